#pragma once
// The exhaustive planner: every grouping, every allocation of nodes to groups (or unused),
// every strategy of every task in the shared search space (planner/space.h), each priced by
// the cost model; the best feasible plan wins. Ground truth for small instances; it counts
// the plans first and refuses when there are more than max_plans.

#include <string>

#include "planner/planner.h"
#include "planner/space.h"

namespace hetrl::planner {

struct ExhaustiveParams {
  SearchSpace space;
  Goal goal;  // throws core::InputError when it needs prices some node lacks
  long long max_plans = 2'000'000;
};

// The number of allocations of the nodes to the groups of each grouping (or to none, every group
// with a node) the search would visit, whatever the strategies: infinity past 1e30.
double exhaustive_allocation_count(const cost::CostModel& model, const ExhaustiveParams& params);

// The number of plans the search would price; past 16 times max_plans, some number above that
// (counting stops there, and the allocations are counted first).
long long exhaustive_plan_count(const cost::CostModel& model, const workload::ModelCatalog& models,
                                const ExhaustiveParams& params);

// Throws core::JobError when the instance is too large for the limit.
PlannerResult plan_exhaustive(const cost::CostModel& model, const workload::ModelCatalog& models,
                              const ExhaustiveParams& params = {});

}  // namespace hetrl::planner
