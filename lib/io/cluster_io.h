#pragma once
// The cluster file (hetrl.cluster/v1):
//
//   {"schema": "hetrl.cluster/v1", "name": "...",
//    "regions": [{"name": "us-east-1", "zones": ["us-east-1a", ...]}, ...],
//    "network": {"intra_zone": {"bandwidth_gbps": G, "latency_ms": L},
//                "cross_zone": {...}, "cross_region": {...},          (optional defaults)
//                "links": [{"zones": ["A", "B"], "bandwidth_gbps": G, "latency_ms": L}]},
//    "nodes": [{"name": "...", "zone": "...", "gpu": "A100-SXM-80G", "gpus": 8,
//               "nic_gbps": 400, "intra_node_link": "nvlink3", "price_per_hour_usd": 41}],
//    "gpu_types": {"A100-SXM-80G": {"price_per_gpu_hour_usd": 3.1,
//                                   "efficiency": {"gemm_large": 0.72}, "source": "..."}}}
//
// intra_node_link and price_per_hour_usd of a node are optional; gpu_types may override any
// catalogue field of a type or define a new type. Latencies are one-way.

#include <string>
#include <string_view>

#include "hw/cluster.h"

namespace hetrl::io {

// Parses and validates. Errors name `file` and the JSON pointer of the value at fault.
hw::Cluster parse_cluster(std::string_view text, std::string_view file, const hw::Catalog& catalog);
hw::Cluster read_cluster(const std::string& path, const hw::Catalog& catalog);

// The cluster as a JSON document (keys in a fixed order, two-space indent, final newline).
std::string cluster_to_json(const hw::Cluster& cluster);

}  // namespace hetrl::io
