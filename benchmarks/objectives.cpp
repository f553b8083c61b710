// Hybrid against the ILP under each objective: the most samples/s, the fewest dollars per
// sample, and the most samples/s within a budget (half the price of the whole cluster an hour,
// so that it binds). Prints CSV rows:
//   scenario,gpus,goal,budget_per_hour,planner,samples_per_second,usd_per_hour,usd_per_1k_samples,
//   planning_seconds,ilp_status,ilp_gap
// Each planner runs as hetrl-plan runs it (60 s for the whole run; the ILP warm-starts from
// hybrid within it). A planner that finds no plan prints zeros.
// Usage: objectives [--goals throughput,cost,budget] [--planners hybrid,ilp] CLUSTER WORKLOAD
//                   [CLUSTER WORKLOAD]...
// A scenario is named after its cluster file's folder when the file is cluster.json, else
// after the two files' stems ("region/ppo-8b-sync").

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/text.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "planner/registry.h"

using namespace hetrl;

namespace {

std::string scenario_name(const std::filesystem::path& cluster, const std::filesystem::path& workload) {
  if (cluster.filename() == "cluster.json") return cluster.parent_path().filename().string();
  return cluster.stem().string() + "/" + workload.stem().string();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> goals{"throughput", "cost", "budget"};
  std::vector<std::string> planners{"hybrid", "ilp"};
  int a = 1;
  for (; a + 1 < argc && std::string(argv[a]).starts_with("--"); a += 2) {
    const std::string flag = argv[a];
    if (flag == "--goals") {
      goals = core::split(argv[a + 1], ',');
    } else if (flag == "--planners") {
      planners = core::split(argv[a + 1], ',');
    } else {
      break;
    }
  }
  if (argc - a < 2 || (argc - a) % 2 != 0) {
    fmt::print(stderr, "usage: objectives [--goals throughput,cost,budget] [--planners hybrid,ilp] CLUSTER WORKLOAD "
                       "[CLUSTER WORKLOAD]...\n");
    return 2;
  }
  for (const std::string& g : goals) {
    if (g != "throughput" && g != "cost" && g != "budget") {
      fmt::print(stderr, "objectives: unknown goal '{}' (throughput, cost or budget)\n", g);
      return 2;
    }
  }
  for (const std::string& p : planners) {
    if (!planner::find_planner(p)) {
      fmt::print(stderr, "objectives: unknown planner '{}'\n", p);
      return 2;
    }
  }
  const io::Catalogs& catalogs = io::builtin_catalogs();
  fmt::print("scenario,gpus,goal,budget_per_hour,planner,samples_per_second,usd_per_hour,usd_per_1k_samples,"
             "planning_seconds,ilp_status,ilp_gap\n");
  for (; a + 1 < argc; a += 2) {
    const std::filesystem::path cluster_path = std::filesystem::path(argv[a]).lexically_normal();
    const std::filesystem::path workload_path = std::filesystem::path(argv[a + 1]).lexically_normal();
    const std::string name = scenario_name(cluster_path, workload_path);
    try {
      const io::Inputs in = io::load_inputs(cluster_path.string(), workload_path.string(), catalogs);
      const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
      const core::SteadyClock clock;
      for (const std::string& g : goals) {
        planner::PlanRequest request;
        if (g == "cost") request.goal.objective = planner::Objective::kCostPerSample;
        if (g == "budget") request.goal.budget_per_hour = 0.5 * in.cluster.price_per_hour().value_or(0.0);
        for (const std::string& planner_name : planners) {
          const planner::PlannerEntry* entry = planner::find_planner(planner_name);
          const double start = clock.seconds();
          const planner::PlannerResult r = entry->run(model, in.workload.models, request, clock);
          const double seconds = clock.seconds() - start;
          const plan::PlannerInfo& info = r.plan.planner;
          const std::string ilp = entry->name == "ilp"
                                      ? fmt::format("{},{:.3g}", info.param("status").value_or(""), info.stat("gap").value_or(0))
                                      : ",";
          const double sps = r.found ? r.prediction.samples_per_second : 0.0;
          const double usd = r.found ? r.prediction.price_per_hour.value_or(0.0) : 0.0;
          const double per_1k = sps > 0 ? 1000 * usd / 3600 / sps : 0.0;
          fmt::print("{},{},{},{:.2f},{},{:.4f},{:.2f},{:.4f},{:.3f},{}\n", name, in.cluster.total_gpus(), g,
                     request.goal.budget_per_hour.value_or(0.0), entry->name, sps, usd, per_1k, seconds, ilp);
          std::fflush(stdout);
        }
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "objectives: {}: {}\n", name, e.what());
      return 1;
    }
  }
  return 0;
}
