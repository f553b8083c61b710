#include "hw/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/error.h"

namespace hetrl::hw {
namespace {

void check_link(const LinkSpec& link, std::string_view what) {
  if (!(link.bandwidth > 0)) {
    throw core::InputError(
        fmt::format("{}: bandwidth must be positive, found {} Gbps", what, link.bandwidth * 8e-9));
  }
  if (!(link.latency >= 0)) {
    throw core::InputError(
        fmt::format("{}: latency must not be negative, found {} ms", what, link.latency * 1e3));
  }
}

template <typename T>
void check_unique_names(const std::vector<T>& items, std::string_view what) {
  std::set<std::string_view> seen;
  for (const T& item : items) {
    if (item.name.empty()) throw core::InputError(fmt::format("a {} has an empty name", what));
    if (!seen.insert(item.name).second) {
      throw core::InputError(fmt::format("{} {} is defined twice", what, core::quoted(item.name)));
    }
  }
}

}  // namespace

std::string_view path_kind_name(PathKind kind) {
  switch (kind) {
    case PathKind::kSameZone: return "same zone";
    case PathKind::kExplicitLink: return "link";
    case PathKind::kCrossZone: return "cross-zone default";
    case PathKind::kCrossRegion: return "cross-region default";
  }
  return "?";
}

void Cluster::validate() const {
  if (nodes.empty()) throw core::InputError("the cluster has no nodes");
  check_unique_names(regions, "region");
  check_unique_names(zones, "zone");
  check_unique_names(nodes, "node");
  check_unique_names(gpu_types, "GPU type");
  for (const Zone& zone : zones) {
    if (zone.region < 0 || zone.region >= static_cast<int>(regions.size())) {
      throw core::InputError(fmt::format("zone {} has no region", core::quoted(zone.name)));
    }
  }
  for (const Node& node : nodes) {
    const std::string what = fmt::format("node {}", core::quoted(node.name));
    if (node.zone < 0 || node.zone >= static_cast<int>(zones.size())) {
      throw core::InputError(what + ": unknown zone");
    }
    if (node.gpu_type < 0 || node.gpu_type >= static_cast<int>(gpu_types.size())) {
      throw core::InputError(what + ": unknown GPU type");
    }
    if (node.gpu_count < 1) {
      throw core::InputError(
          fmt::format("{}: GPU count must be at least 1, found {}", what, node.gpu_count));
    }
    if (!(node.nic_bandwidth > 0)) {
      throw core::InputError(fmt::format("{}: NIC bandwidth must be positive, found {} Gbps",
                                         what, node.nic_bandwidth * 8e-9));
    }
    if (!(node.intra_node.bandwidth > 0)) {
      throw core::InputError(what + ": intra-node link bandwidth must be positive");
    }
    if (node.price_per_hour && *node.price_per_hour < 0) {
      throw core::InputError(fmt::format("{}: price must not be negative, found {}", what,
                                         *node.price_per_hour));
    }
  }
  for (const GpuSpec& spec : gpu_types) validate_gpu_spec(spec);
  long long gpus = 0;
  for (const Node& node : nodes) gpus += node.gpu_count;
  if (gpus > kMaxClusterGpus) {
    throw core::InputError(fmt::format("the cluster has {} GPUs; hetrl takes at most {}", gpus,
                                       kMaxClusterGpus));
  }
  if (zones.size() > static_cast<std::size_t>(kMaxZones)) {
    throw core::InputError(fmt::format("the cluster has {} zones; hetrl takes at most {}",
                                       zones.size(), kMaxZones));
  }
  if (const std::size_t classes = node_classes().members.size(); classes > static_cast<std::size_t>(kMaxNodeClasses)) {
    throw core::InputError(fmt::format("the cluster has {} node classes (nodes that differ in zone, GPU type, "
                                       "NIC or price); hetrl takes at most {}", classes, kMaxNodeClasses));
  }

  check_link(network.intra_zone, "intra-zone network");
  if (network.cross_zone) check_link(*network.cross_zone, "cross-zone network");
  if (network.cross_region) check_link(*network.cross_region, "cross-region network");
  std::set<std::pair<int, int>> linked;
  for (const ZoneLink& link : network.links) {
    const int n = static_cast<int>(zones.size());
    if (link.zone_a < 0 || link.zone_a >= n || link.zone_b < 0 || link.zone_b >= n) {
      throw core::InputError("a zone link names an unknown zone");
    }
    const std::string what = fmt::format("link {} - {}", core::quoted(zones[link.zone_a].name),
                                         core::quoted(zones[link.zone_b].name));
    if (link.zone_a == link.zone_b) {
      throw core::InputError(what + ": a link joins two different zones");
    }
    check_link(link.link, what);
    if (!linked.insert(std::minmax(link.zone_a, link.zone_b)).second) {
      throw core::InputError(what + ": defined twice");
    }
  }
  // Every pair of zones that hold nodes needs a path.
  std::set<int> used_zones;
  for (const Node& node : nodes) used_zones.insert(node.zone);
  for (int a : used_zones) {
    for (int b : used_zones) {
      if (a >= b || linked.count({a, b})) continue;
      const bool same_region = zones[a].region == zones[b].region;
      if (same_region ? !network.cross_zone : !network.cross_region) {
        throw core::InputError(fmt::format(
            "no network path between zones {} and {}: add a link between them or a {} default",
            core::quoted(zones[a].name), core::quoted(zones[b].name),
            same_region ? "cross_zone" : "cross_region"));
      }
    }
  }
}

Path Cluster::zone_path(int zone_a, int zone_b) const {
  if (zone_a == zone_b) return {network.intra_zone, PathKind::kSameZone};
  for (const ZoneLink& link : network.links) {
    if ((link.zone_a == zone_a && link.zone_b == zone_b) ||
        (link.zone_a == zone_b && link.zone_b == zone_a)) {
      return {link.link, PathKind::kExplicitLink};
    }
  }
  if (zones[zone_a].region == zones[zone_b].region) {
    return {*network.cross_zone, PathKind::kCrossZone};
  }
  return {*network.cross_region, PathKind::kCrossRegion};
}

ZonePaths::ZonePaths(const Cluster& cluster) : zones_(cluster.zones.size()), paths_(zones_ * zones_) {
  const Network& network = cluster.network;
  for (std::size_t a = 0; a < zones_; ++a) {
    for (std::size_t b = 0; b < zones_; ++b) {
      Path& path = paths_[a * zones_ + b];
      if (a == b) {
        path = {network.intra_zone, PathKind::kSameZone};
      } else if (cluster.zones[a].region == cluster.zones[b].region) {
        if (network.cross_zone) path = {*network.cross_zone, PathKind::kCrossZone};
      } else if (network.cross_region) {
        path = {*network.cross_region, PathKind::kCrossRegion};
      }  // else a link joins them (validate checks)
    }
  }
  // The first link of a pair wins, as in zone_path (validate refuses a pair linked twice).
  for (auto link = network.links.rbegin(); link != network.links.rend(); ++link) {
    const auto a = static_cast<std::size_t>(link->zone_a), b = static_cast<std::size_t>(link->zone_b);
    paths_[a * zones_ + b] = paths_[b * zones_ + a] = {link->link, PathKind::kExplicitLink};
  }
}

NodeClasses Cluster::node_classes() const {
  NodeClasses out;
  std::map<std::tuple<int, int, double, double, int, double>, int> index;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const auto key = std::make_tuple(node.gpu_type, node.gpu_count, node.intra_node.bandwidth,
                                     node.nic_bandwidth, node.zone,
                                     node_price_per_hour(node).value_or(-1.0));
    const auto [it, fresh] = index.emplace(key, static_cast<int>(out.members.size()));
    if (fresh) out.members.emplace_back();
    out.members[it->second].push_back(static_cast<int>(n));
    out.of_node.push_back(it->second);
  }
  return out;
}

Cluster Cluster::without_nodes(const std::vector<std::string>& names) const {
  std::vector<std::string> known;
  for (const Node& node : nodes) known.push_back(node.name);
  std::set<std::string> dropped;
  for (const std::string& lost : names) {
    if (std::find(known.begin(), known.end(), lost) == known.end()) {
      throw core::InputError(fmt::format("cluster {} has no node {}{}", core::quoted(name), core::quoted(lost),
                                         core::did_you_mean(lost, known)));
    }
    if (!dropped.insert(lost).second) throw core::InputError(fmt::format("node {} is named twice", core::quoted(lost)));
  }
  Cluster out = *this;
  std::erase_if(out.nodes, [&](const Node& node) { return dropped.count(node.name) > 0; });
  if (out.nodes.empty()) throw core::InputError(fmt::format("that is every node of cluster {}", core::quoted(name)));
  return out;
}

int Cluster::total_gpus() const {
  int total = 0;
  for (const Node& node : nodes) total += node.gpu_count;
  return total;
}

std::optional<double> Cluster::node_price_per_hour(const Node& node) const {
  if (node.price_per_hour) return node.price_per_hour;
  const GpuSpec& spec = gpu_types[node.gpu_type];
  if (!spec.price_per_hour) return std::nullopt;
  return *spec.price_per_hour * node.gpu_count;
}

std::optional<double> Cluster::price_per_hour() const {
  double total = 0;
  for (const Node& node : nodes) {
    const std::optional<double> price = node_price_per_hour(node);
    if (!price) return std::nullopt;
    total += *price;
  }
  return total;
}

int Cluster::find_zone(std::string_view zone_name) const {
  for (std::size_t i = 0; i < zones.size(); ++i) {
    if (zones[i].name == zone_name) return static_cast<int>(i);
  }
  return -1;
}

int Cluster::find_gpu_type(std::string_view type_name) const {
  for (std::size_t i = 0; i < gpu_types.size(); ++i) {
    if (gpu_types[i].name == type_name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> Cluster::zone_names() const {
  std::vector<std::string> names;
  for (const Zone& zone : zones) names.push_back(zone.name);
  return names;
}

}  // namespace hetrl::hw
