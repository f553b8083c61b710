// hetrl-plan compare's summary of a plan (plan/compare.h): the GPUs it uses of each type, what
// bounds its iteration (the busiest group's longest task, the slowest transfer between
// groups), its price per sample, and the table and CSV made from summaries.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "approx.h"
#include "fixtures.h"
#include "plan/compare.h"
#include "planner/baselines.h"

using namespace hetrl;

namespace {

struct Summarised {
  plan::ClusterSummary summary;
  plan::Prediction prediction;
  std::vector<double> edges;
};

Summarised summarise(const testing::FileInstance& x, const plan::Plan& p) {
  plan::Evaluator evaluator(x.model);
  Summarised out;
  out.prediction = evaluator.evaluate(p);
  out.edges.assign(evaluator.edge_transfers().begin(), evaluator.edge_transfers().end());
  out.summary = plan::summarise(p, out.prediction, out.edges, x.in.cluster, x.in.graph);
  return out;
}

std::size_t fields(const std::string& line) { return static_cast<std::size_t>(std::count(line.begin(), line.end(), ',')) + 1; }

}  // namespace

TEST_CASE("compare: a plan's summary counts its GPUs by type and names what bounds its iteration") {
  const testing::FileInstance x("valid.json", "grpo_small.json");
  const planner::PlannerResult streamrl =
      planner::plan_streamrl(x.model, testing::catalogs().models, planner::all_nodes(x.in.cluster));
  REQUIRE(streamrl.found);
  const Summarised s = summarise(x, streamrl.plan);
  REQUIRE(s.summary.found);
  CHECK(s.summary.groups == 2);
  // GPUs by type: the plan's, of the cluster's.
  std::map<std::string, int> used, total;
  for (const plan::Group& g : streamrl.plan.groups) {
    for (const plan::Gpu& gpu : g.gpus) ++used[x.in.cluster.gpu_types[x.in.cluster.nodes[gpu.node].gpu_type].name];
  }
  for (const hw::Node& n : x.in.cluster.nodes) total[x.in.cluster.gpu_types[n.gpu_type].name] += n.gpu_count;
  REQUIRE(s.summary.gpus.size() == total.size());
  for (const plan::ClusterSummary::TypeUse& t : s.summary.gpus) {
    CAPTURE(t.gpu_type);
    CHECK(t.used == used[t.gpu_type]);
    CHECK(t.total == total[t.gpu_type]);
  }
  // The busiest group's longest task.
  std::size_t busiest = 0;
  for (std::size_t g = 1; g < s.prediction.groups.size(); ++g) {
    if (s.prediction.groups[g].busy_seconds > s.prediction.groups[busiest].busy_seconds) busiest = g;
  }
  double longest = 0;
  std::string name;
  for (std::size_t t = 0; t < s.prediction.tasks.size(); ++t) {
    if (s.prediction.tasks[t].group == static_cast<int>(busiest) && s.prediction.tasks[t].seconds > longest) {
      longest = s.prediction.tasks[t].seconds;
      name = x.in.graph.tasks[t].name;
    }
  }
  CHECK(s.summary.bottleneck_task_seconds == longest);
  CHECK(s.summary.bottleneck_task.rfind(name + " (group ", 0) == 0);
  // Generation alone in one group, the rest in the other: the samples and the weights cross.
  double slowest = 0;
  for (const double e : s.edges) slowest = std::max(slowest, e);
  CHECK(slowest > 0);
  CHECK(s.summary.bottleneck_link_seconds == slowest);
  CHECK(s.summary.bottleneck_link.find(" to ") != std::string::npos);
  CHECK(s.summary.bottleneck_link.find(x.in.cluster.zones.front().name) != std::string::npos);
  // USD per 1,000 samples at the plan's price.
  REQUIRE(s.summary.plan_price_per_hour);
  CHECK(*s.summary.dollars_per_1k_samples() ==
        testing::approx(*s.prediction.price_per_hour / 3600 * 1000 / s.prediction.samples_per_second));
  CHECK(s.summary.cluster_price_per_hour == x.in.cluster.price_per_hour());
}

TEST_CASE("compare: one group moves nothing between groups, and the table and CSV set each cluster against the first") {
  const testing::FileInstance x("valid.json", "grpo_small.json");
  const planner::PlannerResult verl =
      planner::plan_verl(x.model, testing::catalogs().models, planner::all_nodes(x.in.cluster));
  const planner::PlannerResult streamrl =
      planner::plan_streamrl(x.model, testing::catalogs().models, planner::all_nodes(x.in.cluster));
  REQUIRE(verl.found);
  REQUIRE(streamrl.found);
  plan::ClusterSummary one = summarise(x, verl.plan).summary;
  plan::ClusterSummary two = summarise(x, streamrl.plan).summary;
  CHECK(one.bottleneck_link.empty());
  CHECK(one.bottleneck_link_seconds == 0);
  one.cluster = "first";
  two.cluster = "second";
  const plan::ClusterSummary none = plan::no_plan(x.in.cluster, "every GPU too small");
  CHECK_FALSE(none.found);
  CHECK_FALSE(none.dollars_per_1k_samples());
  const std::vector<plan::ClusterSummary> rows{one, two, none};
  const std::string table = plan::format_comparison(rows, "grpo-small");
  const std::string change = fmt::format("{:+.1f}%", (two.samples_per_second / one.samples_per_second - 1) * 100);
  CHECK(table.find(change) != std::string::npos);
  CHECK(table.find("no feasible plan: every GPU too small") != std::string::npos);
  CHECK(table.find("nothing crosses between groups") != std::string::npos);
  const std::string csv = plan::comparison_csv(rows);
  std::vector<std::string> lines;
  for (std::size_t at = 0, end; (end = csv.find('\n', at)) != std::string::npos; at = end + 1) {
    lines.push_back(csv.substr(at, end - at));
  }
  REQUIRE(lines.size() == 4);
  for (const std::string& line : lines) CHECK(fields(line) == fields(lines.front()));
  CHECK(lines[1].rfind("first,", 0) == 0);
  CHECK(lines[3].find(",false,every GPU too small,") != std::string::npos);
}
