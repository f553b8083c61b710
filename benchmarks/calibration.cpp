// Predicts every published measurement of benchmarks/calibration/rows.json with the cost model
// and the evaluator the tools use, and writes one CSV row per measurement: measured,
// predicted, error, or why the row cannot be expressed. Then prints, per group and split, the
// median and 90th-percentile absolute error.
//
// Usage: calibration ROWS.json OUT.csv
//
// How each kind of row is predicted:
//   training    an "sft" workload of the row's global batch of sequences on a cluster of the
//               row's GPUs, a plan of one group with DP replicas of TP x PP laid out in order
//               and the row's ZeRO stage and recompute; tokens per second per GPU. A measured
//               TFLOP/s is turned into tokens per second with the source's own FLOP count.
//   decode      the generation task of a workload of the row's batch and lengths on one TP group
//               (memory left after the weights holds the KV cache): output tokens per second,
//               or the prefill's milliseconds for a first-token latency.
//   collective  an all-reduce of the row's bytes over its GPUs: bus bandwidth.
//   rl          the row's algorithm and models on its GPUs with every task colocated, as the
//               measured systems run them: samples per second, iteration or task seconds.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "hw/cluster_builder.h"
#include "io/catalog_io.h"
#include "io/files.h"
#include "plan/evaluate.h"
#include "plan/report.h"
#include "planner/baselines.h"
#include "planner/planner.h"
#include "workload/rl_graph.h"

using namespace hetrl;
using Json = nlohmann::json;

namespace {

struct Outcome {
  double predicted = 0;
  std::string why_not;  // non-empty: the row cannot be expressed
};

// `row` may give the GPUs' memory and bandwidth where the measured parts differ from the
// catalogue's (torchtitan's 96 GB H100s).
hw::Cluster make_cluster(const std::string& gpu, int nodes, int gpus_per_node, double nic_gbps,
                         const Json& row = Json::object()) {
  const io::Catalogs& catalogs = io::builtin_catalogs();
  hw::ClusterBuildParams params = hw::default_build_params(catalogs.hardware);
  if (row.contains("gpu_memory_gib")) {
    hw::GpuTypeOverride o;
    o.name = gpu;
    o.memory = row.at("gpu_memory_gib").get<double>() * core::kGiB;
    o.memory_bandwidth = row.at("memory_bandwidth_gbs").get<double>() * 1e9;
    o.source = "the measured part";
    hw::add_override(params, o);
  }
  hw::NodeGroup group;
  group.zone = "z";
  group.node_count = nodes;
  group.gpus_per_node = gpus_per_node;
  group.gpu = gpu;
  group.nic_bandwidth = nic_gbps * core::kGbps;
  params.node_groups.push_back(group);
  return hw::build_cluster(params, catalogs.hardware);
}

// A replica of `tp` x `pp` GPUs taken in order from the cluster's GPUs from `first` on.
plan::Replica replica_at(const hw::Cluster& cluster, int first, int tp, int pp, int layers, double share) {
  const int per_node = cluster.nodes[0].gpu_count;
  plan::Replica r;
  r.share = share;
  for (int s = 0; s < pp; ++s) {
    plan::Stage stage;
    const int start = first + s * tp;
    stage.node = start / per_node;
    for (int d = 0; d < tp; ++d) stage.devices.push_back(start % per_node + d);
    stage.layers = layers / pp + (s < layers % pp ? 1 : 0);
    r.stages.push_back(std::move(stage));
  }
  return r;
}

plan::Group whole_cluster(const hw::Cluster& cluster) {
  plan::Group g;
  for (std::size_t n = 0; n < cluster.nodes.size(); ++n) {
    for (int d = 0; d < cluster.nodes[n].gpu_count; ++d) g.gpus.push_back({static_cast<int>(n), d});
  }
  return g;
}

// The task laid out as `count` replicas of tp x pp over the group's GPUs, in order.
plan::TaskPlacement spread(const hw::Cluster& cluster, int task, int gpus, int tp, int pp, int layers) {
  plan::TaskPlacement t;
  t.task = task;
  const int replicas = gpus / (tp * pp);
  for (int r = 0; r < replicas; ++r) {
    t.replicas.push_back(replica_at(cluster, r * tp * pp, tp, pp, layers, 1.0 / replicas));
  }
  return t;
}

workload::Workload base_workload(const std::string& algorithm, int prompts, int samples_per_prompt, int prompt,
                                 const Json& response) {
  workload::Workload w;
  w.algorithm = algorithm;
  w.prompts_per_iteration = prompts;
  w.samples_per_prompt = samples_per_prompt;
  w.prompt_length_tokens = prompt;
  if (response.value("distribution", "fixed") == "fixed") {
    w.response.kind = workload::LengthKind::kFixed;
    w.response.fixed_tokens = response.at("tokens").get<int>();
  } else {
    w.response.kind = workload::LengthKind::kLognormal;
    w.response.mean_tokens = response.at("mean_tokens").get<double>();
    w.response.max_tokens = response.at("max_tokens").get<int>();
  }
  return w;
}

// FLOPs per token as a source counts them, to turn its TFLOP/s into tokens per second.
double source_flops_per_token(const std::string& convention, const workload::ModelArch& m, double sequence) {
  const double l = m.layers, h = m.hidden, v = m.vocab;
  if (convention == "megatron-recompute") {
    return 96.0 * l * h * h * (1 + sequence / (6 * h) + v / (16 * l * h));
  }
  // 6 x (linear and head parameters) + 12 x layers x hidden x sequence (attention, fwd + bwd).
  const double q = static_cast<double>(m.heads) * m.head_dim, kv = static_cast<double>(m.kv_heads) * m.head_dim;
  const double linear = 2 * h * q + 2 * h * kv + (m.gated_mlp ? 3.0 : 2.0) * h * m.ffn_hidden;
  return 6.0 * (l * linear + v * h) + 12.0 * l * h * sequence;
}

// The framework a row's training and scoring passes run in ("trainer": "fsdp" by default,
// "megatron" or "deepspeed").
cost::Trainer trainer_of(const Json& row) {
  const std::string name = row.value("trainer", "fsdp");
  if (name == "megatron") return cost::Trainer::kMegatron;
  if (name == "deepspeed") return cost::Trainer::kDeepSpeed;
  if (name != "fsdp") throw core::InputError("unknown trainer " + name);
  return cost::Trainer::kFsdp;
}

// The inference engine's fixed cost of a decode step (cost::CostParams::decode_step_overhead):
// vLLM's is the cost model's default; engines replaying CUDA graphs from C++ pay none; the
// DeepSpeed hybrid engine's is fitted on its fit rows (README.md).
double decode_step_overhead(const Json& row) {
  const std::string engine = row.value("engine", "vllm");
  if (engine == "trtllm" || engine == "tgi") return 0;
  if (engine == "deepspeed") return 2.7e-3;
  return cost::CostParams{}.decode_step_overhead;
}

// A row's trainer kernels: "fused" (the default) or "eager".
workload::TrainerKernels kernels_of(const Json& row) {
  const std::string kernels = row.value("kernels", "fused");
  if (kernels != "fused" && kernels != "eager") throw std::runtime_error("kernels: " + kernels);
  return kernels == "eager" ? workload::TrainerKernels::kEager : workload::TrainerKernels::kFused;
}

// A row's activation recompute: false, true (full) or "selective" (torchtitan's per-op policy).
cost::Recompute recompute_of(const Json& row) {
  if (!row.contains("recompute")) return cost::Recompute::kNone;
  const Json& v = row.at("recompute");
  if (v.is_string()) {
    if (v.get<std::string>() != "selective") throw std::runtime_error("recompute: " + v.get<std::string>());
    return cost::Recompute::kSelective;
  }
  return v.get<bool>() ? cost::Recompute::kFull : cost::Recompute::kNone;
}

// A GPU's room for the KV cache and the engine's workspace beside `weights`. vLLM (and the
// cost model) take a share of the GPU's whole memory (gpu_memory_utilization, 0.9) less the
// weights, and size the cache in what their workspace leaves; TensorRT-LLM gives the cache 0.9
// of what is free once the engine's weights and workspace are in
// (KvCacheConfig::free_gpu_memory_fraction, default 0.9, NVIDIA's "How to Change KV Cache
// Behavior").
double kv_budget(const Json& row, const cost::CostModel& model, int task, const cost::Stage& stage,
                 double weights, double gpu_memory) {
  if (row.value("engine", "vllm") == "trtllm") {
    const double workspace = model.generation_workspace(task, stage);
    return 0.9 * (gpu_memory - weights - workspace) + workspace;
  }
  return model.usable_memory(0) - weights;
}

Outcome training(const Json& row, const workload::ModelCatalog& models) {
  const workload::ModelArch& arch = models.get(row.at("model").get<std::string>(), "/model");
  const int gpus = row.at("gpus"), per_node = row.at("gpus_per_node"), tp = row.at("tp"), pp = row.at("pp");
  const int sequence = row.at("sequence"), global = row.at("global_batch"), micro = row.at("micro_batch");
  if (gpus % (tp * pp) != 0 || per_node % tp != 0) return {0, "TP x PP does not divide the GPUs"};
  const hw::Cluster cluster =
      make_cluster(row.at("gpu"), gpus / per_node, per_node, row.value("nic_gbps", 3200.0), row);
  workload::Workload w = base_workload("sft", global, 1, sequence / 2, Json{{"tokens", sequence - sequence / 2}});
  w.role(workload::Role::kActor) = {workload::RoleModel::Kind::kModel, arch.name};
  w.trainer_kernels = kernels_of(row);
  w.validate(io::builtin_catalogs().algorithms, models);
  const workload::TaskGraph graph = workload::build_task_graph(w, io::builtin_catalogs().algorithms, models);
  cost::CostParams params;
  params.micro_batch_tokens = static_cast<double>(micro) * sequence;
  params.trainer = trainer_of(row);
  params.tp_overlap = row.value("tp_overlap", false);
  params.dp_overlap = row.value("dp_overlap", false);
  const cost::CostModel model(cluster, w, graph, models, params);
  plan::Plan p;
  p.groups.push_back(whole_cluster(cluster));
  plan::TaskPlacement t = spread(cluster, graph.find("train"), gpus, tp, pp, arch.layers);
  t.train = {row.at("zero").get<int>(), recompute_of(row)};
  p.groups[0].tasks.push_back(std::move(t));
  p.validate(cluster, graph, models);
  plan::Evaluator evaluator(model);
  const char* explain = std::getenv("HETRL_CALIBRATION_EXPLAIN");
  const bool explaining = explain && row.at("id") == explain;
  const plan::Prediction& prediction = evaluator.evaluate(p, explaining);
  if (!prediction.feasible) return {0, "does not fit: " + prediction.infeasible};
  if (explaining) {
    for (const cost::Breakdown::Term& term : prediction.tasks[graph.find("train")].terms) {
      std::printf("%-56s %10.3f s\n", term.name, term.seconds);
    }
  }
  if (const char* id = std::getenv("HETRL_CALIBRATION_EXPLAIN"); id && row.at("id") == id) {
    std::printf("%s\n", plan::format_plan(p, prediction, {row.at("id"), cluster, graph, w}, true).c_str());
  }
  return {static_cast<double>(global) * sequence / prediction.iteration_seconds / gpus, ""};
}

double training_measured(const Json& row, const workload::ModelCatalog& models) {
  const std::string metric = row.at("metric");
  const double measured = row.at("measured");
  const double sequence = row.at("sequence"), global = row.at("global_batch"), gpus = row.at("gpus");
  if (metric == "tokens_per_gpu_s") return measured;
  if (metric == "iteration_s") return global * sequence / measured / gpus;
  const workload::ModelArch& arch = models.get(row.at("model").get<std::string>(), "/model");
  return measured * 1e12 / source_flops_per_token(row.at("flops"), arch, sequence);
}

Outcome decode(const Json& row, const workload::ModelCatalog& models) {
  const std::string model_name = row.at("model");
  const int tp = row.at("tp"), batch = row.at("batch"), input = row.at("input"), output = row.at("output");
  const hw::Cluster cluster = make_cluster(row.at("gpu"), 1, std::max(tp, 1), 400);
  workload::Workload w = base_workload("ppo", batch, 1, input, Json{{"tokens", output}});
  for (workload::Role r : {workload::Role::kActor, workload::Role::kCritic, workload::Role::kReference}) {
    w.role(r) = {workload::RoleModel::Kind::kModel, model_name};
  }
  w.role(workload::Role::kReward).kind = workload::RoleModel::Kind::kRule;
  w.validate(io::builtin_catalogs().algorithms, models);
  const workload::TaskGraph graph = workload::build_task_graph(w, io::builtin_catalogs().algorithms, models);
  cost::CostParams params;
  if (row.contains("max_num_seqs")) params.max_num_seqs = row.at("max_num_seqs");
  params.decode_step_overhead = decode_step_overhead(row);
  const cost::CostModel model(cluster, w, graph, models, params);
  const int task = graph.find("generate");
  const std::vector<cost::Stage> stages{{0, tp, models.get(model_name, "").layers}};
  const cost::StageMemory memory = model.stage_memory(task, stages, 0, 1, {});
  double budget = kv_budget(row, model, task, stages[0], memory.weights, cluster.gpu_types[0].memory);
  if (budget < memory.kv_cache_min) return {0, "the weights leave no room for one sequence's KV cache"};
  const std::string kind = row.at("kind");
  if (kind == "static") {
    // A static batch decodes all its sequences at once, as the source ran it: room for them
    // all, whatever share of the memory the engine's defaults would give the cache.
    budget = std::max(budget, model.kv_budget_holding(task, stages[0], batch));
  }
  if (kind == "prefill") {
    const auto [compute, allreduce] = model.prefill_seconds(task, stages, 1);
    return {1e3 * (compute + allreduce), ""};
  }
  cost::Breakdown terms(true);
  const std::vector<double> budgets{budget};
  const double seconds = model.replica_seconds(task, stages, batch, 1, {}, budgets, terms);
  if (const char* id = std::getenv("HETRL_CALIBRATION_EXPLAIN"); id && row.at("id") == id) {
    for (const cost::Breakdown::Term& term : terms.terms()) std::printf("%-56s %10.3f s\n", term.name, term.seconds);
    std::printf("%-56s %10.0f\n", "KV cache room (tokens)", model.kv_capacity_tokens(task, stages, budgets));
    std::printf("%-56s %10.1f\n", "sequences decoding at once", model.concurrent_sequences(task, stages, budgets));
  }
  double decode_seconds = seconds;
  if (kind == "stream") {
    for (const cost::Breakdown::Term& term : terms.terms()) {
      if (std::string(term.name).starts_with("prefill")) decode_seconds -= term.seconds;
    }
  }
  return {static_cast<double>(batch) * output / decode_seconds, ""};
}

Outcome collective(const Json& row) {
  const int nodes = row.at("nodes"), per_node = row.at("gpus_per_node");
  const hw::Cluster cluster = make_cluster(row.at("gpu"), nodes, per_node, row.value("nic_gbps", 400.0));
  const workload::Workload w = [] {
    workload::Workload x = base_workload("sft", 1, 1, 1, Json{{"tokens", 1}});
    x.role(workload::Role::kActor) = {workload::RoleModel::Kind::kModel, "Qwen2.5-0.5B"};
    return x;
  }();
  const workload::TaskGraph graph =
      workload::build_task_graph(w, io::builtin_catalogs().algorithms, io::builtin_catalogs().models);
  const cost::CostModel model(cluster, w, graph, io::builtin_catalogs().models);
  const double bytes = row.at("bytes");
  const double gpus = static_cast<double>(nodes) * per_node;
  const double seconds = model.allreduce_seconds(nodes, per_node, bytes);
  return {bytes / seconds * 2 * (gpus - 1) / gpus / 1e9, ""};
}

Outcome rl(const Json& row, const workload::ModelCatalog& models) {
  const int gpus = row.at("gpus");
  const int per_node = std::min(gpus, 8);
  const hw::Cluster cluster = make_cluster(row.at("gpu"), gpus / per_node, per_node, row.value("nic_gbps", 1600.0));
  workload::Workload w = base_workload(row.at("algorithm"), row.at("prompts"), row.value("samples_per_prompt", 1),
                                       row.at("prompt"), row.at("response"));
  w.mini_batches = row.value("mini_batches", 1);
  w.trainer_kernels = kernels_of(row);
  for (const auto& [role_name, model_name] : row.at("models").items()) {
    const auto role = workload::role_from_name(role_name);
    if (!role) return {0, "unknown role " + role_name};
    const std::string name = model_name.get<std::string>();
    w.role(*role) = name == "rule" ? workload::RoleModel{workload::RoleModel::Kind::kRule, ""}
                                   : workload::RoleModel{workload::RoleModel::Kind::kModel, name};
  }
  w.validate(io::builtin_catalogs().algorithms, models);
  const workload::TaskGraph graph = workload::build_task_graph(w, io::builtin_catalogs().algorithms, models);
  cost::CostParams params;
  params.decode_step_overhead = decode_step_overhead(row);
  params.trainer = trainer_of(row);
  const cost::CostModel model(cluster, w, graph, models, params);
  plan::Plan p;
  if (row.value("layout", "") == "measured" || (row.contains("generate_tp") && row.at("generate_tp").get<int>() > 1)) {
    // The measured layout: generation at its TP, the other tasks one replica a GPU.
    p.groups.push_back(whole_cluster(cluster));
    for (int t : graph.gpu_tasks()) {
      const int layers = model.shape(t).layers;
      const bool generate = graph.tasks[t].kind == workload::TaskKind::kGenerate;
      plan::TaskPlacement placement = spread(cluster, t, gpus, generate ? row.at("generate_tp").get<int>() : 1, 1, layers);
      placement.train = {row.value("zero", 3), recompute_of(row)};
      p.groups[0].tasks.push_back(std::move(placement));
    }
  } else {
    // The best colocated plan the hybrid-engine policy allows.
    const planner::PlannerResult r = planner::plan_verl(model, models, planner::all_nodes(cluster));
    if (!r.found) return {0, "no colocated plan fits: " + r.why_not};
    p = r.plan;
  }
  plan::Evaluator evaluator(model);
  const plan::Prediction& prediction = evaluator.evaluate(p, true);
  if (!prediction.feasible) return {0, "does not fit: " + prediction.infeasible};
  if (const char* id = std::getenv("HETRL_CALIBRATION_EXPLAIN"); id && row.at("id") == id) {
    std::printf("%s\n", plan::format_plan(p, prediction, {row.at("id"), cluster, graph, w}, true).c_str());
  }
  const std::string metric = row.at("metric");
  if (metric == "samples_per_s") return {prediction.samples_per_second, ""};
  if (metric == "iteration_s") return {prediction.iteration_seconds, ""};
  const int task = graph.find(row.at("task").get<std::string>());
  if (task < 0) return {0, "no task " + row.at("task").get<std::string>()};
  return {prediction.tasks[task].seconds, ""};
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const double x = p * static_cast<double>(v.size() - 1);
  const std::size_t i = static_cast<std::size_t>(x);
  const double f = x - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: calibration ROWS.json OUT.csv\n");
    return 2;
  }
  try {
    const std::filesystem::path rows_path = argv[1];
    const Json doc = Json::parse(io::read_text_file(rows_path.string()));
    workload::ModelCatalog models = io::builtin_catalogs().models;
    const std::filesystem::path model_file = rows_path.parent_path() / doc.at("model_file").get<std::string>();
    for (const workload::ModelArch& m :
         io::parse_model_catalog(io::read_text_file(model_file.string()), model_file.string(), true).models) {
      models.models.push_back(m);
    }
    std::ofstream out(argv[2]);
    out << "id,group,source,split,metric,measured,predicted,error,why_not,unstated\n";
    // |error| per group and split ("all" too), of the rows whose configuration is stated.
    std::map<std::string, std::map<std::string, std::vector<double>>> errors;
    std::vector<std::string> unexpressed, unstated;
    for (const Json& row : doc.at("rows")) {
      const std::string group = row.at("group"), id = row.at("id");
      Outcome o;
      double measured = row.at("measured");
      try {
        if (group == "training") {
          o = training(row, models);
          measured = training_measured(row, models);
        } else if (group == "decode") {
          o = decode(row, models);
        } else if (group == "collective") {
          o = collective(row);
        } else {
          o = rl(row, models);
        }
      } catch (const core::InputError& e) {
        o.why_not = e.what();
      }
      const double error = o.why_not.empty() ? o.predicted / measured - 1 : 0;
      const std::string why_unstated = row.value("unstated", "");
      out << fmt::format("{},{},{},{},{},{:.6g},{},{},{},{}\n", id, group, row.at("source").get<std::string>(),
                         row.at("split").get<std::string>(), row.at("metric").get<std::string>(), measured,
                         o.why_not.empty() ? fmt::format("{:.6g}", o.predicted) : "",
                         o.why_not.empty() ? fmt::format("{:.4f}", error) : "", csv_field(o.why_not),
                         csv_field(why_unstated));
      if (!why_unstated.empty()) {
        // Predicted as far as the source allows and shown, but not counted: what the
        // prediction rests on is a guess.
        unstated.push_back(o.why_not.empty() ? fmt::format("{} {:+.1f}%", id, 100 * error)
                                             : fmt::format("{} (not expressed: {})", id, o.why_not));
        continue;
      }
      if (!o.why_not.empty()) {
        unexpressed.push_back(fmt::format("{}: {}", id, o.why_not));
        continue;
      }
      errors[group][row.at("split")].push_back(std::abs(error));
      errors[group]["all"].push_back(std::abs(error));
    }
    std::printf("%-11s %-5s %5s %12s %12s\n", "group", "split", "rows", "median |err|", "p90 |err|");
    for (const auto& [group, splits] : errors) {
      for (const char* split : {"fit", "test", "all"}) {
        const auto it = splits.find(split);
        if (it == splits.end()) continue;
        std::printf("%-11s %-5s %5zu %11.1f%% %11.1f%%\n", group.c_str(), split, it->second.size(),
                    100 * percentile(it->second, 0.5), 100 * percentile(it->second, 0.9));
      }
    }
    for (const std::string& line : unexpressed) std::printf("not expressed: %s\n", line.c_str());
    if (!unstated.empty()) {
      std::printf("configuration not stated by the source (not counted; the reasons are in the CSV):\n");
      for (const std::string& line : unstated) std::printf("  %s\n", line.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "calibration: %s\n", e.what());
    return 1;
  }
}
