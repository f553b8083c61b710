#pragma once
// The task graph of one RL iteration, built from an algorithm's template and a workload:
// tasks of absent optional roles are dropped, a rule-based reward becomes a CPU task, and
// every edge is sized in bytes for the workload's batch and lengths (mean response length).
//
// The graph answers the questions every planner, the evaluator and the simulator ask of it:
// which tasks run on GPUs, where a CPU task runs, which edges move data between groups, how
// many iterations back an edge reaches (the staleness bound), and how the trained weights
// reach generation (the weight sync) and the other tasks that read them (reads_weights).

#include <optional>
#include <string>
#include <vector>

#include "workload/workload.h"

namespace hetrl::workload {

struct Task {
  std::string name;
  std::optional<Role> role;
  TaskKind kind = TaskKind::kCpu;
  std::string model;  // empty for CPU tasks
  std::string op;     // e.g. "gae", "group_norm", "rule"

  // Runs on the GPUs of a group of the plan (generation, forward passes, training). CPU tasks
  // and the weight sync are not placed: they are priced from where their neighbours run (the
  // weight sync on generation's GPUs, in turn with that group's tasks).
  bool on_gpu() const { return kind != TaskKind::kCpu && kind != TaskKind::kWeightSync; }
};

struct Edge {
  int from = 0;
  int to = 0;
  std::string payload;
  double bytes = 0;  // per iteration
  // Iterations between the producer's instance and the consumer's: 0 inside an iteration; for
  // an input from the previous iteration, 1, and for the trained weights reaching the weight
  // sync 1 plus the workload's staleness bound (0 when synchronous): generation may run ahead,
  // a forward pass scores with the weights its role was last trained to.
  int lag = 0;
  bool previous_iteration() const { return lag > 0; }
};

// How the trained actor's weights reach generation: `task` (the weight sync) loads them into
// `reader` (generation) at the start of an iteration, on generation's GPUs; `trainer` wrote them
// `lag` iterations before, and `edge` (trainer to sync) carries them across when the two run in
// different groups.
struct WeightSync {
  int task = -1;  // -1: the graph has no weight sync
  int trainer = -1;
  int reader = -1;
  int edge = -1;  // the edge from the trainer into the sync: the weights' transfer
  double bytes = 0;
  int lag = 0;
  bool exists() const { return task >= 0 && trainer >= 0 && reader >= 0; }
};

struct TaskGraph {
  std::string algorithm;
  std::vector<Task> tasks;
  std::vector<Edge> edges;

  int find(std::string_view name) const;  // -1 when absent
  // Tasks in an order where every same-iteration input comes first (stable: template order
  // among ready tasks).
  std::vector<int> topological_order() const;
  // The GPU tasks, in graph order.
  std::vector<int> gpu_tasks() const;
  // For each task, the GPU task whose group runs it: itself for a GPU task; for a CPU task,
  // the first GPU task in topological order that consumes its output (directly or through
  // other CPU tasks); -1 for the weight sync and for a CPU task nothing on a GPU consumes.
  std::vector<int> host_tasks() const;
  // Whether the edge moves its payload from the producer's group to the consumer's (a transfer
  // when the two differ): a same-iteration edge that does not touch the weight sync, whose
  // bytes are the weight sync's to move.
  bool moves_data(const Edge& edge) const {
    return !edge.previous_iteration() && tasks[edge.to].kind != TaskKind::kWeightSync &&
           tasks[edge.from].kind != TaskKind::kWeightSync;
  }
  // Whether the edge carries a trained role's weights straight to a GPU task that reads them
  // in a later iteration (critic_value after critic_train, actor_logprob after actor_train): a
  // transfer when the two run in different groups. The actor's weights reach generation
  // through the weight sync instead.
  bool reads_weights(const Edge& edge) const {
    return edge.previous_iteration() && tasks[edge.from].kind == TaskKind::kTrain && tasks[edge.to].on_gpu();
  }
  WeightSync weight_sync() const;
};

// Requires a workload that passed validate().
TaskGraph build_task_graph(const Workload& workload, const AlgorithmCatalog& algorithms,
                           const ModelCatalog& models);

}  // namespace hetrl::workload
