#include "io/inputs.h"

#include "core/hash.h"
#include "io/cluster_io.h"
#include "io/files.h"

namespace hetrl::io {

WorkloadInputs load_workload(const std::string& path, const Catalogs& catalogs) {
  WorkloadInputs in;
  if (path.empty()) {
    const std::string_view text = builtin_file("default_workload.json");
    in.workload = parse_workload(text, "default_workload.json (embedded)", "", catalogs.algorithms, catalogs.models);
    in.hash = core::content_hash(text);
  } else {
    in.workload = read_workload(path, catalogs.algorithms, catalogs.models);
    in.hash = core::content_hash(read_text_file(path) + in.workload.model_file_text);
  }
  in.graph = workload::build_task_graph(in.workload.workload, catalogs.algorithms, in.workload.models);
  return in;
}

Inputs load_inputs(const std::string& cluster_path, const std::string& workload_path,
                   const Catalogs& catalogs) {
  Inputs in;
  in.cluster = cluster_path.empty()
                   ? parse_cluster(builtin_file("default_cluster.json"),
                                   "default_cluster.json (embedded)", catalogs.hardware)
                   : read_cluster(cluster_path, catalogs.hardware);
  in.cluster_hash = core::content_hash(cluster_to_json(in.cluster));
  WorkloadInputs w = load_workload(workload_path, catalogs);
  in.workload = std::move(w.workload);
  in.graph = std::move(w.graph);
  in.workload_hash = std::move(w.hash);
  return in;
}

}  // namespace hetrl::io
