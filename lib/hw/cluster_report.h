#pragma once
// Human-readable views of a cluster and of the catalogue, as hetrl-cluster prints them.

#include <string>

#include "hw/cluster.h"

namespace hetrl::hw {

// "40 GPUs in 5 nodes, 3 zones, 2 regions".
std::string cluster_summary(const Cluster& cluster);

// Nodes per zone and GPU type with GPUs, dense BF16 PFLOPS, memory and $/hour, totals, and
// the network paths between the zones that hold nodes.
std::string format_cluster_table(const Cluster& cluster);

// The GPU types, instance presets and network presets of the catalogue.
std::string format_catalog(const Catalog& catalog);

}  // namespace hetrl::hw
