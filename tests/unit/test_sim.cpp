#include <doctest/doctest.h>

#include "approx.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/units.h"
#include "hw/cluster_builder.h"
#include "io/catalog_io.h"
#include "plan/periodic.h"
#include "sim/event_queue.h"
#include "sim/generation.h"
#include "sim/simulator.h"
#include "workload/rl_graph.h"

using namespace hetrl;

namespace {

// Seed 1; with link contention or without.
sim::SimParams params(int iterations, bool contention) {
  sim::SimParams p;
  p.iterations = iterations;
  p.link_contention = contention;
  return p;
}

// The largest weight / shift over the cycles, by bisection: T is below it exactly when the
// weights w - T x shift hold a positive cycle (Bellman-Ford still relaxing after n rounds).
double period_by_bisection(int nodes, const std::vector<plan::CycleEdge>& edges) {
  const auto positive_cycle = [&](double t) {
    std::vector<double> longest(nodes, 0.0);
    for (int round = 0; round <= nodes; ++round) {
      bool changed = false;
      for (const plan::CycleEdge& e : edges) {
        const double candidate = longest[e.from] + e.weight - e.shift * t;
        if (candidate > longest[e.to] + 1e-12) {
          longest[e.to] = candidate;
          changed = true;
        }
      }
      if (!changed) return false;
    }
    return true;
  };
  double low = 0, high = 1;
  for (const plan::CycleEdge& e : edges) high += e.weight;
  if (!positive_cycle(0)) return 0;
  for (int step = 0; step < 200; ++step) {
    const double mid = (low + high) / 2;
    (positive_cycle(mid) ? low : high) = mid;
  }
  return low;
}

}  // namespace

TEST_CASE("events run in time order, ties in the order they were scheduled") {
  sim::EventQueue queue;
  std::string order;
  queue.at(2, [&] { order += "a"; });
  queue.at(1, [&] { order += "b"; });
  queue.at(1, [&] {
    order += "c";
    queue.after(0.5, [&] { order += "e"; });  // at 1.5, before "a"
  });
  queue.at(3, [&] { order += "d"; });
  CHECK(queue.run() == 5);
  CHECK(order == "bcead");
  CHECK(queue.now() == 3);
  CHECK(queue.empty());
}

namespace {

const io::Catalogs& catalogs() { return io::builtin_catalogs(); }

workload::ResponseLengths fixed_response(int tokens) {
  workload::ResponseLengths r;
  r.kind = workload::LengthKind::kFixed;
  r.fixed_tokens = tokens;
  return r;
}

// `lengths` in a random order of `seed` (Fisher-Yates on mt19937_64, whose output the standard
// fixes, so the order is the same with every standard library).
std::vector<int> shuffled(std::vector<int> lengths, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (std::size_t i = lengths.size(); i > 1; --i) std::swap(lengths[i - 1], lengths[rng() % i]);
  return lengths;
}

// Seconds the simulator takes to generate `lengths` on one A100 with room for `slots`
// sequences of 512 + 512 tokens (Qwen2.5-7B), and the closed form's for as many sequences.
struct QueuedRun {
  double simulated = 0;
  double closed = 0;
  std::uint64_t steps = 0;
};

struct Generation {
  hw::Cluster cluster;
  workload::Workload workload;
  workload::TaskGraph graph;
  cost::CostModel model;
  int task;
  explicit Generation(int prompts, workload::ResponseLengths response = fixed_response(512))
      : cluster([] {
          hw::ClusterBuildParams p = hw::default_build_params(catalogs().hardware);
          p.node_groups.push_back(hw::parse_node_spec("a:8xA100-SXM-80G", catalogs().hardware));
          return hw::build_cluster(p, catalogs().hardware);
        }()),
        workload([&] {
          workload::Workload w;
          w.algorithm = "grpo";
          w.role(workload::Role::kActor) = {workload::RoleModel::Kind::kModel, "Qwen2.5-7B"};
          w.role(workload::Role::kReward).kind = workload::RoleModel::Kind::kRule;
          w.prompts_per_iteration = prompts;
          w.samples_per_prompt = 2;
          w.prompt_length_tokens = 512;
          w.response = response;
          return w;
        }()),
        graph(workload::build_task_graph(workload, catalogs().algorithms, catalogs().models)),
        model(cluster, workload, graph, catalogs().models),
        task(graph.find("generate")) {}
};

}  // namespace

TEST_CASE("generation with fixed lengths and room for every sequence matches the closed form") {
  const Generation g(4);  // 8 sequences of 512 + 512 tokens
  const std::vector<cost::Stage> one{{0, 1, 28}};
  const std::vector<double> budget{50 * core::kGiB};
  sim::EventQueue queue;
  sim::ReplicaGeneration replica(g.model, g.task, one, budget, std::vector<int>(8, 512));
  bool done = false;
  replica.start(queue, [&] { done = true; });
  queue.run();
  REQUIRE(done);
  CHECK(replica.steps() == 511);  // the first token of each is prefill's
  cost::Breakdown closed;
  g.model.replica_seconds(g.task, one, 8, 1, {}, budget, closed);
  CHECK(replica.finished_at() / closed.total() == hetrl::testing::approx(1.0).epsilon(0.02));
  CHECK(replica.tail_seconds() == 0);  // every sequence runs to the end together
}

TEST_CASE("sequences queued for the cache: the closed form reads the cache at the steps' mean context as simulated") {
  // 512 sequences of 512 + 512 tokens through a cache of 128: four waves, each step reading
  // the KV cache of contexts from 513 to 1023. The closed form prices the waves after the
  // first at the mean of those contexts (at their final length it was 3.7% slower).
  const Generation g(256);
  const std::vector<cost::Stage> one{{0, 1, 28}};
  const double per_token = 28 * 2 * 4 * 128 * 2.0;  // Qwen2.5-7B: 28 layers, 4 KV heads of 128
  const std::vector<double> budget{g.model.generation_workspace(g.task, one[0]) + 128 * 1024 * per_token};
  REQUIRE(g.model.concurrent_sequences(g.task, one, budget) == hetrl::testing::approx(128));
  sim::EventQueue queue;
  sim::ReplicaGeneration replica(g.model, g.task, one, budget, std::vector<int>(512, 512));
  replica.start(queue, [] {});
  queue.run();
  CHECK(replica.steps() == 4 * 511);
  cost::Breakdown closed;
  g.model.replica_seconds(g.task, one, 512, 1, {}, budget, closed);
  CHECK(replica.finished_at() / closed.total() == hetrl::testing::approx(1.0).epsilon(0.01));
}

namespace {

QueuedRun queued_run(const Generation& g, int slots, const std::vector<int>& lengths) {
  const std::vector<cost::Stage> one{{0, 1, 28}};
  const double per_token = 28 * 2 * 4 * 128 * 2.0;  // 28 layers, 4 KV heads of 128
  const std::vector<double> budget{g.model.generation_workspace(g.task, one[0]) + slots * 1024 * per_token};
  REQUIRE(g.model.concurrent_sequences(g.task, one, budget) == hetrl::testing::approx(slots));
  sim::EventQueue queue;
  sim::ReplicaGeneration replica(g.model, g.task, one, budget, lengths);
  replica.start(queue, [] {});
  queue.run();
  cost::Breakdown closed;
  g.model.replica_seconds(g.task, one, static_cast<double>(lengths.size()), 1, {}, budget, closed);
  return {replica.finished_at(), closed.total(), replica.steps()};
}

}  // namespace

TEST_CASE("fixed lengths through a cache that holds a fraction of a wave: the last wave runs part full") {
  // 512 sequences of 512 + 512 tokens, 100 at once: five full waves and one of 12 sequences
  // (the batch of 100 throughout, 5.12 waves, was 11% fast).
  const Generation g(256);
  const QueuedRun run = queued_run(g, 100, std::vector<int>(512, 512));
  CHECK(run.steps == 6 * 511);
  CHECK(run.simulated / run.closed == hetrl::testing::approx(1.0).epsilon(0.005));
  // 150 at once: three full waves and 62 sequences.
  const QueuedRun more = queued_run(g, 150, std::vector<int>(512, 512));
  CHECK(more.steps == 4 * 511);
  CHECK(more.simulated / more.closed == hetrl::testing::approx(1.0).epsilon(0.005));
}

TEST_CASE("spread lengths queued for the cache: the closed form follows the slots out of step") {
  // Responses of 100 and 900 tokens, half each in a random order (the trace's distribution
  // with the same work): the slots fall out of step, and when the queue empties their
  // sequences are at every age, the last ones fresh. 2, 2.7, 4 and 6.4 waves.
  workload::ResponseLengths two;
  two.kind = workload::LengthKind::kTrace;
  two.trace = {100, 900};
  const Generation g(512, two);
  std::vector<int> lengths(1024, 100);
  std::fill(lengths.begin() + 512, lengths.end(), 900);
  for (int slots : {512, 384, 256, 160}) {
    CAPTURE(slots);
    double simulated = 0, closed = 0;
    for (std::uint64_t seed : {1, 2, 3}) {
      const QueuedRun run = queued_run(g, slots, shuffled(lengths, seed));
      simulated += run.simulated;
      closed += run.closed;
    }
    CHECK(simulated / closed == hetrl::testing::approx(1.0).epsilon(0.01));
  }
}

TEST_CASE("lognormal lengths queued for the cache: the closed form within 1.5% of the simulated mean") {
  // Four draws of 1,024 lengths (mean 500, sigma 0.5, clamped at 2,048), 2.7 and 6.4 waves:
  // the mean of the simulated times against the closed form's expectation.
  workload::ResponseLengths spread;
  spread.kind = workload::LengthKind::kLognormal;
  spread.mean_tokens = 500;
  spread.max_tokens = 2048;
  spread.sigma = 0.5;
  const Generation g(512, spread);
  for (int slots : {384, 160}) {
    CAPTURE(slots);
    double simulated = 0, closed = 0;
    for (std::uint64_t seed : {1, 2, 3, 4}) {
      const QueuedRun run = queued_run(g, slots, spread.sample(1024, seed));
      simulated += run.simulated;
      closed += run.closed;
    }
    CHECK(simulated / closed == hetrl::testing::approx(1.0).epsilon(0.015));
  }
}

TEST_CASE("prefill gives every sequence its first token: responses of one token take no decode step") {
  const Generation g(2);
  const std::vector<cost::Stage> one{{0, 1, 28}};
  sim::EventQueue queue;
  sim::ReplicaGeneration replica(g.model, g.task, one, {50 * core::kGiB}, {1, 1, 1, 1});
  bool done = false;
  replica.start(queue, [&] { done = true; });
  queue.run();
  REQUIRE(done);
  CHECK(replica.steps() == 0);
  CHECK(replica.finished_at() == replica.prefill_seconds());
  CHECK(replica.prefill_seconds() > 0);
  // One of two tokens among them: one step, of a batch of one.
  sim::EventQueue mixed_queue;
  sim::ReplicaGeneration mixed(g.model, g.task, one, {50 * core::kGiB}, {1, 2, 1, 1});
  mixed.start(mixed_queue, [] {});
  mixed_queue.run();
  CHECK(mixed.steps() == 1);
}

TEST_CASE("the KV cache caps the batch: sequences wait and run in waves") {
  const Generation g(4);
  const std::vector<cost::Stage> one{{0, 1, 28}};
  // Room for two sequences of 512 + 512 tokens: 28 layers x 2 x 4 KV heads x 128 x 2 bytes.
  const double per_token = 28 * 2 * 4 * 128 * 2.0;
  const std::vector<double> small{2.5 * 1024 * per_token + g.model.generation_workspace(g.task, one[0])};
  sim::EventQueue queue;
  sim::ReplicaGeneration replica(g.model, g.task, one, small, std::vector<int>(8, 512));
  replica.start(queue, [] {});
  queue.run();
  CHECK(replica.concurrency() == 2);
  CHECK(replica.steps() == 4 * 511);  // four waves; each sequence's first token is its prefill's
  sim::EventQueue roomy_queue;
  sim::ReplicaGeneration roomy(g.model, g.task, one, {50 * core::kGiB}, std::vector<int>(8, 512));
  roomy.start(roomy_queue, [] {});
  roomy_queue.run();
  CHECK(replica.finished_at() > 2 * roomy.finished_at());
}

TEST_CASE("one long response holds the replica: the drain is the long tail") {
  const Generation g(2);
  const std::vector<cost::Stage> one{{0, 1, 28}};
  sim::EventQueue queue;
  sim::ReplicaGeneration replica(g.model, g.task, one, {50 * core::kGiB}, {2000, 10, 10, 10});
  replica.start(queue, [] {});
  queue.run();
  CHECK(replica.steps() == 1999);  // the first token is prefill's
  // After step 9 only the long sequence runs: 1990 of 1999 steps are tail.
  CHECK(replica.tail_seconds() > 0.99 * (replica.finished_at() - replica.prefill_seconds()) * 1990 / 1999);
}

#include "core/clock.h"
#include "io/inputs.h"
#include "planner/hybrid.h"
#include "sim/simulator.h"

namespace {

struct Counter final : sim::Listener {
  int tasks = 0;
  int replicas = 0;
  void task_done(const sim::TaskRun&) override { ++tasks; }
  void replica_done(const sim::ReplicaRun&) override { ++replicas; }
};

}  // namespace

TEST_CASE("with fixed lengths and no contention the simulated iteration matches the cost model within 2% (sync)") {
  // Async: the cost model's period (the busiest group, or the chain over k + 1 iterations) is a
  // lower bound that the simulated pipeline may not reach.
  for (const std::string mode : {"sync", "async"}) {
    CAPTURE(mode);
    io::Inputs in = io::load_inputs(std::string(HETRL_TEST_DATA) + "/valid.json",
                                    std::string(HETRL_TEST_DATA) + "/grpo_small.json", catalogs());
    workload::Workload& w = in.workload.workload;
    w.response.kind = workload::LengthKind::kFixed;
    w.response.fixed_tokens = 700;
    if (mode == "async") {
      w.mode = workload::Mode::kAsync;
      w.max_staleness = 1;
    }
    in.graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
    const cost::CostModel model(in.cluster, w, in.graph, catalogs().models);
    const core::FakeClock clock;
    const planner::PlannerResult r = planner::plan_hybrid(model, catalogs().models, {}, clock);
    REQUIRE(r.found);
    Counter counter;
    std::vector<sim::Listener*> listeners{&counter};
    // No link contention: every transfer moves as if alone, as the cost model assumes. Five
    // iterations: the four intervals between their ends span whole periods of an async
    // schedule, which may repeat every staleness + 1 = 2 iterations (alternating intervals).
    const sim::SimSummary s = sim::simulate(model, r.plan, params(5, false), listeners);
    REQUIRE(s.iteration_end.size() == 5);
    // Transfers that share links can only take longer.
    const sim::SimSummary shared = sim::simulate(model, r.plan, params(5, true));
    CHECK(shared.iteration_seconds >= s.iteration_seconds * (1 - 1e-9));
    if (mode == "sync") {
      CHECK(s.iteration_seconds / r.prediction.iteration_seconds == hetrl::testing::approx(1.0).epsilon(0.02));
    } else {
      CHECK(s.iteration_seconds >= 0.98 * r.prediction.iteration_seconds);
    }
    CHECK(counter.tasks == 5 * static_cast<int>(in.graph.tasks.size()));
    CHECK(counter.replicas > 0);
    CHECK(s.events > 1000);
  }
}

#include <fmt/format.h>

#include "io/plan_io.h"
#include "sim/recorder.h"

TEST_CASE("a run past its deadline stops at the first check after it, saying how many iterations ended") {
  const io::Inputs in = io::load_inputs(std::string(HETRL_TEST_DATA) + "/valid.json",
                                        std::string(HETRL_TEST_DATA) + "/grpo_small.json", catalogs());
  const cost::CostModel model(in.cluster, in.workload.workload, in.graph, catalogs().models);
  const core::FakeClock planning;
  const planner::PlannerResult r = planner::plan_hybrid(model, catalogs().models, {}, planning);
  REQUIRE(r.found);
  sim::SimParams run = params(40, true);
  const sim::SimSummary whole = sim::simulate(model, r.plan, run);
  CHECK_FALSE(whole.stopped);
  CHECK(whole.iteration_end.size() == 40);
  REQUIRE(whole.events > 4 * sim::EventQueue::kStopCheck);
  // A clock that reads 1, 2, 3, ... s: the third check passes a deadline of 3 s.
  const core::FakeClock clock(1.0);
  std::vector<int> told;
  run.deadline = {&clock, 3.0};
  run.progress = [&](int done) { told.push_back(done); };
  const sim::SimSummary stopped = sim::simulate(model, r.plan, run);
  CHECK(stopped.stopped);
  CHECK(stopped.events == 3 * sim::EventQueue::kStopCheck);
  CHECK(stopped.iteration_end.size() < 40);
  REQUIRE(told.size() == 3);
  CHECK(std::is_sorted(told.begin(), told.end()));
  CHECK(told.back() == static_cast<int>(stopped.iteration_end.size()));
  // The iterations that ended before the stop ended when they do in the whole run.
  for (std::size_t i = 0; i < stopped.iteration_end.size(); ++i) {
    CHECK(stopped.iteration_end[i] == whole.iteration_end[i]);
  }
}

TEST_CASE("transfers that leave together share the links, the links carry every byte") {
  const io::Inputs in = io::load_inputs(std::string(HETRL_TEST_DATA) + "/valid.json",
                                        std::string(HETRL_TEST_DATA) + "/grpo_small.json", catalogs());
  const cost::CostModel model(in.cluster, in.workload.workload, in.graph, catalogs().models);
  // Generation on a100-0 (us-east); scoring and training on a100-1 (us-east) and h100-0
  // (us-west): generation's four outputs cross to group 1 at once, half of each over the
  // cross-region link, and the weights come back.
  const plan::Plan p = io::read_plan(std::string(HETRL_TEST_DATA) + "/plan_hand.json", in.cluster,
                                     in.graph, catalogs().models);
  std::vector<cost::CostModel::GpuSet> sets(2);
  for (int g = 0; g < 2; ++g) {
    std::vector<int> per_node(in.cluster.nodes.size(), 0);
    for (const plan::Gpu& gpu : p.groups[g].gpus) ++per_node[gpu.node];
    model.describe_gpu_set(per_node, sets[g]);
  }
  for (const bool contention : {false, true}) {
    CAPTURE(contention);
    sim::Recorder recorder;
    std::vector<sim::Listener*> listeners{&recorder};
    const sim::SimSummary s = sim::simulate(model, p, params(2, contention), listeners);
    int from_generation = 0;
    double out_of[2] = {0, 0};
    for (const sim::TransferRun& t : recorder.transfers) {
      out_of[t.from_group] += t.bytes;
      if (in.graph.tasks[t.from_task].kind != workload::TaskKind::kGenerate) continue;
      ++from_generation;
      const double alone = model.transfer_seconds(t.bytes, sets[0], sets[1]);
      // Alone a transfer takes the cost model's time; four at once on the cross-region link
      // (which binds: half of the bytes cross it) each get a quarter of it.
      const hw::LinkSpec across = in.cluster.zone_path(in.cluster.nodes[p.groups[0].gpus[0].node].zone,
                                                       in.cluster.nodes[p.groups[1].gpus.back().node].zone)
                                      .link;
      const double moving = t.bytes / 2 / across.bandwidth;
      CHECK(alone == hetrl::testing::approx(moving + across.latency).epsilon(1e-9));
      const double expected = contention ? across.latency + 4 * moving : alone;
      CHECK(t.end - t.start == hetrl::testing::approx(expected).epsilon(1e-9));
    }
    CHECK(from_generation == 2 * 4);
    // Every byte sent out of a group went through its NICs.
    for (int g = 0; g < 2; ++g) {
      CHECK(out_of[g] > 0);
      CHECK(s.links[2 * g].name == fmt::format("group {} NICs out", g));
      CHECK(s.link_use[2 * g].bytes == hetrl::testing::approx(out_of[g]).epsilon(1e-9));
    }
  }
}

#include "fixtures.h"

namespace {

// Two groups of one 8-GPU node each (nodes 0 and 1), each task of a group eight TP1 replicas
// of all 28 layers (Qwen2.5-1.5B) with even shares; validated.
plan::Plan one_node_each(const testing::Fixture& f, std::initializer_list<const char*> first,
                         std::initializer_list<const char*> second) {
  plan::Plan p;
  p.groups.resize(2);
  for (int g = 0; g < 2; ++g) {
    for (int d = 0; d < 8; ++d) p.groups[g].gpus.push_back({g, d});
    for (const char* name : g == 0 ? first : second) {
      plan::TaskPlacement& t = p.groups[g].tasks.emplace_back();
      t.task = f.task(name);
      for (int d = 0; d < 8; ++d) t.replicas.push_back({{{g, {d}, 28}}, 1.0 / 8});
    }
  }
  p.validate(f.cluster, f.graph, testing::catalogs().models);
  return p;
}

}  // namespace

TEST_CASE("a forward pass waits for the weights its role was trained to in another group, sent over the links") {
  // PPO with Qwen2.5-1.5B everywhere; everything but critic_train on an A100 node in us-east,
  // critic_train on one in us-west (10 Gbps, 32 ms between the regions): the critic's 3 GB of
  // weights cross back every iteration before the next critic_value.
  const testing::Fixture f(testing::make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400",
                                                  "us-west-2a:8xA100-SXM-80G:nic_gbps=400"}),
                           testing::ppo("Qwen2.5-1.5B", 64, 512, 512, 1));
  const plan::Plan p =
      one_node_each(f, {"generate", "actor_logprob", "ref_logprob", "critic_value", "actor_train"}, {"critic_train"});

  plan::Evaluator evaluator(f.model);
  const plan::Prediction& prediction = evaluator.evaluate(p, true);
  REQUIRE(prediction.feasible);
  cost::CostModel::GpuSet east, west;
  f.model.describe_gpu_set(std::vector<int>{8, 0}, east);
  f.model.describe_gpu_set(std::vector<int>{0, 8}, west);
  const double bytes = 2.0 * f.model.shape(f.task("critic_train")).total_params();
  cost::Breakdown unused;
  const double weights = f.model.weight_transfer_seconds(bytes, west, east, unused);
  CHECK(weights > 2.0);  // 3 GB at 10 Gbps
  const plan::TaskPrediction& value = prediction.tasks[f.task("critic_value")];
  const auto received = std::find_if(value.terms.begin(), value.terms.end(), [](const cost::Breakdown::Term& t) {
    return std::string(t.name) == "(receives its trained weights from another group)";
  });
  REQUIRE(received != value.terms.end());
  CHECK(received->seconds == hetrl::testing::approx(weights));
  // The cycle critic_train -> weights -> critic_value -> GAE -> critic_train bounds the period.
  const auto seconds = [&](const char* name) { return prediction.tasks[f.task(name)].seconds; };
  CHECK(prediction.iteration_seconds >= seconds("critic_train") + weights + seconds("critic_value") - 1e-9);

  // The simulator sends them too, and starts each critic_value only once they are in.
  sim::Recorder recorder;
  std::vector<sim::Listener*> listeners{&recorder};
  sim::simulate(f.model, p, params(3, false), listeners);
  int sent = 0;
  for (const sim::TransferRun& t : recorder.transfers) {
    if (t.from_task != f.task("critic_train")) continue;
    if (t.to_task != f.task("critic_value")) continue;
    ++sent;
    CHECK(t.bytes == hetrl::testing::approx(bytes));
    CHECK(t.end - t.start == hetrl::testing::approx(weights).epsilon(1e-9));
    double value_start = -1;
    for (const sim::TaskRun& run : recorder.tasks) {
      if (run.task == f.task("critic_value") && run.iteration == t.iteration + 1) value_start = run.start;
    }
    REQUIRE(value_start >= 0);
    CHECK(value_start >= t.end - 1e-9);
  }
  CHECK(sent == 2);  // after iterations 0 and 1; iteration 2 has no successor
}

TEST_CASE("the weights reach a generation group on two nodes no faster than its slowest NIC") {
  // PPO with Qwen2.5-1.5B: generation on two A100 nodes of one zone, one behind a 10 Gbps
  // NIC; every other task on a third node. The trained actor's 3 GB are broadcast inside the
  // generation group, node to node, so the slow NIC paces them although the group's NICs
  // together take 410 Gbps.
  const testing::Fixture f(testing::make_cluster({"a:8xA100-SXM-80G:nic_gbps=400", "a:8xA100-SXM-80G:nic_gbps=10",
                                                  "a:8xA100-SXM-80G:nic_gbps=400"}),
                           testing::ppo("Qwen2.5-1.5B", 64, 512, 512, 1));
  plan::Plan p;
  p.groups.resize(2);
  for (int n = 0; n < 3; ++n) {
    for (int d = 0; d < 8; ++d) p.groups[n < 2 ? 0 : 1].gpus.push_back({n, d});
  }
  plan::TaskPlacement& generate = p.groups[0].tasks.emplace_back();
  generate.task = f.task("generate");
  for (int n = 0; n < 2; ++n) {
    for (int d = 0; d < 8; ++d) generate.replicas.push_back({{{n, {d}, 28}}, 1.0 / 16});
  }
  for (const char* name : {"actor_logprob", "ref_logprob", "critic_value", "actor_train", "critic_train"}) {
    plan::TaskPlacement& t = p.groups[1].tasks.emplace_back();
    t.task = f.task(name);
    for (int d = 0; d < 8; ++d) t.replicas.push_back({{{2, {d}, 28}}, 1.0 / 8});
  }
  p.validate(f.cluster, f.graph, testing::catalogs().models);
  plan::Evaluator evaluator(f.model);
  REQUIRE(evaluator.evaluate(p).feasible);
  const workload::WeightSync sync = f.graph.weight_sync();
  sim::Recorder recorder;
  std::vector<sim::Listener*> listeners{&recorder};
  sim::simulate(f.model, p, params(2, true), listeners);
  int sent = 0;
  for (const sim::TransferRun& t : recorder.transfers) {
    if (t.from_task != sync.trainer || t.to_task != sync.task) continue;
    ++sent;
    CHECK(t.end - t.start >= sync.bytes / (10e9 / 8));
    CHECK(t.end - t.start < 1.01 * sync.bytes / (10e9 / 8) + 0.01);
  }
  CHECK(sent == 1);  // after iteration 0; iteration 1 has no successor
}

TEST_CASE("the weight sync loads the new weights on generation's GPUs, in turn with generation, and async overlaps their transfer") {
  // PPO with Qwen2.5-1.5B everywhere (reward a rule): generation alone on an A100 node in
  // us-east, every other task on one in us-west (10 Gbps, 32 ms between the regions). The
  // actor's 3 GB of weights cross to us-east every iteration; generation's group then loads
  // them from host memory before it generates.
  const hw::Cluster cluster = testing::make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400",
                                                     "us-west-2a:8xA100-SXM-80G:nic_gbps=400"});
  std::map<std::string, double> period;
  for (const std::string mode : {"sync", "async"}) {
    CAPTURE(mode);
    const workload::Workload w = testing::in_mode(testing::ppo("Qwen2.5-1.5B", 64, 512, 512, 1), mode);
    const testing::Fixture f(cluster, w);
    const plan::Plan p =
        one_node_each(f, {"generate"}, {"actor_logprob", "ref_logprob", "critic_value", "actor_train", "critic_train"});

    plan::Evaluator evaluator(f.model);
    const plan::Prediction& prediction = evaluator.evaluate(p, true);
    REQUIRE(prediction.feasible);
    const workload::WeightSync sync = f.graph.weight_sync();
    const plan::TaskPrediction& loaded = prediction.tasks[sync.task];
    const auto term = [&](const char* name) {
      const auto it = std::find_if(loaded.terms.begin(), loaded.terms.end(),
                                   [&](const cost::Breakdown::Term& t) { return std::string(t.name) == name; });
      return it == loaded.terms.end() ? -1.0 : it->seconds;
    };
    // Each GPU loads its whole TP1 replica (3 GB) from host memory.
    const double shard = 2.0 * f.model.shape(f.task("generate")).total_params();
    CHECK(loaded.seconds == hetrl::testing::approx(shard / cost::CostParams{}.host_bandwidth));
    CHECK(term("weight load from host memory") == hetrl::testing::approx(loaded.seconds));
    cost::CostModel::GpuSet east, west;
    f.model.describe_gpu_set(std::vector<int>{8, 0}, east);
    f.model.describe_gpu_set(std::vector<int>{0, 8}, west);
    cost::Breakdown unused;
    const double transfer = f.model.weight_transfer_seconds(sync.bytes, west, east, unused);
    CHECK(transfer > 2.0);  // 3 GB at 10 Gbps
    CHECK(term("(waits for the weight transfer to the generation group)") == hetrl::testing::approx(transfer));
    // Generation's group is busy generating and loading, and no group is busy for longer
    // than an iteration.
    const auto seconds = [&](const char* name) { return prediction.tasks[f.task(name)].seconds; };
    CHECK(prediction.groups[0].busy_seconds == hetrl::testing::approx(seconds("generate") + loaded.seconds));
    for (const plan::GroupPrediction& g : prediction.groups) CHECK(g.busy_seconds <= prediction.iteration_seconds + 1e-9);
    // Synchronous, the loop of one iteration passes through the transfer and the load; one
    // step off-policy, the transfer runs while generation works on the next iteration.
    const double loop = seconds("generate") + seconds("actor_logprob") + seconds("actor_train") + transfer + loaded.seconds;
    if (mode == "sync") {
      CHECK(prediction.iteration_seconds >= loop - 1e-9);
    } else {
      CHECK(prediction.iteration_seconds < loop - transfer / 2);
    }
    period[mode] = prediction.iteration_seconds;

    // The simulator sends the weights over the links and loads them on generation's group
    // before the generation that reads them, 1 + staleness iterations after their training.
    sim::Recorder recorder;
    std::vector<sim::Listener*> listeners{&recorder};
    const sim::SimSummary s = sim::simulate(f.model, p, params(6, false), listeners);
    const int lag = mode == "sync" ? 1 : 2;
    int sent = 0;
    for (const sim::TransferRun& t : recorder.transfers) {
      if (t.from_task != sync.trainer || t.to_task != sync.task) continue;
      ++sent;
      CHECK(t.end - t.start == hetrl::testing::approx(transfer).epsilon(1e-9));
      for (const sim::TaskRun& run : recorder.tasks) {
        if (run.task == sync.task && run.iteration == t.iteration + lag) {
          CHECK(run.group == 0);
          CHECK(run.start >= t.end - 1e-9);
        }
        if (run.task == sync.reader && run.iteration == t.iteration + lag) {
          for (const sim::TaskRun& load : recorder.tasks) {
            if (load.task == sync.task && load.iteration == run.iteration) CHECK(run.start >= load.end - 1e-9);
          }
        }
      }
    }
    CHECK(sent == 6 - lag);
    CHECK(s.group_busy[0] == hetrl::testing::approx(6 * (seconds("generate") + loaded.seconds)).epsilon(0.01));
    // Sync within 2%; async the simulated pipeline runs 2.3% under the cost model's period here
    // (3.130 against 3.205 s).
    CHECK(s.iteration_seconds == hetrl::testing::approx(prediction.iteration_seconds).epsilon(mode == "sync" ? 0.02 : 0.03));
  }
  CHECK(period["async"] < period["sync"]);
}

TEST_CASE("a group runs its tasks one at a time: forwards that are ready together queue on its GPUs") {
  // PPO with Qwen2.5-1.5B: generation alone on one A100 node, the three forward passes and both
  // trainings on a second node in the same zone. Once generation ends, actor_logprob,
  // ref_logprob and critic_value are all ready; the second node runs them in turn.
  // One step off-policy, the next iteration's generation is ready while this one's runs: it
  // waits for its turn too.
  for (const std::string mode : {"sync", "async"}) {
    CAPTURE(mode);
    const workload::Workload w = testing::in_mode(testing::ppo("Qwen2.5-1.5B", 64, 512, 512, 1), mode);
    const testing::Fixture f(testing::make_cluster({"us-east-1a:2x8xA100-SXM-80G:nic_gbps=400"}), w);
    const plan::Plan p =
        one_node_each(f, {"generate"}, {"actor_logprob", "ref_logprob", "critic_value", "actor_train", "critic_train"});
    sim::Recorder recorder;
    std::vector<sim::Listener*> listeners{&recorder};
    sim::simulate(f.model, p, params(3, false), listeners);
    for (int g = 0; g < 2; ++g) {
      CAPTURE(g);
      std::vector<sim::TaskRun> runs;
      for (const sim::TaskRun& r : recorder.tasks) {
        if (r.group == g) runs.push_back(r);
      }
      std::sort(runs.begin(), runs.end(), [](const sim::TaskRun& a, const sim::TaskRun& b) { return a.start < b.start; });
      REQUIRE(runs.size() >= 3);
      for (std::size_t i = 1; i < runs.size(); ++i) {
        CAPTURE(i);
        CHECK(runs[i].start >= runs[i - 1].end - 1e-9);
      }
    }
    // The three forward passes of an iteration: each starts when the one before it ends.
    const int forwards[] = {f.task("actor_logprob"), f.task("ref_logprob"), f.task("critic_value")};
    for (int iteration = 0; iteration < 3; ++iteration) {
      std::vector<sim::TaskRun> runs;
      for (const sim::TaskRun& r : recorder.tasks) {
        if (r.iteration == iteration && std::count(std::begin(forwards), std::end(forwards), r.task)) runs.push_back(r);
      }
      REQUIRE(runs.size() == 3);
      std::sort(runs.begin(), runs.end(), [](const sim::TaskRun& a, const sim::TaskRun& b) { return a.start < b.start; });
      CHECK(runs[1].start == hetrl::testing::approx(runs[0].end));
      CHECK(runs[2].start == hetrl::testing::approx(runs[1].end));
    }
  }
}

TEST_CASE("the steady state's period is the largest weight / shift over the cycles of the task graph") {
  plan::PeriodSolver solver;
  SUBCASE("a chain and its turn back: the busy time; two rings, the slower") {
    // 0 -> 1 -> 2 in one group (turn back 2 -> 0, shift 1), 3 -> 4 in another.
    std::vector<plan::CycleEdge> edges = {{0, 1, 2.0, 0}, {1, 2, 3.0, 0}, {2, 0, 4.0, 1},
                                          {3, 4, 1.0, 0}, {4, 3, 1.5, 1}};
    const std::vector<int> order = {0, 1, 2, 3, 4};
    CHECK(solver.period(5, edges, order) == hetrl::testing::approx(9.0));
    // Data from the first ring to the second, weights back two iterations behind: the cycle
    // through both is longer and spread over two iterations, and still the slowest.
    edges.push_back({2, 3, 4.0, 0});
    edges.push_back({4, 0, 20.0, 2});
    // Cycles: 0-1-2 (9 / 1); 3-4 (2.5 / 1); 0-1-2-3-4-0: (2 + 3 + 4 + 1 + 20) / 2 = 15.
    CHECK(solver.period(5, edges, order) == hetrl::testing::approx(15.0));
  }
  SUBCASE("no cycle: 0") {
    const std::vector<plan::CycleEdge> edges = {{0, 1, 2.0, 0}, {1, 2, 3.0, 1}};
    const std::vector<int> order = {0, 1, 2};
    CHECK(solver.period(3, edges, order) == 0.0);
  }
  SUBCASE("a time too large to price: an infinite period on a cycle, none off every cycle") {
    const double forever = std::numeric_limits<double>::infinity();
    // Node 2, which nothing reaches, into node 1: bounds nothing.
    std::vector<plan::CycleEdge> edges = {{0, 1, 2.0, 0}, {1, 0, 3.0, 1}, {2, 1, forever, 1}};
    const std::vector<int> order = {0, 1, 2};
    CHECK(solver.period(3, edges, order) == hetrl::testing::approx(5.0));
    edges.push_back({1, 2, 1.0, 0});
    CHECK(solver.period(3, edges, order) == forever);
  }
  SUBCASE("random graphs: as bisection finds it") {
    std::mt19937 random(7);
    std::uniform_real_distribution<double> seconds(0.0, 10.0);
    for (int trial = 0; trial < 300; ++trial) {
      const int n = 2 + trial % 11;
      const double dense = 0.15 + 0.1 * (trial % 7);
      std::bernoulli_distribution edge(dense);
      std::uniform_int_distribution<int> lag(1, 3);
      std::vector<plan::CycleEdge> edges;
      std::vector<int> order(n);
      for (int v = 0; v < n; ++v) order[v] = v;
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          if (a < b && edge(random)) edges.push_back({a, b, seconds(random), 0});
          if (edge(random)) edges.push_back({a, b, seconds(random), lag(random)});
        }
      }
      CAPTURE(trial);
      const double expected = period_by_bisection(n, edges);
      CHECK(solver.period(n, edges, order) == hetrl::testing::approx(expected).epsilon(1e-9));
    }
  }
}
