#include <doctest/doctest.h>

#include "approx.h"

#include <fmt/format.h>

#include <csignal>
#include <map>
#include <random>
#include <set>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "hw/cluster_builder.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "planner/exhaustive.h"
#include "planner/hybrid.h"
#include "planner/ilp_planner.h"
#include "fixtures.h"

using namespace hetrl;

namespace {

const io::Catalogs& catalogs() { return io::builtin_catalogs(); }
using testing::paper_scenario;

// A clock that never advances: no time limit binds.
const core::FakeClock kStill;

struct RandomInstance {
  hw::Cluster cluster;
  workload::Workload workload;
  workload::TaskGraph graph;
  std::string description;
};

// 2 or 3 nodes of 1, 2 or 4 GPUs of random types in one or two regions; GRPO on a small Qwen
// with or without a reference model, fixed or long-tailed lengths, sync or async.
RandomInstance random_instance(std::mt19937& rng) {
  const std::vector<std::string> types = {"A100-SXM-80G", "H100-SXM", "L40S", "L4", "A10G"};
  const std::vector<std::string> zones = {"us-east-1a", "us-east-1b", "us-west-2a"};
  hw::ClusterBuildParams params = hw::default_build_params(catalogs().hardware);
  const int nodes = 2 + static_cast<int>(rng() % 2);
  RandomInstance x;
  for (int n = 0; n < nodes; ++n) {
    const int gpus = 1 << (rng() % 3);
    const std::string spec = zones[rng() % zones.size()] + ":" + std::to_string(gpus) + "x" + types[rng() % types.size()];
    params.node_groups.push_back(hw::parse_node_spec(spec, catalogs().hardware));
    x.description += spec + " ";
  }
  x.cluster = hw::build_cluster(params, catalogs().hardware);
  workload::Workload& w = x.workload;
  w.algorithm = "grpo";
  const std::string model = rng() % 2 ? "Qwen2.5-0.5B" : "Qwen2.5-1.5B";
  w.role(workload::Role::kActor) = {workload::RoleModel::Kind::kModel, model};
  if (rng() % 2) w.role(workload::Role::kReference) = {workload::RoleModel::Kind::kModel, model};
  w.role(workload::Role::kReward).kind = workload::RoleModel::Kind::kRule;
  w.prompts_per_iteration = 16 << (rng() % 3);
  w.samples_per_prompt = 4;
  w.prompt_length_tokens = 256;
  if (rng() % 2) {
    w.response.kind = workload::LengthKind::kFixed;
    w.response.fixed_tokens = 512;
  } else {
    w.response.kind = workload::LengthKind::kLognormal;
    w.response.mean_tokens = 600;
    w.response.max_tokens = 2048;
  }
  if (rng() % 3 == 0) {
    w.mode = workload::Mode::kAsync;
    w.max_staleness = 1;
  }
  w.validate(catalogs().algorithms, catalogs().models);
  x.graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
  x.description += model + (w.role(workload::Role::kReference).kind == workload::RoleModel::Kind::kModel ? " +ref" : "") +
                   (w.mode == workload::Mode::kAsync ? " async" : " sync");
  return x;
}

hw::Cluster cluster_of(const std::vector<const char*>& specs) {
  hw::ClusterBuildParams params = hw::default_build_params(catalogs().hardware);
  for (const char* spec : specs) params.node_groups.push_back(hw::parse_node_spec(spec, catalogs().hardware));
  return hw::build_cluster(params, catalogs().hardware);
}

// A cluster of instance types (hw::parse_preset_node_spec), priced.
hw::Cluster preset_cluster_of(const std::vector<const char*>& specs) {
  hw::ClusterBuildParams params = hw::default_build_params(catalogs().hardware);
  for (const char* spec : specs) params.node_groups.push_back(hw::parse_preset_node_spec(spec, catalogs().hardware));
  return hw::build_cluster(params, catalogs().hardware);
}

// A paper scenario whose trainers reduce their gradients in bf16: the cost landscape the
// search cases below were found on (in fp32, the default, their plans differ).
io::Inputs paper_scenario_bf16_reduce(const std::string& network, const std::string& workload) {
  io::Inputs in = paper_scenario(network, workload);
  in.workload.workload.gradient_reduce = workload::GradientReduce::kBf16;
  return in;
}

// Hybrid's plan for a scenario loaded by paper_scenario.
planner::PlannerResult plan_paper(const io::Inputs& in, const planner::HybridParams& hp) {
  const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
  return planner::plan_hybrid(model, in.workload.models, hp, kStill);
}

// Hybrid's plan for a paper scenario within half the paper cluster's price (107.70 $/h), which
// it must find and keep to.
planner::PlannerResult plan_paper_within_half_price(const io::Inputs& in) {
  planner::HybridParams hp;
  hp.goal.budget_per_hour = 107.70;
  planner::PlannerResult hybrid = plan_paper(in, hp);
  REQUIRE(hybrid.found);
  REQUIRE(hybrid.prediction.price_per_hour);
  CHECK(*hybrid.prediction.price_per_hour <= 107.70);
  return hybrid;
}

// GRPO with a rule reward and no reference, fixed lengths.
workload::Workload grpo(const std::string& model, int prompts, int samples, int prompt, int response) {
  workload::Workload w;
  w.algorithm = "grpo";
  w.role(workload::Role::kActor) = {workload::RoleModel::Kind::kModel, model};
  w.role(workload::Role::kReward).kind = workload::RoleModel::Kind::kRule;
  w.prompts_per_iteration = prompts;
  w.samples_per_prompt = samples;
  w.prompt_length_tokens = prompt;
  w.response.kind = workload::LengthKind::kFixed;
  w.response.fixed_tokens = response;
  return w;
}

// GRPO on Qwen2.5-1.5B over one 8-GPU A100 node and one 8-GPU L40S node.
struct TwoNodeGrpo {
  hw::Cluster cluster = cluster_of({"a:1x8xA100-SXM-80G", "a:1x8xL40S"});
  workload::Workload workload = grpo("Qwen2.5-1.5B", 64, 8, 512, 1024);
  workload::TaskGraph graph = workload::build_task_graph(workload, catalogs().algorithms, catalogs().models);
  cost::CostModel model{cluster, workload, graph, catalogs().models};
};

}  // namespace

TEST_CASE("hybrid finds the exhaustive optimum on 30 small random instances") {
  std::mt19937 rng(2026);
  const core::FakeClock clock;
  int compared = 0;
  for (int i = 0; compared < 30 && i < 200; ++i) {
    const RandomInstance x = random_instance(rng);
    const cost::CostModel model(x.cluster, x.workload, x.graph, catalogs().models);
    planner::ExhaustiveParams exhaustive_params;
    if (planner::exhaustive_plan_count(model, catalogs().models, exhaustive_params) > 10000) continue;
    const planner::PlannerResult truth = planner::plan_exhaustive(model, catalogs().models, exhaustive_params);
    const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, {}, clock);
    CAPTURE(x.description);
    REQUIRE(truth.found == hybrid.found);
    if (!truth.found) continue;
    ++compared;
    CHECK(hybrid.prediction.samples_per_second ==
          hetrl::testing::approx(truth.prediction.samples_per_second).epsilon(1e-9));
  }
  CHECK(compared == 30);
}

TEST_CASE("hybrid: the same seed gives the same plan, constraints and objectives hold") {
  const io::Catalogs& c = catalogs();
  const hw::Cluster cluster = cluster_of({"us-east-1a:2x4xA100-SXM-80G", "us-east-1b:2x4xL4", "us-west-2a:1x4xH100-SXM"});
  const workload::Workload w = grpo("Qwen2.5-1.5B", 64, 8, 512, 1024);
  const workload::TaskGraph graph = workload::build_task_graph(w, c.algorithms, c.models);
  const cost::CostModel model(cluster, w, graph, c.models);
  const core::FakeClock clock;
  planner::HybridParams hp;
  hp.seed = 7;
  const planner::PlannerResult a = planner::plan_hybrid(model, c.models, hp, clock);
  const planner::PlannerResult b = planner::plan_hybrid(model, c.models, hp, clock);
  REQUIRE(a.found);
  CHECK(io::plan_to_json(a.plan, a.prediction, cluster, graph) == io::plan_to_json(b.plan, b.prediction, cluster, graph));

  // A budget below the best plan's price: the plan found costs no more than the budget.
  const double price = *a.prediction.price_per_hour;
  hp.goal.budget_per_hour = price * 0.5;
  const planner::PlannerResult cheap = planner::plan_hybrid(model, c.models, hp, clock);
  REQUIRE(cheap.found);
  CHECK(*cheap.prediction.price_per_hour <= price * 0.5);
  // A throughput floor above anything possible: no plan, and the reason says so.
  hp.goal.budget_per_hour.reset();
  hp.goal.min_throughput = a.prediction.samples_per_second * 10;
  const planner::PlannerResult none = planner::plan_hybrid(model, c.models, hp, clock);
  CHECK_FALSE(none.found);
  CHECK(none.why_not.find("no plan meets the constraints") == 0);
  // Cost per sample: no more per sample than the throughput plan.
  hp.goal.min_throughput.reset();
  hp.goal.objective = planner::Objective::kCostPerSample;
  const planner::PlannerResult thrifty = planner::plan_hybrid(model, c.models, hp, clock);
  REQUIRE(thrifty.found);
  const auto per_sample = [](const plan::Prediction& p) { return *p.price_per_hour / p.samples_per_second; };
  CHECK(per_sample(thrifty.prediction) <= per_sample(a.prediction) * (1 + 1e-9));
}

TEST_CASE("hybrid stops at the time limit with the best plan so far") {
  const io::Catalogs& c = catalogs();
  const hw::Cluster cluster = cluster_of({"a:2x8xA100-SXM-80G", "b:2x8xL40S"});
  const workload::Workload w = grpo("Qwen2.5-7B", 64, 8, 512, 1024);
  const workload::TaskGraph graph = workload::build_task_graph(w, c.algorithms, c.models);
  const cost::CostModel model(cluster, w, graph, c.models);
  planner::HybridParams hp;
  hp.time_limit = 1.0;
  const core::FakeClock clock(0.01);  // every reading 10 ms later: the limit binds
  const planner::PlannerResult r = planner::plan_hybrid(model, c.models, hp, clock);
  const std::optional<double> timed_out = r.plan.planner.stat("timed_out");
  REQUIRE(timed_out);
  CHECK(*timed_out == 1.0);
  CHECK(r.evaluations < 200);
  CHECK(r.stop == planner::Stop::kTimeLimit);
  // A limit that passes before any plan is laid out: nothing, and the limit is the reason.
  hp.time_limit = 0.005;
  const planner::PlannerResult none = planner::plan_hybrid(model, c.models, hp, clock);
  CHECK_FALSE(none.found);
  CHECK(none.stop == planner::Stop::kTimeLimit);
  CHECK(none.why_not == "the time limit of 0.005 s passed before a plan was found; give it more time");
}

TEST_CASE("the ILP optimum equals the exhaustive optimum on 50 small random instances") {
  std::mt19937 rng(51);
  int compared = 0;
  for (int i = 0; compared < 50 && i < 400; ++i) {
    const RandomInstance x = random_instance(rng);
    const cost::CostModel model(x.cluster, x.workload, x.graph, catalogs().models);
    if (planner::exhaustive_plan_count(model, catalogs().models, {}) > 6000) continue;
    const planner::PlannerResult truth = planner::plan_exhaustive(model, catalogs().models, {});
    const planner::IlpOutcome ilp = planner::plan_ilp(model, catalogs().models, {}, kStill);
    CAPTURE(x.description);
    REQUIRE(truth.found == ilp.result.found);
    if (!truth.found) continue;
    ++compared;
    REQUIRE(ilp.solve.status == ilp::Status::kOptimal);
    CHECK(ilp.result.prediction.samples_per_second ==
          hetrl::testing::approx(truth.prediction.samples_per_second).epsilon(1e-9));
    // The ILP's objective is exact: its iteration time is the evaluator's.
    CHECK(ilp.ilp_iteration_seconds == hetrl::testing::approx(ilp.result.prediction.iteration_seconds).epsilon(1e-6));
    if (compared % 2 == 0) {
      // Warm-started from hybrid's plan, which also bounds the enumeration: the start is
      // accepted and the optimum is the same.
      const core::FakeClock clock;
      const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, {}, clock);
      const planner::IlpOutcome warm = planner::plan_ilp(model, catalogs().models, {}, kStill, &hybrid.plan);
      CHECK(warm.warm_started);
      CHECK(warm.result.prediction.samples_per_second ==
            hetrl::testing::approx(truth.prediction.samples_per_second).epsilon(1e-9));
    }
  }
  CHECK(compared == 50);
}

TEST_CASE("--max-groups bounds the same space for hybrid, the ILP and exhaustive search") {
  std::mt19937 rng(51);
  int checked = 0;
  for (int i = 0; checked < 5 && i < 200; ++i) {
    const RandomInstance x = random_instance(rng);
    const cost::CostModel model(x.cluster, x.workload, x.graph, catalogs().models);
    if (planner::exhaustive_plan_count(model, catalogs().models, {}) > 6000) continue;
    const planner::PlannerResult free = planner::plan_exhaustive(model, catalogs().models, {});
    if (!free.found || free.plan.groups.size() < 2) continue;
    CAPTURE(x.description);
    ++checked;
    planner::ExhaustiveParams one;
    one.space.max_groups = 1;
    const planner::PlannerResult truth = planner::plan_exhaustive(model, catalogs().models, one);
    planner::IlpParams ilp_one;
    ilp_one.space.max_groups = 1;
    const planner::IlpOutcome ilp = planner::plan_ilp(model, catalogs().models, ilp_one, kStill);
    planner::HybridParams hybrid_one;
    hybrid_one.space.max_groups = 1;
    const core::FakeClock clock;
    const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, hybrid_one, clock);
    REQUIRE(truth.found == ilp.result.found);
    CHECK(truth.found == hybrid.found);
    if (!truth.found) continue;
    CHECK(truth.plan.groups.size() == 1);
    CHECK(ilp.result.plan.groups.size() == 1);
    CHECK(hybrid.plan.groups.size() == 1);
    CHECK(ilp.result.prediction.samples_per_second ==
          hetrl::testing::approx(truth.prediction.samples_per_second).epsilon(1e-9));
    CHECK(truth.prediction.samples_per_second <= free.prediction.samples_per_second);
  }
  CHECK(checked == 5);
}

TEST_CASE("a solver that crashes leaves the ILP planner with the warm start's plan, and says why") {
  std::mt19937 rng(51);
  for (int i = 0; i < 50; ++i) {
    const RandomInstance x = random_instance(rng);
    const cost::CostModel model(x.cluster, x.workload, x.graph, catalogs().models);
    const core::FakeClock clock;
    const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, {}, clock);
    if (!hybrid.found) continue;
    CAPTURE(x.description);
    planner::IlpParams params;
    params.solve.before_solve = [] { std::raise(SIGSEGV); };
    const planner::IlpOutcome ilp = planner::plan_ilp(model, catalogs().models, params, kStill, &hybrid.plan);
    REQUIRE(ilp.solve.status == ilp::Status::kError);
    REQUIRE(ilp.result.found);
    CHECK(ilp.result.prediction.samples_per_second == hybrid.prediction.samples_per_second);
    CHECK(ilp.result.prediction.iteration_seconds == hybrid.prediction.iteration_seconds);
    CHECK(ilp.result.plan.groups.size() == hybrid.plan.groups.size());
    const std::string summary = planner::ilp_summary(ilp, {}, "hybrid");
    CHECK(summary.find("CBC crashed") != std::string::npos);
    CHECK(summary.find("the plan is the warm start's (hybrid)") != std::string::npos);
    // Without a warm start there is no plan, and the reason names the crash.
    const planner::IlpOutcome cold = planner::plan_ilp(model, catalogs().models, params, kStill);
    CHECK_FALSE(cold.result.found);
    CHECK(cold.result.why_not.find("CBC crashed") != std::string::npos);
    return;
  }
  FAIL("no instance with a plan");
}

TEST_CASE("under a budget that excludes some of a type's nodes hybrid still finds a plan wherever exhaustive search does") {
  // Three nodes of one type, a budget for one or two of them: a start that rents the whole
  // type is over it, so the search must start from fewer nodes.
  int compared = 0;
  for (const char* spec : {"a:3x1xA100-SXM-80G", "a:3x2xL40S"}) {
    for (double fraction : {0.4, 0.7}) {
      hw::Cluster cluster = cluster_of({spec});
      for (hw::GpuSpec& g : cluster.gpu_types) g.price_per_hour = 2.0;
      const workload::Workload w = grpo("Qwen2.5-0.5B", 16, 4, 256, 512);
      const workload::TaskGraph graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
      const cost::CostModel model(cluster, w, graph, catalogs().models);
      double all = 0;  // every node rented
      for (const hw::Node& node : cluster.nodes) all += *cluster.node_price_per_hour(node);
      planner::ExhaustiveParams ep;
      ep.goal.budget_per_hour = fraction * all;
      const planner::PlannerResult truth = planner::plan_exhaustive(model, catalogs().models, ep);
      CAPTURE(spec);
      CAPTURE(fraction);
      REQUIRE(truth.found);
      ++compared;
      planner::HybridParams hp;
      hp.goal = ep.goal;
      const core::FakeClock clock;
      const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, hp, clock);
      REQUIRE(hybrid.found);
      CHECK(*hybrid.prediction.price_per_hour <= *ep.goal.budget_per_hour);
    }
  }
  CHECK(compared == 4);
}

TEST_CASE("one dear node and many cheap ones: hybrid's cheapest plan is the ILP's optimum") {
  // One 8 x A100 node and eight 8 x A10G nodes; a 32B GRPO job with long responses. The
  // cheapest plan takes the A100 node and one A10G node as one group, every task TP8 PP2
  // across the two types: a start that fits alone on neither, found only from a lean start
  // whose tasks are laid out anew together when a node joins.
  const hw::Cluster cluster = preset_cluster_of({"us-east-1a:1xp4de.24xlarge", "us-east-1b:8xg5.48xlarge"});
  workload::Workload w = grpo("Qwen2.5-32B", 128, 16, 512, 0);
  w.role(workload::Role::kReference) = {workload::RoleModel::Kind::kModel, "Qwen2.5-32B"};
  w.response.kind = workload::LengthKind::kLognormal;
  w.response.mean_tokens = 3000;
  w.response.max_tokens = 8192;
  w.mini_batches = 4;
  w.validate(catalogs().algorithms, catalogs().models);
  const workload::TaskGraph graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
  const cost::CostModel model(cluster, w, graph, catalogs().models);
  auto per_1k = [](const plan::Prediction& p) { return *p.price_per_hour / 3600.0 / p.samples_per_second * 1000.0; };
  for (int max_groups : {1, 3}) {
    CAPTURE(max_groups);
    planner::IlpParams ip;
    ip.goal.objective = planner::Objective::kCostPerSample;
    ip.space.max_groups = max_groups;
    const planner::IlpOutcome ilp = planner::plan_ilp(model, catalogs().models, ip, kStill);
    REQUIRE(ilp.solve.status == ilp::Status::kOptimal);
    planner::HybridParams hp;
    hp.goal.objective = planner::Objective::kCostPerSample;
    hp.space.max_groups = max_groups;
    const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, hp, kStill);
    REQUIRE(hybrid.found);
    CHECK(per_1k(hybrid.prediction) == hetrl::testing::approx(per_1k(ilp.result.prediction)).epsilon(1e-9));
    CHECK(hybrid.plan.groups.size() == 1);
  }
}

TEST_CASE("under a budget hybrid and the ILP find the exhaustive optimum on 20 priced instances") {
  std::mt19937 rng(91);
  int compared = 0;
  for (int i = 0; compared < 20 && i < 200; ++i) {
    RandomInstance x = random_instance(rng);
    for (hw::GpuSpec& g : x.cluster.gpu_types) g.price_per_hour = g.name == "H100-SXM" ? 6.9 : g.name == "L4" ? 0.8 : 2.5;
    const cost::CostModel model(x.cluster, x.workload, x.graph, catalogs().models);
    double all = 0;
    for (const hw::Node& node : x.cluster.nodes) all += *x.cluster.node_price_per_hour(node);
    planner::ExhaustiveParams ep;
    ep.goal.budget_per_hour = 0.6 * all;  // at least one node, never all
    if (planner::exhaustive_plan_count(model, catalogs().models, ep) > 6000) continue;
    const planner::PlannerResult truth = planner::plan_exhaustive(model, catalogs().models, ep);
    planner::HybridParams hp;
    hp.goal = ep.goal;
    const core::FakeClock clock;
    const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, hp, clock);
    CAPTURE(x.description);
    REQUIRE(truth.found == hybrid.found);
    if (!truth.found) continue;
    ++compared;
    CHECK(*hybrid.prediction.price_per_hour <= *ep.goal.budget_per_hour);
    CHECK(hybrid.prediction.samples_per_second == hetrl::testing::approx(truth.prediction.samples_per_second).epsilon(1e-9));
    // The ILP on its own (no warm start to hold it to the budget).
    planner::IlpParams ip;
    ip.goal = ep.goal;
    const planner::IlpOutcome ilp = planner::plan_ilp(model, catalogs().models, ip, kStill);
    REQUIRE(ilp.result.found);
    CHECK(*ilp.result.prediction.price_per_hour <= *ep.goal.budget_per_hour * (1 + 1e-9));
    CHECK(ilp.result.prediction.samples_per_second ==
          hetrl::testing::approx(truth.prediction.samples_per_second).epsilon(1e-6));
  }
  CHECK(compared == 20);
}

TEST_CASE("the ILP keeps its groups within the budget together, not only each group beside the cheapest others") {
  // Four identical L4 nodes at 8 $/hour each; PPO with Qwen2.5-0.5B fits on any one of them.
  // Unconstrained, the ILP's fastest plan takes all four; at 24 $/hour two groups of two
  // nodes each pass a check of each group beside the other's cheapest allocation (one node),
  // and only the budget over the groups together refuses them.
  hw::ClusterBuildParams params = hw::default_build_params(catalogs().hardware);
  for (int n = 0; n < 4; ++n) params.node_groups.push_back(hw::parse_node_spec("us-east-1a:8xL4", catalogs().hardware));
  hw::Cluster cluster = hw::build_cluster(params, catalogs().hardware);
  for (hw::GpuSpec& g : cluster.gpu_types) g.price_per_hour = 1.0;
  workload::Workload w;
  w.algorithm = "ppo";
  for (workload::Role r : {workload::Role::kActor, workload::Role::kCritic, workload::Role::kReference}) {
    w.role(r) = {workload::RoleModel::Kind::kModel, "Qwen2.5-0.5B"};
  }
  w.role(workload::Role::kReward).kind = workload::RoleModel::Kind::kRule;
  w.prompts_per_iteration = 64;
  w.prompt_length_tokens = 512;
  w.response.kind = workload::LengthKind::kFixed;
  w.response.fixed_tokens = 512;
  w.mini_batches = 1;
  w.validate(catalogs().algorithms, catalogs().models);
  const workload::TaskGraph graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
  const cost::CostModel model(cluster, w, graph, catalogs().models);
  const planner::IlpOutcome free = planner::plan_ilp(model, catalogs().models, {}, kStill);
  REQUIRE(free.result.found);
  REQUIRE(*free.result.prediction.price_per_hour == hetrl::testing::approx(32.0));
  planner::IlpParams ip;
  ip.goal.budget_per_hour = 24.0;
  const planner::IlpOutcome held = planner::plan_ilp(model, catalogs().models, ip, kStill);
  REQUIRE(held.result.found);
  CHECK(*held.result.prediction.price_per_hour <= 24.0 + 1e-9);
  CHECK(held.result.prediction.samples_per_second < free.result.prediction.samples_per_second);
}

TEST_CASE("with the cost objective the ILP optimum equals the exhaustive optimum on 20 priced instances") {
  std::mt19937 rng(77);
  int compared = 0;
  for (int i = 0; compared < 20 && i < 200; ++i) {
    RandomInstance x = random_instance(rng);
    // Test prices per GPU-hour, one per type.
    const std::map<std::string, double> prices{
        {"A100-SXM-80G", 4.1}, {"H100-SXM", 6.9}, {"L40S", 2.0}, {"L4", 0.8}, {"A10G", 1.0}};
    for (hw::GpuSpec& g : x.cluster.gpu_types) g.price_per_hour = prices.at(g.name);
    const cost::CostModel model(x.cluster, x.workload, x.graph, catalogs().models);
    planner::ExhaustiveParams ep;
    ep.goal.objective = planner::Objective::kCostPerSample;
    if (planner::exhaustive_plan_count(model, catalogs().models, ep) > 6000) continue;
    const planner::PlannerResult truth = planner::plan_exhaustive(model, catalogs().models, ep);
    planner::IlpParams ip;
    ip.goal.objective = planner::Objective::kCostPerSample;
    const planner::IlpOutcome ilp = planner::plan_ilp(model, catalogs().models, ip, kStill);
    CAPTURE(x.description);
    REQUIRE(truth.found == ilp.result.found);
    if (!truth.found) continue;
    ++compared;
    REQUIRE(ilp.solve.status == ilp::Status::kOptimal);
    auto per_1k = [](const plan::Prediction& p) { return *p.price_per_hour / 3600.0 / p.samples_per_second * 1000.0; };
    CHECK(per_1k(ilp.result.prediction) == hetrl::testing::approx(per_1k(truth.prediction)).epsilon(1e-9));
    // The objective is exact: dollars per 1,000 samples as the evaluator prices the plan.
    CHECK(ilp.solve.objective == hetrl::testing::approx(per_1k(ilp.result.prediction)).epsilon(1e-6));
    // Warm-started from hybrid's cheapest plan, which bounds each group's busy time by its
    // price: the same optimum.
    const core::FakeClock clock;
    planner::HybridParams hp;
    hp.goal.objective = planner::Objective::kCostPerSample;
    const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs().models, hp, clock);
    REQUIRE(hybrid.found);
    // Hybrid reaches the optimum itself: its lean starts and moves reach the fewest GPUs.
    CHECK(per_1k(hybrid.prediction) == hetrl::testing::approx(per_1k(truth.prediction)).epsilon(1e-9));
    const planner::IlpOutcome warm = planner::plan_ilp(model, catalogs().models, ip, kStill, &hybrid.plan);
    CHECK(warm.warm_started);
    CHECK(per_1k(warm.result.prediction) == hetrl::testing::approx(per_1k(truth.prediction)).epsilon(1e-9));
  }
  CHECK(compared == 20);
}

TEST_CASE("the ILP counts the configurations it composes, stops at its limits, keeps the undominated") {
  const io::Catalogs& c = catalogs();
  const TwoNodeGrpo x;
  const cost::CostModel& model = x.model;
  const planner::IlpOutcome all = planner::plan_ilp(model, c.models, {}, kStill);
  REQUIRE(all.result.found);
  CHECK(all.kept_configs > 0);
  CHECK(all.kept_configs < all.configs);
  // Without bounds every configuration that fits is composed: no more than the space holds.
  CHECK(all.configs <= planner::ilp_configuration_count(model, c.models, {}));
  planner::IlpParams limited;
  limited.max_configs = all.configs;
  CHECK(planner::plan_ilp(model, c.models, limited, kStill).result.found);
  // One fewer: refused, with the count, not thrown.
  limited.max_configs = all.configs - 1;
  const planner::IlpOutcome refused = planner::plan_ilp(model, c.models, limited, kStill);
  CHECK_FALSE(refused.result.found);
  CHECK_FALSE(refused.solved);
  CHECK(refused.result.stop == planner::Stop::kRefused);
  const std::string expected =
      fmt::format("the ILP would compose more than {} group configurations", all.configs - 1);
  CHECK(refused.result.why_not.find(expected) == 0);
  // And past the columns the model may have.
  planner::IlpParams small;
  small.max_columns = 10;
  const planner::IlpOutcome narrow = planner::plan_ilp(model, c.models, small, kStill);
  CHECK(narrow.result.stop == planner::Stop::kRefused);
  CHECK(narrow.result.why_not.find("the ILP model would have more than 10 columns") == 0);
}

TEST_CASE("the ILP's time limit covers its build, read from the clock it is given") {
  const io::Catalogs& c = catalogs();
  const TwoNodeGrpo x;
  const cost::CostModel& model = x.model;
  const planner::PlannerResult hybrid = planner::plan_hybrid(model, c.models, {}, kStill);
  REQUIRE(hybrid.found);
  // A clock that advances one second each time it is read, and a limit of 3 s: the build
  // stops at the first look past the limit, while pricing the first tasks' strategies.
  planner::IlpParams params;
  params.solve.time_limit = 3;
  {
    const core::FakeClock clock(1.0);
    const planner::IlpOutcome stopped = planner::plan_ilp(model, c.models, params, clock);
    CHECK_FALSE(stopped.solved);
    CHECK(stopped.result.stop == planner::Stop::kTimeLimit);
    CHECK_FALSE(stopped.result.found);
    CHECK(stopped.result.why_not.find("the ILP's build passed the time limit of 3 s") == 0);
  }
  {
    // With a warm start the result is the best plan so far: the warm plan.
    const core::FakeClock clock(1.0);
    const planner::IlpOutcome stopped = planner::plan_ilp(model, c.models, params, clock, &hybrid.plan);
    CHECK(stopped.result.stop == planner::Stop::kTimeLimit);
    REQUIRE(stopped.result.found);
    CHECK(stopped.result.prediction.samples_per_second == hybrid.prediction.samples_per_second);
    CHECK(stopped.result.plan.groups.size() == hybrid.plan.groups.size());
    CHECK(planner::ilp_summary(stopped, {}, "hybrid").find("the plan is the warm start's (hybrid)") !=
          std::string::npos);
  }
  {
    // The same limit on a clock that stands still: it solves.
    const planner::IlpOutcome solved = planner::plan_ilp(model, c.models, params, kStill);
    CHECK(solved.solved);
    CHECK(solved.result.stop == planner::Stop::kComplete);
    CHECK(solved.result.found);
  }
}

TEST_CASE("an incumbent bounds the ILP's enumeration without changing its optimum") {
  const io::Catalogs& c = catalogs();
  const TwoNodeGrpo x;
  const cost::CostModel& model = x.model;
  const planner::IlpOutcome all = planner::plan_ilp(model, c.models, {}, kStill);
  REQUIRE(all.result.found);
  const core::FakeClock clock;
  const planner::PlannerResult hybrid = planner::plan_hybrid(model, c.models, {}, clock);
  REQUIRE(hybrid.found);
  const planner::IlpOutcome bounded = planner::plan_ilp(model, c.models, {}, kStill, &hybrid.plan);
  CHECK(bounded.warm_started);
  CHECK(bounded.configs < all.configs / 2);
  CHECK(bounded.result.prediction.samples_per_second ==
        hetrl::testing::approx(all.result.prediction.samples_per_second).epsilon(1e-9));
  // A minimum throughput bounds it too: just under the optimum, the optimum is still found.
  planner::IlpParams floor;
  floor.goal.min_throughput = all.result.prediction.samples_per_second * (1 - 1e-6);
  const planner::IlpOutcome fast = planner::plan_ilp(model, c.models, floor, kStill);
  CHECK(fast.configs < all.configs / 2);
  CHECK(fast.result.prediction.samples_per_second ==
        hetrl::testing::approx(all.result.prediction.samples_per_second).epsilon(1e-9));
  // A plan outside the space (here one task has no GPUs) bounds nothing and starts nothing.
  plan::Plan partial = hybrid.plan;
  partial.groups.front().tasks.pop_back();
  const planner::IlpOutcome unbounded = planner::plan_ilp(model, c.models, {}, kStill, &partial);
  CHECK_FALSE(unbounded.warm_started);
  CHECK(unbounded.configs == all.configs);
}

TEST_CASE("the ILP: infeasible instances and constraints") {
  const io::Catalogs& c = catalogs();
  const hw::Cluster cluster = cluster_of({"a:2xT4"});
  const workload::Workload w = grpo("Qwen2.5-72B", 8, 4, 256, 256);
  const workload::TaskGraph graph = workload::build_task_graph(w, c.algorithms, c.models);
  const cost::CostModel model(cluster, w, graph, c.models);
  const planner::IlpOutcome none = planner::plan_ilp(model, c.models, {}, kStill);
  CHECK_FALSE(none.result.found);
  CHECK(none.solve.status == ilp::Status::kInfeasible);
  CHECK(none.result.why_not.find("the ILP is infeasible") == 0);
}

// Under the cost model since a decode step's kernels are priced in turn (each optimum below
// solved again with the ILP; benchmarks/RESULTS.md). Each search step a case is named after
// was checked by switching it off in a throwaway build under the model before, where the case
// then fell short; the figures a case gives for hybrid without a step are from that model.

namespace {

// The GPU types of a group's nodes, and of the plan's.
std::set<std::string> gpu_types(const io::Inputs& in, const plan::Plan& plan, int group = -1) {
  std::set<std::string> types;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    if (group >= 0 && static_cast<int>(g) != group) continue;
    for (const plan::Gpu& gpu : plan.groups[g].gpus) {
      types.insert(in.cluster.gpu_types[in.cluster.nodes[gpu.node].gpu_type].name);
    }
  }
  return types;
}

}  // namespace

TEST_CASE("a second search goes bottleneck first: PPO-14B async with bf16 gradients reaches the ILP's optimum") {
  // The paper's region network. The ILP proves 21.98 samples/s on every GPU: generation and the
  // actor's and the reference's forward passes on two A100 nodes, the reward's forward pass
  // alone on the L4 nodes, the critic's forward pass and both trainings on the third A100 node
  // and the L40S nodes. The search in task order alone stops short (18.83).
  const io::Inputs in = paper_scenario_bf16_reduce("region", "ppo-14b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 21.984);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  CHECK(hybrid.plan.groups[generate].gpus.size() == 16);
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == generate);
  const int reward = hybrid.plan.group_of(in.graph.find("reward"));
  CHECK(hybrid.plan.groups[reward].tasks.size() == 1);
  CHECK(gpu_types(in, hybrid.plan, reward) == std::set<std::string>{"L4"});
  const int train = hybrid.plan.group_of(in.graph.find("actor_train"));
  CHECK(hybrid.plan.group_of(in.graph.find("critic_train")) == train);
  CHECK(gpu_types(in, hybrid.plan, train) == std::set<std::string>{"A100-SXM-40G", "L40S"});
  CHECK(hybrid.plan.gpu_count() == 64);
}

TEST_CASE("the starts of the highest bounds ride beside the halving: GRPO-4B async with bf16 gradients reaches the ILP's optimum") {
  // The paper's region network. The ILP proves 74.22 samples/s: generation and the reward on
  // the A100s, the actor's forward pass and training on the L40S nodes, the reference's forward
  // pass on the L4 nodes (and one L40S node). Its start (A100s, L40S and L4 to those three
  // groups) has the second highest bound of all starts but climbs slowly: the halving alone cut
  // it and planned 72.90 with the L4s idle.
  const io::Inputs in = paper_scenario_bf16_reduce("region", "grpo-4b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 74.22);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  CHECK(hybrid.plan.group_of(in.graph.find("reward")) == generate);
  CHECK(gpu_types(in, hybrid.plan, generate) == std::set<std::string>{"A100-SXM-40G"});
  const int train = hybrid.plan.group_of(in.graph.find("actor_train"));
  CHECK(hybrid.plan.group_of(in.graph.find("actor_logprob")) == train);
  const int reference = hybrid.plan.group_of(in.graph.find("ref_logprob"));
  CHECK(hybrid.plan.groups[reference].tasks.size() == 1);
  CHECK(gpu_types(in, hybrid.plan, reference).count("L4") == 1);
}

TEST_CASE("a converged candidate tries exchanging two tasks between groups: GRPO-8B async within half the price reaches the ILP's optimum") {
  // The paper's region network, GRPO-8B async within half the cluster's price. The ILP proves
  // 27.78 samples/s on the three A100 nodes: generation and the reward's forward pass on one,
  // the actor's and the reference's forward passes beside the actor's training on two. Without
  // the exchanges hybrid stops at 28.31.
  const io::Inputs in = paper_scenario("region", "grpo-8b-async");
  const planner::PlannerResult hybrid = plan_paper_within_half_price(in);
  CHECK(hybrid.prediction.samples_per_second > 27.779);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  const int train = hybrid.plan.group_of(in.graph.find("actor_train"));
  CHECK(hybrid.plan.group_of(in.graph.find("reward")) == generate);
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == train);
  CHECK(gpu_types(in, hybrid.plan) == std::set<std::string>{"A100-SXM-40G"});
}

TEST_CASE("two tasks exchanged that do not fit with their own strategies take each other's TP and PP: GRPO-14B async reaches the ILP's optimum") {
  // The paper's region network and GRPO-14B async (actor, reference and reward all Qwen3-14B)
  // with bf16 gradients. The ILP proves 29.71 samples/s in two groups: generation and the
  // reference's forward pass (TP1 PP2) on two A100 nodes; the actor's and the reward's forward
  // passes (TP2 PP2) and the actor's training on the third A100 node and the L40S nodes; the
  // L4s idle (the actor's and the reference's forward passes, one model, are as good the other
  // way round). Without the exchange at each other's TP and PP hybrid stops at 29.65.
  const io::Inputs in = paper_scenario_bf16_reduce("region", "grpo-14b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 29.707);
  REQUIRE(hybrid.plan.groups.size() == 2);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  const int train = hybrid.plan.group_of(in.graph.find("actor_train"));
  CHECK(hybrid.plan.groups[generate].tasks.size() == 2);  // one of the two forward passes
  CHECK(hybrid.plan.group_of(in.graph.find("reward")) == train);
  for (const char* name : {"actor_logprob", "ref_logprob", "reward"}) {
    const plan::TaskPlacement* t = hybrid.plan.placement(in.graph.find(name));
    REQUIRE(t);
    const int tp = hybrid.plan.group_of(in.graph.find(name)) == generate ? 1 : 2;
    CHECK(t->replicas.front().stages.size() == 2);
    CHECK(static_cast<int>(t->replicas.front().stages.front().devices.size()) == tp);
  }
}

TEST_CASE("the candidate searched to the end restarts from regrouped plans: PPO-14B sync reaches the ILP's optimum") {
  // The paper's region network, PPO-14B sync with bf16 gradients. The ILP proves 17.29
  // samples/s in two groups: generation, the actor's and the reward's forward passes and the
  // actor's training on the A100 nodes; the reference's and the critic's tasks on the L40S
  // nodes; the L4s idle. Without the restart from regrouped plans hybrid stops at 14.23.
  const io::Inputs in = paper_scenario_bf16_reduce("region", "ppo-14b-sync");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 17.289);
  CHECK(hybrid.plan.groups.size() == 2);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  CHECK(hybrid.plan.group_of(in.graph.find("reward")) == generate);
  CHECK(hybrid.plan.group_of(in.graph.find("actor_train")) == generate);
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == hybrid.plan.group_of(in.graph.find("critic_train")));
  CHECK(hybrid.plan.gpu_count() == 48);
}

TEST_CASE("of plans as fast, hybrid keeps the one on the cheaper GPUs: PPO-14B sync on the country network leaves the L4s idle") {
  // The paper's country network, PPO-14B sync. Generation, the actor's and the reward's forward
  // passes and the actor's training on the A100 nodes set the iteration (17.29 samples/s, the
  // ILP's optimum); the reference's and the critic's tasks run beside them on the L40S nodes,
  // as fast with the reference's forward pass on the L4 nodes and an L40S node of its own,
  // which the search reaches first (64 GPUs, 215.40 $/h against 188.70).
  const io::Inputs in = paper_scenario("country", "ppo-14b-sync");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 17.289);
  CHECK(hybrid.plan.gpu_count() == 48);
  CHECK(gpu_types(in, hybrid.plan).count("L4") == 0);
  REQUIRE(hybrid.prediction.price_per_hour);
  CHECK(*hybrid.prediction.price_per_hour < 188.71);
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == hybrid.plan.group_of(in.graph.find("critic_train")));
}

TEST_CASE("the starts that did not fit get their second chance highest bound first, and a finalist's polish reaches the optimum: PPO-8B async leaves the L4s idle") {
  // The paper's region network, PPO-8B async. The ILP proves 34.27 samples/s on 48 GPUs:
  // generation alone on one A100 node, the actor's forward pass and training and the
  // reference's forward pass on the L40S nodes (every one in two stages, the training with
  // selective recompute), the critic's and the reward's tasks on the other two A100 nodes (the
  // forward passes at TP 2 PP 2, the critic's update at TP 1 with selective recompute), the
  // L4s idle (the critic and the reward are one model with a value head: either forward pass
  // takes either layout). That start does not fit as first laid out (the 6th by its bound); the second
  // chance once took the unfit starts closest to fitting first, and the plan's overflow was its
  // first group's over its memory, not its furthest GPU's (so making one group fit could look
  // further off): hybrid kept all 64 GPUs at 32.84. It then reached that start's nodes, at
  // 33.38 with the actor's tasks in one stage and both updates with full recompute; the
  // winner's polish takes it to the optimum's layouts: the actor's group laid out alike in two
  // stages with its update's recompute a step lighter (retrain_options), and the critic's
  // update with selective recompute beside a forward pass spread (make_room). Another start's
  // plan wins the halving (34.01, every GPU), which its polish leaves as it is: the best three
  // plans are polished, and the runner-up's reaches the optimum.
  const io::Inputs in = paper_scenario("region", "ppo-8b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 34.270);
  CHECK(hybrid.plan.gpu_count() == 48);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  CHECK(hybrid.plan.groups[generate].tasks.size() == 1);
  const int actor = hybrid.plan.group_of(in.graph.find("actor_train"));
  CHECK(gpu_types(in, hybrid.plan, actor) == std::set<std::string>{"L40S"});
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == actor);
  CHECK(hybrid.plan.group_of(in.graph.find("reward")) == hybrid.plan.group_of(in.graph.find("critic_train")));
  const plan::TaskPlacement* actor_train = hybrid.plan.placement(in.graph.find("actor_train"));
  const plan::TaskPlacement* critic_train = hybrid.plan.placement(in.graph.find("critic_train"));
  REQUIRE(actor_train);
  REQUIRE(critic_train);
  CHECK(actor_train->replicas.front().stages.size() == 2);
  CHECK(actor_train->train.recompute == cost::Recompute::kSelective);
  CHECK(critic_train->train.recompute == cost::Recompute::kSelective);
  std::multiset<std::size_t> tp;
  for (const char* name : {"critic_value", "reward"}) {
    const plan::TaskPlacement* pass = hybrid.plan.placement(in.graph.find(name));
    REQUIRE(pass);
    CHECK(pass->replicas.front().stages.size() == 2);
    tp.insert(pass->replicas.front().stages.front().devices.size());
  }
  CHECK(tp == std::multiset<std::size_t>{1, 2});
}

TEST_CASE("GRPO-14B async with fp32 gradients comes within 1% of the ILP's optimum") {
  // The paper's region network and GRPO-14B async as given. The ILP proves 26.24 samples/s on
  // every GPU; hybrid plans 26.17 (0.25% behind) there too: generation and the reference's
  // forward pass on two A100 nodes, the actor's forward pass and training on the third and the
  // L40S nodes, the reward's forward pass alone on the L4s.
  const io::Inputs in = paper_scenario("region", "grpo-14b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 0.99 * 26.2375);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == generate);
  const int reward = hybrid.plan.group_of(in.graph.find("reward"));
  CHECK(hybrid.plan.groups[reward].tasks.size() == 1);
  CHECK(gpu_types(in, hybrid.plan, reward) == std::set<std::string>{"L4"});
  CHECK(hybrid.plan.gpu_count() == 64);
}

TEST_CASE("PPO-8B async with bf16 gradients comes within 1% of the ILP's optimum") {
  // The paper's region network, PPO-8B async. The ILP proves 36.91 samples/s on every GPU:
  // generation and the actor's and reward's forward passes on two A100 nodes, the reference's
  // forward pass alone on the L4 nodes, the critic's forward pass and both trainings on the
  // third A100 node and the L40S nodes. Hybrid plans 36.86 (0.16% behind) on every GPU too:
  // generation alone on one A100 node, the actor's and the reference's forward passes on the L4
  // nodes and one L40S node, every other task on the rest.
  const io::Inputs in = paper_scenario_bf16_reduce("region", "ppo-8b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 0.99 * 36.9149);
  CHECK(hybrid.plan.gpu_count() == 64);
}

TEST_CASE("a converged candidate lays out a group's forward passes alike: GRPO-4B async within half the price reaches the ILP's optimum") {
  // The paper's region network, GRPO-4B async, within half the cluster's price (fp32 gradient
  // sync). The ILP proves 47.63 samples/s: generation on one A100 node, every other task on
  // two, the three forward passes at TP 1 PP 2. Without the forward passes laid out alike
  // hybrid stops at 46.97.
  const io::Inputs in = paper_scenario("region", "grpo-4b-async");
  const planner::PlannerResult hybrid = plan_paper_within_half_price(in);
  CHECK(hybrid.prediction.samples_per_second > 47.625);
  const plan::TaskPlacement* actor = hybrid.plan.placement(in.graph.find("actor_logprob"));
  const plan::TaskPlacement* reward = hybrid.plan.placement(in.graph.find("reward"));
  REQUIRE(actor);
  REQUIRE(reward);
  for (const plan::TaskPlacement* t : {actor, reward}) {
    CHECK(t->replicas.front().stages.size() == 2);
    CHECK(t->replicas.front().stages.front().devices.size() == 1);
  }
}

TEST_CASE("the winner's polish spreads a training task with its options a step lighter to make room: GRPO-4B async with bf16 gradients within half the price reaches the ILP's optimum") {
  // The paper's region network, GRPO-4B async with bf16 gradients, within half the cluster's
  // price. The ILP proves 48.14 samples/s on three A100 nodes: generation on one; on the other
  // two one of the actor model's two forward passes (the actor's or the reference's) at TP 1 in
  // one stage, the other and the reward's at TP 1 PP 2, the actor's update at TP 2 without
  // recompute. Hybrid stopped at 47.63 with both passes in two stages and the update at TP 1
  // with selective recompute: a pass in one stage fits only with the update spread over twice
  // the GPUs, where it is faster with no recompute than with the one it had.
  const io::Inputs in = paper_scenario_bf16_reduce("region", "grpo-4b-async");
  const planner::PlannerResult hybrid = plan_paper_within_half_price(in);
  CHECK(hybrid.prediction.samples_per_second > 48.135);
  int one_stage = 0;
  for (const char* name : {"actor_logprob", "ref_logprob"}) {
    const plan::TaskPlacement* pass = hybrid.plan.placement(in.graph.find(name));
    REQUIRE(pass);
    if (pass->replicas.front().stages.size() == 1) ++one_stage;
  }
  CHECK(one_stage == 1);
  const plan::TaskPlacement* train = hybrid.plan.placement(in.graph.find("actor_train"));
  REQUIRE(train);
  CHECK(train->replicas.front().stages.front().devices.size() == 2);
  CHECK(train->train.recompute == cost::Recompute::kNone);
}

namespace {

// PPO-14B async's optimum as the ILP proves it on the paper's country and continent networks,
// 17.92 samples/s on 48 GPUs, and hybrid's plan there: generation and the actor's forward pass
// on one A100 node, the reward's forward pass beside the actor's training on two, the
// reference's beside the critic's tasks on the L40S nodes; the L4s idle.
void check_ppo_14b_async_optimum(const char* network) {
  CAPTURE(network);
  const io::Inputs in = paper_scenario(network, "ppo-14b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 17.916);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  CHECK(hybrid.plan.group_of(in.graph.find("actor_logprob")) == generate);
  CHECK(hybrid.plan.group_of(in.graph.find("reward")) == hybrid.plan.group_of(in.graph.find("actor_train")));
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == hybrid.plan.group_of(in.graph.find("critic_train")));
  CHECK(hybrid.plan.gpu_count() == 48);
}

}  // namespace

TEST_CASE("two tasks exchanged that are no better at their own TP and PP try each other's: PPO-14B async on the country and continent networks reaches the ILP's optimum") {
  // On the continent network hybrid had the reference's forward pass (TP1 PP2 at the optimum)
  // and the reward's (TP2 PP2) the other way round (18.27); exchanged at their own layouts they
  // fit but are slower.
  for (const char* network : {"country", "continent"}) check_ppo_14b_async_optimum(network);
}

TEST_CASE("PPO-4B async with bf16 gradients reaches the ILP's optimum") {
  // The paper's region network, PPO-4B async. The ILP proves 60.06 samples/s on 48 GPUs:
  // generation and the reward's forward pass on two A100 nodes, the actor's forward pass and
  // training on the third and one L40S node, the reference's and the critic's tasks on two L40S
  // nodes; the L4s idle. (The critic and the reward are one model with a value head: their
  // forward passes are as fast either way round.)
  const io::Inputs in = paper_scenario_bf16_reduce("region", "ppo-4b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 60.057);
  const int generate = hybrid.plan.group_of(in.graph.find("generate"));
  const int critic = hybrid.plan.group_of(in.graph.find("critic_train"));
  CHECK(std::set<int>{hybrid.plan.group_of(in.graph.find("reward")), hybrid.plan.group_of(in.graph.find("critic_value"))} ==
        std::set<int>{generate, critic});
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == critic);
  CHECK(hybrid.plan.gpu_count() == 48);
  CHECK(gpu_types(in, hybrid.plan).count("L4") == 0);
}

TEST_CASE("a start within the budget takes back the nodes it gave up where they fit: PPO-4B async within half the price reaches the ILP's optimum") {
  // The paper's region network, PPO-4B async with bf16 gradients, within 107.70 $/h. The ILP
  // proves 35.46 samples/s on one A100 node, one L4 node and two L40S nodes (106.38 $/h);
  // hybrid's plan there: generation and the reference's forward pass on the A100 node, the
  // reward's forward pass alone on the L4 node, the actor's and the critic's forward passes
  // beside both trainings on the L40S nodes. Without the starts that take back the nodes they
  // gave up while within the budget hybrid stopped at 35.46 under the model before (35.51 then).
  const io::Inputs in = paper_scenario_bf16_reduce("region", "ppo-4b-async");
  const planner::PlannerResult hybrid = plan_paper_within_half_price(in);
  CHECK(hybrid.prediction.samples_per_second > 35.461);
  REQUIRE(hybrid.prediction.price_per_hour);
  CHECK(*hybrid.prediction.price_per_hour <= 107.70);
  const int reward = hybrid.plan.group_of(in.graph.find("reward"));
  CHECK(hybrid.plan.groups[reward].tasks.size() == 1);
  CHECK(gpu_types(in, hybrid.plan, reward) == std::set<std::string>{"L4"});
  CHECK(hybrid.plan.groups[reward].gpus.size() == 8);
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == hybrid.plan.group_of(in.graph.find("generate")));
  const int train = hybrid.plan.group_of(in.graph.find("actor_train"));
  CHECK(hybrid.plan.group_of(in.graph.find("critic_train")) == train);
  CHECK(gpu_types(in, hybrid.plan, train) == std::set<std::string>{"L40S"});
  CHECK(hybrid.plan.groups[train].gpus.size() == 16);
}

TEST_CASE("PPO-14B async with bf16 gradients within half the price reaches the ILP's optimum on A100 and L40S nodes and an L4 node") {
  // The paper's region network, within 107.70 $/h. The ILP proves 10.27 samples/s on one A100
  // node, two L40S nodes and one L4 node (106.38 $/h); hybrid's plan there, as the ILP's:
  // generation and the actor's and the reference's forward passes on the A100 node, the
  // critic's forward pass and both trainings on the L40S nodes, the reward's forward pass
  // alone on the L4 node. (Under the model before, 10.42 on three A100 nodes.)
  const io::Inputs in = paper_scenario_bf16_reduce("region", "ppo-14b-async");
  const planner::PlannerResult hybrid = plan_paper_within_half_price(in);
  CHECK(hybrid.prediction.samples_per_second > 10.272);
  CHECK(gpu_types(in, hybrid.plan) == std::set<std::string>{"A100-SXM-40G", "L40S", "L4"});
  CHECK(hybrid.plan.gpu_count() == 32);
  const int reward = hybrid.plan.group_of(in.graph.find("reward"));
  CHECK(hybrid.plan.groups[reward].tasks.size() == 1);
  CHECK(gpu_types(in, hybrid.plan, reward) == std::set<std::string>{"L4"});
  CHECK(hybrid.plan.group_of(in.graph.find("ref_logprob")) == hybrid.plan.group_of(in.graph.find("generate")));
}

TEST_CASE("a forward pass moved into a group where it does not fit makes room there: PPO-14B async comes within 1% of the ILP's optimum") {
  // The paper's region network (fp32 gradient sync). A forward pass moved into another group
  // that does not fit there tries the group's training task one step leaner or spread over
  // twice the GPUs, as a strategy move does; without that hybrid stopped at 17.47 under the
  // model before. The ILP proves 18.08 samples/s on every GPU here; hybrid plans the country
  // network's optimum on 48 (17.92, 0.93% behind).
  const io::Inputs in = paper_scenario("region", "ppo-14b-async");
  const planner::PlannerResult hybrid = plan_paper(in, planner::HybridParams{});
  REQUIRE(hybrid.found);
  CHECK(hybrid.prediction.samples_per_second > 0.99 * 18.0843);
}

TEST_CASE("a task split onto unused nodes over the budget is paid for with a group's nodes traded for a cheaper type: PPO-8B async within half the price reaches the ILP's optimum") {
  // The paper's region network, PPO-8B async with bf16 gradients, within 107.70 $/h. The ILP
  // proves 20.66 samples/s: generation and the actor's and reference's forward passes on one
  // A100 node, the reward's forward pass alone on one L4 node, the critic's forward pass and
  // both trainings on the two L40S nodes (106.38 $/h). Without the split paid for by trading,
  // hybrid stops at 19.55 on three A100 nodes.
  const io::Inputs in = paper_scenario_bf16_reduce("region", "ppo-8b-async");
  const planner::PlannerResult hybrid = plan_paper_within_half_price(in);
  CHECK(hybrid.prediction.samples_per_second > 20.664);
  const std::set<std::string> types = gpu_types(in, hybrid.plan);
  CHECK(types.count("L40S") == 1);
  CHECK(types.count("L4") == 1);
  const int train = hybrid.plan.group_of(in.graph.find("actor_train"));
  CHECK(hybrid.plan.group_of(in.graph.find("critic_train")) == train);
  CHECK(hybrid.plan.groups[train].gpus.size() == 16);
}
