#include <doctest/doctest.h>

#include "approx.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "core/error.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "planner/baselines.h"
#include "planner/exhaustive.h"
#include "planner/hybrid.h"
#include "planner/layout.h"
#include "planner/pricer.h"
#include "fixtures.h"

using namespace hetrl;

namespace {

const io::Catalogs& catalogs() { return io::builtin_catalogs(); }

using Instance = testing::FileInstance;

std::set<std::string> gpu_types_used(const plan::Plan& p, const hw::Cluster& cluster) {
  std::set<std::string> types;
  for (const plan::Group& g : p.groups) {
    for (const plan::Gpu& gpu : g.gpus) types.insert(cluster.gpu_types[cluster.nodes[gpu.node].gpu_type].name);
  }
  return types;
}

}  // namespace

TEST_CASE("partitions: the Bell numbers, each item once") {
  const std::vector<std::size_t> bell = {1, 2, 5, 15, 52, 203};
  for (std::size_t n = 1; n <= bell.size(); ++n) {
    std::vector<int> items(n);
    for (std::size_t i = 0; i < n; ++i) items[i] = static_cast<int>(10 + i);
    const auto all = planner::partitions(items, static_cast<int>(n));
    CHECK(all.size() == bell[n - 1]);
    // At most two groups: the partitions into one and into two, 2^(n-1) of them.
    const auto two = planner::partitions(items, 2);
    CHECK(two.size() == (std::size_t{1} << (n - 1)));
    for (const auto& partition : two) CHECK(partition.size() <= 2);
    std::set<std::vector<std::vector<int>>> distinct(all.begin(), all.end());
    CHECK(distinct.size() == all.size());
    for (const auto& partition : all) {
      std::vector<int> seen;
      for (const auto& group : partition) {
        CHECK(!group.empty());
        seen.insert(seen.end(), group.begin(), group.end());
      }
      std::sort(seen.begin(), seen.end());
      CHECK(seen == items);
    }
  }
}

TEST_CASE("a baseline given a deadline stops at the first evaluation past it with its best plan so far") {
  const Instance x("valid.json", "grpo_small.json");
  const std::vector<int> nodes = planner::all_nodes(x.in.cluster);
  const planner::PlannerResult whole = planner::plan_streamrl(x.model, catalogs().models, nodes);
  REQUIRE(whole.found);
  REQUIRE(whole.evaluations > 4);
  CHECK(whole.stop == planner::Stop::kComplete);
  for (const std::string name : {"verl", "streamrl", "homogeneous"}) {
    CAPTURE(name);
    const auto run = [&](const planner::Deadline& deadline) {
      return name == "verl"       ? planner::plan_verl(x.model, catalogs().models, nodes, deadline)
             : name == "streamrl" ? planner::plan_streamrl(x.model, catalogs().models, nodes, deadline)
                               : planner::plan_homogeneous(x.model, catalogs().models, deadline);
    };
    // A clock that reads 1, 2, 3 s...: the tenth check stops it.
    const core::FakeClock clock(1.0);
    const planner::PlannerResult stopped = run({&clock, 10.0});
    CHECK(stopped.stop == planner::Stop::kTimeLimit);
    CHECK(stopped.evaluations >= 1);
    CHECK(stopped.evaluations < run({}).evaluations);
    // Past before it starts: nothing, and why.
    const core::FakeClock late(1.0);
    const planner::PlannerResult none = run({&late, 0.0});
    CHECK_FALSE(none.found);
    CHECK(none.stop == planner::Stop::kTimeLimit);
    CHECK(none.why_not == "the time limit passed before a plan was found");
  }
}

TEST_CASE("verl colocates every task on every GPU with one strategy and even shares") {
  const Instance x("valid.json", "grpo_small.json");
  const planner::PlannerResult r = planner::plan_verl(x.model, catalogs().models, planner::all_nodes(x.in.cluster));
  REQUIRE(r.found);
  REQUIRE(r.plan.groups.size() == 1);
  CHECK(static_cast<int>(r.plan.groups[0].gpus.size()) == x.in.cluster.total_gpus());
  CHECK(r.plan.groups[0].tasks.size() == x.in.graph.gpu_tasks().size());
  const auto& first = r.plan.groups[0].tasks[0].replicas;
  for (const plan::TaskPlacement& t : r.plan.groups[0].tasks) {
    CHECK(t.replicas.size() == first.size());
    for (const plan::Replica& replica : t.replicas) {
      CHECK(replica.share == hetrl::testing::approx(1.0 / static_cast<double>(first.size())));
      CHECK(replica.stages.front().devices.size() == first.front().stages.front().devices.size());
    }
  }
  CHECK_NOTHROW(r.plan.validate(x.in.cluster, x.in.graph, catalogs().models));
}

TEST_CASE("verl's training and scoring stages hold equal runs of layers, as Megatron splits them") {
  // The paper's multi-country network, PPO on Qwen3-8B (36 layers): a single replica over
  // eight stages of 4 and 5 layers would keep the gradient all-reduce off the slow links, but
  // verl's documented configuration cannot split layers unevenly.
  const io::Inputs in = testing::paper_scenario("country", "ppo-8b-sync");
  const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
  const planner::PlannerResult r = planner::plan_verl(model, catalogs().models, planner::all_nodes(in.cluster));
  REQUIRE(r.found);
  int most_stages = 0;
  for (const plan::TaskPlacement& t : r.plan.groups.at(0).tasks) {
    if (in.graph.tasks[t.task].kind == workload::TaskKind::kGenerate) continue;
    for (const plan::Replica& replica : t.replicas) {
      most_stages = std::max(most_stages, static_cast<int>(replica.stages.size()));
      for (const plan::Stage& stage : replica.stages) CHECK(stage.layers == replica.stages.front().layers);
    }
  }
  CHECK(most_stages > 1);  // the plan pipelines: the check above says something
}

TEST_CASE("streamrl puts generation alone on its own nodes and balances shares by speed") {
  const Instance x("valid.json", "grpo_small.json");
  const planner::PlannerResult r =
      planner::plan_streamrl(x.model, catalogs().models, planner::all_nodes(x.in.cluster));
  REQUIRE(r.found);
  REQUIRE(r.plan.groups.size() == 2);
  REQUIRE(r.plan.groups[0].tasks.size() == 1);
  CHECK(x.in.graph.tasks[r.plan.groups[0].tasks[0].task].name == "generate");
  std::set<int> gen_nodes, train_nodes;
  for (const plan::Gpu& g : r.plan.groups[0].gpus) gen_nodes.insert(g.node);
  for (const plan::Gpu& g : r.plan.groups[1].gpus) train_nodes.insert(g.node);
  for (int n : gen_nodes) CHECK(train_nodes.count(n) == 0);
  CHECK_NOTHROW(r.plan.validate(x.in.cluster, x.in.graph, catalogs().models));
  // Heterogeneous replicas of a task finish closer together than with even shares.
  for (const plan::Group& g : r.plan.groups) {
    for (const plan::TaskPlacement& t : g.tasks) {
      const auto& seconds = r.prediction.tasks[t.task].replica_seconds;
      if (seconds.size() < 2) continue;
      const auto [lo, hi] = std::minmax_element(seconds.begin(), seconds.end());
      CHECK(*hi / *lo < 1.35);
    }
  }
}

TEST_CASE("verl-async: disjoint generation and training pools, even shares, async workloads only") {
  const Instance sync("valid.json", "grpo_small.json");
  CHECK_THROWS_AS(planner::plan_verl_async(sync.model, catalogs().models, planner::all_nodes(sync.in.cluster)),
                  core::InputError);
  const Instance x("valid.json", "grpo_tiny_async.json");
  const planner::PlannerResult r = planner::plan_verl_async(x.model, catalogs().models, planner::all_nodes(x.in.cluster));
  REQUIRE(r.found);
  CHECK(r.plan.planner.name == "verl-async");
  REQUIRE(r.plan.groups.size() == 2);
  REQUIRE(r.plan.groups[0].tasks.size() == 1);
  CHECK(x.in.graph.tasks[r.plan.groups[0].tasks[0].task].kind == workload::TaskKind::kGenerate);
  std::set<int> gen_nodes;
  for (const plan::Gpu& g : r.plan.groups[0].gpus) gen_nodes.insert(g.node);
  for (const plan::Gpu& g : r.plan.groups[1].gpus) CHECK(gen_nodes.count(g.node) == 0);
  // verl splits a batch evenly over a task's replicas, whatever their GPUs.
  for (const plan::Group& g : r.plan.groups) {
    for (const plan::TaskPlacement& t : g.tasks) {
      for (const plan::Replica& replica : t.replicas) {
        CHECK(replica.share == hetrl::testing::approx(1.0 / static_cast<double>(t.replicas.size())));
      }
    }
  }
  CHECK_NOTHROW(r.plan.validate(x.in.cluster, x.in.graph, catalogs().models));
  // StreamRL's pools with shares balanced by speed are never slower than the same pools even.
  const planner::PlannerResult streamrl =
      planner::plan_streamrl(x.model, catalogs().models, planner::all_nodes(x.in.cluster));
  REQUIRE(streamrl.found);
  CHECK(streamrl.prediction.samples_per_second >= r.prediction.samples_per_second * (1 - 1e-9));
}

TEST_CASE("homogeneous uses a single GPU type and beats nothing it may not use") {
  const Instance x("valid.json", "grpo_small.json");
  const planner::PlannerResult r = planner::plan_homogeneous(x.model, catalogs().models);
  REQUIRE(r.found);
  CHECK(gpu_types_used(r.plan, x.in.cluster).size() == 1);
}

TEST_CASE("planning is deterministic: the same inputs give the same plan file") {
  const Instance x("valid.json", "grpo_small.json");
  const auto nodes = planner::all_nodes(x.in.cluster);
  const planner::PlannerResult a = planner::plan_streamrl(x.model, catalogs().models, nodes);
  const planner::PlannerResult b = planner::plan_streamrl(x.model, catalogs().models, nodes);
  CHECK(io::plan_to_json(a.plan, a.prediction, x.in.cluster, x.in.graph) ==
        io::plan_to_json(b.plan, b.prediction, x.in.cluster, x.in.graph));
}

TEST_CASE("no feasible plan says why") {
  const Instance x("tiny_t4.json", "grpo_72b.json");
  const planner::PlannerResult r = planner::plan_verl(x.model, catalogs().models, planner::all_nodes(x.in.cluster));
  CHECK_FALSE(r.found);
  CHECK(r.why_not.find("GPU t4-0:") != std::string::npos);
  CHECK(r.why_not.find("GiB over") != std::string::npos);
}

TEST_CASE("exhaustive: no plan of its space beats it, it refuses large instances") {
  const Instance x("small3.json", "grpo_tiny.json");
  const planner::PlannerResult best = planner::plan_exhaustive(x.model, catalogs().models);
  REQUIRE(best.found);
  CHECK(best.evaluations > 1000);
  // Random plans from the same space, built and balanced the same way, never beat it.
  std::mt19937 rng(17);
  plan::Evaluator evaluator(x.model);
  const std::vector<int> tasks = x.in.graph.gpu_tasks();
  const auto partitions = planner::partitions(tasks, planner::SearchSpace{}.max_groups);
  const int nodes = static_cast<int>(x.in.cluster.nodes.size());
  int priced = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto& partition = partitions[rng() % partitions.size()];
    std::vector<planner::GroupChoice> groups(partition.size());
    for (std::size_t g = 0; g < partition.size(); ++g) groups[g].tasks = partition[g];
    for (int n = 0; n < nodes; ++n) {
      const std::size_t owner = rng() % (partition.size() + 1);
      if (owner < partition.size()) groups[owner].nodes.push_back(n);
    }
    bool ok = true;
    for (planner::GroupChoice& g : groups) {
      if (g.nodes.empty()) ok = false;
      for (int t : g.tasks) {
        if (!ok) break;
        const auto choices = planner::task_choices(x.model, catalogs().models, {}, t, g.nodes);
        if (choices.empty()) {
          ok = false;
          break;
        }
        g.choices.push_back(choices[rng() % choices.size()]);
      }
    }
    plan::Plan p;
    if (!ok || !planner::realize(x.model, catalogs().models, groups, p)) continue;
    const double sps = planner::balance_shares(evaluator, p, 1).samples_per_second;
    ++priced;
    CHECK(sps <= best.prediction.samples_per_second * (1 + 1e-12));
  }
  CHECK(priced > 50);
  const Instance big("valid.json", "grpo_small.json");
  CHECK_THROWS_WITH_AS(planner::plan_exhaustive(big.model, catalogs().models),
                       doctest::Contains("more than its limit of 2000000"), core::JobError);
}

TEST_CASE("exhaustive counts its allocations as it would visit them, and refuses too many before visiting any") {
  // Every map of the nodes to a grouping's groups or to none that leaves no group empty, summed
  // over the groupings: counted here one map at a time.
  for (const char* file : {"small3.json", "valid.json"}) {
    CAPTURE(file);
    const Instance x(file, "grpo_small.json");
    for (int max_groups : {1, 2, 3}) {
      CAPTURE(max_groups);
      planner::ExhaustiveParams params;
      params.space.max_groups = max_groups;
      const int nodes = static_cast<int>(x.in.cluster.nodes.size());
      double expected = 0;
      for (const auto& partition : planner::partitions(x.in.graph.gpu_tasks(), max_groups)) {
        const int k = static_cast<int>(partition.size());
        std::vector<int> owner(nodes, 0);
        for (;;) {
          std::vector<int> used(k + 1, 0);
          for (int o : owner) ++used[o];
          if (std::count(used.begin(), used.begin() + k, 0) == 0) ++expected;
          int n = 0;
          while (n < nodes && ++owner[n] > k) owner[n++] = 0;
          if (n == nodes) break;
        }
      }
      CHECK(planner::exhaustive_allocation_count(x.model, params) == expected);
    }
  }
  // 18 nodes: 408,056,545,757 allocations into at most three groups of grpo_small's four GPU
  // tasks (1 grouping into one group, 7 into two, 6 into three).
  const Instance wide("classes18.json", "grpo_small.json");
  CHECK(planner::exhaustive_allocation_count(wide.model, {}) == 408056545757.0);
  CHECK_THROWS_WITH_AS(planner::plan_exhaustive(wide.model, catalogs().models),
                       "the exhaustive planner would try 408056545757 allocations of the 18 nodes to groups, more than "
                       "its limit of 2000000; use it on fewer nodes or tasks, or another planner",
                       core::JobError);
  CHECK(planner::exhaustive_plan_count(wide.model, catalogs().models, {}) > 16 * 2'000'000LL);
}

TEST_CASE("colocated roles that share an architecture each hold their own weights and state") {
  // PPO with actor, critic and reference all Qwen2.5-1.5B, every task on one 8-GPU node, TP 1:
  // each GPU holds the actor's training state and generation weights, the critic's training
  // state, and the reference's weights; the actor's and critic's forward passes reuse the
  // trained weights unless ZeRO-3 shards them (then they hold their own copy; the actor's
  // forward shares the generation's).
  const hw::Cluster cluster = testing::make_cluster({"a:8xA100-SXM-80G"});
  const workload::Workload w = testing::ppo("Qwen2.5-1.5B", 64, 512, 512, 2);
  const workload::TaskGraph graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
  const cost::CostModel model(cluster, w, graph, catalogs().models);
  const planner::PlannerResult r = planner::plan_verl(model, catalogs().models, planner::all_nodes(cluster));
  REQUIRE(r.found);
  REQUIRE(r.plan.groups.size() == 1);
  for (const plan::TaskPlacement& t : r.plan.groups[0].tasks) REQUIRE(t.replicas.front().stages.size() == 1);
  // What one stage of each task needs, from the cost model.
  auto memory = [&](const char* name) {
    const int task = graph.find(name);
    for (const plan::TaskPlacement& t : r.plan.groups[0].tasks) {
      if (t.task != task) continue;
      const plan::Stage& s = t.replicas.front().stages[0];
      const std::vector<cost::Stage> stages{{s.node, static_cast<int>(s.devices.size()), s.layers}};
      return model.stage_memory(task, stages, 0, static_cast<int>(t.replicas.size()), t.train);
    }
    FAIL("no task " << name);
    return cost::StageMemory{};
  };
  const cost::StageMemory actor = memory("actor_train"), critic = memory("critic_train");
  const cost::StageMemory generate = memory("generate"), reference = memory("ref_logprob");
  REQUIRE(actor.weights > 0);
  REQUIRE(critic.weights > 0);
  plan::Evaluator evaluator(model);
  REQUIRE(evaluator.evaluate(r.plan).feasible);
  const plan::MemoryUse use = evaluator.gpu_memory(0)[0];
  const cost::StageMemory logprob = memory("actor_logprob"), value = memory("critic_value");
  const bool actor_sharded = (actor.layout & cost::kShardedLayout) != 0;
  const bool critic_sharded = (critic.layout & cost::kShardedLayout) != 0;
  CHECK(use.weights ==
        hetrl::testing::approx(actor.weights + (actor_sharded ? std::max(generate.weights, logprob.weights) : generate.weights) +
                        critic.weights + (critic_sharded ? value.weights : 0.0) + reference.weights));
  CHECK(use.gradients == hetrl::testing::approx(actor.gradients + critic.gradients));
  CHECK(use.optimizer == hetrl::testing::approx(actor.optimizer + critic.optimizer));
}

TEST_CASE("one goal judges every planner's plans: the objective, then the constraints") {
  plan::Prediction fast, cheap, broken;
  fast.feasible = cheap.feasible = true;
  fast.samples_per_second = 10;
  fast.price_per_hour = 3600;  // 0.1 $ per sample
  cheap.samples_per_second = 4;
  cheap.price_per_hour = 720;  // 0.05 $ per sample
  CHECK(*cheap.dollars_per_sample() == hetrl::testing::approx(0.05));
  planner::Goal goal;
  CHECK(goal.better(fast, cheap));
  CHECK(goal.score(broken) == -std::numeric_limits<double>::infinity());
  goal.objective = planner::Objective::kCostPerSample;
  CHECK(goal.better(cheap, fast));
  goal.budget_per_hour = 500;
  CHECK_FALSE(goal.accepts(cheap));
  goal.budget_per_hour.reset();
  goal.min_throughput = 5;
  CHECK_FALSE(goal.accepts(cheap));
  CHECK(goal.accepts(fast));
  CHECK(goal.better(fast, cheap));  // the cheap one misses the floor
  CHECK(goal.constrained());
}

namespace {

// "... 674.9 GiB over ..." -> 674.9
double gib_over(const std::string& why) {
  const std::size_t at = why.find(" GiB over");
  REQUIRE(at != std::string::npos);
  const std::size_t from = why.rfind(' ', at - 1) + 1;
  return std::stod(why.substr(from, at - from));
}

}  // namespace

TEST_CASE("an infeasible plan names its GPU furthest over capacity, and the baselines the plan closest to fitting") {
  const Instance x("tiny_t4.json", "grpo_72b.json");
  // verl's first strategy (TP1 PP1 ZeRO-1 on both T4s), evaluated alone.
  plan::Plan first;
  first.groups.emplace_back();
  first.groups[0].gpus = planner::gpus_of(x.in.cluster, std::vector<int>{0});
  for (int t : x.in.graph.gpu_tasks()) {
    plan::TaskPlacement placement;
    placement.task = t;
    REQUIRE(planner::uniform_replicas(x.in.cluster, std::vector<int>{0}, 1, 1,
                                      catalogs().models.get(x.in.graph.tasks[t].model, "").layers, placement.replicas));
    first.groups[0].tasks.push_back(placement);
  }
  plan::Evaluator evaluator(x.model);
  const plan::Prediction p = evaluator.evaluate(first);
  REQUIRE_FALSE(p.feasible);
  // The reported GPU is the group's worst: its overflow is the largest of any GPU's.
  for (const plan::MemoryUse& use : evaluator.gpu_memory(0)) {
    CHECK((use.used() - use.capacity) / use.capacity <= p.overflow + 1e-12);
  }
  const planner::PlannerResult verl = planner::plan_verl(x.model, catalogs().models, planner::all_nodes(x.in.cluster));
  REQUIRE_FALSE(verl.found);
  CHECK(verl.evaluations > 1);
  CHECK(gib_over(verl.why_not) < gib_over(p.infeasible));
}

TEST_CASE("a trainer that overlaps its gradient sync finishes its training task earlier by what its compute hides") {
  // Two A100 nodes across regions, every task as one TP 8 replica a node: the training's sync
  // crosses the 10 Gbps link, far longer than what the compute hides.
  const hw::Cluster cluster = testing::make_cluster({"us-east-1a:8xA100-SXM-80G", "us-west-2a:8xA100-SXM-80G"});
  const workload::Workload w = testing::ppo("Qwen2.5-0.5B", 64, 512, 512, 2);
  cost::CostParams overlapped;
  overlapped.dp_overlap = true;
  const testing::Fixture plain(cluster, w), over(cluster, w, overlapped);
  const std::vector<int> nodes{0, 1};
  plan::Plan p;
  p.groups.emplace_back();
  p.groups[0].gpus = planner::gpus_of(cluster, nodes);
  for (int t : plain.graph.gpu_tasks()) {
    plan::TaskPlacement placement;
    placement.task = t;
    REQUIRE(planner::uniform_replicas(cluster, nodes, 8, 1, plain.model.shape(t).layers, placement.replicas));
    p.groups[0].tasks.push_back(placement);
  }
  plan::Evaluator plain_evaluator(plain.model), over_evaluator(over.model);
  const plan::Prediction before = plain_evaluator.evaluate(p);
  const plan::Prediction after = over_evaluator.evaluate(p);
  REQUIRE(before.feasible);
  REQUIRE(after.feasible);
  // The cost model's own sync, exposed and whole, over the plan's two replicas.
  const int train = plain.task("actor_train");
  const std::vector<cost::Stage> a{{0, 8, 24}}, b{{1, 8, 24}};
  const std::vector<std::span<const cost::Stage>> replicas{a, b};
  const cost::SyncOverlap hidden = over.model.gradient_sync_overlap(train, a, w.samples_per_iteration() / 2.0, {});
  cost::Breakdown whole, exposed;
  const double saved = plain.model.gradient_sync_seconds(train, replicas, {}, whole) -
                       over.model.gradient_sync_seconds(train, replicas, {}, exposed, hidden);
  CHECK(saved > 0);
  CHECK(before.tasks[train].seconds - after.tasks[train].seconds == hetrl::testing::approx(saved).epsilon(1e-9));
  // The other tasks are priced alike.
  const int generate = plain.task("generate");
  CHECK(before.tasks[generate].seconds == after.tasks[generate].seconds);
}

TEST_CASE("an infeasible plan names the GPU furthest over capacity, not the first found over it") {
  // Node 0 (an A100) is over its capacity, node 1 (an L4, with less memory and the same load)
  // further over it.
  const testing::Fixture f(testing::make_cluster({"us-east-1a:1xA100-SXM-80G", "us-east-1a:1xL4"}),
                           testing::ppo("Qwen2.5-7B", 64, 512, 512, 1));
  const std::vector<int> nodes{0, 1};
  plan::Plan p;
  p.groups.emplace_back();
  p.groups[0].gpus = planner::gpus_of(f.cluster, nodes);
  for (int t : f.graph.gpu_tasks()) {
    plan::TaskPlacement placement;
    placement.task = t;
    REQUIRE(planner::uniform_replicas(f.cluster, nodes, 1, 1, f.model.shape(t).layers, placement.replicas));
    p.groups[0].tasks.push_back(placement);
  }
  plan::Evaluator evaluator(f.model);
  const plan::Prediction& prediction = evaluator.evaluate(p);
  REQUIRE_FALSE(prediction.feasible);
  const plan::MemoryUse a100 = evaluator.gpu_memory(0)[0];  // the first GPU found over
  CHECK(a100.used() > a100.capacity);
  CHECK(prediction.infeasible.find("(L4, group 0)") != std::string::npos);
  CHECK(prediction.overflow > (a100.used() - a100.capacity) / a100.capacity);
}

TEST_CASE("an infeasible plan names the GPU furthest over capacity in any group, not in the first group over") {
  // Group 0 (the forward passes and generation on an A100) is a little over its capacity; group
  // 1 (both trainings on an L4) far over it. A plan is as close to fitting as its GPU furthest
  // over: making group 1 fit must not make the plan look further off (the search's repairs
  // follow that figure).
  const testing::Fixture f(testing::make_cluster({"us-east-1a:1xA100-SXM-40G", "us-east-1a:1xL4"}),
                           testing::ppo("Qwen2.5-7B", 64, 512, 512, 1));
  plan::Plan p;
  for (int node : {0, 1}) {
    p.groups.emplace_back();
    p.groups.back().gpus = planner::gpus_of(f.cluster, std::vector<int>{node});
  }
  for (int t : f.graph.gpu_tasks()) {
    const int group = f.graph.tasks[t].kind == workload::TaskKind::kTrain ? 1 : 0;
    plan::TaskPlacement placement;
    placement.task = t;
    REQUIRE(planner::uniform_replicas(f.cluster, std::vector<int>{group}, 1, 1, f.model.shape(t).layers,
                                      placement.replicas));
    p.groups[static_cast<std::size_t>(group)].tasks.push_back(placement);
  }
  plan::Evaluator evaluator(f.model);
  const plan::Prediction& prediction = evaluator.evaluate(p);
  REQUIRE_FALSE(prediction.feasible);
  const plan::MemoryUse a100 = evaluator.gpu_memory(0)[0];
  const plan::MemoryUse l4 = evaluator.gpu_memory(1)[0];
  REQUIRE(a100.used() > a100.capacity);
  REQUIRE((l4.used() - l4.capacity) / l4.capacity > (a100.used() - a100.capacity) / a100.capacity);
  CHECK(prediction.infeasible.find("(L4, group 1)") != std::string::npos);
  CHECK(prediction.overflow == doctest::Approx((l4.used() - l4.capacity) / l4.capacity));
}

TEST_CASE("rejections say why nothing met the goal: the closest to fitting, or the constraint missed") {
  plan::Prediction near, far, slow, dear;
  near.infeasible = "near";
  near.overflow = 0.1;
  far.infeasible = "far";
  far.overflow = 0.7;
  slow.feasible = dear.feasible = true;
  slow.samples_per_second = 2;
  slow.price_per_hour = 10;
  dear.samples_per_second = 8;
  dear.price_per_hour = 50;
  planner::Goal goal;
  planner::Rejections none;
  CHECK(none.why_not(goal) == "no candidate could be laid out on the cluster");
  planner::Rejections memory;
  memory.see(far);
  memory.see(near);
  memory.see(far);
  CHECK(memory.why_not(goal) == "near");
  goal.budget_per_hour = 5;
  goal.min_throughput = 10;
  planner::Rejections constrained;
  constrained.see(far);
  constrained.see(slow);
  constrained.see(dear);
  const std::string why = constrained.why_not(goal);
  CHECK(why.find("no plan meets the constraints") == 0);
  CHECK(why.find("the cheapest plan that fits costs 10.00 $/h, over the budget of 5 $/h") != std::string::npos);
  CHECK(why.find("the fastest plan that fits reaches 8 samples/s, under the minimum of 10") != std::string::npos);
}

TEST_CASE("a budget below the cheapest node is refused at once, naming the price") {
  const Instance x("valid.json", "grpo_small.json");
  planner::Goal goal;
  goal.budget_per_hour = 0.01;
  const std::optional<std::string> why = goal.unreachable(x.in.cluster);
  REQUIRE(why);
  CHECK(why->find("the budget of 0.01 $/h is below the price of the cheapest node") == 0);
  goal.budget_per_hour = 1e6;
  CHECK_FALSE(goal.unreachable(x.in.cluster));
}

TEST_CASE("an offloading group holds one task's state at a time and pays its reload and offload") {
  const io::Inputs in = io::load_inputs(std::string(HETRL_TEST_DATA) + "/h100_64.json",
                                        std::string(HETRL_TEST_DATA) + "/grpo_70b.json", catalogs());
  const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
  plan::Plan resident = io::read_plan(std::string(HETRL_TEST_DATA) + "/plan_70b_resident.json", in.cluster, in.graph,
                                      in.workload.models);
  const plan::Plan offload = io::read_plan(std::string(HETRL_TEST_DATA) + "/plan_70b_offload.json", in.cluster,
                                           in.graph, in.workload.models);
  REQUIRE(offload.groups[0].offload);
  plan::Evaluator evaluator(model);
  CHECK_FALSE(evaluator.evaluate(resident).feasible);
  const plan::Prediction& p = evaluator.evaluate(offload, true);
  REQUIRE(p.feasible);
  // actor_train's state on one GPU: ZeRO-1 over 8 TP-8 replicas of Llama-3.1-70B.
  const int train = in.graph.find("actor_train");
  const std::vector<cost::Stage> tp8{{0, 8, 80}};
  const double state = model.stage_memory(train, tp8, 0, 8, {1, cost::Recompute::kFull}).resident();
  const auto& terms = p.tasks[train].terms;
  const auto moved = std::find_if(terms.begin(), terms.end(), [](const cost::Breakdown::Term& t) {
    return std::string(t.name) == "offload and reload (host memory)";
  });
  REQUIRE(moved != terms.end());
  CHECK(moved->seconds == hetrl::testing::approx(2 * state / model.params().host_bandwidth));
  // The tightest GPU holds no more than the largest single task needs.
  CHECK(p.groups[0].tightest.used() <= p.groups[0].tightest.capacity);
  CHECK(p.groups[0].tightest.used() >= state);
}

TEST_CASE("a plan's planner record is read by name") {
  plan::PlannerInfo info;
  info.params = {{"seed", "7"}, {"status", "optimal"}};
  info.stats = {{"gap", 0.25}, {"evaluations", 12}};
  CHECK(info.param("status") == "optimal");
  CHECK(info.param("seed") == "7");
  CHECK_FALSE(info.param("objective"));
  CHECK(info.stat("evaluations") == 12);
  CHECK(info.stat("gap") == 0.25);
  CHECK_FALSE(info.stat("rounds"));
}

TEST_CASE("repricing a plan whose shares changed predicts what a full evaluation does") {
  const Instance x("small3.json", "grpo_tiny.json");
  const planner::PlannerResult best = planner::plan_exhaustive(x.model, catalogs().models);
  REQUIRE(best.found);
  const io::Inputs in = io::load_inputs(std::string(HETRL_TEST_DATA) + "/h100_64.json",
                                        std::string(HETRL_TEST_DATA) + "/grpo_70b.json", catalogs());
  const cost::CostModel offload_model(in.cluster, in.workload.workload, in.graph, in.workload.models);
  const plan::Plan offload = io::read_plan(std::string(HETRL_TEST_DATA) + "/plan_70b_offload.json", in.cluster,
                                           in.graph, in.workload.models);
  const std::vector<std::pair<const cost::CostModel*, plan::Plan>> cases{{&x.model, best.plan},
                                                                         {&offload_model, offload}};
  std::mt19937 rng(5);
  int repriced_replicas = 0;
  for (const auto& [model, original] : cases) {
    plan::Evaluator evaluator(*model);
    plan::Evaluator fresh(*model);
    plan::Plan p = original;
    REQUIRE(evaluator.evaluate(p, true).feasible);
    for (int trial = 0; trial < 5; ++trial) {
      for (plan::Group& g : p.groups) {
        for (plan::TaskPlacement& placement : g.tasks) {
          double total = 0;
          for (plan::Replica& r : placement.replicas) total += r.share = 0.5 + static_cast<double>(rng() % 100);
          for (plan::Replica& r : placement.replicas) r.share /= total;
          repriced_replicas += placement.replicas.size() > 1 ? 1 : 0;
        }
      }
      const plan::Prediction& a = evaluator.reprice(p);
      const plan::Prediction& b = fresh.evaluate(p);
      REQUIRE(a.feasible);
      CHECK(a.samples_per_second == b.samples_per_second);
      CHECK(a.iteration_seconds == b.iteration_seconds);
      CHECK(a.makespan_seconds == b.makespan_seconds);
      for (std::size_t t = 0; t < a.tasks.size(); ++t) {
        CHECK(a.tasks[t].seconds == b.tasks[t].seconds);
        CHECK(a.tasks[t].start == b.tasks[t].start);
        CHECK(a.tasks[t].replica_seconds == b.tasks[t].replica_seconds);
        CHECK(a.tasks[t].terms.empty());
      }
      for (std::size_t g = 0; g < a.groups.size(); ++g) CHECK(a.groups[g].busy_seconds == b.groups[g].busy_seconds);
    }
  }
  CHECK(repriced_replicas > 0);
}

TEST_CASE("the plan pricer gives what realize, balance_shares and evaluate give, group by group from its cache") {
  // Random group choices, many seen again in other positions and plans; some do not fit
  // (7B models on 24 GB L4s) or cannot compute in the precision (T4s and bf16).
  const Instance a("small3.json", "grpo_7b.json");
  const Instance b("small3.json", "grpo_tiny.json");
  workload::Workload bf16 = testing::ppo("Qwen2.5-0.5B", 8, 64, 64, 1);
  bf16.precision = workload::Precision::kBf16;
  const testing::Fixture c(testing::make_cluster({"a:2xT4", "a:4xA100-SXM-80G", "b:4xL4"}), bf16);
  const std::vector<std::pair<const cost::CostModel*, const workload::TaskGraph*>> instances{
      {&a.model, &a.in.graph}, {&b.model, &b.in.graph}, {&c.model, &c.graph}};
  int fit = 0, unfit = 0, precision = 0, not_laid_out = 0;
  for (const auto& [model, graph] : instances) {
    planner::PlanPricer pricer(*model, catalogs().models);
    plan::Evaluator evaluator(*model);
    std::mt19937 rng(3);
    const std::vector<int> tasks = graph->gpu_tasks();
    const auto partitions = planner::partitions(tasks, 3);
    const int nodes = static_cast<int>(model->cluster().nodes.size());
    // A small pool of groups to draw from, so plans share groups.
    std::vector<std::vector<planner::GroupChoice>> plans;
    for (int trial = 0; trial < 200; ++trial) {
      const auto& partition = partitions[rng() % partitions.size()];
      std::vector<planner::GroupChoice> groups(partition.size());
      for (std::size_t g = 0; g < partition.size(); ++g) groups[g].tasks = partition[g];
      for (int n = 0; n < nodes; ++n) {
        const std::size_t owner = rng() % (groups.size() + 1);  // the last: unused
        if (owner < groups.size()) groups[owner].nodes.push_back(n);
      }
      bool ok = true;
      for (planner::GroupChoice& g : groups) {
        ok = ok && !g.nodes.empty();
        for (int t : g.tasks) {
          if (!ok) break;
          const auto choices = planner::task_choices(*model, catalogs().models, {}, t, g.nodes);
          if (choices.empty()) {
            ok = false;
            break;
          }
          g.choices.push_back(choices[rng() % choices.size()]);
        }
      }
      if (ok) plans.push_back(groups);
    }
    REQUIRE(plans.size() > 10);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<planner::GroupChoice> groups = plans[rng() % plans.size()];
      std::shuffle(groups.begin(), groups.end(), rng);
      plan::Plan expected;
      const bool laid_out = planner::realize(*model, catalogs().models, groups, expected);
      const planner::PlanPricer::Outcome outcome = pricer.price(groups);
      if (!laid_out) {
        CHECK(outcome == planner::PlanPricer::Outcome::kNotLaidOut);
        ++not_laid_out;
        continue;
      }
      const plan::Prediction want = planner::balance_shares(evaluator, expected, 1);
      const plan::Prediction& got = pricer.prediction();
      REQUIRE(outcome == (want.feasible ? planner::PlanPricer::Outcome::kFit : planner::PlanPricer::Outcome::kUnfit));
      CHECK(got.feasible == want.feasible);
      CHECK(got.overflow == want.overflow);
      CHECK(got.infeasible == want.infeasible);
      CHECK(got.price_per_hour == want.price_per_hour);
      if (!want.feasible) {
        ++(want.overflow == std::numeric_limits<double>::infinity() ? precision : unfit);
        // Unexplained, from its groups' cached figures alone: the same overflow.
        double asked = -1;
        CHECK(pricer.price(groups, [&](double overflow) {
          asked = overflow;
          return false;
        }) == planner::PlanPricer::Outcome::kUnfit);
        CHECK(asked == want.overflow);
        CHECK(pricer.prediction().overflow == want.overflow);
        continue;
      }
      ++fit;
      CHECK(pricer.plan().groups == expected.groups);
      CHECK(got.samples_per_second == want.samples_per_second);
      CHECK(got.iteration_seconds == want.iteration_seconds);
      CHECK(got.makespan_seconds == want.makespan_seconds);
      for (std::size_t t = 0; t < want.tasks.size(); ++t) {
        CHECK(got.tasks[t].group == want.tasks[t].group);
        CHECK(got.tasks[t].seconds == want.tasks[t].seconds);
        CHECK(got.tasks[t].start == want.tasks[t].start);
        CHECK(got.tasks[t].replica_seconds == want.tasks[t].replica_seconds);
      }
      REQUIRE(got.groups.size() == want.groups.size());
      for (std::size_t g = 0; g < want.groups.size(); ++g) {
        CHECK(got.groups[g].busy_seconds == want.groups[g].busy_seconds);
        CHECK(got.groups[g].tightest.gpu == want.groups[g].tightest.gpu);
        CHECK(got.groups[g].tightest.used() == want.groups[g].tightest.used());
      }
    }
  }
  CHECK(fit > 100);
  CHECK(unfit > 10);
  CHECK(precision > 10);
}

TEST_CASE("node classes move alone while their choices are few, else by GPU type and region, else by GPU type") {
  // Six classes: L4 in two zones of one region and one of another, A10G likewise.
  const hw::Cluster cluster = testing::make_cluster({"us-east-1a:8xL4", "us-east-1b:8xL4", "us-west-2a:8xL4",
                                            "us-east-1a:8xA10G", "us-east-1b:8xA10G", "us-west-2a:8xA10G"});
  const std::vector<std::vector<int>> classes = cluster.node_classes().members;
  REQUIRE(classes.size() == 6);
  const auto sizes = [](const std::vector<std::vector<int>>& units) {
    std::vector<std::size_t> out;
    for (const auto& u : units) out.push_back(u.size());
    std::sort(out.begin(), out.end());
    return out;
  };
  const auto at_most = [](std::size_t most) { return [most](std::size_t units) { return units <= most; }; };
  CHECK(planner::class_units(cluster, classes, at_most(6)).size() == 6);
  const std::vector<std::vector<int>> by_region = planner::class_units(cluster, classes, at_most(5));
  CHECK(sizes(by_region) == std::vector<std::size_t>{1, 1, 2, 2});
  for (const std::vector<int>& unit : by_region) {
    for (int c : unit) {
      const hw::Node& first = cluster.nodes[classes[unit.front()].front()];
      const hw::Node& node = cluster.nodes[classes[c].front()];
      CHECK(node.gpu_type == first.gpu_type);
      CHECK(cluster.zones[node.zone].region == cluster.zones[first.zone].region);
    }
  }
  CHECK(sizes(planner::class_units(cluster, classes, at_most(3))) == std::vector<std::size_t>{3, 3});
}

TEST_CASE("a rate too small to price makes a plan infeasible, never a plan of infinite times") {
  // The loaders refuse such rates (core::kSmallestQuantity); a cluster built in code can hold
  // one: the second node's NIC moves 1e-320 bytes a second, so any plan that crosses it takes
  // forever.
  hw::Cluster cluster = testing::make_cluster({"us-east-1a:2x8xA100-SXM-80G"});
  REQUIRE(cluster.nodes.size() == 2);
  cluster.nodes[1].nic_bandwidth = 1e-320;
  const testing::Fixture f(cluster, testing::ppo("Qwen2.5-1.5B", 64, 512, 512, 1));
  // verl spreads every task over both nodes: every plan it composes is refused, and says why.
  const planner::PlannerResult verl = planner::plan_verl(f.model, catalogs().models, {0, 1});
  CHECK_FALSE(verl.found);
  CHECK(verl.why_not == "a predicted time is not finite: a rate of the cluster is too small to price");
  // Hybrid keeps to one node, whose traffic stays inside it, with finite times and shares.
  const core::FakeClock still;
  const planner::PlannerResult hybrid = planner::plan_hybrid(f.model, catalogs().models, {}, still);
  REQUIRE(hybrid.found);
  CHECK(std::isfinite(hybrid.prediction.iteration_seconds));
  std::set<int> nodes;
  for (const plan::Group& g : hybrid.plan.groups) {
    for (const plan::Gpu& gpu : g.gpus) nodes.insert(gpu.node);
    for (const plan::TaskPlacement& t : g.tasks) {
      for (const plan::Replica& r : t.replicas) CHECK(std::isfinite(r.share));
    }
  }
  CHECK(nodes.size() == 1);
}
