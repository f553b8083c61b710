// Runs the baselines and the searching planners of the planner table on every scenario given
// and prints CSV rows:
//   scenario,gpus,planner,samples_per_second,planning_seconds,evaluations,ilp_status,ilp_gap,
//   ilp_build_seconds,ilp_solve_seconds,ilp_kept
// A scenario is a folder with cluster.json and workload.json. Every planner runs as hetrl-plan
// runs it, with the default settings (60 s for the whole run). A planner that finds no plan
// prints 0 samples/s. The ILP columns are filled on the ILP's row only, from its plan's record;
// when it stopped before solving ("refused", or "build time limit" with hybrid's plan as the
// best so far) the evaluations are the configurations of its space.
// Usage: planners SCENARIO_DIR...

#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "core/clock.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "planner/ilp_planner.h"
#include "planner/registry.h"

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
      const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
      const core::SteadyClock clock;
      for (const planner::PlannerEntry& entry : planner::planner_table()) {
        if (entry.kind != planner::PlannerKind::kBaseline && entry.kind != planner::PlannerKind::kSearch) continue;
        // verl's one-step off-policy baseline plans async workloads only.
        if (entry.name == "verl-async" && in.workload.workload.staleness() < 1) continue;
        const double start = clock.seconds();
        const planner::PlannerResult r = entry.run(model, in.workload.models, {}, clock);
        const double seconds = clock.seconds() - start;
        std::string ilp = ",,,,";
        long long evaluations = r.evaluations;
        if (entry.name == "ilp") {
          const plan::PlannerInfo& info = r.plan.planner;
          const std::string status = info.param("status").value_or("");
          const bool built = status != "refused" && status != "build time limit";
          if (!built) evaluations = planner::ilp_configuration_count(model, in.workload.models, {});
          ilp = built ? fmt::format("{},{:.3g},{:.3f},{:.3f},{}", status, info.stat("gap").value_or(0),
                                    r.run_stat("build_seconds").value_or(0), r.run_stat("solve_seconds").value_or(0),
                                    info.stat("configurations_kept").value_or(0))
                      : status + ",,,,";
        }
        fmt::print("{},{},{},{:.4f},{:.3f},{},{}\n", dir.filename().string(), in.cluster.total_gpus(), entry.name,
                   r.found ? r.prediction.samples_per_second : 0.0, seconds, evaluations, ilp);
        std::fflush(stdout);
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "planners: {}: {}\n", dir.string(), e.what());
      return 1;
    }
  }
  return 0;
}
