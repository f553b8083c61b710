#include "plan/replan.h"

#include <fmt/format.h>

#include <set>
#include <tuple>

#include "core/text.h"
#include "plan/report.h"

namespace hetrl::plan {
namespace {

// The task's GPUs by node name and device, in each replica and stage's order.
std::vector<std::tuple<std::string, int>> gpus_of(const TaskPlacement& t, const hw::Cluster& cluster) {
  std::vector<std::tuple<std::string, int>> out;
  for (const Replica& r : t.replicas) {
    for (const Stage& s : r.stages) {
      for (const int d : s.devices) out.emplace_back(cluster.nodes[static_cast<std::size_t>(s.node)].name, d);
    }
  }
  return out;
}

std::string describe(const TaskPlacement* t, const hw::Cluster& cluster) {
  if (!t) return "not placed";
  std::set<std::string> nodes;
  std::string names;
  for (const Replica& r : t->replicas) {
    for (const Stage& s : r.stages) {
      const std::string& name = cluster.nodes[static_cast<std::size_t>(s.node)].name;
      if (nodes.insert(name).second) names += (names.empty() ? "" : ", ") + name;
    }
  }
  return fmt::format("{}: {}", layout_text(*t, cluster), names);
}

std::string change(double before, double after) {
  return before > 0 ? core::signed_percent(after / before - 1) : std::string("-");
}

}  // namespace

std::vector<TaskMove> task_moves(const Plan& before, const hw::Cluster& before_cluster, const Plan& after,
                                 const hw::Cluster& after_cluster, const workload::TaskGraph& graph) {
  std::vector<TaskMove> out;
  for (const int task : graph.gpu_tasks()) {
    const TaskPlacement* a = before.placement(task);
    const TaskPlacement* b = after.placement(task);
    TaskMove m;
    m.task = graph.tasks[static_cast<std::size_t>(task)].name;
    m.before = describe(a, before_cluster);
    m.after = describe(b, after_cluster);
    m.moved = !a || !b || m.before != m.after || gpus_of(*a, before_cluster) != gpus_of(*b, after_cluster);
    out.push_back(std::move(m));
  }
  return out;
}

std::string format_replan(const ReplanSides& before, const ReplanSides& after, const workload::TaskGraph& graph,
                          const std::string& what) {
  std::string out = fmt::format("replanned {}: {} of {} GPUs before, {} of {} after\n", what, before.plan.gpu_count(),
                                before.cluster.total_gpus(), after.plan.gpu_count(), after.cluster.total_gpus());
  const Prediction& p = before.prediction;
  const Prediction& q = after.prediction;
  out += fmt::format("  {:<16} {:>12} {:>12} {:>9}\n", "", "before", "after", "change");
  if (!p.feasible) out += fmt::format("  the plan before does not fit its cluster: {}\n", p.infeasible);
  const auto row = [&](const char* name, double a, double b, const char* format) {
    out += fmt::format("  {:<16} {:>12} {:>12} {:>9}\n", name, fmt::format(fmt::runtime(format), a),
                       fmt::format(fmt::runtime(format), b), p.feasible ? change(a, b) : std::string("-"));
  };
  row("samples/s", p.samples_per_second, q.samples_per_second, "{:.3f}");
  row("tokens/s", p.tokens_per_second, q.tokens_per_second, "{:.0f}");
  row("iteration s", p.iteration_seconds, q.iteration_seconds, "{:.2f}");
  if (p.price_per_hour && q.price_per_hour) {
    row("$/h (plan)", *p.price_per_hour, *q.price_per_hour, "{:.2f}");
    row("$ per 1k samples", *p.dollars_per_sample() * 1000, *q.dollars_per_sample() * 1000, "{:.3f}");
  }
  const std::vector<TaskMove> moves = task_moves(before.plan, before.cluster, after.plan, after.cluster, graph);
  int moved = 0;
  std::string kept;
  for (const TaskMove& m : moves) {
    if (m.moved) {
      ++moved;
    } else {
      kept += (kept.empty() ? "" : ", ") + m.task;
    }
  }
  out += fmt::format("moved: {} of {} GPU tasks\n", moved, moves.size());
  for (const TaskMove& m : moves) {
    if (!m.moved) continue;
    out += fmt::format("  {:<16} before {}\n  {:<16} after  {}\n", m.task, m.before, "", m.after);
  }
  if (!kept.empty()) out += fmt::format("kept in place: {}\n", kept);
  return out;
}

}  // namespace hetrl::plan
