#pragma once
// The ILP planner's first stage (planner/ilp_planner.h has the whole reading map): the node
// allocations a group may get, and the configurations (a strategy for each of its tasks) a
// group of tasks can run as on each allocation, with their prices. Internal to the planner.
//
// Configurations are composed, not priced one by one. Each task's strategies are priced alone
// on an allocation (time, and resident and transient memory on every GPU); a depth-first search
// over the group's tasks adds memory per GPU by the cost model's rule for roles sharing a GPU
// (cost::RoleMemory) and stops a branch at the first GPU over capacity, and stops it when the
// group's busy time (the sum of its tasks' times: a group runs them in turn) passes the
// allocation's cap. Generation's time depends only on the memory the others leave for its KV
// cache, and the weight sync's on the trainer's strategy: they are priced with the whole group
// once per combination of the others' resident memory and the trainer's strategy, and
// generation is bounded before that by its floor (CostModel::generation_floor). Configurations
// no faster than another of the same group and allocation in every task (and the weight sync) are
// dropped: the period never shrinks when a duration grows, and a group's price depends on its
// nodes alone. The survivors are priced again as a whole group by the evaluator.

#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "cost/cost_model.h"
#include "plan/evaluate.h"
#include "planner/space.h"

namespace hetrl::planner::ilp_detail {

// A number of nodes of each node class, as the nodes a group gets.
struct Allocation {
  std::vector<int> counts;  // nodes per class
  std::vector<int> nodes;   // representative nodes: the first of each class, by class
  cost::CostModel::GpuSet set;
  double price = 0;  // USD per hour (unpriced nodes count 0: a goal that needs prices has them)
};

// Every non-empty allocation, the count of the first class varying fastest.
std::vector<Allocation> enumerate_allocations(const cost::CostModel& model,
                                              const std::vector<std::vector<int>>& classes);

struct Config {
  std::vector<TaskChoice> choices;  // per task of the group
  std::vector<double> seconds;      // per task of the group
  // The weight sync's time on the group's GPUs when it runs generation: resharding the weights
  // it trained itself, or loading another group's from host memory; 0 without generation.
  double sync = 0;
};

// How composing ended.
enum class ComposeEnd { kDone, kTimeLimit, kTooMany };

class Composer {
 public:
  // `deadline` is a reading of `clock`; past it, or past `max_configs` composed
  // configurations, composing stops.
  Composer(const cost::CostModel& model, const workload::ModelCatalog& models,
           const SearchSpace& space, const std::vector<Allocation>& allocations,
           const core::Clock& clock, double deadline, long long max_configs);

  // The most a group on each allocation may be busy per iteration (infinite: no cap).
  void set_busy_caps(std::vector<double> caps) { busy_cap_ = std::move(caps); }

  // The least time each task takes on each allocation with its strategies priced alone (its
  // fastest strategy; generation's floor), infinite where none fits: out[task][allocation] for
  // the tasks given, empty rows for the others. Empty when the time limit passed.
  std::vector<std::vector<double>> floors(const std::vector<int>& tasks);
  // From now on composes a group only on the allocations marked for it (a group not listed:
  // on every allocation).
  void restrict_to(std::map<std::vector<int>, std::vector<char>> usable) { usable_ = std::move(usable); }

  // Composes the configurations of every group on every allocation, one allocation at a time
  // (the strategies priced alone are kept for the allocation at hand only).
  ComposeEnd compose(const std::set<std::vector<int>>& groups);
  // A group's configurations on an allocation, once composed (empty when none fits).
  const std::vector<Config>& configs(const std::vector<int>& group, int allocation) const;

  long long composed() const { return composed_; }
  long long kept() const;
  // For every group and allocation, the product of its tasks' strategy counts: what would be
  // composed without memory or bounds (saturates at 2^60).
  long long space_size(const std::set<std::vector<int>>& groups);
  const std::vector<TaskChoice>& choices_for(int task, int allocation);

 private:
  // One strategy of one task on one allocation, priced with the task alone in the group.
  struct Option {
    TaskChoice choice;
    double seconds = 0;  // generation: a floor (its time depends on the memory others leave)
    int signature = 0;   // the task's options with the same resident memory share one
    std::vector<cost::StageMemory> memory;  // per GPU of the allocation
  };
  struct GenerationPrice {
    double seconds = 0;
    double sync = 0;
  };
  struct KeyHash {
    std::size_t operator()(const std::vector<int>& v) const;
  };
  // The search over one group on one allocation.
  struct Search {
    std::vector<int> tasks;
    int allocation = 0;
    double cap = 0;     // the group's busy time may not exceed this
    int generate = -1;  // position of generation in `tasks`, or -1
    int trainer = -1;   // position of the weight sync's trainer in `tasks`, or -1
    std::vector<int> order;  // the other positions, searched in this order
    std::vector<const std::vector<Option>*> options;  // per position
    std::vector<int> role_of;  // per position: its role's index in the group
    int roles = 0;
    int slots = 0;
    std::vector<double> capacity;  // per GPU
    std::vector<cost::RoleMemory> cells;   // per role and GPU: what the roles keep so far
    std::vector<cost::RoleMemory> initial;  // the cells before any task (trained roles marked)
    std::vector<std::vector<cost::RoleMemory>> saved;  // per depth: its role's cells before it
    std::vector<std::vector<double>> total, transient;  // per depth and GPU
    std::vector<double> rest_floor;  // per depth: the least time the tasks from there on take
    std::vector<int> pick;           // per position: the option chosen
    std::vector<int> key;
    std::unordered_map<std::vector<int>, GenerationPrice, KeyHash> generation;
    std::vector<Config> front;
  };

  const std::vector<Option>& options_for(int task, int allocation);
  void compose_group(const std::vector<int>& tasks, int allocation);
  void prepare(Search& s, const std::vector<int>& tasks, int allocation);
  // Adds option `o` of position `i` at `depth` (generation: at depth 0, in place); false, with
  // the cells restored from saved[depth] (descend saves them), when a GPU is over its capacity.
  bool add_option(Search& s, std::size_t depth, int i, const Option& o);
  void remove_option(Search& s, std::size_t depth, int i);
  void descend(Search& s, std::size_t depth, double busy);
  void leaf(Search& s, double busy);
  // Prices the configurations the search kept as the evaluator prices a whole group.
  void price_front(Search& s, std::vector<Config>& out);
  bool out_of_time();
  static bool dominates(const Config& a, const Config& b);
  static void keep_if_not_dominated(std::vector<Config>& front, Config c);

  const cost::CostModel& model_;
  const workload::ModelCatalog& models_;
  const SearchSpace& space_;
  const std::vector<Allocation>& allocations_;
  const core::Clock& clock_;
  double deadline_;
  long long max_configs_;
  int sync_task_ = -1;
  plan::Evaluator evaluator_;
  std::vector<double> busy_cap_;
  std::map<std::vector<int>, std::vector<char>> usable_;  // per group: per allocation
  std::map<std::pair<std::vector<int>, int>, std::vector<Config>> configs_;
  std::map<std::pair<int, int>, std::vector<TaskChoice>> choices_;  // (task, allocation)
  std::map<std::pair<int, int>, std::vector<Option>> options_;      // (task, allocation)
  Search search_;
  plan::Plan scratch_;
  long long composed_ = 0;
  ComposeEnd end_ = ComposeEnd::kDone;
};

}  // namespace hetrl::planner::ilp_detail
