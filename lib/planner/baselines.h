#pragma once
// The baseline planners: each returns the best plan its own policy allows, judged by the same
// cost model as every other planner.
//
//   verl         every GPU task colocated on all GPUs (the hybrid engine of verl): one TP x PP
//                and training options for training and scoring, the rollout's TP x PP chosen
//                apart, layers and batch split evenly.
//   streamrl     generation on one pool of nodes, every other task colocated on the rest;
//                a strategy per pool, batch shares split by replica speed (StreamRL).
//   verl-async   verl's one-step off-policy trainer: generation on one pool of nodes, every
//                other task on the rest, each pool with verl's strategies, batch split evenly;
//                an async workload only (an InputError otherwise).
//   homogeneous  the best of verl and streamrl on the nodes of a single GPU type.
//
// Search choices (kBaselineSpace): TP in powers of two (dividing the heads, inside a node), PP
// in {1, 2, 4, 8}, ZeRO stage in {1, 2, 3}, activation recompute none or full (the systems'
// FSDP trainers checkpoint whole layers, as Hugging Face models' gradient checkpointing does;
// selective recompute is hetrl's own choice), the optimizer on the GPU. The streamrl split
// is chosen over node classes (hw::NodeClasses): every way of giving k of a class's nodes to
// generation, up to kMaxSplits splits (whole classes only beyond that). Each baseline ranks its
// plans by throughput. Given a deadline, a baseline stops at the first evaluation past it with
// the best plan so far (Stop::kTimeLimit); `auto` gives them one.

#include <vector>

#include "planner/planner.h"
#include "planner/space.h"
#include "workload/model.h"

namespace hetrl::planner {

inline const SearchSpace kBaselineSpace{
    .pipeline = {1, 2, 4, 8},
    .zero_stages = {1, 2, 3},
    .recompute = {cost::Recompute::kNone, cost::Recompute::kFull},
    .optimizer_offload = {false}};
// The disaggregated baselines try at most this many splits of the nodes into two pools...
inline constexpr int kMaxSplits = 4096;
// ... and fewer on a large cluster: at most this many GPUs priced over all splits (4,096 splits
// up to 1,024 GPUs, 41 on 100,000), at least 16 splits.
inline constexpr long long kSplitGpus = 4096LL * 1024;

PlannerResult plan_verl(const cost::CostModel& model, const workload::ModelCatalog& models,
                        const std::vector<int>& nodes, const Deadline& deadline = {});
PlannerResult plan_streamrl(const cost::CostModel& model, const workload::ModelCatalog& models,
                            const std::vector<int>& nodes, const Deadline& deadline = {});
PlannerResult plan_verl_async(const cost::CostModel& model, const workload::ModelCatalog& models,
                              const std::vector<int>& nodes, const Deadline& deadline = {});
PlannerResult plan_homogeneous(const cost::CostModel& model, const workload::ModelCatalog& models,
                               const Deadline& deadline = {});

}  // namespace hetrl::planner
