#pragma once
// Simulating RL iterations of a plan, event by event (reading map):
//   - Each iteration draws the response lengths of its samples (seeded) and splits them over the
//     generation replicas by their batch shares; each replica generates with continuous
//     batching (sim/generation.h), one event per decode step.
//   - Every other task takes the time the cost model gives it, scaled by the tokens the
//     iteration actually produced over the tokens the cost model assumed.
//   - A task instance (task, iteration) starts when its inputs have arrived and its group has
//     run the instances before it (a group runs its tasks in iteration order, then topological
//     order); CPU tasks and the weight sync need no group.
//   - Data between groups, and the weights from the training group to another generation
//     group, move over the network (sim/network.h): transfers at the same time share the links
//     they cross fairly, and pay the path's latency. Without contention each moves as if alone,
//     as the cost model assumes.
//   - The next iteration's generation waits for the weights of iteration i - 1 - k (k = the
//     staleness bound of an async workload, 0 for sync).
//   Listeners see every task instance and every replica's generation; the event loop knows
//   nothing about reports or traces.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/clock.h"
#include "cost/cost_model.h"
#include "plan/plan.h"
#include "sim/network.h"

namespace hetrl::sim {

struct SimParams {
  int iterations = 3;
  std::uint64_t seed = 1;
  bool link_contention = true;  // transfers share links; off: each moves as if alone
  // A wall-clock limit: the run stops at the first check (every few thousand events) past it.
  core::Deadline deadline;
  // Told at the same checks how many iterations have ended, for people watching.
  std::function<void(int iterations_done)> progress;
};

struct TaskRun {
  int iteration = 0;
  int task = 0;
  int group = -1;  // -1: a CPU task (the weight sync runs on its generation group)
  double start = 0;
  double end = 0;
};

struct ReplicaRun {
  int iteration = 0;
  int task = 0;
  int group = 0;
  int replica = 0;
  double start = 0;
  double end = 0;
  double tail_seconds = 0;
  std::uint64_t steps = 0;
  int sequences = 0;
};

// Data or weights moved between two groups.
struct TransferRun {
  int iteration = 0;
  int from_task = 0;
  int to_task = 0;  // the consumer, or the weight sync
  int from_group = 0;
  int to_group = 0;
  double bytes = 0;
  double start = 0;
  double end = 0;  // the last byte arrived
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual void task_done(const TaskRun& run) = 0;
  virtual void replica_done(const ReplicaRun& run) = 0;
  virtual void transfer_done(const TransferRun&) {}
  // The traffic on link `link` (an index into SimSummary::links) is `bytes_per_second` from
  // `time` on.
  virtual void link_rate(int /*link*/, double /*time*/, double /*bytes_per_second*/) {}
};

struct SimSummary {
  std::uint64_t events = 0;
  double end = 0;                  // when the last iteration ended (its last task)
  std::vector<double> iteration_end;  // each iteration's end, in time order
  double iteration_seconds = 0;    // steady: between the first and the last iteration's end
  double samples_per_second = 0;
  double tokens_per_second = 0;
  std::vector<double> group_busy;  // seconds each group ran tasks
  double tail_seconds = 0;         // generation drain, summed over replicas and iterations
  std::vector<Link> links;         // every link a transfer could cross
  std::vector<LinkUse> link_use;   // per link: bytes carried and seconds with traffic
  // The run passed its deadline and stopped with iteration_end.size() iterations ended: the
  // other figures cover a part of the run and mean nothing.
  bool stopped = false;
};

// Requires a plan that passed Plan::validate and fits (the evaluator finds it feasible).
SimSummary simulate(const cost::CostModel& model, const plan::Plan& plan, const SimParams& params,
                    std::span<Listener* const> listeners = {});

}  // namespace hetrl::sim
