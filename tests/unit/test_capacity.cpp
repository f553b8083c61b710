// Capacity planning (planner/capacity.h): the search's cheapest cluster and front against
// planning every cluster of the market, on random small markets with the hybrid planner as the
// oracle and on larger ones with a throughput made up in code; the clusters a market makes;
// clusters alike but for their zones' names.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <string>

#include "approx.h"
#include "fixtures.h"
#include "planner/capacity.h"
#include "planner/hybrid.h"

using namespace hetrl;
using testing::catalogs;

namespace {

const core::FakeClock kStill;

// A small deterministic generator (the same numbers on every standard library).
struct Random {
  std::uint64_t state;
  int below(int n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % static_cast<std::uint64_t>(n));
  }
};

planner::Offer offer(const std::string& spec, double price, int max_new, int existing = 0) {
  planner::Offer o;
  o.node = hw::parse_node_spec(spec, catalogs().hardware);
  o.what = spec;
  o.price = price;
  o.max_new = max_new;
  o.existing = existing;
  return o;
}

planner::Market market_of(std::vector<planner::Offer> offers) {
  planner::Market m;
  m.name = "test";
  m.offers = std::move(offers);
  m.network = hw::default_build_params(catalogs().hardware);
  return m;
}

void check_same(const std::optional<planner::CapacityPoint>& a, const std::optional<planner::CapacityPoint>& b) {
  REQUIRE(a.has_value() == b.has_value());
  if (!a) return;
  CHECK(a->usd_per_hour == testing::approx(b->usd_per_hour));
  CHECK(a->samples_per_second == testing::approx(b->samples_per_second));
}

void check_same_front(const std::vector<planner::CapacityPoint>& a, const std::vector<planner::CapacityPoint>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    check_same(a[i], b[i]);
  }
}

// The front by its definition: every cluster of the market, cheapest first (of equal price the
// fastest), each kept when it is faster than every cheaper one (beyond rounding: sums of the same
// rates in another order), up to the first reaching the target.
std::vector<planner::CapacityPoint> front_by_definition(const planner::Market& market, const planner::Oracle& oracle,
                                                        double target) {
  std::vector<planner::CapacityPoint> all;
  planner::Counts c(market.offers.size(), 0);
  for (;;) {
    if (planner::has_nodes(market, c)) all.push_back({c, planner::rent_per_hour(market, c), oracle(c)});
    std::size_t i = 0;
    while (i < c.size() && c[i] == market.offers[i].max_new) c[i++] = 0;
    if (i == c.size()) break;
    ++c[i];
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.usd_per_hour != b.usd_per_hour ? a.usd_per_hour < b.usd_per_hour : a.samples_per_second > b.samples_per_second;
  });
  std::vector<planner::CapacityPoint> front;
  for (const planner::CapacityPoint& p : all) {
    if (p.samples_per_second <= (front.empty() ? 0.0 : front.back().samples_per_second * (1 + 1e-9))) continue;
    front.push_back(p);
    if (p.samples_per_second >= target) break;
  }
  return front;
}

}  // namespace

TEST_CASE("capacity: the search finds what planning every cluster finds, on 24 random small markets") {
  // A workload that fits some single GPUs and not others, so that some clusters have no plan.
  const workload::Workload w = testing::ppo("Qwen2.5-0.5B", 32, 256, 256, 2);
  const workload::TaskGraph graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
  const std::vector<std::string> pool = {"us-east-1a:1xA100-SXM-80G", "us-east-1a:2xL40S", "us-east-1b:2xL4",
                                         "eu-west-1a:1xH100-SXM",     "us-east-1a:2xA10G", "us-east-1b:1xA100-SXM-80G"};
  Random random{2024};
  int reached = 0, missed = 0, pruned = 0;
  for (int m = 0; m < 24; ++m) {
    CAPTURE(m);
    std::vector<planner::Offer> offers;
    const int count = 2 + random.below(2);
    for (int i = 0; i < count; ++i) {
      const std::string& spec = pool[static_cast<std::size_t>(random.below(static_cast<int>(pool.size())))];
      offers.push_back(offer(spec, 1 + random.below(40) / 4.0, random.below(3) + (i == 0 ? 1 : 0),
                             random.below(6) == 0 ? 1 : 0));
    }
    const planner::Market market = market_of(offers);
    const auto plan = [&](const hw::Cluster& cluster) {
      const cost::CostModel model(cluster, w, graph, catalogs().models);
      // A shorter search than the tool's (the first 64 candidates), the same on every run: the
      // question is whether the capacity search finds what planning every cluster finds.
      planner::HybridParams hp;
      hp.evaluation_budget = 300;
      hp.max_candidates = 64;
      const planner::PlannerResult r = planner::plan_hybrid(model, catalogs().models, hp, kStill);
      return r.found ? r.prediction.samples_per_second : 0.0;
    };
    // Every cluster planned once, by counts, for both.
    std::map<planner::Counts, double> seen;
    const planner::Oracle oracle = [&](const planner::Counts& c) {
      const auto known = seen.find(c);
      if (known != seen.end()) return known->second;
      const double s = plan(planner::market_cluster(market, c, catalogs().hardware, "test"));
      seen.emplace(c, s);
      return s;
    };
    // A target between the slowest and a tenth past the fastest cluster.
    const planner::ExhaustiveCapacity any = planner::exhaustive_capacity(market, oracle, 1e9);
    if (!any.result.fastest) continue;
    const double fastest = any.result.fastest->samples_per_second;
    const double target = fastest * (0.3 + random.below(9) / 10.0);
    CAPTURE(target);
    const planner::ExhaustiveCapacity all = planner::exhaustive_capacity(market, oracle, target);
    long long calls = 0;
    // The search plans each structure once, through the tool's oracle.
    const auto plan_counted = [&](const hw::Cluster& cluster) {
      ++calls;
      return plan(cluster);
    };
    planner::CapacitySearch search(market, planner::planning_oracle(market, catalogs().hardware, plan_counted),
                                   core::Deadline{});
    const planner::CapacityResult found = search.cheapest(target);
    CHECK(found.proven);
    check_same(found.cheapest, all.result.cheapest);
    bool proven = false;
    check_same_front(search.front(target, &proven), all.front);
    CHECK(proven);
    (found.cheapest ? reached : missed) += 1;
    if (calls < all.result.planned) ++pruned;
  }
  // The markets cover both answers, and the search plans fewer clusters than there are.
  CHECK(reached >= 12);
  CHECK(missed >= 2);
  CHECK(pruned >= 12);
}

TEST_CASE("capacity: the search equals planning every cluster on 200 larger markets of a made-up throughput") {
  // A throughput that grows with nodes but not additively: the least of a generation rate and
  // a training rate, each a sum over offers, and nothing below a memory floor.
  Random random{7};
  for (int m = 0; m < 200; ++m) {
    CAPTURE(m);
    std::vector<planner::Offer> offers;
    std::vector<double> gen, train;
    const int count = 2 + random.below(3);
    for (int i = 0; i < count; ++i) {
      offers.push_back(offer(i % 2 == 0 ? "us-east-1a:8xA100-SXM-80G" : "us-east-1b:8xL40S", 1 + random.below(50),
                             random.below(6), random.below(8) == 0 ? 1 : 0));
      gen.push_back(random.below(10));
      train.push_back(random.below(10));
    }
    const planner::Market market = market_of(offers);
    const planner::Oracle oracle = [&](const planner::Counts& c) {
      double g = 0, t = 0;
      int nodes = 0;
      for (std::size_t i = 0; i < c.size(); ++i) {
        const int n = c[i] + market.offers[i].existing;
        g += gen[i] * n;
        t += train[i] * n * (1 + 0.1 * n);
        nodes += n;
      }
      return nodes < 2 ? 0.0 : std::min(g, t);
    };
    const double target = 1 + random.below(60);
    CAPTURE(target);
    const planner::ExhaustiveCapacity all = planner::exhaustive_capacity(market, oracle, target);
    planner::CapacitySearch search(market, oracle, core::Deadline{});
    const planner::CapacityResult found = search.cheapest(target);
    CHECK(found.proven);
    check_same(found.cheapest, all.result.cheapest);
    bool proven = false;
    const std::vector<planner::CapacityPoint> front = search.front(target, &proven);
    check_same_front(front, all.front);
    check_same_front(front, front_by_definition(market, oracle, target));
  }
}

TEST_CASE("capacity: a search stopped by its time limit says so, with a bound no cheaper cluster beats") {
  const planner::Market market =
      market_of({offer("us-east-1a:8xA100-SXM-80G", 10, 6), offer("us-east-1b:8xL40S", 7, 6)});
  const planner::Oracle oracle = [](const planner::Counts& c) { return 2.0 * c[0] + 1.0 * c[1]; };
  const planner::ExhaustiveCapacity all = planner::exhaustive_capacity(market, oracle, 9);
  REQUIRE(all.result.cheapest);
  // Each reading of the clock a second later; the search may read it a few times only.
  const core::FakeClock clock(1);
  planner::CapacitySearch search(market, oracle, core::Deadline{&clock, 4});
  const planner::CapacityResult stopped = search.cheapest(9);
  CHECK_FALSE(stopped.proven);
  CHECK(stopped.lower_bound <= all.result.cheapest->usd_per_hour + 1e-9);
  if (stopped.cheapest) CHECK(stopped.cheapest->usd_per_hour >= all.result.cheapest->usd_per_hour - 1e-9);
  // Without a limit it ends, proven.
  planner::CapacitySearch whole(market, oracle, core::Deadline{});
  const planner::CapacityResult done = whole.cheapest(9);
  CHECK(done.proven);
  check_same(done.cheapest, all.result.cheapest);
  CHECK(done.lower_bound == testing::approx(all.result.cheapest->usd_per_hour));
}

TEST_CASE("capacity: a market's cluster has the nodes paid for and rented, priced, and the links of its zones") {
  planner::Market market = market_of({offer("us-east-1a:8xA100-SXM-80G", 40, 3, 1), offer("eu-west-1a:8xL40S", 30, 2),
                                      offer("us-west-2a:4xL4", 5, 2)});
  market.network.links.push_back(hw::parse_link_spec("us-east-1a,eu-west-1a:gbps=5,latency_ms=40", catalogs().hardware));
  market.network.links.push_back(hw::parse_link_spec("us-east-1a,us-west-2a:gbps=7,latency_ms=30", catalogs().hardware));
  const hw::Cluster c = planner::market_cluster(market, {2, 1, 0}, catalogs().hardware, "x");
  CHECK(c.nodes.size() == 4);  // 1 paid + 2 rented A100 nodes, 1 L40S node
  CHECK(c.zones.size() == 2);
  REQUIRE(c.network.links.size() == 1);  // the link to us-west-2a, which has no nodes, left out
  CHECK(c.network.links[0].link.bandwidth == testing::approx(5 * core::kGbps));
  CHECK(c.total_gpus() == 32);
  CHECK(planner::market_gpus(market, {2, 1, 0}) == 32);
  CHECK(planner::rent_per_hour(market, {2, 1, 0}) == testing::approx(2 * 40 + 30));
  REQUIRE(c.price_per_hour());
  CHECK(*c.price_per_hour() == testing::approx(3 * 40 + 30));  // the cluster prices the paid node too
  CHECK(planner::gpus_text(market, {2, 1, 0}) == "24 A100-SXM-80G + 8 L40S");
  CHECK_FALSE(planner::has_nodes(market_of({offer("us-east-1a:8xL4", 5, 2)}), {0}));
}

TEST_CASE("capacity: clusters alike but for their zones' names share a structure key, and no others") {
  const auto cluster = [](const std::vector<std::string>& nodes, const std::vector<std::string>& links) {
    hw::ClusterBuildParams params = hw::default_build_params(catalogs().hardware);
    for (const std::string& spec : nodes) params.node_groups.push_back(hw::parse_node_spec(spec, catalogs().hardware));
    for (const std::string& spec : links) params.links.push_back(hw::parse_link_spec(spec, catalogs().hardware));
    return planner::structure_key(hw::build_cluster(params, catalogs().hardware));
  };
  const std::string a = cluster({"us-east-1a:2x8xA100-SXM-80G", "us-east-1b:8xL40S"}, {});
  // The same in other zones of one region, listed the other way round.
  CHECK(cluster({"eu-west-1c:8xL40S", "eu-west-1b:2x8xA100-SXM-80G"}, {}) == a);
  // A node more, another GPU, another NIC, another region, another link: each differs.
  CHECK(cluster({"us-east-1a:3x8xA100-SXM-80G", "us-east-1b:8xL40S"}, {}) != a);
  CHECK(cluster({"us-east-1a:2x8xA100-SXM-40G", "us-east-1b:8xL40S"}, {}) != a);
  CHECK(cluster({"us-east-1a:2x8xA100-SXM-80G", "us-east-1b:8xL40S:nic_gbps=400"}, {}) != a);
  CHECK(cluster({"us-east-1a:2x8xA100-SXM-80G", "eu-west-1a:8xL40S"}, {}) != a);
  CHECK(cluster({"us-east-1a:2x8xA100-SXM-80G", "us-east-1b:8xL40S"}, {"us-east-1a,us-east-1b:gbps=1,latency_ms=9"}) != a);
  // Two zones alike: the key names them.
  CHECK(cluster({"us-east-1a:8xL40S", "us-east-1b:8xL40S"}, {}) != cluster({"us-east-1a:8xL40S", "us-east-1c:8xL40S"}, {}));
}
