#pragma once
// The steady state of a task graph that repeats every iteration. Each edge says a task cannot
// start before another has started plus `weight` seconds, `shift` iterations earlier (0: the same
// iteration; 1: the previous one, as a group's first task waits for its last task of the previous
// iteration; k + 1: the weights that generation may lag behind by). The earliest periodic
// schedule repeats every T seconds, T the largest ratio weight / shift over the cycles of the
// graph (a max-plus linear system: what a long run of the simulator converges to).
//
// Edges of shift 0 must form a DAG that `order` lists topologically.

#include <span>
#include <vector>

#include "workload/rl_graph.h"

namespace hetrl::plan {

struct CycleEdge {
  int from = 0;
  int to = 0;
  double weight = 0;  // seconds, from the start of `from` to the earliest start of `to`
  int shift = 0;      // iterations
};

// Reuses its buffers: the evaluator calls it once per plan.
class PeriodSolver {
 public:
  // The period; 0 when the graph has no cycle.
  double period(int nodes, std::span<const CycleEdge> edges, std::span<const int> order);

 private:
  double max_cycle_ratio(std::span<const CycleEdge> edges);
  void evaluate_policy(std::span<const CycleEdge> edges);

  std::vector<int> shifted_;
  std::vector<double> reduced_;  // shifted x shifted: weight of the path from one shifted edge to the next
  std::vector<double> distance_;
  std::vector<int> first_out_;  // shift-0 edges leaving each node: out_[first_out_[v] ..]
  std::vector<int> out_;
  std::vector<int> fill_;
  // Howard's policy iteration over the reduced graph: not vector<bool>, read in inner loops.
  std::vector<unsigned char> alive_;  // leads to a cycle
  std::vector<unsigned char> reach_;  // m x m, only where a weight is infinite
  std::vector<unsigned char> state_;
  std::vector<int> policy_;  // the edge each node follows
  std::vector<double> ratio_;  // of the cycle the policy leads the node to
  std::vector<double> value_;  // weight to that cycle less ratio x shift
  std::vector<int> path_;
  std::vector<int> cycle_;
};

// The edges of an RL task graph's repeating schedule, into `out`: each data edge (weight: the
// source's seconds plus `edge_transfer` of that edge, the data or, for an edge that reads
// weights, the weights crossing between groups; shift: the edge's lag, so the new weights
// reach generation 1 + staleness iterations later), and each group's turns: its GPU
// tasks one after the other in `order`, and its last task back to its first (shift 1).
// `group[t]`: the group of GPU task t, or -1 for CPU tasks, the weight sync and unplaced
// tasks. `first` and `last` are scratch.
void schedule_edges(const workload::TaskGraph& graph, std::span<const int> order,
                    std::span<const double> seconds, std::span<const double> edge_transfer,
                    std::span<const int> group, int groups, std::vector<CycleEdge>& out,
                    std::vector<int>& first, std::vector<int>& last);

// Start times within an iteration of a periodic schedule with the given period (which must be
// at least the graph's period): longest paths with weights weight - shift x period.
std::vector<double> periodic_starts(int nodes, std::span<const CycleEdge> edges, double period);

}  // namespace hetrl::plan
