#pragma once
// The task graph of one RL iteration, built from an algorithm's template and a workload:
// tasks of absent optional roles are dropped, a rule-based reward becomes a CPU task, and
// every edge is sized in bytes for the workload's batch and lengths (mean response length).

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
};

struct Edge {
  int from = 0;
  int to = 0;
  std::string payload;
  double bytes = 0;  // per iteration
  bool previous_iteration = false;
};

struct TaskGraph {
  std::string algorithm;
  std::vector<Task> tasks;
  std::vector<Edge> edges;

  int find(std::string_view name) const;  // -1 when absent
  // Tasks in an order where every same-iteration input comes first (stable: template order
  // among ready tasks).
  std::vector<int> topological_order() const;
};

// Requires a workload that passed validate().
TaskGraph build_task_graph(const Workload& workload, const AlgorithmCatalog& algorithms,
                           const ModelCatalog& models);

}  // namespace hetrl::workload
