#pragma once
// The decision space the searching planners share (hybrid, the ILP, exhaustive), so their
// plans are comparable and the exhaustive optimum is ground truth for the others:
//
//   grouping    a partition of the GPU tasks into at most max_groups groups (colocated tasks
//               share GPUs)
//   allocation  each node to one group, or unused
//   strategy    per task: TP (a power of two dividing the heads, inside a node), PP, and for
//               training the ZeRO stage, recompute and whether the optimizer runs on the
//               host; replicas laid out over the group's nodes in order (uniform_replicas),
//               layers split by stage speed, batch shares re-weighted once by replica speed
//               (balance_shares with one round).

#include <functional>
#include <span>
#include <vector>

#include "cost/cost_model.h"
#include "plan/evaluate.h"
#include "plan/plan.h"
#include "workload/model.h"

namespace hetrl::planner {

struct SearchSpace {
  int max_groups = 3;  // the most groups a plan has (--max-groups)
  std::vector<int> pipeline = {1, 2};
  std::vector<int> zero_stages = {1, 2, 3};
  std::vector<cost::Recompute> recompute = {cost::Recompute::kNone, cost::Recompute::kSelective,
                                            cost::Recompute::kFull};
  // Not searched yet: with the host in the space hybrid finds 13.06 samples/s instead of 11.16
  // on regions3-mixed-256 (the critic's Adam on the CPUs), but the ILP's composed
  // configurations grow 1.5x to 3.7x and homog-h100-64 passes its limit. Plans may still say it.
  std::vector<bool> optimizer_offload = {false};
};

// One strategy of one task: TP x PP, and for training the ZeRO stage, recompute and optimizer
// offload.
struct TaskChoice {
  int tp = 1;
  int pp = 1;
  cost::TrainOptions train;
  friend bool operator==(const TaskChoice&, const TaskChoice&) = default;
};

// The strategies of a space for the given TP degrees, TP first, then PP, then (training
// tasks only) the ZeRO stage, recompute and optimizer offload.
std::vector<TaskChoice> strategies(const SearchSpace& space, std::span<const int> tps, bool training);

struct GroupChoice {
  std::vector<int> tasks;  // graph indices
  std::vector<int> nodes;  // cluster node indices
  std::vector<TaskChoice> choices;  // one per task
  friend bool operator==(const GroupChoice&, const GroupChoice&) = default;
};

// The strategies a task may take on a set of nodes.
std::vector<TaskChoice> task_choices(const cost::CostModel& model, const workload::ModelCatalog& models,
                                     const SearchSpace& space, int task, const std::vector<int>& nodes);

// Builds one group of a plan (reusing `group`'s vectors); false when a task cannot be laid out.
bool realize(const cost::CostModel& model, const workload::ModelCatalog& models, const GroupChoice& choice,
             plan::Group& group);

// Builds the plan of a set of group choices; false when a task cannot be laid out.
bool realize(const cost::CostModel& model, const workload::ModelCatalog& models,
             const std::vector<GroupChoice>& groups, plan::Plan& out);

// Every partition of `items` into at most `max_groups` non-empty groups, each group in
// increasing order, groups ordered by their first item.
std::vector<std::vector<std::vector<int>>> partitions(const std::vector<int>& items, int max_groups);

// Node classes (indices into `classes`, each a list of nodes) gathered into units that move
// together, the finest that `few` accepts by their number: each class alone, else the classes
// of one GPU type in one region, else of one GPU type. A search that gives every unit an owner
// makes (owners + 1)^units choices, which a cluster of many zones would make past counting.
std::vector<std::vector<int>> class_units(const hw::Cluster& cluster, const std::vector<std::vector<int>>& classes,
                                          const std::function<bool(std::size_t)>& few);

}  // namespace hetrl::planner
