#include "io/plan_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/text.h"
#include "core/units.h"
#include "io/files.h"
#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {
namespace {

using detail::Json;
using detail::ObjectReader;
using detail::OrderedJson;

// "node:3" or "node:0-7" -> GPUs.
std::vector<plan::Gpu> parse_gpus(const std::string& text, const hw::Cluster& cluster,
                                  const std::string& where) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw core::InputError(fmt::format("{}: expected NODE:DEVICE or NODE:FIRST-LAST, found {}",
                                       where, core::quoted(text)));
  }
  const std::string node_name = text.substr(0, colon);
  int node = -1;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    names.push_back(cluster.nodes[i].name);
    if (cluster.nodes[i].name == node_name) node = static_cast<int>(i);
  }
  if (node < 0) {
    throw core::InputError(fmt::format("{}: unknown node {}{}", where, core::quoted(node_name),
                                       core::did_you_mean(node_name, names)));
  }
  const std::string range = text.substr(colon + 1);
  const std::size_t dash = range.find('-');
  const int count = cluster.nodes[node].gpu_count;
  const std::string what = fmt::format("{}: GPU of {} (it has 0 to {})", where,
                                       core::quoted(node_name), count - 1);
  const int first = static_cast<int>(core::parse_integer(range.substr(0, dash), what, 0, count - 1));
  const int last = dash == std::string::npos
                       ? first
                       : static_cast<int>(core::parse_integer(range.substr(dash + 1), what, first, count - 1));
  std::vector<plan::Gpu> gpus;
  for (int d = first; d <= last; ++d) gpus.push_back({node, d});
  return gpus;
}

// A training task's "recompute": "none", "selective" or "full"; the booleans older plans wrote
// read as "none" and "full".
cost::Recompute read_recompute(ObjectReader& t) {
  if (!t.has("recompute")) return cost::Recompute::kNone;
  const Json& v = t.value("recompute");
  if (v.is_boolean()) return v.get<bool>() ? cost::Recompute::kFull : cost::Recompute::kNone;
  constexpr std::array kinds{cost::Recompute::kNone, cost::Recompute::kSelective, cost::Recompute::kFull};
  std::vector<std::string> names;
  for (cost::Recompute r : kinds) names.emplace_back(cost::recompute_name(r));
  const std::vector<std::string_view> views(names.begin(), names.end());
  const std::string expected = "expected " + detail::one_of(views) + ", found ";
  if (!v.is_string()) t.fail("recompute", expected + detail::describe(v));
  const std::string name = v.get<std::string>();
  for (cost::Recompute r : kinds) {
    if (name == cost::recompute_name(r)) return r;
  }
  t.fail("recompute", expected + core::quoted(name) + core::did_you_mean(name, names));
}

std::vector<plan::Gpu> read_gpu_list(ObjectReader& r, const hw::Cluster& cluster) {
  std::vector<plan::Gpu> gpus;
  const std::vector<std::string> items = r.string_array("gpus");
  if (items.empty()) r.fail("gpus", "expected at least one GPU");
  for (std::size_t i = 0; i < items.size(); ++i) {
    for (const plan::Gpu& gpu : parse_gpus(items[i], cluster, fmt::format("{}/{}", r.where("gpus"), i))) {
      gpus.push_back(gpu);
    }
  }
  return gpus;
}

// Consecutive devices of one node as "node:first-last" strings.
std::vector<std::string> gpu_strings(const std::vector<plan::Gpu>& gpus, const hw::Cluster& cluster) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < gpus.size()) {
    std::size_t j = i;
    while (j + 1 < gpus.size() && gpus[j + 1].node == gpus[i].node &&
           gpus[j + 1].device == gpus[j].device + 1) {
      ++j;
    }
    const std::string& node = cluster.nodes[gpus[i].node].name;
    out.push_back(i == j ? fmt::format("{}:{}", node, gpus[i].device)
                         : fmt::format("{}:{}-{}", node, gpus[i].device, gpus[j].device));
    i = j + 1;
  }
  return out;
}

}  // namespace

plan::Plan parse_plan(std::string_view text, std::string_view file, const hw::Cluster& cluster,
                      const workload::TaskGraph& graph, const workload::ModelCatalog& models) {
  const Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.plan/v1");
  plan::Plan p;
  const core::Provenance provenance = detail::read_provenance(root);
  for (const auto& [name, hash] : provenance.inputs) {
    if (name == "cluster") p.cluster_hash = hash;
    if (name == "workload") p.workload_hash = hash;
  }
  if (auto planner = root.optional_object("planner")) {
    p.planner.name = planner->string("name");
    planner->has("params");
    planner->has("stats");
  }
  root.has("prediction");  // an output: evaluation recomputes it
  std::vector<std::string> task_names;
  for (const workload::Task& t : graph.tasks) task_names.push_back(t.name);
  for (ObjectReader& g : root.object_array("groups", false)) {
    plan::Group group;
    group.gpus = read_gpu_list(g, cluster);
    group.offload = g.optional_boolean("offload").value_or(false);
    for (auto& [name, t] : g.object_map("tasks")) {
      plan::TaskPlacement placement;
      placement.task = graph.find(name);
      if (placement.task < 0) {
        throw core::InputError(fmt::format("{}: the workload's {} graph has no task {}{}", t.where(),
                                           graph.algorithm, core::quoted(name),
                                           core::did_you_mean(name, task_names)));
      }
      placement.train.zero_stage =
          static_cast<int>(t.optional_integer("zero_stage", 0, 3).value_or(placement.train.zero_stage));
      placement.train.recompute = read_recompute(t);
      placement.train.optimizer_offload = t.optional_boolean("optimizer_offload").value_or(false);
      for (ObjectReader& r : t.object_array("replicas", false)) {
        plan::Replica replica;
        replica.share = r.number("share", detail::Range::kPositive);
        for (ObjectReader& s : r.object_array("stages", false)) {
          plan::Stage stage;
          const std::vector<plan::Gpu> gpus = read_gpu_list(s, cluster);
          stage.node = gpus.front().node;
          for (const plan::Gpu& gpu : gpus) {
            if (gpu.node != stage.node) {
              s.fail("gpus", fmt::format("TP across nodes: the GPUs of a stage must sit on one node, "
                                         "found {} and {}",
                                         core::quoted(cluster.nodes[stage.node].name),
                                         core::quoted(cluster.nodes[gpu.node].name)));
            }
            stage.devices.push_back(gpu.device);
          }
          stage.layers = static_cast<int>(s.integer("layers", 1, 1 << 20));
          s.finish();
          replica.stages.push_back(std::move(stage));
        }
        r.finish();
        placement.replicas.push_back(std::move(replica));
      }
      t.finish();
      group.tasks.push_back(std::move(placement));
    }
    g.finish();
    // Tasks in graph order, whatever order the file lists them in.
    std::sort(group.tasks.begin(), group.tasks.end(),
              [](const plan::TaskPlacement& a, const plan::TaskPlacement& b) { return a.task < b.task; });
    p.groups.push_back(std::move(group));
  }
  root.finish();
  try {
    p.validate(cluster, graph, models);
  } catch (const core::InputError& e) {
    throw core::InputError(core::located(file, e.what()));
  }
  return p;
}

plan::Plan read_plan(const std::string& path, const hw::Cluster& cluster,
                     const workload::TaskGraph& graph, const workload::ModelCatalog& models) {
  return parse_plan(read_text_file(path), path, cluster, graph, models);
}

std::string plan_to_json(const plan::Plan& p, const plan::Prediction& prediction,
                         const hw::Cluster& cluster, const workload::TaskGraph& graph) {
  OrderedJson out;
  out["schema"] = "hetrl.plan/v1";
  core::Provenance provenance;
  provenance.tool = "hetrl-plan";
  provenance.version = HETRL_VERSION;
  if (!p.cluster_hash.empty()) provenance.inputs.emplace_back("cluster", p.cluster_hash);
  if (!p.workload_hash.empty()) provenance.inputs.emplace_back("workload", p.workload_hash);
  detail::write_provenance(out, provenance);
  OrderedJson planner;
  planner["name"] = p.planner.name;
  OrderedJson params = OrderedJson::object();
  for (const auto& [key, value] : p.planner.params) params[key] = value;
  planner["params"] = std::move(params);
  OrderedJson stats = OrderedJson::object();
  for (const auto& [key, value] : p.planner.stats) stats[key] = detail::file_units(value);
  planner["stats"] = std::move(stats);
  out["planner"] = std::move(planner);

  OrderedJson groups = OrderedJson::array();
  for (const plan::Group& group : p.groups) {
    OrderedJson g;
    g["gpus"] = gpu_strings(group.gpus, cluster);
    if (group.offload) g["offload"] = true;
    OrderedJson tasks = OrderedJson::object();
    for (const plan::TaskPlacement& placement : group.tasks) {
      OrderedJson t;
      if (graph.tasks[placement.task].kind == workload::TaskKind::kTrain) {
        t["zero_stage"] = placement.train.zero_stage;
        t["recompute"] = cost::recompute_name(placement.train.recompute);
        if (placement.train.optimizer_offload) t["optimizer_offload"] = true;
      }
      OrderedJson replicas = OrderedJson::array();
      for (const plan::Replica& replica : placement.replicas) {
        OrderedJson r;
        r["share"] = replica.share;  // a decision, written exactly: read back, the plan predicts the same
        OrderedJson stages = OrderedJson::array();
        for (const plan::Stage& stage : replica.stages) {
          std::vector<plan::Gpu> gpus;
          for (int d : stage.devices) gpus.push_back({stage.node, d});
          stages.push_back({{"gpus", gpu_strings(gpus, cluster)}, {"layers", stage.layers}});
        }
        r["stages"] = std::move(stages);
        replicas.push_back(std::move(r));
      }
      t["replicas"] = std::move(replicas);
      tasks[graph.tasks[placement.task].name] = std::move(t);
    }
    g["tasks"] = std::move(tasks);
    groups.push_back(std::move(g));
  }
  out["groups"] = std::move(groups);

  OrderedJson pred;
  pred["feasible"] = prediction.feasible;
  if (!prediction.feasible) pred["infeasible"] = prediction.infeasible;
  pred["iteration_seconds"] = detail::file_units(prediction.iteration_seconds);
  pred["samples_per_second"] = detail::file_units(prediction.samples_per_second);
  pred["tokens_per_second"] = detail::file_units(prediction.tokens_per_second);
  if (prediction.price_per_hour) {
    pred["price_per_hour_usd"] = detail::file_units(*prediction.price_per_hour);
  }
  OrderedJson tasks = OrderedJson::object();
  for (std::size_t t = 0; t < prediction.tasks.size() && prediction.feasible; ++t) {
    const plan::TaskPrediction& tp = prediction.tasks[t];
    OrderedJson entry;
    if (tp.group >= 0) entry["group"] = tp.group;
    entry["start_seconds"] = detail::file_units(tp.start);
    entry["seconds"] = detail::file_units(tp.seconds);
    tasks[graph.tasks[t].name] = std::move(entry);
  }
  pred["tasks"] = std::move(tasks);
  OrderedJson memory = OrderedJson::array();
  for (const plan::GroupPrediction& g : prediction.groups) {
    const plan::MemoryUse& m = g.tightest;
    OrderedJson entry;
    entry["busy_seconds"] = detail::file_units(g.busy_seconds);
    entry["tightest_gpu"] = gpu_strings({m.gpu}, cluster).front();
    entry["used_gib"] = detail::file_units(m.used() / core::kGiB);
    entry["usable_gib"] = detail::file_units(m.capacity / core::kGiB);
    memory.push_back(std::move(entry));
  }
  pred["groups"] = std::move(memory);
  out["prediction"] = std::move(pred);
  return detail::dump(out);
}

}  // namespace hetrl::io
