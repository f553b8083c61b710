#pragma once
// Pricing plans built from group choices, each distinct group priced once.
//
// A group's memory, its tasks' times and the shares balance_shares gives its replicas depend
// only on its own nodes, tasks and strategies, not on the plan's other groups. A search that
// moves one group at a time (hybrid's local search: one task's strategy, one node between two
// groups) prices mostly groups it has seen before: on the scale benchmark's clusters more than
// four in five. The pricer keeps each group's part of the prediction and its balanced shares,
// and prices only what joins the groups: transfers, the weight sync and the schedule.
//
// Its predictions are the ones realize, balance_shares(1 round) and evaluate give for the same
// choices, to the last bit: the cache changes how long pricing takes, never its result.

#include <cstddef>
#include <functional>
#include <limits>
#include <unordered_map>
#include <vector>

#include "plan/evaluate.h"
#include "plan/plan.h"
#include "planner/space.h"

namespace hetrl::planner {

class PlanPricer {
 public:
  PlanPricer(const cost::CostModel& model, const workload::ModelCatalog& models);

  enum class Outcome {
    kNotLaidOut,  // a task cannot be laid out on its group's nodes (realize fails)
    kUnfit,       // some GPU is over its memory, or cannot compute in the precision
    kFit,
  };
  // Prices the plan of the groups. An unfit plan's prediction has its overflow; it says why
  // (Prediction::infeasible, from a full evaluation of the plan) when `explain` says so for
  // that overflow (a caller that keeps only the closest to fitting asks for few), or when no
  // `explain` is given.
  Outcome price(const std::vector<GroupChoice>& groups, const std::function<bool(double)>& explain = {});
  // The last plan priced: complete, shares balanced, when it fit.
  const plan::Plan& plan() const { return plan_; }
  // The last prediction (not laid out: none, an empty one).
  const plan::Prediction& prediction() const { return *prediction_; }

 private:
  struct GroupHash {
    std::size_t operator()(const GroupChoice& g) const;
  };
  struct Entry {
    bool laid_out = false;
    bool fits = false;
    double overflow = 0;              // when not: how far over (Prediction::overflow)
    plan::Evaluator::GroupPart part;  // when it fits
    // Per task, its replicas' balanced shares as runs of equal values (share, how many).
    std::vector<std::vector<std::pair<double, int>>> shares;
    std::size_t size() const;  // values held, for the cache's bound
  };
  const Entry& entry(const GroupChoice& choice, int slot);
  // Lays plan_'s group `slot` out as `choice`, unless it already is; with balanced shares
  // from the entry when it fits.
  void fill(const GroupChoice& choice, const Entry& e, int slot);

  const cost::CostModel& model_;
  const workload::ModelCatalog& models_;
  plan::Evaluator evaluator_;
  std::unordered_map<GroupChoice, Entry, GroupHash> cache_;
  std::size_t cached_values_ = 0;
  plan::Plan plan_;
  // What each group of plan_ is laid out as, and whether with balanced shares.
  enum class State { kNone, kUniform, kBalanced };
  std::vector<GroupChoice> slot_;
  std::vector<State> state_;
  std::vector<const Entry*> entries_;  // the groups being priced
  plan::Plan alone_;                // one group, priced on its own
  plan::Prediction unfit_;          // an unfit plan's prediction when not explained
  plan::Prediction empty_;
  const plan::Prediction* prediction_ = &empty_;
  std::vector<const plan::Evaluator::GroupPart*> parts_;
};

}  // namespace hetrl::planner
