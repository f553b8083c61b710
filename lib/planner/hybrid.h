#pragma once
// The hybrid planner, hetrl-plan's default: a multi-level search over the shared decision space
// (planner/space.h) with successive halving.
//
// Reading map:
//   Level 1  a candidate is a grouping of the GPU tasks (at most max_groups groups) and, for
//            each node class (nodes alike for the cost model: GPU type, size, links, zone),
//            the group that gets it, or none; a group left without a class takes half of the
//            largest class another group has (so generation and training can split one GPU
//            type). Candidates whose groups cannot hold their models' state even spread over
//            all their GPUs are pruned before any evaluation; beyond max_candidates, the
//            all-colocated ones and then the rest by an upper bound on their score (each
//            group's tasks at their fastest strategies priced alone), or a seeded sample where
//            bounding them would price too many strategies.
//   Level 2  node counts: how many nodes of each class each group takes (moves of one node
//            between groups or to and from the unused pool, and swaps of a node of one class
//            for one of another; none past a budget).
//   Level 3  each task's strategy (TP, PP, ZeRO stage, recompute), with layers split by stage
//            speed and batch shares re-weighted by replica speed (closed forms).
//   Levels 2 and 3 run as first-improvement local search from a memory-aware start: sweeps
//   over every strategy of every task (the first sweep the busiest group's longest tasks
//   first), then every one-node move; a sweep without improvement
//   ends in exchanges of two tasks between groups and forward passes moved to another group
//   spread thinner (with one there spread too), then a seeded perturbation, restarts
//   times, then the candidate is done.
//   Successive halving: every candidate gets a first budget, the better half twice as much
//   (and the best candidate of each kind of start, by the node classes it took), and so on
//   until one is left, which then searches to the end. Beside it the two starts of the
//   highest bounds ride on with each round's budget while their bound is above the best plan
//   found, taking no place of the halving's. Where the starts were bounded, a
//   second, smaller halving searches the best 512 bottleneck first (the first sweep tries
//   each task's fastest strategies alone first, and every better strategy lists the moves
//   again busiest group first); the plan is the better of the two. Last, the winner is
//   polished: searched once more from its best plan with joint moves no candidate makes (a
//   group laid out alike with its training's options a step either way; a training task
//   spread to make room for a forward pass with its options a step either way), keeping its
//   best. A time limit stops the search at any point with the best plan found so far.
//
// Deterministic: the same inputs and seed give the same plan (when the time limit does not
// bind). Constraints (budget per hour, minimum throughput) make a plan unacceptable; the
// objective is throughput, or cost per sample.

#include <cstdint>
#include <functional>

#include "core/clock.h"
#include "planner/planner.h"
#include "planner/space.h"

namespace hetrl::planner {

struct HybridParams {
  SearchSpace space;
  std::uint64_t seed = 1;
  double time_limit = kDefaultTimeLimit;  // seconds
  int max_candidates = 2048;       // level-1 candidates searched (beyond: by bound, or a seeded sample)
  // Evaluations the search aims to spend in all. The first round gives each of the N
  // candidates budget / (N x rounds) evaluations (at least 2), so small instances are searched
  // to convergence and large ones get a quick look first.
  long long evaluation_budget = 40000;
  int restarts = 2;                // perturbations after the local search converges
  Goal goal;
};

struct SearchProgress {
  int round = 0;
  int candidates_left = 0;
  long long evaluations = 0;
  double seconds = 0;
};

// Throws core::InputError when the goal needs prices the cluster lacks.
PlannerResult plan_hybrid(const cost::CostModel& model, const workload::ModelCatalog& models,
                          const HybridParams& params, const core::Clock& clock,
                          const std::function<void(const SearchProgress&)>& progress = {});

}  // namespace hetrl::planner
