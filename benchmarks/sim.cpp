// The simulator against the cost model, and its speed, on every scenario given: plans each
// scenario with hybrid, then simulates 10 iterations three times: with fixed response lengths
// (the workload's mean) and every transfer moving as if alone (the cost model's assumption),
// the same with transfers sharing links, and with the workload's own distribution and shared
// links. Prints CSV rows:
//   scenario,gpus,lengths,links,simulated_s,predicted_s,diff_percent,events,wall_seconds,events_per_second
// Usage: sim SCENARIO_DIR...

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/clock.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "plan/evaluate.h"
#include "planner/hybrid.h"
#include "sim/simulator.h"

using namespace hetrl;

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: sim SCENARIO_DIR...\n");
    return 2;
  }
  const io::Catalogs& catalogs = io::builtin_catalogs();
  fmt::print("scenario,gpus,lengths,links,simulated_s,predicted_s,diff_percent,events,wall_seconds,events_per_second\n");
  for (int a = 1; a < argc; ++a) {
    std::filesystem::path dir = std::filesystem::path(argv[a]).lexically_normal();
    if (dir.filename().empty()) dir = dir.parent_path();
    io::Inputs in = io::load_inputs((dir / "cluster.json").string(), (dir / "workload.json").string(), catalogs);
    const std::pair<const char*, bool> runs[] = {{"fixed", false}, {"fixed", true}, {"distribution", true}};
    for (const auto& [lengths, contention] : runs) {
      workload::Workload w = in.workload.workload;
      if (std::string(lengths) == "fixed") {
        const int mean = static_cast<int>(std::lround(w.response.mean()));
        w.response = {};
        w.response.kind = workload::LengthKind::kFixed;
        w.response.fixed_tokens = mean;
      }
      const workload::TaskGraph graph = workload::build_task_graph(w, catalogs.algorithms, in.workload.models);
      const cost::CostModel model(in.cluster, w, graph, in.workload.models);
      const core::SteadyClock clock;
      const planner::PlannerResult r = planner::plan_hybrid(model, in.workload.models, {}, clock);
      if (!r.found) continue;
      const auto start = std::chrono::steady_clock::now();
      sim::SimParams params;
      params.iterations = 10;
      params.link_contention = contention;
      const sim::SimSummary s = sim::simulate(model, r.plan, params);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print("{},{},{},{},{:.4f},{:.4f},{:.2f},{},{:.3f},{:.0f}\n", dir.filename().string(),
                 in.cluster.total_gpus(), lengths, contention ? "shared" : "alone", s.iteration_seconds, r.prediction.iteration_seconds,
                 100 * (s.iteration_seconds / r.prediction.iteration_seconds - 1), s.events, wall,
                 static_cast<double>(s.events) / wall);
      std::fflush(stdout);
    }
  }
  return 0;
}
