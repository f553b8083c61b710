#pragma once
// The ILP planner's second stage (planner/ilp_planner.h has the whole reading map): the
// integer program over the composed configurations, and the two ways across between it and
// plans: a plan of the space as a starting assignment, and a solution as a plan. Internal to
// the planner.

#include <map>
#include <tuple>
#include <vector>

#include "ilp/mip.h"
#include "planner/ilp_configs.h"
#include "planner/ilp_planner.h"

namespace hetrl::planner::ilp_detail {

using Terms = std::vector<std::pair<int, double>>;

// What the formulation is built over: the instance, its node classes and allocations, and the
// configurations composed for them.
struct Instance {
  const cost::CostModel& model;
  const workload::ModelCatalog& models;
  const IlpParams& params;
  std::vector<std::vector<int>> classes;  // node classes
  std::vector<Allocation> allocations;
  std::vector<std::vector<std::vector<int>>> partitions;  // of the GPU tasks
  std::vector<int> host;                  // TaskGraph::host_tasks
  workload::WeightSync sync;
  // Per partition, group and allocation: whether the group may take the allocation in a plan
  // that could be chosen (ilp_planner.cpp, usable_allocations); empty: every allocation.
  std::vector<std::vector<std::vector<char>>> usable;

  Instance(const cost::CostModel& model, const workload::ModelCatalog& models, const IlpParams& params);
  // Every group some partition has.
  std::set<std::vector<int>> groups() const;
  bool may_take(std::size_t partition, std::size_t group, std::size_t allocation) const {
    return usable.empty() || usable[partition][group][allocation];
  }
  double transfer(double bytes, int from, int to) const {
    return model.transfer_seconds(bytes, allocations[from].set, allocations[to].set);
  }
  // The weight sync's bytes from the trainer's allocation to the reader's.
  double weight_transfer(int trainer, int reader) const { return weight_transfer(sync.bytes, trainer, reader); }
  double weight_transfer(double bytes, int trainer, int reader) const;
};

// The columns of one group of one partition.
struct GroupVars {
  std::vector<int> tasks;
  std::vector<int> allocations;             // indices into Instance::allocations
  std::vector<int> a;                       // column per allocation
  std::vector<int> w;                       // cost objective: T when the allocation is chosen
  std::vector<std::vector<int>> x;          // columns per allocation and configuration
  std::vector<const std::vector<Config>*> configs;  // per allocation
  std::vector<Terms> duration;  // per task of the group: its duration over the group's columns
  Terms sync;                   // the weight sync's duration, on generation's group
  Terms busy;                   // the sum of its tasks' durations (and the weight sync's)
};

struct Formulation {
  ilp::Model model;
  std::vector<int> y;                        // per partition: its column, -1 when left out
  std::vector<std::vector<GroupVars>> groups;  // per partition
  std::map<std::tuple<std::size_t, int, int, int, int>, int> z;  // (p, g, h, a, b) -> column
  std::vector<int> start;                    // per task: S_t
  int t = -1;                                // T
};

// Builds the program; false when it would have more columns than params.max_columns.
bool formulate(const Instance& instance, const Composer& composer, Formulation& out);

// The values of every column for `incumbent` (a plan of the space, laid out as the space lays
// plans out), or empty when it is not one of the program's.
std::vector<double> warm_start(const Instance& instance, const Formulation& f, plan::Evaluator& evaluator,
                               const plan::Plan& incumbent);

// The plan of a solution; false when the solution is not a whole plan.
bool decode(const Instance& instance, const Formulation& f, plan::Evaluator& evaluator,
            const std::vector<double>& values, plan::Plan& out);

}  // namespace hetrl::planner::ilp_detail
