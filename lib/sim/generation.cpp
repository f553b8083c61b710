#include "sim/generation.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace hetrl::sim {

ReplicaGeneration::ReplicaGeneration(const cost::CostModel& model, int task,
                                     std::vector<cost::Stage> stages, std::vector<double> kv_budget,
                                     std::vector<int> lengths)
    : model_(model), stages_(std::move(stages)), waiting_(lengths.begin(), lengths.end()) {
  model_.decode_stages(task, stages_, decode_);
  prompt_ = model_.workload().prompt_length_tokens;
  concurrency_ = std::max(1, static_cast<int>(std::floor(model_.concurrent_sequences(task, stages_, kv_budget))));
  const auto [compute, tp] = model_.prefill_seconds(task, stages_, static_cast<double>(lengths.size()));
  prefill_ = lengths.empty() ? 0.0 : compute + tp;
  full_batch_ = std::min(concurrency_, static_cast<int>(lengths.size()));
}

void ReplicaGeneration::admit() {
  // Prefill gives a sequence its first token: one of n tokens takes n - 1 decode steps, and
  // one of a single token none.
  while (static_cast<int>(remaining_.size()) < concurrency_ && !waiting_.empty()) {
    const int decode_steps = waiting_.front() - 1;
    waiting_.pop_front();
    if (decode_steps <= 0) continue;
    remaining_.push_back(decode_steps);
    generated_.push_back(1);
    total_context_ += prompt_ + 1;
  }
}

void ReplicaGeneration::start(EventQueue& queue, std::function<void()> done) {
  done_ = std::move(done);
  started_ = queue.now();
  if (waiting_.empty()) {
    finished_ = started_;
    queue.at(started_, [this] { done_(); });
    return;
  }
  admit();
  queue.after(prefill_, [this, &queue] { step_or_finish(queue); });
}

void ReplicaGeneration::step_or_finish(EventQueue& queue) {
  if (remaining_.empty()) {
    finished_ = queue.now();
    done_();
  } else {
    step(queue);
  }
}

void ReplicaGeneration::step(EventQueue& queue) {
  const double batch = static_cast<double>(remaining_.size());
  assert(batch > 0);
  const double seconds = model_.decode_step(decode_, batch, total_context_).total();
  if (waiting_.empty() && static_cast<int>(remaining_.size()) < full_batch_) tail_ += seconds;
  ++steps_;
  queue.after(seconds, [this, &queue] {
    // Every live sequence gained a token; the finished ones leave and free their cache.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < remaining_.size(); ++i) {
      ++generated_[i];
      total_context_ += 1;
      if (--remaining_[i] > 0) {
        remaining_[kept] = remaining_[i];
        generated_[kept] = generated_[i];
        ++kept;
      } else {
        total_context_ -= prompt_ + generated_[i];
      }
    }
    remaining_.resize(kept);
    generated_.resize(kept);
    admit();
    step_or_finish(queue);
  });
}

}  // namespace hetrl::sim
