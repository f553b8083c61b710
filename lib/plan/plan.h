#pragma once
// A plan: how the RL tasks are grouped, which GPUs each group gets, and how each task runs on
// them. Groups time-share their GPUs (colocation); separate groups run at the same time
// (disaggregation). Each GPU task of the graph is in exactly one group, with replicas (data
// parallel), each a pipeline of stages; a stage is TP GPUs of one node holding a run of
// layers. Replicas of different GPU types carry batch shares that make them finish together.
// CPU tasks and the weight sync are not placed: the cost model prices them from where their
// neighbours are.
//
// Invariants after validate(): every GPU a replica uses belongs to its group and to no other
// group; a task's replicas do not share GPUs; TP divides the attention heads; each replica's
// stages hold all layers; shares are positive and sum to 1.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/cost_model.h"
#include "hw/cluster.h"
#include "workload/rl_graph.h"

namespace hetrl::plan {

struct Gpu {
  int node = 0;
  int device = 0;
  friend bool operator==(const Gpu&, const Gpu&) = default;
  friend auto operator<=>(const Gpu&, const Gpu&) = default;
};

struct Stage {
  int node = 0;
  std::vector<int> devices;  // TP = devices.size()
  int layers = 0;
  friend bool operator==(const Stage&, const Stage&) = default;
};

struct Replica {
  std::vector<Stage> stages;  // PP = stages.size()
  double share = 0;           // of the iteration's samples
  friend bool operator==(const Replica&, const Replica&) = default;
};

struct TaskPlacement {
  int task = 0;  // index into the task graph
  std::vector<Replica> replicas;
  cost::TrainOptions train;  // train tasks only
  friend bool operator==(const TaskPlacement&, const TaskPlacement&) = default;
};

struct Group {
  std::vector<Gpu> gpus;
  std::vector<TaskPlacement> tasks;
  // The tasks' weights and training state live in host memory between their turns, as verl's
  // hybrid engine offloads them: a GPU holds one task's at a time, and each task pays their
  // reload before it runs and their offload after.
  bool offload = false;
  friend bool operator==(const Group&, const Group&) = default;
};

// Which planner made the plan, with what, and how the search went.
struct PlannerInfo {
  std::string name;
  std::vector<std::pair<std::string, std::string>> params;
  std::vector<std::pair<std::string, double>> stats;

  // The setting or statistic of that name; nullopt when the planner did not record it.
  std::optional<std::string> param(std::string_view key) const;
  std::optional<double> stat(std::string_view key) const;
};

struct Plan {
  std::vector<Group> groups;
  PlannerInfo planner;
  std::string cluster_hash;
  std::string workload_hash;

  // Throws core::InputError naming the group, task, replica or GPU at fault.
  void validate(const hw::Cluster& cluster, const workload::TaskGraph& graph,
                const workload::ModelCatalog& models) const;

  // The group a task is in, or -1.
  int group_of(int task) const;
  // Where a task is placed, or nullptr when the plan leaves it out.
  const TaskPlacement* placement(int task) const;
  // The GPUs the plan's groups hold.
  int gpu_count() const;
};

}  // namespace hetrl::plan
