#include "hw/cluster_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "core/units.h"

namespace hetrl::hw {
namespace {

std::string money(const std::optional<double>& usd) {
  return usd ? fmt::format("{:.2f}", *usd) : std::string("n/a");
}

std::string link_text(const LinkSpec& link) {
  // Slow links are often below 1 Gbps: up to four significant digits, not rounded to units.
  return fmt::format("{:>8.4g} {:>11.3f}", link.bandwidth / core::kGbps,
                     link.latency / core::kMillisecond);
}

std::string counted(std::size_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

}  // namespace

std::string cluster_summary(const Cluster& cluster) {
  return fmt::format("{} in {}, {}, {}", counted(static_cast<std::size_t>(cluster.total_gpus()), "GPU"),
                     counted(cluster.nodes.size(), "node"), counted(cluster.zones.size(), "zone"),
                     counted(cluster.regions.size(), "region"));
}

std::string format_cluster_table(const Cluster& cluster) {
  struct Row {
    int nodes = 0;
    int gpus = 0;
    double flops = 0;
    double memory = 0;
    std::optional<double> price = 0.0;
  };
  // Rows keyed by (zone, GPU type) in the order zones and types first appear.
  std::vector<std::pair<std::pair<int, int>, Row>> rows;
  auto row_for = [&](int zone, int type) -> Row& {
    for (auto& [key, row] : rows) {
      if (key == std::make_pair(zone, type)) return row;
    }
    rows.push_back({{zone, type}, Row{}});
    return rows.back().second;
  };
  std::vector<int> zone_order;
  for (const Node& node : cluster.nodes) {
    if (std::find(zone_order.begin(), zone_order.end(), node.zone) == zone_order.end()) {
      zone_order.push_back(node.zone);
    }
  }
  for (const int zone : zone_order) {
    for (const Node& node : cluster.nodes) {
      if (node.zone != zone) continue;
      const GpuSpec& spec = cluster.gpu_types[node.gpu_type];
      Row& row = row_for(node.zone, node.gpu_type);
      row.nodes += 1;
      row.gpus += node.gpu_count;
      row.flops += spec.tensor_flops() * node.gpu_count;
      row.memory += spec.memory * node.gpu_count;
      const std::optional<double> price = cluster.node_price_per_hour(node);
      row.price = row.price && price ? std::optional<double>(*row.price + *price) : std::nullopt;
    }
  }

  std::string out = fmt::format("cluster {}: {}\n\n", cluster.name, cluster_summary(cluster));
  const auto header = fmt::format("{:<16} {:<14} {:<14} {:>5} {:>5} {:>11} {:>11} {:>9}\n",
                                  "zone", "region", "GPU type", "nodes", "GPUs", "BF16 PFLOPS",
                                  "memory GiB", "$/hour");
  out += header;
  out += std::string(header.size() - 1, '-') + "\n";
  Row total;
  for (const auto& [key, row] : rows) {
    const Zone& zone = cluster.zones[key.first];
    out += fmt::format("{:<16} {:<14} {:<14} {:>5} {:>5} {:>11.2f} {:>11.0f} {:>9}\n", zone.name,
                       cluster.regions[zone.region].name, cluster.gpu_types[key.second].name,
                       row.nodes, row.gpus, row.flops / 1e15, row.memory / core::kGiB,
                       money(row.price));
    total.nodes += row.nodes;
    total.gpus += row.gpus;
    total.flops += row.flops;
    total.memory += row.memory;
    total.price = total.price && row.price ? std::optional<double>(*total.price + *row.price)
                                           : std::nullopt;
  }
  out += std::string(header.size() - 1, '-') + "\n";
  out += fmt::format("{:<46} {:>5} {:>5} {:>11.2f} {:>11.0f} {:>9}\n", "total", total.nodes,
                     total.gpus, total.flops / 1e15, total.memory / core::kGiB,
                     money(total.price));

  const auto [slowest, fastest] = std::minmax_element(
      cluster.nodes.begin(), cluster.nodes.end(),
      [](const Node& a, const Node& b) { return a.nic_bandwidth < b.nic_bandwidth; });
  out += fmt::format("\nnetwork: {:.0f} Gbps, {:.3f} ms inside a zone; node NICs from {:.0f} to "
                     "{:.0f} Gbps\n",
                     cluster.network.intra_zone.bandwidth / core::kGbps,
                     cluster.network.intra_zone.latency / core::kMillisecond,
                     slowest->nic_bandwidth / core::kGbps, fastest->nic_bandwidth / core::kGbps);
  if (zone_order.size() > 1) {
    out += fmt::format("\n{:<16} {:<16} {:>8} {:>11}  {}\n", "zone", "zone", "Gbps",
                       "latency ms", "path");
    const ZonePaths paths(cluster);
    for (std::size_t i = 0; i < zone_order.size(); ++i) {
      for (std::size_t j = i + 1; j < zone_order.size(); ++j) {
        const Path& path = paths(zone_order[i], zone_order[j]);
        out += fmt::format("{:<16} {:<16} {}  {}\n", cluster.zones[zone_order[i]].name,
                           cluster.zones[zone_order[j]].name, link_text(path.link),
                           path_kind_name(path.kind));
      }
    }
  }
  return out;
}

std::string format_catalog(const Catalog& catalog) {
  std::string out = "GPU types\n";
  out += fmt::format("{:<14} {:>7} {:>8} {:>10} {:>8} {:<8} {:>8}\n", "name", "mem GiB", "mem GB/s",
                     "BF16 TFLOPS", "FP32", "link", "$/GPU-h");
  for (const GpuSpec& gpu : catalog.gpus) {
    out += fmt::format("{:<14} {:>7.0f} {:>8.0f} {:>10} {:>8.1f} {:<8} {:>8}\n", gpu.name,
                       gpu.memory / core::kGiB, gpu.memory_bandwidth / core::kGBps,
                       gpu.bf16_flops > 0 ? fmt::format("{:.1f}", gpu.bf16_flops / core::kTflops)
                                          : fmt::format("{:.1f}*", gpu.fp16_flops / core::kTflops),
                       gpu.fp32_flops / core::kTflops, gpu.intra_node.name,
                       money(gpu.price_per_hour));
  }
  out += "* no BF16: the FP16 tensor peak\n\nInstance presets (--preset-node)\n";
  out += fmt::format("{:<16} {:<14} {:>5} {:>9} {:>9}\n", "name", "GPU type", "GPUs", "NIC Gbps",
                     "$/hour");
  for (const InstancePreset& instance : catalog.instances) {
    out += fmt::format("{:<16} {:<14} {:>5} {:>9.0f} {:>9}\n", instance.name, instance.gpu,
                       instance.gpus_per_node, instance.nic_bandwidth / core::kGbps,
                       money(instance.price_per_hour));
  }
  out += "\nNetwork presets (--link, --intra-zone, --cross-zone, --cross-region)\n";
  out += fmt::format("{:<16} {:>8} {:>11}\n", "name", "Gbps", "latency ms");
  for (const NetworkPreset& network : catalog.networks) {
    out += fmt::format("{:<16} {}\n", network.name, link_text(network.link));
  }
  return out;
}

}  // namespace hetrl::hw
