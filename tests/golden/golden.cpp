// Golden plans and reports for the benchmark scenarios: the safety net under restructuring.
//
//   hetrl_golden check GOLDEN_DIR SCENARIOS_DIR SCENARIO   compare, exit 1 on any difference
//   hetrl_golden write GOLDEN_DIR SCENARIOS_DIR SCENARIO   (re)write the files (scripts/golden)
//
// For a scenario it plans with every baseline and with hybrid (seed 1, a clock that never
// advances, so the time limit never binds), with the ILP where it proves optimality quickly,
// and with the variants the table below names; each plan is written as the plan file and as
// the table hetrl-plan prints with --explain, and (but for the ILP's) as hetrl-plan export
// writes it for verl and for OpenRLHF, or the reasons it refuses. For some scenarios hybrid's plan is also
// simulated (3 iterations, seed 1) and its report kept. Seconds the search took are the one
// thing that differs between runs: they are set to 0 before writing. Every plan file is also
// read back and evaluated: it must predict, bit for bit, what the planner's plan predicted.

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "io/sim_io.h"
#include "plan/evaluate.h"
#include "plan/export.h"
#include "plan/report.h"
#include "planner/baselines.h"
#include "planner/hybrid.h"
#include "planner/ilp_planner.h"
#include "sim/recorder.h"
#include "sim/simulator.h"

namespace {

using namespace hetrl;
namespace fs = std::filesystem;

struct ScenarioCase {
  const char* name;
  bool ilp;       // the ILP proves optimality in seconds (warm-started from hybrid)
  bool simulate;  // keep the simulator's report of hybrid's plan
  bool cost;      // hybrid and the ILP with the cost objective, hybrid under a budget
};

constexpr ScenarioCase kCases[] = {
    {"homog-a100-32", true, false, false},
    {"homog-h100-64", false, false, false},
    {"regions2-a100-h100-128", true, false, false},
    {"regions2-h100-l40s-64", true, true, false},
    {"regions2-mixed-64", false, true, false},
    {"regions3-mixed-256", false, false, false},
    {"regions3-mixed-512", false, false, false},
    {"zone1-3types-48", true, false, true},
    {"zone1-a100-l4-16", true, true, false},
    {"zone1-a100-l40s-32", true, false, false},
    {"zone1-l40s-a10g-16", true, false, false},
    {"zones2-a100-a10g-72", true, false, true},
    {"zones2-a100-l40s-64", false, false, false},
    {"zones2-mixed-128", false, true, false},
    {"zones3-mixed-64", true, false, false},
};

constexpr double kIlpTimeLimit = 600;

class Golden {
 public:
  Golden(fs::path dir, bool write) : dir_(std::move(dir)), write_(write) {}

  // Compares `text` with the file (check) or writes it (write).
  void file(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    if (write_) {
      fs::create_directories(path.parent_path());
      std::ofstream(path, std::ios::binary) << text;
      return;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      fmt::print(stderr, "golden: {} is missing\n", path.string());
      ++differences_;
      return;
    }
    std::stringstream expected;
    expected << in.rdbuf();
    if (expected.str() == text) return;
    ++differences_;
    std::istringstream a(expected.str()), b(text);
    std::string la, lb;
    for (int line = 1;; ++line) {
      const bool ha = static_cast<bool>(std::getline(a, la));
      const bool hb = static_cast<bool>(std::getline(b, lb));
      if (!ha && !hb) break;
      if (ha != hb || la != lb) {
        fmt::print(stderr, "golden: {} differs at line {}:\n  expected: {}\n  found:    {}\n",
                   path.string(), line, ha ? la : "(end of file)", hb ? lb : "(end of file)");
        break;
      }
    }
  }
  void mismatch(const std::string& what) {
    fmt::print(stderr, "golden: {}\n", what);
    ++differences_;
  }
  int differences() const { return differences_; }

 private:
  fs::path dir_;
  bool write_;
  int differences_ = 0;
};

// Whether two predictions agree bit for bit in every figure a plan file or the table shows.
std::string first_difference(const plan::Prediction& a, const plan::Prediction& b, const workload::TaskGraph& graph) {
  if (a.feasible != b.feasible) return "feasible";
  if (a.iteration_seconds != b.iteration_seconds) return "iteration_seconds";
  if (a.makespan_seconds != b.makespan_seconds) return "makespan_seconds";
  if (a.samples_per_second != b.samples_per_second) return "samples_per_second";
  if (a.price_per_hour != b.price_per_hour) return "price_per_hour";
  for (std::size_t t = 0; t < a.tasks.size(); ++t) {
    if (a.tasks[t].seconds != b.tasks[t].seconds || a.tasks[t].start != b.tasks[t].start) {
      return "the seconds of " + graph.tasks[t].name;
    }
  }
  for (std::size_t g = 0; g < a.groups.size(); ++g) {
    if (a.groups[g].busy_seconds != b.groups[g].busy_seconds ||
        a.groups[g].tightest.used() != b.groups[g].tightest.used()) {
      return fmt::format("group {}", g);
    }
  }
  return "";
}

// Zeroes the statistics that measure wall time.
void drop_seconds(plan::Plan& plan) {
  for (auto& [name, value] : plan.planner.stats) {
    if (name.ends_with("seconds") && name != "ilp_iteration_seconds") value = 0;
  }
}

int run(const std::string& mode, const fs::path& golden, const fs::path& scenarios,
        const std::string& name) {
  const ScenarioCase* scenario = nullptr;
  for (const ScenarioCase& c : kCases) {
    if (c.name == name) scenario = &c;
  }
  if (!scenario) {
    fmt::print(stderr, "golden: unknown scenario {}\n", name);
    return 2;
  }
  Golden out(golden / name, mode == "write");
  const io::Catalogs& catalogs = io::builtin_catalogs();
  const fs::path dir = scenarios / name;
  const io::Inputs in = io::load_inputs((dir / "cluster.json").string(),
                                        (dir / "workload.json").string(), catalogs);
  const cost::CostModel model(in.cluster, in.workload.workload, in.graph, catalogs.models);
  const plan::ReportContext context{in.workload.name, in.cluster, in.graph, in.workload.workload};
  const core::FakeClock clock;  // never advances: the time limit never binds

  const auto keep = [&](const std::string& label, planner::PlannerResult result) {
    if (!result.found) {
      out.file(label + ".plan.json", "no plan: " + result.why_not + "\n");
      out.file(label + ".txt", "no plan: " + result.why_not + "\n");
      return;
    }
    plan::Plan& p = result.plan;
    drop_seconds(p);
    p.cluster_hash = in.cluster_hash;
    p.workload_hash = in.workload_hash;
    plan::Evaluator evaluator(model);
    const plan::Prediction& prediction = evaluator.evaluate(p, true);
    out.file(label + ".txt", plan::format_plan(p, prediction, context, true));
    const std::string json = io::plan_to_json(p, prediction, in.cluster, in.graph);
    out.file(label + ".plan.json", json);
    // Read back and evaluated, the plan file predicts exactly what was written.
    const plan::Plan back = io::parse_plan(json, label + ".plan.json", in.cluster, in.graph, catalogs.models);
    plan::Evaluator again(model);
    const std::string differs = first_difference(prediction, again.evaluate(back, true), in.graph);
    if (!differs.empty()) out.mismatch(label + ".plan.json read back predicts another " + differs);
    // The plan as each runtime's configuration, or the reasons it cannot run it.
    if (label.starts_with("ilp")) return;
    const plan::ExportInputs inputs{p, in.cluster, in.workload.workload, in.graph, catalogs.models, model, prediction};
    for (const plan::Runtime runtime : {plan::Runtime::kVerl, plan::Runtime::kOpenRlhf}) {
      std::string text;
      try {
        text = plan::format_export(plan::export_plan(runtime, inputs), inputs, in.workload.name);
      } catch (const core::JobError& e) {
        text = fmt::format("refused: {}\n", e.what());
      }
      out.file(fmt::format("{}.{}.sh", label, plan::runtime_name(runtime)), text);
    }
  };
  const std::vector<int> nodes = planner::all_nodes(in.cluster);
  keep("verl", planner::plan_verl(model, catalogs.models, nodes));
  keep("streamrl", planner::plan_streamrl(model, catalogs.models, nodes));
  keep("homogeneous", planner::plan_homogeneous(model, catalogs.models));
  const planner::PlannerResult hybrid = planner::plan_hybrid(model, catalogs.models, {}, clock);
  keep("hybrid", hybrid);

  const auto ilp = [&](const std::string& label, planner::IlpParams params, const plan::Plan* warm) {
    params.solve.time_limit = kIlpTimeLimit;
    planner::IlpOutcome outcome = planner::plan_ilp(model, catalogs.models, params, clock, warm);
    if (!outcome.solved || outcome.solve.status != ilp::Status::kOptimal) {
      throw core::JobError(fmt::format("{}: the ILP did not prove optimality ({})", label,
                                       ilp::status_name(outcome.solve.status)));
    }
    keep(label, std::move(outcome.result));
  };
  if (scenario->ilp) ilp("ilp", {}, hybrid.found ? &hybrid.plan : nullptr);
  if (scenario->cost) {
    planner::HybridParams cost_params;
    cost_params.goal.objective = planner::Objective::kCostPerSample;
    const planner::PlannerResult cheap = planner::plan_hybrid(model, catalogs.models, cost_params, clock);
    keep("hybrid-cost", cheap);
    planner::IlpParams ilp_cost;
    ilp_cost.goal.objective = planner::Objective::kCostPerSample;
    ilp("ilp-cost", ilp_cost, cheap.found ? &cheap.plan : nullptr);
    // A budget at 60% of what hybrid's fastest plan costs.
    planner::HybridParams budget_params;
    budget_params.goal.budget_per_hour = 0.6 * hybrid.prediction.price_per_hour.value_or(0);
    keep("hybrid-budget", planner::plan_hybrid(model, catalogs.models, budget_params, clock));
  }
  if (scenario->simulate && hybrid.found) {
    sim::SimParams params;
    sim::Recorder recorder;
    std::vector<sim::Listener*> listeners{&recorder};
    const sim::SimSummary summary = sim::simulate(model, hybrid.plan, params, listeners);
    plan::Evaluator evaluator(model);
    out.file("sim.json", io::sim_report_json({"hybrid.plan.json", in.cluster_hash, in.workload_hash, params},
                                             summary, recorder, evaluator.evaluate(hybrid.plan), in.graph));
  }
  return out.differences() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 5 ? argv[1] : "";
  if (mode != "check" && mode != "write") {
    fmt::print(stderr, "usage: hetrl_golden check|write GOLDEN_DIR SCENARIOS_DIR SCENARIO\n");
    return 2;
  }
  try {
    return run(mode, argv[2], argv[3], argv[4]);
  } catch (const std::exception& e) {
    fmt::print(stderr, "golden: {}: {}\n", argv[4], e.what());
    return 1;
  }
}
