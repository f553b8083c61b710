#include "io/cluster_io.h"

#include <fmt/format.h>

#include <map>

#include "core/error.h"
#include "core/units.h"
#include "hw/cluster_builder.h"
#include "io/files.h"
#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {
namespace {

using detail::ObjectReader;
using detail::OrderedJson;
using detail::Range;

hw::LinkSpec read_link(ObjectReader& r) {
  hw::LinkSpec link;
  link.bandwidth = r.number("bandwidth_gbps", Range::kPositive) * core::kGbps;
  link.latency = r.number("latency_ms", Range::kNonNegative) * core::kMillisecond;
  return link;
}

hw::GpuTypeOverride read_override(const std::string& name, ObjectReader& r,
                                  const hw::Catalog& catalog) {
  hw::GpuTypeOverride o;
  o.name = name;
  o.memory = r.optional_quantity("memory_gib", core::kGiB);
  o.memory_bandwidth = r.optional_quantity("memory_bandwidth_gb_per_s", core::kGBps);
  o.bf16_flops = r.optional_quantity("bf16_dense_tflops", core::kTflops);
  o.fp16_flops = r.optional_quantity("fp16_dense_tflops", core::kTflops);
  o.fp32_flops = r.optional_quantity("fp32_tflops", core::kTflops);
  if (auto link = r.optional_string("intra_node_link")) {
    o.intra_node_link = catalog.intra_node_link(*link, r.where("intra_node_link")).name;
  }
  o.intra_node_bandwidth = r.optional_quantity("intra_node_bandwidth_gb_per_s", core::kGBps);
  o.memory_is_host = r.optional_boolean("memory_is_host");
  o.price_per_hour = r.optional_number("price_per_gpu_hour_usd", Range::kNonNegative);
  if (auto e = r.optional_object("efficiency")) {
    o.gemm_large = e->optional_number("gemm_large", Range::kFraction);
    o.gemm_small = e->optional_number("gemm_small", Range::kFraction);
    const auto read_curve = [](ObjectReader& from, const char* key = "gemm_curve") {
      hw::GemmCurve curve;
      for (ObjectReader& point : from.object_array(key, false)) {
        const double tokens = point.number("tokens", Range::kPositive);
        if (!curve.empty() && tokens <= curve.back().first) {
          throw core::InputError(core::located(point.where("tokens"), "expected tokens in ascending order"));
        }
        curve.emplace_back(tokens, point.number("efficiency", Range::kFraction));
        point.finish();
      }
      return curve;
    };
    if (e->has("gemm_curve")) o.gemm_curve = read_curve(*e);
    if (e->has("gemm_curves")) {
      hw::WidthCurves curves;
      for (ObjectReader& at : e->object_array("gemm_curves", false)) {
        const double width = at.number("width", Range::kPositive);
        if (!curves.empty() && width <= curves.back().width) {
          throw core::InputError(core::located(at.where("width"), "expected widths in ascending order"));
        }
        curves.push_back({width, read_curve(at)});
        at.finish();
      }
      o.gemm_curves = std::move(curves);
    }
    if (e->has("weight_gradient_curve")) o.weight_gradient_curve = read_curve(*e, "weight_gradient_curve");
    o.memory_efficiency = e->optional_number("memory", Range::kFraction);
    o.collective = e->optional_number("collective", Range::kFraction);
    if (auto by_op = e->optional_object("collectives")) {
      hw::CollectiveShares shares{};
      for (int op = 0; op < hw::kCollectives; ++op) {
        if (auto by_type = by_op->optional_object(hw::collective_name(static_cast<hw::Collective>(op)))) {
          shares[op][0] = by_type->optional_number("bf16", Range::kFraction).value_or(0.0);
          shares[op][1] = by_type->optional_number("fp32", Range::kFraction).value_or(0.0);
          by_type->finish();
        }
      }
      by_op->finish();
      o.collectives = shares;
    }
    o.training = e->optional_number("training", Range::kFraction);
    o.attention = e->optional_number("attention", Range::kFraction);
    // Shares of what they read and write: checked against hw::kMostReadWriteShare with the type.
    o.optimizer_efficiency = e->optional_number("optimizer", Range::kPositive);
    o.copy_efficiency = e->optional_number("copy", Range::kPositive);
    o.prefill_efficiency = e->optional_number("prefill", Range::kFraction);
    o.gemm_width_half = e->optional_number("gemm_width_half", Range::kNonNegative);
    o.gemm_reduction_share = e->optional_number("gemm_reduction_share", Range::kUnitInterval);
    o.decode_attention = e->optional_number("decode_attention", Range::kFraction);
    if (auto ms = e->optional_number("decode_step_overhead_ms", Range::kNonNegative)) {
      o.decode_step_overhead = *ms * core::kMillisecond;
    }
    if (auto ms = e->optional_number("decode_allreduce_ms", Range::kNonNegative)) {
      o.decode_allreduce = *ms * core::kMillisecond;
    }
    o.tp_wait = e->optional_number("tp_wait", Range::kNonNegative);
    e->finish();
  }
  o.source = r.optional_string("source").value_or("");
  r.finish();
  return o;
}

OrderedJson write_link(const hw::LinkSpec& link) {
  OrderedJson out;
  out["bandwidth_gbps"] = detail::file_units(link.bandwidth / core::kGbps);
  out["latency_ms"] = detail::file_units(link.latency / core::kMillisecond);
  return out;
}

OrderedJson write_override(const hw::GpuTypeOverride& o) {
  OrderedJson out = OrderedJson::object();
  auto put = [&](const char* key, const std::optional<double>& value, double unit) {
    if (value) out[key] = detail::file_units(*value / unit);
  };
  put("memory_gib", o.memory, core::kGiB);
  put("memory_bandwidth_gb_per_s", o.memory_bandwidth, core::kGBps);
  put("bf16_dense_tflops", o.bf16_flops, core::kTflops);
  put("fp16_dense_tflops", o.fp16_flops, core::kTflops);
  put("fp32_tflops", o.fp32_flops, core::kTflops);
  if (o.intra_node_link) out["intra_node_link"] = *o.intra_node_link;
  put("intra_node_bandwidth_gb_per_s", o.intra_node_bandwidth, core::kGBps);
  if (o.memory_is_host) out["memory_is_host"] = *o.memory_is_host;
  put("price_per_gpu_hour_usd", o.price_per_hour, 1.0);
  OrderedJson efficiency = OrderedJson::object();
  auto put_fraction = [&](const char* key, const std::optional<double>& value) {
    if (value) efficiency[key] = detail::file_units(*value);
  };
  put_fraction("gemm_large", o.gemm_large);
  put_fraction("gemm_small", o.gemm_small);
  const auto curve_json = [](const hw::GemmCurve& points) {
    OrderedJson curve = OrderedJson::array();
    for (const auto& [tokens, fraction] : points) {
      curve.push_back({{"tokens", tokens}, {"efficiency", detail::file_units(fraction)}});
    }
    return curve;
  };
  if (o.gemm_curve) efficiency["gemm_curve"] = curve_json(*o.gemm_curve);
  if (o.gemm_curves) {
    OrderedJson curves = OrderedJson::array();
    for (const hw::WidthCurve& w : *o.gemm_curves) {
      OrderedJson at = OrderedJson::object();
      at["width"] = w.width;
      at["gemm_curve"] = curve_json(w.curve);
      curves.push_back(std::move(at));
    }
    efficiency["gemm_curves"] = std::move(curves);
  }
  if (o.weight_gradient_curve) efficiency["weight_gradient_curve"] = curve_json(*o.weight_gradient_curve);
  put_fraction("memory", o.memory_efficiency);
  put_fraction("collective", o.collective);
  if (o.collectives) {
    OrderedJson by_op = OrderedJson::object();
    for (int op = 0; op < hw::kCollectives; ++op) {
      OrderedJson by_type = OrderedJson::object();
      for (int fp32 = 0; fp32 < 2; ++fp32) {
        const double share = (*o.collectives)[op][fp32];
        if (share > 0) by_type[fp32 ? "fp32" : "bf16"] = detail::file_units(share);
      }
      if (!by_type.empty()) by_op[hw::collective_name(static_cast<hw::Collective>(op))] = std::move(by_type);
    }
    if (!by_op.empty()) efficiency["collectives"] = std::move(by_op);
  }
  put_fraction("training", o.training);
  put_fraction("attention", o.attention);
  put_fraction("optimizer", o.optimizer_efficiency);
  put_fraction("copy", o.copy_efficiency);
  put_fraction("prefill", o.prefill_efficiency);
  put_fraction("gemm_width_half", o.gemm_width_half);
  put_fraction("gemm_reduction_share", o.gemm_reduction_share);
  put_fraction("decode_attention", o.decode_attention);
  if (o.decode_step_overhead) efficiency["decode_step_overhead_ms"] = detail::file_units(*o.decode_step_overhead / core::kMillisecond);
  if (o.decode_allreduce) efficiency["decode_allreduce_ms"] = detail::file_units(*o.decode_allreduce / core::kMillisecond);
  put_fraction("tp_wait", o.tp_wait);
  if (!efficiency.empty()) out["efficiency"] = std::move(efficiency);
  if (!o.source.empty()) out["source"] = o.source;
  return out;
}

}  // namespace

namespace {

// Regions and their zones.
void read_regions(ObjectReader& root, hw::Cluster& cluster) {
  std::map<std::string, std::string> zone_pointer;
  for (ObjectReader& r : root.object_array("regions", false)) {
    const std::string name = r.string("name");
    for (const hw::Region& region : cluster.regions) {
      if (region.name == name) r.fail("name", fmt::format("region {} is defined twice", core::quoted(name)));
    }
    cluster.regions.push_back({name});
    const std::vector<std::string> zones = r.string_array("zones");
    if (zones.empty()) r.fail("zones", "expected at least one zone");
    for (std::size_t i = 0; i < zones.size(); ++i) {
      const std::string where = fmt::format("{}/{}", r.where("zones"), i);
      if (cluster.find_zone(zones[i]) >= 0) {
        throw core::InputError(fmt::format("{}: zone {} is listed twice (also {})", where,
                                           core::quoted(zones[i]), zone_pointer[zones[i]]));
      }
      zone_pointer[zones[i]] = where.substr(where.find(": ") + 2);
      cluster.zones.push_back({zones[i], static_cast<int>(cluster.regions.size()) - 1});
    }
    r.finish();
  }
}

// The index of a declared zone; `where` locates the name when it is not r's value at `key`.
int zone_index(const hw::Cluster& cluster, ObjectReader& r, std::string_view key, const std::string& name,
               const std::string& where) {
  const int index = cluster.find_zone(name);
  if (index < 0) {
    throw core::InputError(fmt::format("{}: unknown zone {}{}; zones are declared under /regions",
                                       where.empty() ? r.where(key) : where, core::quoted(name),
                                       core::did_you_mean(name, cluster.zone_names())));
  }
  return index;
}

void read_network(ObjectReader& root, hw::Cluster& cluster) {
  ObjectReader network = root.object("network");
  ObjectReader intra = network.object("intra_zone");
  cluster.network.intra_zone = read_link(intra);
  intra.finish();
  if (auto r = network.optional_object("cross_zone")) {
    cluster.network.cross_zone = read_link(*r);
    r->finish();
  }
  if (auto r = network.optional_object("cross_region")) {
    cluster.network.cross_region = read_link(*r);
    r->finish();
  }
  if (network.has("links")) {
    for (ObjectReader& r : network.object_array("links", true)) {
      const std::vector<std::string> zones = r.string_array("zones");
      if (zones.size() != 2) r.fail("zones", fmt::format("expected two zones, found {}", zones.size()));
      hw::ZoneLink link;
      link.zone_a = zone_index(cluster, r, "zones", zones[0], r.where("zones") + "/0");
      link.zone_b = zone_index(cluster, r, "zones", zones[1], r.where("zones") + "/1");
      if (link.zone_a == link.zone_b) r.fail("zones", "a link joins two different zones");
      for (const hw::ZoneLink& other : cluster.network.links) {
        if (std::minmax(other.zone_a, other.zone_b) == std::minmax(link.zone_a, link.zone_b)) {
          r.fail("zones", fmt::format("zones {} and {} are linked twice", core::quoted(zones[0]),
                                      core::quoted(zones[1])));
        }
      }
      link.link = read_link(r);
      r.finish();
      cluster.network.links.push_back(link);
    }
  }
  network.finish();
}

// The nodes; returns the name of each node's GPU type (resolved once the overrides are known).
std::vector<std::string> read_nodes(ObjectReader& root, hw::Cluster& cluster, const hw::Catalog& catalog) {
  std::vector<std::string> type_names;
  std::map<std::string, std::string> node_pointer;
  for (ObjectReader& r : root.object_array("nodes", false)) {
    hw::Node node;
    node.name = r.string("name");
    if (node_pointer.count(node.name)) {
      r.fail("name", fmt::format("node {} is defined twice (also {})", core::quoted(node.name),
                                 node_pointer[node.name]));
    }
    node_pointer[node.name] = r.pointer();
    node.zone = zone_index(cluster, r, "zone", r.string("zone"), "");
    const std::string gpu = r.string("gpu");
    bool overridden = false;
    for (const hw::GpuTypeOverride& o : cluster.gpu_overrides) overridden |= o.name == gpu;
    type_names.push_back(overridden ? gpu : catalog.gpu(gpu, r.where("gpu")).name);
    node.gpu_count = static_cast<int>(r.integer("gpus", 1, 1024));
    node.nic_bandwidth = r.number("nic_gbps", Range::kPositive) * core::kGbps;
    if (auto link = r.optional_string("intra_node_link")) {
      node.intra_node_link = catalog.intra_node_link(*link, r.where("intra_node_link")).name;
    }
    node.price_per_hour = r.optional_number("price_per_hour_usd", Range::kNonNegative);
    r.finish();
    cluster.nodes.push_back(std::move(node));
  }
  return type_names;
}

}  // namespace

hw::Cluster parse_cluster(std::string_view text, std::string_view file, const hw::Catalog& catalog) {
  const detail::Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.cluster/v1");
  hw::Cluster cluster;
  cluster.name = root.string("name");
  cluster.provenance = detail::read_provenance(root);
  read_regions(root, cluster);
  read_network(root, cluster);
  // GPU type overrides, then the nodes.
  if (root.has("gpu_types")) {
    for (auto& [name, r] : root.object_map("gpu_types")) {
      cluster.gpu_overrides.push_back(read_override(name, r, catalog));
    }
  }
  const std::vector<std::string> type_names = read_nodes(root, cluster, catalog);
  root.finish();

  std::vector<int> type_index;
  try {
    type_index = hw::resolve_gpu_types(cluster, type_names, catalog);
  } catch (const core::InputError& e) {
    throw core::InputError(core::located(std::string(file) + ": /gpu_types", e.what()));
  }
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    hw::Node& node = cluster.nodes[i];
    node.gpu_type = type_index[i];
    node.intra_node = node.intra_node_link ? catalog.intra_node_link(*node.intra_node_link, "")
                                           : cluster.gpu_types[node.gpu_type].intra_node;
  }
  try {
    cluster.validate();
  } catch (const core::InputError& e) {
    throw core::InputError(core::located(file, e.what()));
  }
  return cluster;
}

hw::Cluster read_cluster(const std::string& path, const hw::Catalog& catalog) {
  return parse_cluster(read_text_file(path), path, catalog);
}

std::string cluster_to_json(const hw::Cluster& cluster) {
  OrderedJson out;
  out["schema"] = "hetrl.cluster/v1";
  out["name"] = cluster.name;
  detail::write_provenance(out, cluster.provenance);
  OrderedJson regions = OrderedJson::array();
  for (std::size_t r = 0; r < cluster.regions.size(); ++r) {
    OrderedJson zones = OrderedJson::array();
    for (const hw::Zone& zone : cluster.zones) {
      if (zone.region == static_cast<int>(r)) zones.push_back(zone.name);
    }
    regions.push_back({{"name", cluster.regions[r].name}, {"zones", std::move(zones)}});
  }
  out["regions"] = std::move(regions);
  OrderedJson network;
  network["intra_zone"] = write_link(cluster.network.intra_zone);
  if (cluster.network.cross_zone) network["cross_zone"] = write_link(*cluster.network.cross_zone);
  if (cluster.network.cross_region) {
    network["cross_region"] = write_link(*cluster.network.cross_region);
  }
  OrderedJson links = OrderedJson::array();
  for (const hw::ZoneLink& link : cluster.network.links) {
    OrderedJson entry;
    entry["zones"] = {cluster.zones[link.zone_a].name, cluster.zones[link.zone_b].name};
    entry.update(write_link(link.link));
    links.push_back(std::move(entry));
  }
  network["links"] = std::move(links);
  out["network"] = std::move(network);
  OrderedJson nodes = OrderedJson::array();
  for (const hw::Node& node : cluster.nodes) {
    OrderedJson entry;
    entry["name"] = node.name;
    entry["zone"] = cluster.zones[node.zone].name;
    entry["gpu"] = cluster.gpu_types[node.gpu_type].name;
    entry["gpus"] = node.gpu_count;
    entry["nic_gbps"] = detail::file_units(node.nic_bandwidth / core::kGbps);
    if (node.intra_node_link) entry["intra_node_link"] = *node.intra_node_link;
    if (node.price_per_hour) entry["price_per_hour_usd"] = detail::file_units(*node.price_per_hour);
    nodes.push_back(std::move(entry));
  }
  out["nodes"] = std::move(nodes);
  if (!cluster.gpu_overrides.empty()) {
    OrderedJson types = OrderedJson::object();
    for (const hw::GpuTypeOverride& o : cluster.gpu_overrides) types[o.name] = write_override(o);
    out["gpu_types"] = std::move(types);
  }
  return detail::dump(out);
}

}  // namespace hetrl::io
