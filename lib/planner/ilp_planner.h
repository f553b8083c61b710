#pragma once
// The ILP planner: the shared decision space (planner/space.h) as an integer linear program
// solved by CBC, so the plan it returns is provably the best of that space when CBC proves
// optimality.
//
// Formulation (sets, variables, constraints, objective):
//   Sets     P the partitions of the GPU tasks into groups; for a group g of p, A(g) the node
//            allocations (nodes of each node class) and, for each allocation a, K(g, a) the
//            configurations (a strategy for each task of g) that fit in memory. Configurations
//            are priced once with the cost model on the group alone: task times, and the weight
//            reshard when generation and training share the group. Edges between groups are
//            priced per pair of allocations (transfers over the bottleneck path, the weight
//            transfer and broadcast).
//   Variables  y_p (partition chosen), a_{p,g,a} (allocation), x_{p,g,a,k} (configuration),
//            z_{p,g,h,a,b} >= a_{p,g,a} + a_{p,h,b} - 1 (both allocations chosen; for group
//            pairs that exchange data), S_t >= 0 (start of task t), T (iteration time).
//   Constraints  sum_p y_p = 1; sum_a a_{p,g,a} = y_p; sum_k x_{p,g,a,k} = a_{p,g,a};
//            for each node class c: sum a_{p,g,a} * a_c <= nodes of c (GPU capacity per node
//            class, and so per zone and type); the periodic schedule of the repeating
//            iterations: S_t + lag T >= S_u + D_u + transfer_{u,t} for each edge u -> t of the
//            RL graph (lag 0 inside an iteration; 1 + k for the weights reaching the next
//            generation, k the async staleness bound, 0 for sync; 1 for the weights a scoring
//            pass reads from its trainer, sent between groups when they differ); colocated
//            tasks take turns in topological order, S_next >= S_prev + D_prev - M (1 - y_p),
//            and a group's first task waits for its last of the previous iteration,
//            S_first + T >= S_last + D_last - M (1 - y_p); T >= sum_{t in g} D_t over the
//            columns of p (each group's busy time); optional budget sum price(a) *
//            a_{p,g,a} <= B and T <= samples / min_throughput.
//   Objective  minimise T, the period (samples/s = samples / T). The durations D are sums of
//            x and z times their priced values and the evaluator takes the same periodic
//            schedule, so for the space's plans T equals the evaluator's iteration time: the
//            objective is exact. With the cost objective, minimise dollars per 1,000 samples,
//            sum price(a) w_{p,g,a} 1000 / 3600 / samples, where w_{p,g,a} >= T - M (1 -
//            a_{p,g,a}), w >= 0 is T when the allocation is chosen and 0 otherwise (exact:
//            prices are not negative and M bounds T); w <= T, w <= M a and sum_a w_{p,g,a} >=
//            T - M (1 - y_p) for each group tighten the relaxation.
//
// Reading map. plan_ilp (ilp_planner.cpp) runs three stages over one clock and time limit:
//   1. Compose (ilp_configs.h): the node allocations, and for every group of every partition
//      and every allocation the configurations that fit, each priced; bounded by an incumbent
//      (a plan of the space, e.g. hybrid's, laid out as the space lays plans out: T >= a
//      group's busy time, so no group may be busier than the incumbent's period; with the cost
//      objective, busy <= incumbent dollars / allocation price) and by a minimum throughput.
//   2. Formulate (ilp_formulation.h): the program above as a solver-neutral ilp::Model. It
//      leaves out partitions with a group that has no configuration, and pair variables for
//      allocations that do not fit on the cluster together; it adds T >= each group's busy
//      time (implied, but a tighter relaxation).
//   3. Solve with CBC from the incumbent's assignment (a warm start whose configuration was
//      dropped starts from one that dominates it), and decode the solution into a plan.
// Limits are outcomes, not errors: past the time limit while composing, the result is the
// warm plan (the best so far) or nothing; past max_configs or max_columns it is refused with
// the count. CBC gets what the first two stages left of the time limit (it checks the clock
// between its steps, so a long root LP may overrun it).

#include <optional>
#include <string>

#include "core/clock.h"
#include "ilp/solver.h"
#include "planner/planner.h"
#include "planner/space.h"

namespace hetrl::planner {

struct IlpParams {
  SearchSpace space;
  Goal goal;
  // Its time limit covers composing, formulating and solving.
  ilp::SolveParams solve{.time_limit = kDefaultTimeLimit};
  // Group configurations the build may compose (about 1 us each here); past that it is refused.
  long long max_configs = 20000000;
  // Columns the model may have (a few hundred bytes each, with its rows); past that it is
  // refused.
  long long max_columns = 2000000;
  // Node allocations (a count of each node class: the product of one more than each class's
  // nodes) it may enumerate, a few hundred bytes each; past that it is refused before any is
  // made. A cluster of 80 one-node classes would have 2^80.
  double max_allocations = 200000;
  std::string export_lp;  // write the model here too, when set
  std::string export_mps;
};

struct IlpOutcome {
  PlannerResult result;      // result.stop says whether a limit ended it
  bool solved = false;       // the model was built and CBC ran: `solve` holds its outcome
  ilp::SolveResult solve;
  double ilp_iteration_seconds = 0;  // T of the ILP's solution
  double build_seconds = 0;
  long long configs = 0;       // group configurations composed
  long long kept_configs = 0;  // of them, those no other beats in every task (columns x)
  int columns = 0;
  int rows = 0;
  bool warm_started = false;  // the warm start was a feasible solution of the model
};

// Why the ILP refuses the instance before building anything (too many node allocations), or
// nothing.
std::optional<std::string> ilp_refusal(const cost::CostModel& model, const IlpParams& params);

// The group configurations of the space on this instance: for every group of the partitions
// and every allocation, the product of its tasks' strategy counts (what plan_ilp would compose
// without memory or bounds).
long long ilp_configuration_count(const cost::CostModel& model, const workload::ModelCatalog& models,
                                  const IlpParams& params);

// `warm` (a plan, e.g. hybrid's) starts the search and bounds it when it is a plan of the space.
// Throws core::InputError when the goal needs prices the cluster lacks.
IlpOutcome plan_ilp(const cost::CostModel& model, const workload::ModelCatalog& models,
                    const IlpParams& params, const core::Clock& clock, const plan::Plan* warm = nullptr);

// One line for people on how the ILP went: its status, objective, bound and gap, what it built
// and how long each stage took; `warm_from` names where the warm start came from.
std::string ilp_summary(const IlpOutcome& outcome, const Goal& goal, const std::string& warm_from);

}  // namespace hetrl::planner
