// The simulator's network: transfers alone take the cost model's time; at the same time they
// share links max-min fairly, worked out by hand here.

#include <doctest/doctest.h>

#include "approx.h"

#include <vector>

#include "fixtures.h"
#include "sim/event_queue.h"
#include "sim/network.h"

using namespace hetrl;
using namespace hetrl::testing;

namespace {

// Group g is node g's 8 GPUs. Nodes 0, 1 and 3 share a zone in one region, node 2 is in
// another region (the catalogue's cross-region link: 10 Gbps, 32 ms). NICs: 400 Gbps, node 3's
// 100 Gbps.
struct Net {
  Fixture f{make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400",
                          "us-east-1a:8xA100-SXM-80G:nic_gbps=400",
                          "us-west-2a:8xA100-SXM-80G:nic_gbps=400",
                          "us-east-1a:8xA100-SXM-80G:nic_gbps=100"}),
            ppo("Qwen2.5-0.5B", 64, 512, 512, 1)};
  std::vector<cost::CostModel::GpuSet> sets;
  sim::EventQueue queue;
  sim::Network network;
  std::vector<double> done_at;

  explicit Net(bool contention = true)
      : sets(groups(f.model)), network(queue, f.model, sets, contention) {}

  static std::vector<cost::CostModel::GpuSet> groups(const cost::CostModel& model) {
    std::vector<cost::CostModel::GpuSet> out(4);
    for (int g = 0; g < 4; ++g) {
      std::vector<int> per_node(4, 0);
      per_node[g] = 8;
      model.describe_gpu_set(per_node, out[g]);
    }
    return out;
  }
  // Starts a transfer at `at`; its arrival time lands in done_at[index].
  void transfer(double at, double bytes, int from, int to, int index) {
    if (done_at.size() <= static_cast<std::size_t>(index)) done_at.resize(index + 1, -1);
    queue.at(at, [this, bytes, from, to, index] {
      network.start(bytes, from, to, std::numeric_limits<double>::infinity(),
                    [this, index] { done_at[index] = queue.now(); });
    });
  }
};

constexpr double kNic = 400e9 / 8;        // bytes/s
constexpr double kSlowNic = 100e9 / 8;
constexpr double kRegionLink = 10e9 / 8;
constexpr double kZoneLatency = 0.015e-3;  // the same-zone preset
constexpr double kRegionLatency = 0.032;

}  // namespace

TEST_CASE("a transfer alone takes the cost model's transfer time") {
  for (const auto& [from, to] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{3, 0}}) {
    CAPTURE(from);
    CAPTURE(to);
    Net n;
    n.transfer(0, 1e9, from, to, 0);
    n.queue.run();
    CHECK(n.done_at[0] == hetrl::testing::approx(n.f.model.transfer_seconds(1e9, n.sets[from], n.sets[to]))
                              .epsilon(1e-12));
  }
  Net n;
  n.transfer(0, 1e9, 0, 2, 0);
  n.queue.run();
  CHECK(n.done_at[0] == hetrl::testing::approx(1e9 / kRegionLink + kRegionLatency).epsilon(1e-12));
}

TEST_CASE("transfers out of one group share its NICs max-min fairly") {
  Net n;
  n.transfer(0, 1e9, 0, 1, 0);
  n.transfer(0, 1e9, 0, 3, 1);
  n.queue.run();
  // Half of 400 Gbps = 200 > 100 Gbps: the transfer into node 3 is held at its NIC, and the
  // other takes the rest of node 0's.
  const double slow_end = 1e9 / kSlowNic;
  const double fast_rate = kNic - kSlowNic;
  CHECK(n.done_at[1] == hetrl::testing::approx(slow_end + kZoneLatency).epsilon(1e-12));
  CHECK(n.done_at[0] == hetrl::testing::approx(1e9 / fast_rate + kZoneLatency).epsilon(1e-12));

  Net even;
  even.transfer(0, 1e9, 0, 1, 0);
  even.transfer(0, 1e9, 0, 2, 1);
  even.transfer(0, 1e9, 1, 0, 2);  // the other direction: NICs are full duplex
  even.queue.run();
  // The cross-region one is held at 10 Gbps; the one to node 1 gets the rest of node 0's NIC.
  CHECK(even.done_at[1] == hetrl::testing::approx(1e9 / kRegionLink + kRegionLatency).epsilon(1e-12));
  CHECK(even.done_at[0] == hetrl::testing::approx(1e9 / (kNic - kRegionLink) + kZoneLatency).epsilon(1e-12));
  CHECK(even.done_at[2] == hetrl::testing::approx(1e9 / kNic + kZoneLatency).epsilon(1e-12));
}

TEST_CASE("groups sharing a node move what stays on it over their GPU links there") {
  // Node 0 (8 A100s, 400 Gbps NIC) split into groups of 2 and 6, node 1 a group of its 8.
  Fixture f{make_cluster({"a:8xA100-SXM-80G:nic_gbps=400", "a:8xA100-SXM-80G:nic_gbps=400"}),
            ppo("Qwen2.5-0.5B", 64, 512, 512, 1)};
  std::vector<cost::CostModel::GpuSet> sets(3);
  f.model.describe_gpu_set(std::vector<int>{2, 0}, sets[0]);
  f.model.describe_gpu_set(std::vector<int>{6, 0}, sets[1]);
  f.model.describe_gpu_set(std::vector<int>{0, 8}, sets[2]);
  const double link = f.model.cluster().nodes[0].intra_node.bandwidth;
  const double latency = f.model.cluster().nodes[0].intra_node.hop_latency;
  {
    // Alone: the cost model's time, two GPUs' links binding.
    sim::EventQueue queue;
    sim::Network network(queue, f.model, sets, true);
    double done = -1;
    network.start(1e9, 0, 1, std::numeric_limits<double>::infinity(), [&] { done = queue.now(); });
    queue.run();
    CHECK(done == hetrl::testing::approx(f.model.transfer_seconds(1e9, sets[0], sets[1])).epsilon(1e-12));
    CHECK(done == hetrl::testing::approx(1e9 / (2 * link) + latency).epsilon(1e-12));
    // Only node 0's groups have GPU links; the NICs carried nothing.
    int gpu_links = 0;
    for (std::size_t l = 0; l < network.links().size(); ++l) {
      const bool gpu = network.links()[l].name.find("GPU links") != std::string::npos;
      gpu_links += gpu;
      if (!gpu) CHECK(network.use()[l].bytes == 0);
    }
    CHECK(gpu_links == 4);
  }
  {
    // Two at once out of the 2-GPU group, to its neighbour on the node and to node 1: the
    // first crosses the group's GPU links only, the second its share of the NIC (a quarter of
    // 400 Gbps) only, so each moves as if alone.
    sim::EventQueue queue;
    sim::Network network(queue, f.model, sets, true);
    double inside = -1, across = -1, again = -1;
    network.start(1e9, 0, 1, std::numeric_limits<double>::infinity(), [&] { inside = queue.now(); });
    network.start(1e9, 0, 2, std::numeric_limits<double>::infinity(), [&] { across = queue.now(); });
    queue.run();
    CHECK(inside == hetrl::testing::approx(1e9 / (2 * link) + latency).epsilon(1e-12));
    CHECK(across == hetrl::testing::approx(1e9 / (400e9 / 8 / 4) + kZoneLatency).epsilon(1e-12));
    // Two into the 2-GPU group from its neighbour at once halve its links in.
    network.start(1e9, 1, 0, std::numeric_limits<double>::infinity(), [&] { again = queue.now(); });
    const double start = queue.now();
    double second = -1;
    network.start(1e9, 1, 0, std::numeric_limits<double>::infinity(), [&] { second = queue.now(); });
    queue.run();
    CHECK(again - start == hetrl::testing::approx(2e9 / (2 * link) + latency).epsilon(1e-12));
    CHECK(second == again);
  }
}

TEST_CASE("a transfer that joins later takes its share from then on") {
  Net n;
  n.transfer(0, 1e9, 0, 1, 0);
  n.transfer(0.01, 0.25e9, 0, 1, 1);
  n.queue.run();
  // Until 0.01 s the first moves 0.5 GB alone; then both at half the NIC until the second's
  // 0.25 GB are gone (0.02 s); the first's last 0.25 GB then take 0.005 s alone.
  CHECK(n.done_at[1] == hetrl::testing::approx(0.02 + kZoneLatency).epsilon(1e-12));
  CHECK(n.done_at[0] == hetrl::testing::approx(0.025 + kZoneLatency).epsilon(1e-12));
  // The links carried every byte, busy from 0 to 0.025 s.
  const sim::LinkUse& out = n.network.use()[0];
  CHECK(n.network.links()[0].name == "group 0 NICs out");
  CHECK(out.bytes == hetrl::testing::approx(1.25e9).epsilon(1e-12));
  CHECK(out.busy_seconds == hetrl::testing::approx(0.025).epsilon(1e-12));
  CHECK(n.network.active() == 0);
}

TEST_CASE("without contention every transfer moves as if alone") {
  Net n(false);
  n.transfer(0, 1e9, 0, 1, 0);
  n.transfer(0, 1e9, 0, 1, 1);
  n.queue.run();
  CHECK(n.done_at[0] == hetrl::testing::approx(1e9 / kNic + kZoneLatency).epsilon(1e-12));
  CHECK(n.done_at[1] == hetrl::testing::approx(1e9 / kNic + kZoneLatency).epsilon(1e-12));

  Net shared;
  shared.transfer(0, 1e9, 0, 1, 0);
  shared.transfer(0, 1e9, 0, 1, 1);
  shared.queue.run();
  CHECK(shared.done_at[0] == hetrl::testing::approx(2e9 / kNic + kZoneLatency).epsilon(1e-12));
  CHECK(shared.done_at[1] == hetrl::testing::approx(2e9 / kNic + kZoneLatency).epsilon(1e-12));
}

TEST_CASE("link rates are reported as they change, and add up to the bytes carried") {
  Net n;
  std::vector<std::tuple<int, double, double>> samples;
  n.network.on_rate([&](int link, double time, double rate) { samples.emplace_back(link, time, rate); });
  n.transfer(0, 1e9, 0, 2, 0);
  n.queue.run();
  const std::vector<sim::Link>& links = n.network.links();
  double zone_bytes = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto [link, time, rate] = samples[i];
    if (links[link].name != "zone us-east-1a -> us-west-2a") continue;
    // The rate holds until the link's next sample.
    for (std::size_t j = i + 1; j < samples.size(); ++j) {
      if (std::get<0>(samples[j]) == link) {
        zone_bytes += rate * (std::get<1>(samples[j]) - time);
        break;
      }
    }
  }
  CHECK(zone_bytes == hetrl::testing::approx(1e9).epsilon(1e-9));
  // Out of node 0, into node 2, and across the regions; nothing back.
  int changed = 0;
  for (const sim::LinkUse& use : n.network.use()) changed += use.bytes > 0 ? 1 : 0;
  CHECK(changed == 3);
}

TEST_CASE("an empty transfer arrives at once") {
  Net n;
  n.transfer(0.5, 0, 0, 2, 0);
  n.queue.run();
  CHECK(n.done_at[0] == 0.5);
  for (const sim::LinkUse& use : n.network.use()) CHECK(use.bytes == 0);
}

TEST_CASE("a transfer that crosses a zone link with part of its bytes takes that part of the link") {
  // Node 0 in us-east-1a, nodes 1 and 2 in us-west-2a (10 Gbps, 32 ms between the regions).
  // Group A spans nodes 0 and 1, so half of what it sends to group B (node 2) crosses the
  // region link; group C (node 0) sends all of its across. A's transfer is held at 1.6 Gbps
  // (0.2 GB/s, as a broadcast cap holds one), taking 0.1 GB/s of the link; C takes the rest,
  // 1.15 GB/s, not 1.05.
  const Fixture f(make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400", "us-west-2a:8xA100-SXM-80G:nic_gbps=400",
                                "us-west-2a:8xA100-SXM-80G:nic_gbps=400"}),
                  ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  std::vector<cost::CostModel::GpuSet> sets(3);
  const std::vector<std::vector<int>> gpus{{8, 8, 0}, {0, 0, 8}, {8, 0, 0}};  // A, B, C
  for (std::size_t g = 0; g < gpus.size(); ++g) f.model.describe_gpu_set(gpus[g], sets[g]);
  sim::EventQueue queue;
  sim::Network network(queue, f.model, sets, true);
  double a_done = -1, c_done = -1;
  queue.at(0, [&] {
    network.start(1e9, 0, 1, 0.2e9, [&] { a_done = queue.now(); });
    network.start(1.15e9, 2, 1, std::numeric_limits<double>::infinity(), [&] { c_done = queue.now(); });
  });
  queue.run();
  CHECK(c_done == hetrl::testing::approx(1.0 + kRegionLatency).epsilon(1e-12));
  // A alone after C: still held at its cap.
  CHECK(a_done == hetrl::testing::approx(1e9 / 0.2e9 + kRegionLatency).epsilon(1e-12));
}
