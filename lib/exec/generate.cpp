#include "exec/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>

#include "core/error.h"

namespace hetrl::exec {

GenerationResult generate(Transformer& model, const GenerationRequest& request) {
  const std::size_t count = request.prompts.size();
  if (count == 0 || request.response_lengths.size() != count) {
    throw core::InputError(fmt::format("generate: {} prompts and {} response lengths", count,
                                       request.response_lengths.size()));
  }
  if (request.concurrency < 1) throw core::InputError("generate: concurrency must be at least 1");
  if (request.prefill_chunk_tokens < 0) throw core::InputError("generate: a negative prefill chunk");
  int capacity = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (request.prompts[i].empty() || request.response_lengths[i] < 1) {
      throw core::InputError(fmt::format("generate: prompt {} is empty or wants no response", i));
    }
    capacity = std::max(capacity, static_cast<int>(request.prompts[i].size()) + request.response_lengths[i]);
  }
  const int slots = std::min(request.concurrency, static_cast<int>(count));
  Transformer::Cache cache = model.make_cache(slots, capacity);

  GenerationResult result;
  result.responses.resize(count);
  // Live sequences: which prompt each slot holds (-1: free) and its next token.
  std::vector<int> holds(static_cast<std::size_t>(slots), -1), next_token(static_cast<std::size_t>(slots), 0);
  // The model's timed all-reduces: those outside the prefills are the decode steps'.
  const CollectiveTime* collectives = model.collective_time();
  const CollectiveTime before = collectives ? *collectives : CollectiveTime{};
  CollectiveTime in_prefill;
  std::size_t admitted = 0;
  const auto id = [&](std::size_t prompt) { return request.first_sequence + static_cast<int>(prompt); };
  const auto done = [&](int slot) {
    const int p = holds[static_cast<std::size_t>(slot)];
    return static_cast<int>(result.responses[static_cast<std::size_t>(p)].size()) >=
           request.response_lengths[static_cast<std::size_t>(p)];
  };
  // Free slots take the next prompts, prefilled together as an engine batches the prompts it
  // schedules in one step (passes for each prompt length among them, each within the prefill
  // chunk), each giving its first response token. A prompt whose response is that one token is
  // done at once, and its slot takes the next prompt.
  const auto fill = [&](std::vector<int> free) {
    if (free.empty() || admitted == count) return;
    const auto start = std::chrono::steady_clock::now();
    const CollectiveTime at_start = collectives ? *collectives : CollectiveTime{};
    while (!free.empty() && admitted < count) {
      std::map<std::size_t, std::vector<int>> by_length;  // prompt length -> slots
      for (const int slot : free) {
        if (admitted == count) break;
        const std::size_t p = admitted++;
        holds[static_cast<std::size_t>(slot)] = static_cast<int>(p);
        by_length[request.prompts[p].size()].push_back(slot);
      }
      free.clear();
      for (const auto& [length, admitted_slots] : by_length) {
        // Passes of whole prompts within the chunk (one at least).
        const std::size_t per_pass =
            request.prefill_chunk_tokens > 0
                ? std::max<std::size_t>(1, static_cast<std::size_t>(request.prefill_chunk_tokens) / length)
                : admitted_slots.size();
        for (std::size_t first = 0; first < admitted_slots.size(); first += per_pass) {
          const auto from = admitted_slots.begin() + static_cast<std::ptrdiff_t>(first);
          const std::vector<int> slots_of(from, from + static_cast<std::ptrdiff_t>(std::min(per_pass, admitted_slots.size() - first)));
          std::vector<int> tokens, ids, positions;
          for (const int slot : slots_of) {
            const std::size_t p = static_cast<std::size_t>(holds[static_cast<std::size_t>(slot)]);
            tokens.insert(tokens.end(), request.prompts[p].begin(), request.prompts[p].end());
            ids.push_back(id(p));
            positions.push_back(static_cast<int>(length));
          }
          const int rows = static_cast<int>(slots_of.size());
          const device::Buffer& logits = model.prefill(cache, slots_of, tokens, static_cast<int>(length));
          ++result.prefill_passes;
          const std::vector<int> drawn = model.sample(logits, rows, request.temperature, request.seed, ids, positions);
          for (int r = 0; r < rows; ++r) {
            const int slot = slots_of[static_cast<std::size_t>(r)];
            const std::size_t p = static_cast<std::size_t>(holds[static_cast<std::size_t>(slot)]);
            result.prefill_tokens += static_cast<long long>(length);
            result.generated_tokens += 1;
            result.responses[p].push_back(drawn[static_cast<std::size_t>(r)]);
            next_token[static_cast<std::size_t>(slot)] = drawn[static_cast<std::size_t>(r)];
            if (done(slot)) {
              holds[static_cast<std::size_t>(slot)] = -1;
              free.push_back(slot);
            }
          }
        }
      }
    }
    result.prefill_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (collectives) {
      in_prefill.seconds += collectives->seconds - at_start.seconds;
      in_prefill.calls += collectives->calls - at_start.calls;
    }
  };
  std::vector<int> all(static_cast<std::size_t>(slots));
  std::iota(all.begin(), all.end(), 0);
  fill(std::move(all));
  while (true) {
    std::vector<int> live_slots, tokens, positions, ids, sample_positions;
    for (int slot = 0; slot < slots; ++slot) {
      const int p = holds[static_cast<std::size_t>(slot)];
      if (p < 0) continue;
      const std::size_t prompt = static_cast<std::size_t>(p);
      const int position = static_cast<int>(request.prompts[prompt].size() + result.responses[prompt].size()) - 1;
      live_slots.push_back(slot);
      tokens.push_back(next_token[static_cast<std::size_t>(slot)]);
      positions.push_back(position);
      ids.push_back(id(prompt));
      sample_positions.push_back(position + 1);
    }
    if (live_slots.empty()) break;
    const int rows = static_cast<int>(live_slots.size());
    result.largest_batch = std::max(result.largest_batch, rows);
    ++result.decode_steps;
    const device::Buffer& logits = model.decode(cache, live_slots, tokens, positions);
    const std::vector<int> drawn = model.sample(logits, rows, request.temperature, request.seed, ids, sample_positions);
    for (int r = 0; r < rows; ++r) {
      const int slot = live_slots[static_cast<std::size_t>(r)];
      const std::size_t p = static_cast<std::size_t>(holds[static_cast<std::size_t>(slot)]);
      result.responses[p].push_back(drawn[static_cast<std::size_t>(r)]);
      next_token[static_cast<std::size_t>(slot)] = drawn[static_cast<std::size_t>(r)];
      result.generated_tokens += 1;
    }
    // Sequences that reached their lengths leave; their slots take the next prompts.
    std::vector<int> free;
    for (const int slot : live_slots) {
      if (done(slot)) {
        holds[static_cast<std::size_t>(slot)] = -1;
        free.push_back(slot);
      }
    }
    fill(std::move(free));
  }
  if (collectives) {
    result.decode_collectives.seconds = collectives->seconds - before.seconds - in_prefill.seconds;
    result.decode_collectives.calls = collectives->calls - before.calls - in_prefill.calls;
  }
  return result;
}

}  // namespace hetrl::exec
