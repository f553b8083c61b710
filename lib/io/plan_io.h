#pragma once
// The plan file (hetrl.plan/v1). GPUs are written "NODE:DEVICE" or "NODE:FIRST-LAST":
//
//   {"schema": "hetrl.plan/v1",
//    "inputs": {"cluster": "fnv1a64:...", "workload": "fnv1a64:..."},
//    "planner": {"name": "verl", "params": {...}, "stats": {...}},
//    "groups": [
//      {"gpus": ["node-a:0-7", "node-b:0-3"],
//       "tasks": {
//         "generate": {"replicas": [
//             {"share": 0.5, "stages": [{"gpus": ["node-a:0-1"], "layers": 28}]}, ...]},
//         "actor_train": {"zero_stage": 1, "recompute": "none", "replicas": [...]}}}],
//    "prediction": {...}}
//
// "recompute" is "none", "selective" or "full" (cost::Recompute); true and false, as plans
// before selective recompute wrote it, read as "full" and "none".
// "prediction" is what the planner predicted; reading ignores it (evaluation recomputes it).
// A stage's GPUs must sit on one node (TP stays inside a node). A group may say
// "offload": true: its tasks' weights and state wait in host memory between their turns
// (plan::Group::offload).

#include <string>
#include <string_view>

#include "plan/evaluate.h"
#include "plan/plan.h"

namespace hetrl::io {

// Parses a plan and checks it against the cluster and the task graph (Plan::validate).
plan::Plan parse_plan(std::string_view text, std::string_view file, const hw::Cluster& cluster,
                      const workload::TaskGraph& graph, const workload::ModelCatalog& models);
plan::Plan read_plan(const std::string& path, const hw::Cluster& cluster,
                     const workload::TaskGraph& graph, const workload::ModelCatalog& models);

// The plan with its prediction, as JSON.
std::string plan_to_json(const plan::Plan& plan, const plan::Prediction& prediction,
                         const hw::Cluster& cluster, const workload::TaskGraph& graph);

}  // namespace hetrl::io
