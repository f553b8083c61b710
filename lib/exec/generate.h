#pragma once
// Generation on one replica with continuous batching, as a serving engine runs it: up to
// `concurrency` sequences decode together, one token each per step; a sequence whose response
// reaches its length leaves, and the next prompt is prefilled into its cache slot and joins
// the next step. Prompts admitted together are prefilled together, as an engine batches the
// prompts it schedules in a step: in passes of at most prefill_chunk_tokens tokens (whole
// prompts), as the cost model prices prefill in chunks and sizes an engine's workspace by one.
// Response lengths are given (drawn from the workload by the same sampler as hetrl-sim), so the
// run has the shape the cost model and the simulator price.

#include <cstdint>
#include <vector>

#include "exec/transformer.h"

namespace hetrl::exec {

struct GenerationRequest {
  std::vector<std::vector<int>> prompts;
  std::vector<int> response_lengths;  // per prompt, at least 1
  int concurrency = 1;                // sequences decoding at once at most
  float temperature = 1.0f;           // 0: greedy
  std::uint64_t seed = 1;
  int first_sequence = 0;  // the id of prompts[0] for sampling (ids run on from it)
  // Tokens a prefill pass takes at most (whole prompts of one length, one prompt at least):
  // cost::CostParams::prefill_chunk_tokens. 0: every prompt of a length admitted together.
  int prefill_chunk_tokens = 0;
};

struct GenerationResult {
  std::vector<std::vector<int>> responses;  // per prompt
  long long prefill_tokens = 0;
  long long generated_tokens = 0;
  long long decode_steps = 0;
  long long prefill_passes = 0;
  int largest_batch = 0;
  // Host seconds in the prefills, each with its first tokens' sampling (which waits for the
  // device), so without a synchronisation of its own.
  double prefill_seconds = 0;
  // The decode steps' tensor-parallel all-reduces, where the model times them
  // (Transformer::collective_time): host seconds in them and their count.
  CollectiveTime decode_collectives;
};

// Throws core::InputError for a request that does not fit its own terms (no prompts, a
// length below 1, a token outside the vocabulary).
GenerationResult generate(Transformer& model, const GenerationRequest& request);

}  // namespace hetrl::exec
