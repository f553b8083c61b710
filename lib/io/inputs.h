#pragma once
// What every planning tool loads: the cluster and the workload (from files, or the embedded
// defaults when a path is empty), the task graph built from them, and their content hashes.

#include <string>

#include "hw/cluster.h"
#include "io/catalog_io.h"
#include "io/workload_io.h"
#include "workload/rl_graph.h"

namespace hetrl::io {

struct Inputs {
  hw::Cluster cluster;
  LoadedWorkload workload;
  workload::TaskGraph graph;
  std::string cluster_hash;
  std::string workload_hash;
};

Inputs load_inputs(const std::string& cluster_path, const std::string& workload_path,
                   const Catalogs& catalogs);

}  // namespace hetrl::io
