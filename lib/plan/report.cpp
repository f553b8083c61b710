#include "plan/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/units.h"

namespace hetrl::plan {

std::string layout_text(const TaskPlacement& placement, const hw::Cluster& cluster) {
  std::vector<std::pair<std::string, int>> kinds;
  for (const Replica& replica : placement.replicas) {
    std::string types;
    for (const Stage& stage : replica.stages) {
      const std::string& type = cluster.gpu_types[cluster.nodes[stage.node].gpu_type].name;
      if (types.find(type) == std::string::npos) types += (types.empty() ? "" : "/") + type;
    }
    const int tp = static_cast<int>(replica.stages.front().devices.size());
    const int pp = static_cast<int>(replica.stages.size());
    const std::string kind = pp > 1 ? fmt::format("TP{} PP{} on {}", tp, pp, types)
                                    : fmt::format("TP{} on {}", tp, types);
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) {
      kinds.emplace_back(kind, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [kind, count] : kinds) {
    out += fmt::format("{}{} x {}", out.empty() ? "" : " + ", count, kind);
  }
  return out;
}

namespace {

std::string share_text(const TaskPlacement& placement) {
  double lo = 1, hi = 0;
  for (const Replica& r : placement.replicas) {
    lo = std::min(lo, r.share);
    hi = std::max(hi, r.share);
  }
  return hi - lo < 1e-9 ? fmt::format("{:.3f}", lo) : fmt::format("{:.3f}-{:.3f}", lo, hi);
}

void print_terms(std::string& out, const TaskPrediction& task) {
  for (const cost::Breakdown::Term& term : task.terms) {
    out += fmt::format("      {:<50} {:>9.3f} s\n", term.name, term.seconds);
  }
}

}  // namespace

std::string format_plan(const Plan& plan, const Prediction& prediction, const ReportContext& c,
                        bool explain) {
  const hw::Cluster& cluster = c.cluster;
  const int gpus = plan.gpu_count();
  std::string out = fmt::format("plan for {} ({}, {} samples of {}+{:.0f} tokens) on {}, by {}\n",
                                c.workload_name, c.graph.algorithm, c.workload.samples_per_iteration(),
                                c.workload.prompt_length_tokens, c.workload.response.mean(),
                                cluster.name, plan.planner.name.empty() ? "hand" : plan.planner.name);
  if (!prediction.feasible) {
    out += "  infeasible: " + prediction.infeasible + "\n";
    return out;
  }
  out += fmt::format("  iteration {:.2f} s | {:.2f} samples/s | {:.0f} tokens/s | {} of {} GPUs",
                     prediction.iteration_seconds, prediction.samples_per_second,
                     prediction.tokens_per_second, gpus, cluster.total_gpus());
  if (prediction.price_per_hour) {
    const double per_1k = *prediction.dollars_per_sample() * 1000;
    out += fmt::format(" | {:.2f} $/h | {:.3f} $ per 1k samples", *prediction.price_per_hour, per_1k);
  }
  out += "\n";

  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& group = plan.groups[g];
    std::map<std::string, int> types;
    std::set<int> nodes;
    for (const Gpu& gpu : group.gpus) {
      ++types[cluster.gpu_types[cluster.nodes[gpu.node].gpu_type].name];
      nodes.insert(gpu.node);
    }
    std::string type_text;
    for (const auto& [type, count] : types) {
      type_text += fmt::format("{}{} {}", type_text.empty() ? "" : ", ", count, type);
    }
    const GroupPrediction& gp = prediction.groups[g];
    const MemoryUse& m = gp.tightest;
    out += fmt::format("\ngroup {}: {} GPUs on {} node{} ({}); busy {:.2f} s; tightest GPU {}:{} "
                       "{:.1f} of {:.1f} GiB{}\n",
                       g, group.gpus.size(), nodes.size(), nodes.size() == 1 ? "" : "s", type_text, gp.busy_seconds,
                       cluster.nodes[m.gpu.node].name, m.gpu.device, m.used() / core::kGiB,
                       m.capacity / core::kGiB, group.offload ? "; offloads weights and state between tasks" : "");
    out += fmt::format("  {:<16} {:>9} {:>9} {:>8} {:>11}  {}\n", "task", "start s", "seconds",
                       "replicas", "share", "layout");
    for (const TaskPlacement& placement : group.tasks) {
      const TaskPrediction& tp = prediction.tasks[placement.task];
      std::string layout = layout_text(placement, cluster);
      // Said only where it is not the usual BF16: one format for the whole task.
      for (const Replica& replica : placement.replicas) {
        const hw::GpuSpec& gpu = cluster.gpu_types[cluster.nodes[replica.stages[0].node].gpu_type];
        if (std::string_view(cost::dtype_of(gpu, c.workload.precision)) == "fp16") {
          layout += ", FP16";
          break;
        }
      }
      if (c.graph.tasks[placement.task].kind == workload::TaskKind::kTrain) {
        layout += fmt::format(", ZeRO-{}", placement.train.zero_stage);
        if (placement.train.recompute != cost::Recompute::kNone) {
          layout += fmt::format(", {} recompute", cost::recompute_name(placement.train.recompute));
        }
        if (placement.train.optimizer_offload) layout += ", optimizer on the CPU";
      }
      out += fmt::format("  {:<16} {:>9.2f} {:>9.2f} {:>8} {:>11}  {}\n",
                         c.graph.tasks[placement.task].name, tp.start, tp.seconds,
                         placement.replicas.size(), share_text(placement), layout);
      if (explain) print_terms(out, tp);
    }
  }
  const bool host_tasks = std::any_of(c.graph.tasks.begin(), c.graph.tasks.end(),
                                      [](const workload::Task& task) { return !task.on_gpu(); });
  if (!host_tasks) return out;  // a training-only workload
  out += fmt::format("\nCPU tasks and weight sync\n  {:<16} {:>9} {:>9}\n", "task", "start s", "seconds");
  for (std::size_t t = 0; t < c.graph.tasks.size(); ++t) {
    const workload::Task& task = c.graph.tasks[t];
    if (task.on_gpu()) continue;
    const TaskPrediction& tp = prediction.tasks[t];
    out += fmt::format("  {:<16} {:>9.2f} {:>9.2f}  {}\n", task.name, tp.start, tp.seconds,
                       task.kind == workload::TaskKind::kCpu ? "on the CPU (" + task.op + ")"
                                                             : "actor weights to the generation replicas");
    if (explain) print_terms(out, tp);
  }
  return out;
}

}  // namespace hetrl::plan
