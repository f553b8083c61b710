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

// The workload alone (the embedded default when `path` is empty), its task graph and hash.
struct WorkloadInputs {
  LoadedWorkload workload;
  workload::TaskGraph graph;
  std::string hash;
};
WorkloadInputs load_workload(const std::string& path, const Catalogs& catalogs);

Inputs load_inputs(const std::string& cluster_path, const std::string& workload_path,
                   const Catalogs& catalogs);

}  // namespace hetrl::io
