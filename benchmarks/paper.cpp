// The paper's evaluation setting (benchmarks/paper/): every cluster of CLUSTER_DIR with every
// workload of WORKLOAD_DIR, each planned by hybrid and by the baselines of its mode (verl for
// sync workloads; verl-async and streamrl for async ones), each plan predicted by the cost
// model and simulated (20 iterations, response lengths drawn from the workload, transfers
// sharing links). Prints CSV rows:
//   network,workload,algorithm,model,mode,planner,predicted_sps,simulated_sps,planning_seconds,gpus_used,groups
// Usage: paper CLUSTER_DIR WORKLOAD_DIR

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/clock.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "planner/baselines.h"
#include "planner/hybrid.h"
#include "planner/layout.h"
#include "sim/simulator.h"

using namespace hetrl;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> json_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: paper CLUSTER_DIR WORKLOAD_DIR\n");
    return 2;
  }
  const io::Catalogs& catalogs = io::builtin_catalogs();
  fmt::print("network,workload,algorithm,model,mode,planner,predicted_sps,simulated_sps,planning_seconds,gpus_used,groups\n");
  try {
    for (const fs::path& cluster : json_files(argv[1])) {
      for (const fs::path& workload : json_files(argv[2])) {
        const io::Inputs in = io::load_inputs(cluster.string(), workload.string(), catalogs);
        const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
        const bool async = in.workload.workload.staleness() >= 1;
        const std::vector<int> nodes = planner::all_nodes(in.cluster);
        const core::SteadyClock clock;
        const auto row = [&](const char* name, auto&& plan) {
          const double start = clock.seconds();
          const planner::PlannerResult r = plan();
          const double seconds = clock.seconds() - start;
          double simulated = 0;
          int gpus = 0;
          if (r.found) {
            sim::SimParams params;
            params.iterations = 20;
            params.link_contention = true;
            simulated = 1.0 / sim::simulate(model, r.plan, params).iteration_seconds *
                        in.workload.workload.samples_per_iteration();
            for (const plan::Group& g : r.plan.groups) gpus += static_cast<int>(g.gpus.size());
          }
          fmt::print("{},{},{},{},{},{},{:.4f},{:.4f},{:.3f},{},{}\n", cluster.stem().string(),
                     workload.stem().string(), in.workload.workload.algorithm,
                     in.workload.workload.role(workload::Role::kActor).model, async ? "async" : "sync", name,
                     r.found ? r.prediction.samples_per_second : 0.0, simulated, seconds, gpus,
                     r.found ? r.plan.groups.size() : 0);
          std::fflush(stdout);
        };
        row("hybrid", [&] { return planner::plan_hybrid(model, in.workload.models, {}, clock); });
        if (async) {
          row("verl-async", [&] { return planner::plan_verl_async(model, in.workload.models, nodes); });
          row("streamrl", [&] { return planner::plan_streamrl(model, in.workload.models, nodes); });
        } else {
          row("verl", [&] { return planner::plan_verl(model, in.workload.models, nodes); });
        }
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "paper: {}\n", e.what());
    return 1;
  }
  return 0;
}
