#include "plan/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/text.h"

namespace hetrl::plan {
namespace {

// The zones of a group's GPUs, in the cluster's order: "us-east-1a+us-east-1b".
std::string group_zones(const Group& group, const hw::Cluster& cluster) {
  std::set<int> zones;
  for (const Gpu& gpu : group.gpus) zones.insert(cluster.nodes[static_cast<std::size_t>(gpu.node)].zone);
  std::string out;
  for (const int z : zones) out += (out.empty() ? "" : "+") + cluster.zones[static_cast<std::size_t>(z)].name;
  return out;
}

// "+12.3%" of `value` against `first`; "-" where either is missing.
std::string change(std::optional<double> value, std::optional<double> first) {
  if (!value || !first || *first <= 0) return "-";
  return core::signed_percent(*value / *first - 1);
}

std::string dollars(std::optional<double> value, int decimals) {
  return value ? fmt::format("{:.{}f}", *value, decimals) : std::string("-");
}

std::string gpus_text(const ClusterSummary& s) {
  std::string out;
  for (const ClusterSummary::TypeUse& t : s.gpus) {
    out += fmt::format("{}{} {}/{}", out.empty() ? "" : ", ", t.gpu_type, t.used, t.total);
  }
  return out;
}

int used_gpus(const ClusterSummary& s) {
  int n = 0;
  for (const ClusterSummary::TypeUse& t : s.gpus) n += t.used;
  return n;
}

int total_gpus(const ClusterSummary& s) {
  int n = 0;
  for (const ClusterSummary::TypeUse& t : s.gpus) n += t.total;
  return n;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Numbers to 12 significant digits, as the JSON writes them.
std::string csv_number(std::optional<double> value) { return value ? fmt::format("{:.12g}", *value) : std::string(); }

// "A100-SXM-80G:16/16 L4:8/16": no commas, so the CSV field needs no quotes.
std::string gpus_csv(const ClusterSummary& s) {
  std::string out;
  for (const ClusterSummary::TypeUse& t : s.gpus) out += fmt::format("{}{}:{}/{}", out.empty() ? "" : " ", t.gpu_type, t.used, t.total);
  return out;
}

// What the cluster alone says: its name, price and GPUs of each type (none used yet).
ClusterSummary cluster_only(const hw::Cluster& cluster, const std::string& why_not) {
  ClusterSummary s;
  s.cluster = cluster.name;
  s.why_not = why_not;
  s.cluster_price_per_hour = cluster.price_per_hour();
  for (const hw::GpuSpec& type : cluster.gpu_types) s.gpus.push_back({type.name, 0, 0});
  for (const hw::Node& node : cluster.nodes) s.gpus[static_cast<std::size_t>(node.gpu_type)].total += node.gpu_count;
  return s;
}

// Types the cluster names but has no node of.
void leave_out_absent_types(ClusterSummary& s) {
  std::erase_if(s.gpus, [](const ClusterSummary::TypeUse& t) { return t.total == 0; });
}

}  // namespace

ClusterSummary no_plan(const hw::Cluster& cluster, const std::string& why_not) {
  ClusterSummary s = cluster_only(cluster, why_not);
  leave_out_absent_types(s);
  return s;
}

ClusterSummary summarise(const Plan& plan, const Prediction& prediction, std::span<const double> edge_transfers,
                         const hw::Cluster& cluster, const workload::TaskGraph& graph) {
  ClusterSummary s = cluster_only(cluster, prediction.infeasible);
  s.found = prediction.feasible;
  s.iteration_seconds = prediction.iteration_seconds;
  s.samples_per_second = prediction.samples_per_second;
  s.tokens_per_second = prediction.tokens_per_second;
  s.plan_price_per_hour = prediction.price_per_hour;
  s.groups = static_cast<int>(plan.groups.size());
  for (const Group& group : plan.groups) {
    for (const Gpu& gpu : group.gpus) {
      ++s.gpus[static_cast<std::size_t>(cluster.nodes[static_cast<std::size_t>(gpu.node)].gpu_type)].used;
    }
  }
  leave_out_absent_types(s);
  if (!s.found) return s;
  // The group a task runs in: the weight sync runs on generation's (-1 for a CPU task).
  const auto group_of = [&](int task) {
    return graph.tasks[static_cast<std::size_t>(task)].kind == workload::TaskKind::kWeightSync
               ? plan.group_of(graph.weight_sync().reader)
               : plan.group_of(task);
  };
  // The busiest group's longest task.
  const auto busiest = static_cast<int>(
      std::max_element(prediction.groups.begin(), prediction.groups.end(),
                       [](const GroupPrediction& a, const GroupPrediction& b) { return a.busy_seconds < b.busy_seconds; }) -
      prediction.groups.begin());
  for (std::size_t t = 0; t < prediction.tasks.size(); ++t) {
    const double seconds = prediction.tasks[t].seconds;
    if (group_of(static_cast<int>(t)) != busiest || seconds <= s.bottleneck_task_seconds) continue;
    s.bottleneck_task = fmt::format("{} (group {})", graph.tasks[t].name, busiest);  // numbered as plans print them
    s.bottleneck_task_seconds = seconds;
  }
  // The slowest transfer between groups (the trained weights cross to the weight sync's).
  for (std::size_t e = 0; e < edge_transfers.size() && e < graph.edges.size(); ++e) {
    if (edge_transfers[e] <= s.bottleneck_link_seconds) continue;
    const workload::Edge& edge = graph.edges[e];
    const int from = group_of(edge.from), to = group_of(edge.to);
    if (from < 0 || to < 0 || from == to) continue;
    s.bottleneck_link = fmt::format("{} to {} ({} to {})", graph.tasks[static_cast<std::size_t>(edge.from)].name,
                                    graph.tasks[static_cast<std::size_t>(edge.to)].name,
                                    group_zones(plan.groups[static_cast<std::size_t>(from)], cluster),
                                    group_zones(plan.groups[static_cast<std::size_t>(to)], cluster));
    s.bottleneck_link_seconds = edge_transfers[e];
  }
  return s;
}

std::string format_comparison(const std::vector<ClusterSummary>& rows, const std::string& workload_name) {
  std::string out = fmt::format("{} on {} cluster{}\n", workload_name, rows.size(), rows.size() == 1 ? "" : "s");
  std::size_t width = 7;
  for (const ClusterSummary& s : rows) width = std::max(width, s.cluster.size());
  const ClusterSummary* first = rows.empty() || !rows.front().found ? nullptr : &rows.front();
  out += fmt::format("{:<{}}  {:>11}  {:>10}  {:>8}  {:>10}  {:>10}  {:>10}  {:>13}  {:>8}  {:>10}\n", "cluster", width,
                     "GPUs used", "samples/s", "vs first", "tokens/s", "$/h (plan)", "$/h (all)", "$/1k samples",
                     "vs first", "planned in");
  for (const ClusterSummary& s : rows) {
    const std::string used = fmt::format("{} of {}", used_gpus(s), total_gpus(s));
    if (!s.found) {
      out += fmt::format("{:<{}}  {:>11}  no feasible plan: {}\n", s.cluster, width, used, s.why_not);
      continue;
    }
    out += fmt::format("{:<{}}  {:>11}  {:>10.3f}  {:>8}  {:>10.0f}  {:>10}  {:>10}  {:>13}  {:>8}  {:>8.2f} s\n",
                       s.cluster, width, used, s.samples_per_second,
                       first && &s != first ? change(s.samples_per_second, first->samples_per_second) : "-",
                       s.tokens_per_second, dollars(s.plan_price_per_hour, 2), dollars(s.cluster_price_per_hour, 2),
                       dollars(s.dollars_per_1k_samples(), 3),
                       first && &s != first ? change(s.dollars_per_1k_samples(), first->dollars_per_1k_samples()) : "-",
                       s.planning_seconds);
  }
  out += fmt::format("\n{:<{}}  {}\n", "cluster", width, "GPUs by type (used/all), what bounds the iteration");
  for (const ClusterSummary& s : rows) {
    out += fmt::format("{:<{}}  {}\n", s.cluster, width, gpus_text(s));
    if (!s.found) continue;
    out += fmt::format("{:<{}}  {} group{}; longest task of the busiest group: {} {:.2f} s\n", "", width, s.groups,
                       s.groups == 1 ? "" : "s", s.bottleneck_task, s.bottleneck_task_seconds);
    out += s.bottleneck_link.empty()
               ? fmt::format("{:<{}}  nothing crosses between groups\n", "", width)
               : fmt::format("{:<{}}  slowest transfer between groups: {} {:.3g} s\n", "", width, s.bottleneck_link,
                             s.bottleneck_link_seconds);
  }
  return out;
}

std::string comparison_csv(const std::vector<ClusterSummary>& rows) {
  std::string out =
      "cluster,file,found,why_not,gpus_used,gpus_total,gpus_by_type,groups,iteration_s,samples_per_s,tokens_per_s,"
      "plan_usd_per_h,cluster_usd_per_h,usd_per_1k_samples,bottleneck_task,bottleneck_task_s,bottleneck_link,"
      "bottleneck_link_s,planning_s\n";
  for (const ClusterSummary& s : rows) {
    out += fmt::format("{},{},{},{},{},{},{},", csv_field(s.cluster), csv_field(s.file), s.found ? "true" : "false",
                       csv_field(s.why_not), used_gpus(s), total_gpus(s), csv_field(gpus_csv(s)));
    if (s.found) {
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", s.groups, csv_number(s.iteration_seconds),
                         csv_number(s.samples_per_second), csv_number(s.tokens_per_second),
                         csv_number(s.plan_price_per_hour), csv_number(s.cluster_price_per_hour),
                         csv_number(s.dollars_per_1k_samples()), csv_field(s.bottleneck_task),
                         csv_number(s.bottleneck_task_seconds), csv_field(s.bottleneck_link),
                         s.bottleneck_link.empty() ? std::string() : csv_number(s.bottleneck_link_seconds),
                         csv_number(s.planning_seconds));
    } else {
      out += fmt::format(",,,,,{},,,,,,{}\n", csv_number(s.cluster_price_per_hour), csv_number(s.planning_seconds));
    }
  }
  return out;
}

}  // namespace hetrl::plan
