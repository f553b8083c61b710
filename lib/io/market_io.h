#pragma once
// The market file (hetrl.market/v1): what a capacity search may rent.
//
//   {"schema": "hetrl.market/v1", "name": "...",
//    "offers": [{"instance": "us-east-1a:p4de.24xlarge", "max_nodes": 4, "existing_nodes": 1,
//                "price_per_hour_usd": 40.97},
//               {"node": "us-east-1a:8xL40S:nic_gbps=400", "max_nodes": 8}],
//    "network": {"links": ["us-east-1a,us-west-2a:gbps=10,latency_ms=30"],
//                "regions": ["us=us-east-1a,us-west-2a"],
//                "intra_zone": "same-zone", "cross_zone": "cross-zone", "cross_region": "cross-region"}}
//
// An offer is one node, as hetrl-cluster's --preset-node or --node spec gives it (without a
// node count); max_nodes is how many can be rented (default 0), existing_nodes how many are
// already paid for (default 0), and price_per_hour_usd the price of a rented node: by default
// the instance's, the spec's price_per_hour_usd, or the GPU type's catalogue price times its
// GPUs. The network is optional, each spec as hetrl-cluster's flags take it; its links and
// regions name zones that offers have.

#include <string>
#include <string_view>

#include "hw/gpu.h"
#include "planner/capacity.h"

namespace hetrl::io {

// Parses and validates. Errors name `file` and the JSON pointer of the value at fault.
planner::Market parse_market(std::string_view text, std::string_view file, const hw::Catalog& catalog);

// What hetrl-plan capacity writes with --json: hetrl.capacity/v1, the market and workload (by
// name and content hash), the target, how the search ended, the cheapest cluster reaching the
// target and, with --pareto, the front: each cluster as its rented and paid nodes per offer,
// its GPUs, its price and the best plan's samples/s.
std::string capacity_json(const planner::Market& market, const planner::CapacityReport& report,
                          const std::string& market_hash, const std::string& workload_hash);

}  // namespace hetrl::io
