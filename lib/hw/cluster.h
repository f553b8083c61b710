#pragma once
// A cluster: nodes of GPUs in zones, zones grouped into regions, and the network between
// them. A node holds GPUs of one type joined by one intra-node link (NVLink or PCIe); nodes
// talk through their NICs; traffic between zones crosses a zone link.
//
// Network model. Inside a zone the fabric is non-blocking: a node pair is limited by the
// smaller NIC and the intra-zone default. Between two zones the path is an explicit link if
// the cluster gives one, else the cross-zone default (same region) or the cross-region
// default (different regions). Latencies are one-way.
//
// Invariants after validate(): names are unique; every index is in range; every pair of
// zones has a path; every GPU type a node uses has an effective spec in gpu_types.

#include <optional>
#include <string>
#include <vector>

#include "core/provenance.h"
#include "hw/gpu.h"

namespace hetrl::hw {

struct Region {
  std::string name;
};

struct Zone {
  std::string name;
  int region = 0;  // index into Cluster::regions
};

struct Node {
  std::string name;
  int zone = 0;       // index into Cluster::zones
  int gpu_type = 0;   // index into Cluster::gpu_types
  int gpu_count = 0;
  double nic_bandwidth = 0;             // bytes/s
  std::optional<std::string> intra_node_link;  // replaces the GPU type's link when set
  IntraNodeLink intra_node;             // effective link (resolved)
  std::optional<double> price_per_hour;  // USD per node-hour; replaces GPU price x count
};

struct ZoneLink {
  int zone_a = 0;
  int zone_b = 0;
  LinkSpec link;
};

struct Network {
  LinkSpec intra_zone;
  std::optional<LinkSpec> cross_zone;
  std::optional<LinkSpec> cross_region;
  std::vector<ZoneLink> links;
};

// Nodes that neither the cost model nor a planner can tell apart: the same GPU type and count,
// intra-node link, NIC, zone and price. Planners choose how many nodes of a class a group
// gets, not which; the evaluator prices alike replicas once.
struct NodeClasses {
  std::vector<std::vector<int>> members;  // per class its nodes in node order; classes in
                                          // order of their first node
  std::vector<int> of_node;               // the class of each node
};

enum class PathKind { kSameZone, kExplicitLink, kCrossZone, kCrossRegion };

struct Path {
  LinkSpec link;
  PathKind kind = PathKind::kSameZone;
};

// The largest cluster hetrl takes; a larger one is refused at load, naming the limit. Planning
// costs grow with the GPUs a plan lists, the zones a transfer may cross and the node classes a
// search moves (docs/architecture.md, "Limits"); within these, planning keeps to its time limit
// and a 100,000-GPU cluster plans in well under 2 GB.
inline constexpr long long kMaxClusterGpus = 131072;
inline constexpr int kMaxZones = 256;
inline constexpr int kMaxNodeClasses = 1024;

struct Cluster {
  std::string name;
  std::vector<Region> regions;
  std::vector<Zone> zones;
  std::vector<Node> nodes;
  Network network;
  std::vector<GpuTypeOverride> gpu_overrides;  // as given, kept so files round-trip
  std::vector<GpuSpec> gpu_types;              // effective specs, indexed by Node::gpu_type
  core::Provenance provenance;

  // Throws core::InputError naming the first problem found.
  void validate() const;

  // The path between two zones (indices). Requires a validated cluster.
  Path zone_path(int zone_a, int zone_b) const;

  int total_gpus() const;
  // USD per hour of the whole cluster, or nullopt when some node has no price.
  std::optional<double> price_per_hour() const;
  std::optional<double> node_price_per_hour(const Node& node) const;

  NodeClasses node_classes() const;

  // The cluster without the named nodes (a node lost, taken back or not yet delivered): the
  // same zones, network and GPU types. Throws core::InputError for a name it does not have, a
  // name given twice, or every node named.
  Cluster without_nodes(const std::vector<std::string>& names) const;
  int find_zone(std::string_view name) const;  // -1 when absent
  int find_gpu_type(std::string_view name) const;  // -1 when absent
  std::vector<std::string> zone_names() const;
};

// Cluster::zone_path of every pair of a validated cluster's zones, made once in time
// proportional to the pairs and links and then looked up in constant time (zone_path looks
// through the links each time: on thousands of links, most of an evaluation).
class ZonePaths {
 public:
  explicit ZonePaths(const Cluster& cluster);
  const Path& operator()(int zone_a, int zone_b) const {
    return paths_[static_cast<std::size_t>(zone_a) * zones_ + static_cast<std::size_t>(zone_b)];
  }

 private:
  std::size_t zones_ = 0;
  std::vector<Path> paths_;  // [zone_a * zones + zone_b]
};

std::string_view path_kind_name(PathKind kind);

}  // namespace hetrl::hw
