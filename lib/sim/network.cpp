#include "sim/network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace hetrl::sim {
namespace {

// Rates within this relative distance of a bottleneck's level count as at it.
constexpr double kTolerance = 1e-12;
// A transfer whose bytes left are below this fraction of its size has finished.
constexpr double kDrained = 1e-9;

}  // namespace

Network::Network(EventQueue& queue, const cost::CostModel& model,
                 std::vector<cost::CostModel::GpuSet> sets, bool contention)
    : queue_(queue), model_(model), sets_(std::move(sets)), contention_(contention) {
  const hw::Cluster& cluster = model.cluster();
  for (std::size_t g = 0; g < sets_.size(); ++g) {
    links_.push_back({fmt::format("group {} NICs out", g), sets_[g].nic_bandwidth});
    links_.push_back({fmt::format("group {} NICs in", g), sets_[g].nic_bandwidth});
  }
  const int zones = static_cast<int>(cluster.zones.size());
  const hw::ZonePaths paths(cluster);
  for (int a = 0; a < zones; ++a) {
    for (int b = 0; b < zones; ++b) {
      if (a == b) continue;
      links_.push_back({fmt::format("zone {} -> {}", cluster.zones[a].name, cluster.zones[b].name),
                        paths(a, b).link.bandwidth});
    }
  }
  // The GPU links of each group on the nodes it shares with another.
  std::vector<int> groups_on(cluster.nodes.size(), 0);
  for (const cost::CostModel::GpuSet& set : sets_) {
    for (const auto& [node, gpus] : set.on_nodes) ++groups_on[node];
  }
  gpu_links_.resize(sets_.size());
  for (std::size_t g = 0; g < sets_.size(); ++g) {
    for (const auto& [node, gpus] : sets_[g].on_nodes) {
      if (groups_on[node] < 2) continue;
      const hw::Node& n = cluster.nodes[node];
      const double capacity = gpus * n.intra_node.bandwidth;
      gpu_links_[g].emplace_back(node, static_cast<int>(links_.size()));
      links_.push_back({fmt::format("group {} GPU links out on {}", g, n.name), capacity});
      links_.push_back({fmt::format("group {} GPU links in on {}", g, n.name), capacity});
    }
  }
  use_.assign(links_.size(), LinkUse{});
  load_.assign(links_.size(), 0.0);
}

int Network::zone_link(int from, int to) const {
  const int zones = static_cast<int>(model_.cluster().zones.size());
  return 2 * static_cast<int>(sets_.size()) + from * (zones - 1) + (to < from ? to : to - 1);
}

int Network::gpu_link(int group, int node) const {
  const auto& links = gpu_links_[group];
  const auto it = std::lower_bound(links.begin(), links.end(), std::pair{node, -1});
  return it != links.end() && it->first == node ? it->second : -1;
}

int Network::active() const {
  return static_cast<int>(std::count_if(flows_.begin(), flows_.end(),
                                        [](const Flow& f) { return f.active; }));
}

void Network::start(double bytes, int from, int to, double max_rate, std::function<void()> done) {
  const cost::CostModel::GpuSet& a = sets_[from];
  const cost::CostModel::GpuSet& b = sets_[to];
  if (bytes <= 0 || a.gpus == 0 || b.gpus == 0) {
    queue_.at(queue_.now(), std::move(done));
    return;
  }
  advance();
  auto slot = std::find_if(flows_.begin(), flows_.end(), [](const Flow& f) { return !f.active; });
  if (slot == flows_.end()) slot = flows_.insert(flows_.end(), Flow{});
  Flow& f = *slot;
  f.bytes = f.remaining = bytes;
  f.max_rate = max_rate;
  f.latency = 0;
  f.loads.clear();
  double inside = 0;
  model_.for_each_shared_node(a, b, [&](int node, double fraction, int, int) {
    inside += fraction;
    f.loads.push_back({gpu_link(from, node), fraction});
    f.loads.push_back({gpu_link(to, node) + 1, fraction});
    f.latency = std::max(f.latency, model_.cluster().nodes[node].intra_node.hop_latency);
  });
  if (inside < 1 - cost::CostModel::kWithinRounding) {
    f.loads.push_back({out_link(from), 1 - inside});
    f.loads.push_back({in_link(to), 1 - inside});
    model_.for_each_zone_pair(a, b, [&](int za, int zb, double fraction, const hw::Path& path) {
      f.latency = std::max(f.latency, path.link.latency);
      if (za != zb) f.loads.push_back({zone_link(za, zb), fraction});
    });
  }
  f.alone_rate = max_rate;
  for (const Load& load : f.loads) {
    f.alone_rate = std::min(f.alone_rate, links_[load.link].capacity / load.fraction);
  }
  f.done = std::move(done);
  f.active = true;
  share();
}

void Network::advance() {
  const double now = queue_.now();
  const double dt = now - last_;
  last_ = now;
  if (dt <= 0) return;
  for (Flow& f : flows_) {
    if (f.active) f.remaining -= f.rate * dt;
  }
  for (std::size_t l = 0; l < links_.size(); ++l) {
    if (load_[l] <= 0) continue;
    use_[l].bytes += load_[l] * dt;
    use_[l].busy_seconds += dt;
  }
}

void Network::share() {
  const std::size_t links = links_.size();
  if (!contention_) {
    for (Flow& f : flows_) f.rate = f.active ? f.alone_rate : 0.0;
  } else {
    // Progressive filling: the unfrozen transfers share one rate that rises until a link is
    // full (or a transfer reaches its cap); the transfers there freeze at it.
    remaining_capacity_.resize(links);
    for (std::size_t l = 0; l < links; ++l) remaining_capacity_[l] = links_[l].capacity;
    frozen_.assign(flows_.size(), 0);
    for (std::size_t i = 0; i < flows_.size(); ++i) {
      if (!flows_[i].active) frozen_[i] = 1;
    }
    full_.assign(links, 0);
    for (;;) {
      unfrozen_fraction_.assign(links, 0.0);
      bool any = false;
      double level = std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < flows_.size(); ++i) {
        if (frozen_[i]) continue;
        any = true;
        level = std::min(level, flows_[i].max_rate);
        for (const Load& load : flows_[i].loads) unfrozen_fraction_[load.link] += load.fraction;
      }
      if (!any) break;
      for (std::size_t l = 0; l < links; ++l) {
        if (unfrozen_fraction_[l] > 0) {
          level = std::min(level, std::max(0.0, remaining_capacity_[l]) / unfrozen_fraction_[l]);
        }
      }
      for (std::size_t l = 0; l < links; ++l) {
        full_[l] = unfrozen_fraction_[l] > 0 &&
                  std::max(0.0, remaining_capacity_[l]) / unfrozen_fraction_[l] <=
                      level * (1 + kTolerance);
      }
      for (std::size_t i = 0; i < flows_.size(); ++i) {
        if (frozen_[i]) continue;
        Flow& f = flows_[i];
        bool stops = f.max_rate <= level * (1 + kTolerance);
        for (const Load& load : f.loads) stops = stops || full_[load.link];
        if (!stops) continue;
        f.rate = level;
        frozen_[i] = 1;
        for (const Load& load : f.loads) remaining_capacity_[load.link] -= load.fraction * level;
      }
    }
  }
  // The links' traffic, reported where it changed.
  next_load_.assign(links, 0.0);
  for (const Flow& f : flows_) {
    if (!f.active) continue;
    for (const Load& l : f.loads) next_load_[l.link] += l.fraction * f.rate;
  }
  for (std::size_t l = 0; l < links; ++l) {
    if (next_load_[l] != load_[l] && on_rate_) on_rate_(static_cast<int>(l), queue_.now(), next_load_[l]);
  }
  load_.swap(next_load_);
  // The next transfer to drain.
  double next = std::numeric_limits<double>::infinity();
  for (const Flow& f : flows_) {
    if (f.active && f.rate > 0) next = std::min(next, f.remaining / f.rate);
  }
  const std::uint64_t version = ++version_;
  if (next < std::numeric_limits<double>::infinity()) {
    queue_.at(queue_.now() + std::max(0.0, next), [this, version] { tick(version); });
  }
}

void Network::tick(std::uint64_t version) {
  if (version != version_) return;  // the rates changed since this was scheduled
  advance();
  // The transfer this tick was for has drained, whatever rounding left of it, and so have any
  // within rounding of it.
  double soonest = std::numeric_limits<double>::infinity();
  for (const Flow& f : flows_) {
    if (f.active && f.rate > 0) soonest = std::min(soonest, f.remaining / f.rate);
  }
  for (Flow& f : flows_) {
    if (!f.active) continue;
    const bool drained = f.remaining <= kDrained * f.bytes ||
                         (f.rate > 0 && f.remaining / f.rate <= soonest * (1 + kTolerance));
    if (!drained) continue;
    f.active = false;
    f.rate = 0;
    queue_.at(queue_.now() + f.latency, std::move(f.done));
    f.done = nullptr;
  }
  share();
}

}  // namespace hetrl::sim
