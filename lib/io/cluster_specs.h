#pragma once
// A cluster as hetrl-cluster's flags describe it: node, link, region and network specs as
// people write them (hw/cluster_builder.h has each syntax), measured profiles to adopt and GPU
// prices, built into a validated cluster that records the files it was made from.

#include <string>
#include <vector>

#include "hw/cluster.h"
#include "io/catalog_io.h"

namespace hetrl::io {

struct ClusterSpecs {
  std::string name = "cluster";
  std::vector<std::string> nodes;         // ZONE:[NODES x]GPUS x GPU_TYPE[:key=value,...]
  std::vector<std::string> preset_nodes;  // ZONE:[NODES x]INSTANCE[:key=value,...]
  std::vector<std::string> links;         // ZONE,ZONE:gbps=G,latency_ms=L or ZONE,ZONE:PRESET
  std::vector<std::string> regions;       // REGION=ZONE,ZONE
  std::vector<std::string> profiles;      // files (hetrl.profile/v1)
  std::vector<std::string> prices;        // GPU_TYPE=USD_PER_GPU_HOUR
  std::string intra_zone;                 // network specs; empty: the catalogue's default
  std::string cross_zone;
  std::string cross_region;
};

// Throws core::InputError naming the flag and spec at fault.
hw::Cluster build_cluster(const ClusterSpecs& specs, const Catalogs& catalogs);

}  // namespace hetrl::io
