#include "hw/cluster_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/error.h"
#include "core/text.h"
#include "core/units.h"
#include "hw/profile.h"

namespace hetrl::hw {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "ZONE:BODY[:OPTIONS]" -> {ZONE, BODY, OPTIONS}.
struct SpecParts {
  std::string zone;
  std::string body;
  std::string options;
};

SpecParts split_zone_spec(std::string_view spec, std::string_view flag, std::string_view form) {
  const std::vector<std::string> parts = core::split(spec, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() || parts[1].empty()) {
    throw core::InputError(
        fmt::format("{} {}: expected {}", flag, core::quoted(spec), form));
  }
  return {parts[0], parts[1], parts.size() == 3 ? parts[2] : std::string()};
}

// "key=value,key=value" -> ordered pairs; rejects empty keys and repeated keys.
std::vector<std::pair<std::string, std::string>> parse_options(std::string_view text,
                                                               std::string_view context) {
  std::vector<std::pair<std::string, std::string>> options;
  if (text.empty()) return options;
  for (const std::string& item : core::split(text, ',')) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw core::InputError(
          fmt::format("{}: expected key=value, found {}", context, core::quoted(item)));
    }
    std::string key = item.substr(0, eq);
    for (const auto& [seen, value] : options) {
      if (seen == key) {
        throw core::InputError(fmt::format("{}: {} is given twice", context, key));
      }
    }
    options.emplace_back(std::move(key), item.substr(eq + 1));
  }
  return options;
}

[[noreturn]] void unknown_option(std::string_view context, std::string_view key,
                                 const std::vector<std::string>& known) {
  throw core::InputError(fmt::format("{}: unknown key {}{}", context, core::quoted(key),
                                     core::did_you_mean(key, known)));
}

// "[N x]M x NAME" or "[N x]NAME" (with_gpu_count false). Returns counts and the name.
struct CountedName {
  int nodes = 1;
  int gpus = 0;
  std::string name;
};

CountedName parse_counted(std::string_view body, bool with_gpu_count, std::string_view context) {
  // Split off leading "<digits>x" groups; the rest is the name (which may contain 'x').
  std::vector<std::string> counts;
  std::string_view rest = body;
  while (true) {
    std::size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
      ++digits;
    }
    if (digits == 0 || digits >= rest.size() || (rest[digits] != 'x' && rest[digits] != 'X')) {
      break;
    }
    counts.emplace_back(rest.substr(0, digits));
    rest.remove_prefix(digits + 1);
  }
  const std::size_t wanted_max = with_gpu_count ? 2 : 1;
  const std::size_t wanted_min = with_gpu_count ? 1 : 0;
  if (rest.empty() || counts.size() < wanted_min || counts.size() > wanted_max) {
    throw core::InputError(fmt::format(
        "{}: expected {}", context,
        with_gpu_count ? "[NODES x]GPUS x GPU_TYPE, e.g. 2x8xA100-SXM-80G"
                       : "[NODES x]INSTANCE, e.g. 4xg6e.48xlarge"));
  }
  CountedName out;
  out.name = std::string(rest);
  constexpr long long kMaxCount = 100000;
  if (with_gpu_count) {
    out.gpus = static_cast<int>(core::parse_integer(counts.back(), fmt::format("{}: GPU count", context), 1, 1024));
    if (counts.size() == 2) {
      out.nodes = static_cast<int>(core::parse_integer(counts[0], fmt::format("{}: node count", context), 1, kMaxCount));
    }
  } else if (counts.size() == 1) {
    out.nodes = static_cast<int>(core::parse_integer(counts[0], fmt::format("{}: node count", context), 1, kMaxCount));
  }
  return out;
}

void apply_node_options(NodeGroup& group, std::string_view options, std::string_view context,
                        const Catalog& catalog) {
  const std::vector<std::string> known = {"nic_gbps", "link", "price_per_hour_usd"};
  for (const auto& [key, value] : parse_options(options, context)) {
    const std::string what = fmt::format("{}: {}", context, key);
    if (key == "nic_gbps") {
      const double gbps = core::parse_number(value, what);
      if (!(gbps > 0)) throw core::InputError(fmt::format("{}: must be positive, found {}", what, value));
      group.nic_bandwidth = gbps * core::kGbps;
    } else if (key == "link") {
      group.intra_node_link = catalog.intra_node_link(value, context).name;
    } else if (key == "price_per_hour_usd") {
      const double price = core::parse_number(value, what);
      if (price < 0) throw core::InputError(fmt::format("{}: must not be negative, found {}", what, value));
      group.price_per_hour = price;
    } else {
      unknown_option(context, key, known);
    }
  }
}

LinkSpec link_from_options(std::string_view text, const Catalog& catalog,
                           std::string_view context) {
  if (text.find('=') == std::string_view::npos) return catalog.network(text, context).link;
  std::optional<double> gbps;
  std::optional<double> latency_ms;
  for (const auto& [key, value] : parse_options(text, context)) {
    const std::string what = fmt::format("{}: {}", context, key);
    if (key == "gbps") {
      gbps = core::parse_number(value, what);
      if (!(*gbps > 0)) throw core::InputError(fmt::format("{}: must be positive, found {}", what, value));
    } else if (key == "latency_ms") {
      latency_ms = core::parse_number(value, what);
      if (*latency_ms < 0) throw core::InputError(fmt::format("{}: must not be negative, found {}", what, value));
    } else {
      unknown_option(context, key, {"gbps", "latency_ms"});
    }
  }
  if (!gbps || !latency_ms) {
    throw core::InputError(fmt::format("{}: expected both gbps= and latency_ms=", context));
  }
  return {*gbps * core::kGbps, *latency_ms * core::kMillisecond};
}

}  // namespace

ClusterBuildParams default_build_params(const Catalog& catalog) {
  ClusterBuildParams params;
  params.intra_zone = catalog.network("same-zone", "catalogue").link;
  params.cross_zone = catalog.network("cross-zone", "catalogue").link;
  params.cross_region = catalog.network("cross-region", "catalogue").link;
  return params;
}

NodeGroup parse_node_spec(std::string_view spec, const Catalog& catalog, const std::vector<std::string>& new_types) {
  const std::string context = fmt::format("--node {}", core::quoted(spec));
  const SpecParts parts =
      split_zone_spec(spec, "--node", "ZONE:[NODES x]GPUS x GPU_TYPE[:key=value,...], e.g. us-east-1a:2x8xA100-SXM-80G");
  const CountedName counted = parse_counted(parts.body, true, context);
  const bool is_new = catalog.find_gpu(counted.name) == nullptr &&
                      std::find(new_types.begin(), new_types.end(), counted.name) != new_types.end();
  const std::string gpu = is_new ? counted.name : catalog.gpu(counted.name, context).name;
  NodeGroup group{parts.zone, counted.nodes, counted.gpus, gpu, lower(gpu),
                  kDefaultNicGbps * core::kGbps, std::nullopt, std::nullopt};
  apply_node_options(group, parts.options, context, catalog);
  return group;
}

NodeGroup parse_preset_node_spec(std::string_view spec, const Catalog& catalog) {
  const std::string context = fmt::format("--preset-node {}", core::quoted(spec));
  const SpecParts parts = split_zone_spec(
      spec, "--preset-node", "ZONE:[NODES x]INSTANCE[:key=value,...], e.g. us-west-2a:4xg6e.48xlarge");
  const CountedName counted = parse_counted(parts.body, false, context);
  const InstancePreset& instance = catalog.instance(counted.name, context);
  NodeGroup group{parts.zone, counted.nodes, instance.gpus_per_node, instance.gpu, lower(instance.name),
                  instance.nic_bandwidth, std::nullopt, instance.price_per_hour};
  apply_node_options(group, parts.options, context, catalog);
  return group;
}

LinkRequest parse_link_spec(std::string_view spec, const Catalog& catalog) {
  const std::string context = fmt::format("--link {}", core::quoted(spec));
  const std::size_t colon = spec.find(':');
  const std::string form = "ZONE,ZONE:gbps=G,latency_ms=L or ZONE,ZONE:PRESET";
  if (colon == std::string_view::npos || colon + 1 == spec.size()) {
    throw core::InputError(fmt::format("{}: expected {}", context, form));
  }
  const std::vector<std::string> zones = core::split(spec.substr(0, colon), ',');
  if (zones.size() != 2 || zones[0].empty() || zones[1].empty()) {
    throw core::InputError(fmt::format("{}: expected two zones before ':', as in {}", context, form));
  }
  if (zones[0] == zones[1]) {
    throw core::InputError(fmt::format("{}: a link joins two different zones", context));
  }
  return {zones[0], zones[1], link_from_options(spec.substr(colon + 1), catalog, context)};
}

LinkSpec parse_network_spec(std::string_view spec, const Catalog& catalog,
                            std::string_view flag) {
  return link_from_options(spec, catalog, fmt::format("{} {}", flag, core::quoted(spec)));
}

RegionRequest parse_region_spec(std::string_view spec) {
  const std::string context = fmt::format("--region {}", core::quoted(spec));
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    throw core::InputError(fmt::format("{}: expected REGION=ZONE,ZONE,...", context));
  }
  RegionRequest request;
  request.region = std::string(spec.substr(0, eq));
  request.zones = core::split(spec.substr(eq + 1), ',');
  for (const std::string& zone : request.zones) {
    if (zone.empty()) throw core::InputError(fmt::format("{}: empty zone name", context));
  }
  return request;
}

GpuTypeOverride parse_gpu_price_spec(std::string_view spec, const Catalog& catalog) {
  const std::string context = fmt::format("--gpu-price {}", core::quoted(spec));
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    throw core::InputError(fmt::format("{}: expected GPU_TYPE=USD_PER_GPU_HOUR", context));
  }
  GpuTypeOverride o;
  o.name = catalog.gpu(spec.substr(0, eq), context).name;
  const double price = core::parse_number(spec.substr(eq + 1), context);
  if (price < 0) throw core::InputError(fmt::format("{}: price must not be negative", context));
  o.price_per_hour = price;
  o.source = "price given to hetrl-cluster --gpu-price";
  return o;
}

std::string region_of_zone(std::string_view zone) {
  const std::size_t n = zone.size();
  if (n >= 3 && zone[n - 2] == '-' && std::isalpha(static_cast<unsigned char>(zone[n - 1]))) {
    return std::string(zone.substr(0, n - 2));  // GCP: us-central1-a
  }
  if (n >= 2 && std::isalpha(static_cast<unsigned char>(zone[n - 1])) &&
      std::isdigit(static_cast<unsigned char>(zone[n - 2]))) {
    return std::string(zone.substr(0, n - 1));  // AWS: us-east-1a
  }
  return std::string(zone);
}

void add_override(ClusterBuildParams& params, const GpuTypeOverride& override_spec) {
  for (GpuTypeOverride& existing : params.overrides) {
    if (existing.name == override_spec.name) {
      merge_override(existing, override_spec);
      return;
    }
  }
  params.overrides.push_back(override_spec);
}

std::vector<int> resolve_gpu_types(Cluster& cluster, const std::vector<std::string>& type_names,
                                   const Catalog& catalog) {
  cluster.gpu_types.clear();
  for (const GpuTypeOverride& o : cluster.gpu_overrides) {
    cluster.gpu_types.push_back(apply_override(catalog, o));
  }
  std::vector<int> indices;
  for (const std::string& name : type_names) {
    int index = cluster.find_gpu_type(name);
    if (index < 0) {
      cluster.gpu_types.push_back(catalog.gpu(name, ""));
      index = static_cast<int>(cluster.gpu_types.size()) - 1;
    }
    indices.push_back(index);
  }
  return indices;
}

namespace {

// The n-th node of a group's zone and stem: ZONE-STEM-N.
std::string node_name(const NodeGroup& group, int n) { return fmt::format("{}-{}-{}", group.zone, group.name_stem, n); }

// A node of `group` in zone `zone` with the cluster's GPU type `type`: the group's link, or the
// type's where the group names none.
Node node_of(const NodeGroup& group, std::string name, int zone, int type, const Cluster& cluster,
             const Catalog& catalog) {
  Node node;
  node.name = std::move(name);
  node.zone = zone;
  node.gpu_type = type;
  node.gpu_count = group.gpus_per_node;
  node.nic_bandwidth = group.nic_bandwidth;
  node.intra_node_link = group.intra_node_link;
  node.intra_node = group.intra_node_link ? catalog.intra_node_link(*group.intra_node_link, "")
                                          : cluster.gpu_types[static_cast<std::size_t>(type)].intra_node;
  node.price_per_hour = group.price_per_hour;
  return node;
}

}  // namespace

Cluster with_nodes(const Cluster& cluster, const std::vector<NodeGroup>& groups, const Catalog& catalog) {
  Cluster out = cluster;
  // A type the cluster has keeps its spec (overridden or profiled); a new one is the catalogue's.
  std::vector<int> type_index;
  for (const NodeGroup& group : groups) {
    int index = out.find_gpu_type(group.gpu);
    if (index < 0) {
      out.gpu_types.push_back(catalog.gpu(group.gpu, ""));
      index = static_cast<int>(out.gpu_types.size()) - 1;
    }
    type_index.push_back(index);
  }
  std::set<std::string> taken;
  for (const Node& node : out.nodes) taken.insert(node.name);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const NodeGroup& group = groups[g];
    const int zone = out.find_zone(group.zone);
    if (zone < 0) {
      throw core::InputError(fmt::format("cluster {} has no zone {}{}: a new zone needs its links (hetrl-cluster)",
                                         core::quoted(cluster.name), core::quoted(group.zone),
                                         core::did_you_mean(group.zone, out.zone_names())));
    }
    for (int i = 0, n = 0; i < group.node_count; ++i) {
      std::string name;
      do {
        name = node_name(group, n++);
      } while (taken.count(name) > 0);
      taken.insert(name);
      out.nodes.push_back(node_of(group, std::move(name), zone, type_index[g], out, catalog));
    }
  }
  out.validate();
  return out;
}

Cluster build_cluster(const ClusterBuildParams& params, const Catalog& catalog) {
  if (params.node_groups.empty()) {
    throw core::InputError("no nodes: give at least one --node or --preset-node");
  }
  Cluster cluster;
  cluster.name = params.name;
  cluster.provenance = params.provenance;
  cluster.network.intra_zone = params.intra_zone;
  cluster.network.cross_zone = params.cross_zone;
  cluster.network.cross_region = params.cross_region;
  cluster.gpu_overrides = params.overrides;

  // Zones in order of first use by nodes; each gets its region.
  std::map<std::string, std::string> region_of;
  for (const RegionRequest& request : params.regions) {
    for (const std::string& zone : request.zones) {
      if (!region_of.emplace(zone, request.region).second) {
        throw core::InputError(fmt::format("--region: zone {} is given more than one region",
                                           core::quoted(zone)));
      }
    }
  }
  auto zone_index = [&](const std::string& name) {
    int index = cluster.find_zone(name);
    if (index >= 0) return index;
    const auto given = region_of.find(name);
    const std::string region = given != region_of.end() ? given->second : region_of_zone(name);
    int region_index = -1;
    for (std::size_t i = 0; i < cluster.regions.size(); ++i) {
      if (cluster.regions[i].name == region) region_index = static_cast<int>(i);
    }
    if (region_index < 0) {
      cluster.regions.push_back({region});
      region_index = static_cast<int>(cluster.regions.size()) - 1;
    }
    cluster.zones.push_back({name, region_index});
    return static_cast<int>(cluster.zones.size()) - 1;
  };

  std::vector<std::string> type_names;
  for (const NodeGroup& group : params.node_groups) type_names.push_back(group.gpu);
  const std::vector<int> type_index = resolve_gpu_types(cluster, type_names, catalog);

  std::map<std::pair<std::string, std::string>, int> next_index;
  for (std::size_t g = 0; g < params.node_groups.size(); ++g) {
    const NodeGroup& group = params.node_groups[g];
    const int zone = zone_index(group.zone);
    for (int i = 0; i < group.node_count; ++i) {
      const int n = next_index[{group.zone, group.name_stem}]++;
      cluster.nodes.push_back(node_of(group, node_name(group, n), zone, type_index[g], cluster, catalog));
    }
  }
  for (const auto& [zone, region] : region_of) {
    if (cluster.find_zone(zone) < 0) {
      throw core::InputError(fmt::format("--region {}: zone {} has no nodes{}", region,
                                         core::quoted(zone),
                                         core::did_you_mean(zone, cluster.zone_names())));
    }
  }
  for (const LinkRequest& request : params.links) {
    ZoneLink link;
    for (const std::string* name : {&request.zone_a, &request.zone_b}) {
      if (cluster.find_zone(*name) < 0) {
        throw core::InputError(fmt::format("--link {},{}: zone {} has no nodes{}", request.zone_a,
                                           request.zone_b, core::quoted(*name),
                                           core::did_you_mean(*name, cluster.zone_names())));
      }
    }
    link.zone_a = cluster.find_zone(request.zone_a);
    link.zone_b = cluster.find_zone(request.zone_b);
    link.link = request.link;
    cluster.network.links.push_back(link);
  }
  cluster.validate();
  return cluster;
}

}  // namespace hetrl::hw
