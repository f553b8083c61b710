#pragma once
// Generation on one replica with continuous batching, one decode step per event: the prompts
// are prefilled, then each step costs what the cost model gives for the live batch and its
// total context; sequences join while fewer than the KV cache's concurrency run and leave when
// their response is complete. The closed form of the cost model integrates the same steps over
// the survival curve; this steps through actual lengths.

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "cost/cost_model.h"
#include "sim/event_queue.h"

namespace hetrl::sim {

class ReplicaGeneration {
 public:
  // `lengths`: the response lengths of the replica's sequences, in arrival order.
  ReplicaGeneration(const cost::CostModel& model, int task, std::vector<cost::Stage> stages,
                    std::vector<double> kv_budget, std::vector<int> lengths);

  // Schedules the replica's work on `queue` from now; `done` runs when its last sequence ends.
  void start(EventQueue& queue, std::function<void()> done);

  double started_at() const { return started_; }
  double finished_at() const { return finished_; }
  double prefill_seconds() const { return prefill_; }
  std::uint64_t steps() const { return steps_; }
  // Seconds of decode with no sequence waiting and the batch below its full size (the
  // concurrency limit, or every sequence when fewer): the GPUs drain the long tail.
  double tail_seconds() const { return tail_; }
  int concurrency() const { return concurrency_; }

 private:
  void admit();
  // The next decode step, or the end when no sequence is left.
  void step_or_finish(EventQueue& queue);
  void step(EventQueue& queue);

  const cost::CostModel& model_;
  std::vector<cost::Stage> stages_;
  cost::CostModel::DecodeStages decode_;
  double prompt_ = 0;
  int concurrency_ = 1;
  int full_batch_ = 1;
  std::deque<int> waiting_;     // lengths not yet admitted
  std::vector<int> remaining_;  // decode steps left per live sequence
  std::vector<int> generated_;  // tokens generated per live sequence
  double total_context_ = 0;    // tokens of context over the live batch
  double started_ = 0;
  double finished_ = 0;
  double prefill_ = 0;
  double tail_ = 0;
  std::uint64_t steps_ = 0;
  std::function<void()> done_;
};

}  // namespace hetrl::sim
