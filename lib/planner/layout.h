#pragma once
// Building blocks the planners share: laying replicas out over a set of nodes, and batch
// shares that make replicas of different speeds finish together.

#include <span>
#include <vector>

#include "plan/evaluate.h"
#include "plan/plan.h"
#include "workload/model.h"

namespace hetrl::planner {

// All GPUs of the given nodes, in node order then device order.
std::vector<plan::Gpu> gpus_of(const hw::Cluster& cluster, std::span<const int> nodes);

// Whether uniform_replicas can lay out tp x pp replicas over the nodes (without building them).
bool layout_fits(const hw::Cluster& cluster, std::span<const int> nodes, int tp, int pp, int layers);

// Replicas of `pp` stages of `tp` GPUs each over the nodes' GPUs in order, layers split as
// evenly as they go (the first stages take the remainder), equal shares. False when a node's
// GPU count is not a multiple of tp, the stages do not form whole replicas, or pp exceeds
// the layers.
bool uniform_replicas(const hw::Cluster& cluster, std::span<const int> nodes, int tp, int pp,
                      int layers, std::vector<plan::Replica>& out);

// TP degrees to try for a set of models on a set of nodes: powers of two up to the smallest
// node, dividing every model's attention heads.
std::vector<int> tp_choices(const hw::Cluster& cluster, std::span<const int> nodes,
                            const std::vector<const workload::ModelArch*>& models);

// Re-weights every task's replica shares toward equal finishing times (share / seconds) for a
// few rounds; each task keeps whichever of its old and new shares finish it sooner. Returns
// the plan's prediction (the evaluator's, valid until its next call).
const plan::Prediction& balance_shares(plan::Evaluator& evaluator, plan::Plan& plan, int rounds = 3);

}  // namespace hetrl::planner
