#pragma once
// A plan as the configuration of the runtime that deploys it (hetrl-plan export): verl's
// Hydra overrides or OpenRLHF's command-line flags, each key one the runtime's documentation
// of the version named in RuntimeDocs gives (docs/export.md lists them and where they come
// from). A runtime expresses fewer plans than hetrl makes: each role runs on every GPU of its
// resource pool, with one layout for all its data-parallel ranks, an even split of the batch
// over them, and pools given by GPU counts per node, not by which GPUs. A plan outside that is
// refused with every reason found, never exported approximately.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/evaluate.h"
#include "plan/plan.h"

namespace hetrl::plan {

enum class Runtime { kVerl, kOpenRlhf };
std::string_view runtime_name(Runtime runtime);  // "verl", "openrlhf"
std::optional<Runtime> runtime_from_name(std::string_view name);

// The version of the runtime whose documented keys an export uses, and where they are
// documented.
struct RuntimeDocs {
  std::string_view runtime;  // as people write it: "verl", "OpenRLHF"
  std::string_view version;
  std::string_view documents;
};
const RuntimeDocs& runtime_docs(Runtime runtime);

struct ExportSetting {
  std::string key;    // "trainer.nnodes"; a flag: "--actor.num_nodes"
  std::string value;  // empty for a flag that takes none (OpenRLHF's switches)
};

struct Export {
  Runtime runtime = Runtime::kVerl;
  std::string command;  // what the settings follow: "python3 -m verl.trainer.main_ppo"
  std::vector<ExportSetting> settings;
  // What the user still has to give or do, one line each (data files, the reward function, the
  // Ray cluster's nodes).
  std::vector<std::string> notes;
};

struct ExportInputs {
  const Plan& plan;
  const hw::Cluster& cluster;
  const workload::Workload& workload;
  const workload::TaskGraph& graph;
  const workload::ModelCatalog& models;
  const cost::CostModel& model;
  // The plan's prediction evaluated with explain (generation's KV cache budgets size the
  // rollout's share of GPU memory).
  const Prediction& prediction;
};

// The runtime's configuration for the plan. Throws core::JobError naming the runtime and
// version and every reason it cannot express the plan.
Export export_plan(Runtime runtime, const ExportInputs& in);

// The export as a shell script: a header saying what it was made from and its notes as
// comments, then the command with one setting per line.
std::string format_export(const Export& exported, const ExportInputs& in, std::string_view workload_name);

// Why verl's trainers cannot run a training or scoring layout, or nullopt when one can: its
// FSDP workers shard weights, gradients and optimizer state over every GPU (ZeRO-3) without
// tensor or pipeline parallelism; its Megatron workers run TP and PP with the optimizer state
// sharded (ZeRO-1, the distributed optimizer) or not (ZeRO-0); neither runs the optimizer on
// the CPU. Shared with the verl baselines, which plan within it.
std::optional<std::string> verl_trainer_refusal(int tp, int pp, const cost::TrainOptions& train);

}  // namespace hetrl::plan
