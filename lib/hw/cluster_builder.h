#pragma once
// Building a cluster from short specs, as hetrl-cluster's flags give them:
//
//   node         ZONE:[N x]M x GPU[:key=value,...]    us-east-1a:2x8xA100-SXM-80G
//                keys: nic_gbps (default 100), link (intra-node link name),
//                price_per_hour_usd (per node)
//   preset node  ZONE:[N x]INSTANCE[:key=value,...]   us-west-2a:4xg6e.48xlarge
//   link         ZONE,ZONE:gbps=G,latency_ms=L         or ZONE,ZONE:PRESET
//   network      gbps=G,latency_ms=L                   or PRESET (same-zone, cross-zone, ...)
//   region       REGION=ZONE,ZONE,...
//   GPU price    TYPE=USD_PER_GPU_HOUR
//
// A zone's region, unless given, comes from its name: "us-east-1a" -> "us-east-1" (AWS),
// "us-central1-a" -> "us-central1" (GCP); any other name is its own region. Nodes are named
// ZONE-STEM-I, where STEM is the GPU type or instance in lower case and I counts from 0 per
// zone and stem. Zone pairs without an explicit link use the cross-zone or cross-region
// default. Every parser throws core::InputError that quotes the spec.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw/cluster.h"

namespace hetrl::hw {

inline constexpr double kDefaultNicGbps = 100;

struct NodeGroup {
  std::string zone;
  int node_count = 1;
  int gpus_per_node = 0;
  std::string gpu;
  std::string name_stem;
  double nic_bandwidth = 0;  // bytes/s
  std::optional<std::string> intra_node_link;
  std::optional<double> price_per_hour;  // USD per node-hour
};

struct LinkRequest {
  std::string zone_a;
  std::string zone_b;
  LinkSpec link;
};

struct RegionRequest {
  std::string region;
  std::vector<std::string> zones;
};

struct ClusterBuildParams {
  std::string name = "cluster";
  std::vector<NodeGroup> node_groups;
  std::vector<RegionRequest> regions;
  std::vector<LinkRequest> links;
  LinkSpec intra_zone;
  LinkSpec cross_zone;
  LinkSpec cross_region;
  std::vector<GpuTypeOverride> overrides;  // one per GPU type, merged
  core::Provenance provenance;
};

// Params with the network defaults taken from the catalogue's "same-zone", "cross-zone" and
// "cross-region" presets.
ClusterBuildParams default_build_params(const Catalog& catalog);

// `new_types`: GPU types the catalogue does not have that the build defines (from profiles).
NodeGroup parse_node_spec(std::string_view spec, const Catalog& catalog,
                          const std::vector<std::string>& new_types = {});
NodeGroup parse_preset_node_spec(std::string_view spec, const Catalog& catalog);
LinkRequest parse_link_spec(std::string_view spec, const Catalog& catalog);
LinkSpec parse_network_spec(std::string_view spec, const Catalog& catalog,
                            std::string_view flag);
RegionRequest parse_region_spec(std::string_view spec);
GpuTypeOverride parse_gpu_price_spec(std::string_view spec, const Catalog& catalog);

std::string region_of_zone(std::string_view zone);

// Adds an override to params, merging with one already there for the same GPU type.
void add_override(ClusterBuildParams& params, const GpuTypeOverride& override_spec);

// Builds and validates the cluster.
Cluster build_cluster(const ClusterBuildParams& params, const Catalog& catalog);

// The cluster with more nodes, in zones it has (a zone of its own needs links, which
// hetrl-cluster gives): named ZONE-STEM-I as the builder names them, I past the names taken.
// Throws core::InputError for a zone the cluster lacks.
Cluster with_nodes(const Cluster& cluster, const std::vector<NodeGroup>& groups, const Catalog& catalog);

// Resolves the effective GPU specs of `cluster.gpu_overrides` and of the named types into
// cluster.gpu_types and returns the index of each name in `type_names`. Used by the builder
// and the file reader so both resolve types the same way.
std::vector<int> resolve_gpu_types(Cluster& cluster, const std::vector<std::string>& type_names,
                                   const Catalog& catalog);

}  // namespace hetrl::hw
