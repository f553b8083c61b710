// Runs every planner on every scenario given and prints CSV rows:
//   scenario,gpus,planner,samples_per_second,planning_seconds,evaluations,ilp_status,ilp_gap,
//   ilp_build_seconds,ilp_solve_seconds,ilp_kept
// A scenario is a folder with cluster.json and workload.json. A planner that finds no plan
// prints 0 samples/s; the ILP columns are filled on the ILP's row only ("build time limit" or
// "refused" when its build stopped at the time limit or at its configuration or column limit;
// evaluations are then the configurations of the space). Usage: planners SCENARIO_DIR...

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "core/clock.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "planner/baselines.h"
#include "planner/hybrid.h"
#include "planner/ilp_planner.h"
#include "core/error.h"

using namespace hetrl;

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: planners SCENARIO_DIR...\n");
    return 2;
  }
  const io::Catalogs& catalogs = io::builtin_catalogs();
  fmt::print("scenario,gpus,planner,samples_per_second,planning_seconds,evaluations,ilp_status,"
             "ilp_gap,ilp_build_seconds,ilp_solve_seconds,ilp_kept\n");
  for (int a = 1; a < argc; ++a) {
    std::filesystem::path dir = std::filesystem::path(argv[a]).lexically_normal();
    if (dir.filename().empty()) dir = dir.parent_path();  // "scenario/" names the folder too
    try {
      const io::Inputs in = io::load_inputs((dir / "cluster.json").string(),
                                            (dir / "workload.json").string(), catalogs);
      const cost::CostModel model(in.cluster, in.workload.workload, in.graph, catalogs.models);
      const std::vector<int> nodes = planner::all_nodes(in.cluster);
      const core::SteadyClock clock;
      const auto run = [&](const char* name, const auto& plan) {
        const double start = clock.seconds();
        const planner::PlannerResult r = plan();
        const double seconds = clock.seconds() - start;
        fmt::print("{},{},{},{:.4f},{:.3f},{},,,,\n", dir.filename().string(), in.cluster.total_gpus(), name,
                   r.found ? r.prediction.samples_per_second : 0.0, seconds, r.evaluations);
        std::fflush(stdout);
      };
      run("verl", [&] { return planner::plan_verl(model, catalogs.models, nodes); });
      run("streamrl", [&] { return planner::plan_streamrl(model, catalogs.models, nodes); });
      run("homogeneous", [&] { return planner::plan_homogeneous(model, catalogs.models); });
      planner::PlannerResult hybrid;
      run("hybrid", [&] {
        hybrid = planner::plan_hybrid(model, catalogs.models, {}, clock);
        return hybrid;
      });
      // The ILP, warm-started from hybrid's plan, with a 60 s limit.
      planner::IlpParams ilp;
      ilp.solve.time_limit = 60;
      const double start = clock.seconds();
      try {
        const planner::IlpOutcome o = planner::plan_ilp(model, catalogs.models, ilp, hybrid.found ? &hybrid.plan : nullptr);
        fmt::print("{},{},ilp,{:.4f},{:.3f},{},{},{:.3g},{:.3f},{:.3f},{}\n", dir.filename().string(),
                   in.cluster.total_gpus(), o.result.found ? o.result.prediction.samples_per_second : 0.0,
                   clock.seconds() - start, o.configs, ilp::status_name(o.solve.status), o.solve.gap,
                   o.build_seconds, o.solve.seconds, o.kept_configs);
      } catch (const core::JobError& e) {
        // The build stopped: past the time limit, or past the configurations it may compose.
        const bool timed_out = std::string(e.what()).find("time limit") != std::string::npos;
        fmt::print("{},{},ilp,0,{:.3f},{},{},,,,\n", dir.filename().string(), in.cluster.total_gpus(),
                   clock.seconds() - start, planner::ilp_configuration_count(model, catalogs.models, ilp),
                   timed_out ? "build time limit" : "refused");
      }
      std::fflush(stdout);
    } catch (const std::exception& e) {
      fmt::print(stderr, "planners: {}: {}\n", dir.string(), e.what());
      return 1;
    }
  }
  return 0;
}
