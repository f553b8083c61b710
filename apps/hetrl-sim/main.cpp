// hetrl-sim: simulate RL iterations of a plan event by event, to check what the cost model's
// closed forms approximate and to show where the time goes; or several plans side by side on
// the same sampled response lengths; or sample response lengths into a trace file.

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <limits>

#include "common/tool.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/version.h"
#include "cost/cost_model.h"
#include "io/catalog_io.h"
#include "io/files.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "io/sim_io.h"
#include "sim/run_text.h"
#include "workload/lengths.h"

namespace {

using namespace hetrl;

constexpr const char* kExamples = R"(Examples:
  hetrl-sim --cluster c.json --workload w.json --plan plan.json --iterations 5 \
            --report report.json --trace trace.json      (open trace.json in Perfetto)
  hetrl-sim --cluster c.json --workload w.json --compare a.json b.json
  hetrl-sim lengths --mean-tokens 1024 --max-tokens 4096 --sigma 0.8 --count 2000 -o t.csv)";

// Simulates one plan within the run's deadline, with a progress line on a terminal once the
// run takes more than a second. A run that passes the deadline is a failure: its figures
// would cover part of the iterations asked for.
sim::PlanRun simulate(const cost::CostModel& model, const plan::Plan& plan, sim::SimParams params,
                      const std::string& name, double time_limit, double started) {
  bool shown = false;
  if (::isatty(STDERR_FILENO) != 0) {
    params.progress = [&](int done) {
      const double seconds = params.deadline.clock->seconds() - started;
      if (seconds < 1.0) return;
      shown = true;
      std::fprintf(stderr, "\rsimulating %s: %d of %d iterations, %.1f s   ", name.c_str(), done, params.iterations,
                   seconds);
    };
  }
  sim::PlanRun run = sim::run_plan(model, plan, params, name);
  if (shown) std::fprintf(stderr, "\n");
  if (run.summary.stopped) {
    throw core::JobError(fmt::format(
        "{}: the simulation passed its time limit of {} s with {} of {} iterations done; ask for fewer --iterations "
        "or a longer --time-limit",
        name, time_limit, run.summary.iteration_end.size(), params.iterations));
  }
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulate RL iterations of a plan, event by event.", "hetrl-sim"};
  app.set_version_flag("--version", std::string(core::kVersion));
  app.footer(kExamples);
  std::string cluster_path, workload_path, plan_path, report_path, trace_path;
  std::vector<std::string> compare;
  sim::SimParams params;
  app.add_option("--cluster", cluster_path, "Cluster file; default: the embedded one");
  app.add_option("--workload", workload_path, "Workload file; default: the embedded one");
  CLI::Option* plan_option = app.add_option("--plan", plan_path, "The plan to simulate (hetrl.plan/v1)");
  CLI::Option* compare_option =
      app.add_option("--compare", compare, "Several plans, simulated on the same sampled lengths");
  app.add_option("--iterations", params.iterations, "Iterations to simulate")
      ->check(apps::whole_number(1, 10000))->capture_default_str();
  app.add_option("--seed", params.seed, "Seed of the sampled response lengths")
      ->check(apps::unsigned_integer())->capture_default_str();
  app.add_option("--report", report_path, "Write the report (hetrl.simreport/v1) here ('-': standard output, the text then on standard error)");
  app.add_option("--trace", trace_path, "Write a Chrome trace-event file here (opens in Perfetto; '-': standard output)");
  double time_limit = std::numeric_limits<double>::infinity();
  app.add_option("--time-limit", time_limit, "Seconds the simulation may take (wall clock); default: no limit")
      ->check(apps::finite_positive());
  bool no_contention = false;
  app.add_flag("--no-contention", no_contention,
               "Move every transfer as if it were alone on its links (the cost model's assumption)");
  plan_option->excludes(compare_option);

  CLI::App* lengths = app.add_subcommand("lengths", "Sample response lengths into a trace file (CSV)");
  double mean = 0, sigma = workload::kDefaultLognormalSigma;
  int max_tokens = 0, count = 0;
  std::uint64_t lengths_seed = 1;
  std::string lengths_output;
  lengths->add_option("--mean-tokens", mean, "Mean length after the clamp")->required()->check(apps::finite_positive());
  lengths->add_option("--max-tokens", max_tokens, "The clamp: the longest response")
      ->required()
      ->check(apps::whole_number(1, workload::kMaxResponseTokens));
  lengths->add_option("--sigma", sigma, "Shape of the lognormal")->capture_default_str()->check(apps::finite_positive());
  lengths->add_option("--count", count, "How many lengths")->required()->check(apps::whole_number(1, 10000000));
  lengths->add_option("--seed", lengths_seed, "Seed")->check(apps::unsigned_integer())->capture_default_str();
  lengths->add_option("-o,--output", lengths_output, "The CSV file to write ('-': standard output)")->required();

  return apps::run_tool(app, argc, argv, [&] {
    if (lengths->parsed()) {
      workload::ResponseLengths dist;
      dist.kind = workload::LengthKind::kLognormal;
      dist.mean_tokens = mean;
      dist.max_tokens = max_tokens;
      dist.sigma = sigma;
      dist.validate();
      std::string csv = "response_tokens\n";
      for (int n : dist.sample(count, lengths_seed)) csv += fmt::format("{}\n", n);
      io::write_file_atomic(lengths_output, csv);
      fmt::print(lengths_output == io::kStdout ? stderr : stdout, "wrote {} lengths (lognormal, mean {} and max {} tokens, sigma {}, seed {}) to {}\n",
                 count, mean, max_tokens, sigma, lengths_seed, lengths_output);
      return apps::kExitOk;
    }
    if (plan_path.empty() && compare.empty()) apps::usage_error("give --plan FILE or --compare FILE...");
    params.link_contention = !no_contention;
    const core::SteadyClock clock;
    const double started = clock.seconds();
    params.deadline = {&clock, started + time_limit};
    if (!compare.empty() && (!report_path.empty() || !trace_path.empty())) {
      apps::usage_error("--report and --trace take one plan: use --plan");
    }
    // Both outputs checked before either is written: a trace that cannot be written must not
    // leave the report behind, and neither may replace an input.
    std::vector<std::string> inputs{cluster_path, workload_path, plan_path};
    inputs.insert(inputs.end(), compare.begin(), compare.end());
    io::check_outputs(std::vector<std::string>{report_path, trace_path}, inputs);
    const io::Catalogs& catalogs = io::builtin_catalogs();
    const io::Inputs in = io::load_inputs(cluster_path, workload_path, catalogs);
    const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
    const sim::RunLabels labels{plan_path, in.workload.name, in.cluster.name};
    if (!compare.empty()) {
      std::vector<std::pair<std::string, sim::PlanRun>> runs;
      for (const std::string& file : compare) {
        const plan::Plan p = io::read_plan(file, in.cluster, in.graph, in.workload.models);
        runs.emplace_back(file, simulate(model, p, params, file, time_limit, started));
      }
      fmt::print("{}", sim::format_comparison(runs, params, labels));
      return apps::kExitOk;
    }
    const plan::Plan p = io::read_plan(plan_path, in.cluster, in.graph, in.workload.models);
    const sim::PlanRun run = simulate(model, p, params, plan_path, time_limit, started);
    // The report and the trace are written together, or neither.
    io::OutputFiles files;
    if (!report_path.empty()) {
      files.add(report_path, io::sim_report_json({plan_path, in.cluster_hash, in.workload_hash, params}, run.summary,
                                                 run.recorder, run.predicted, in.graph));
    }
    if (!trace_path.empty()) {
      files.add(trace_path, io::chrome_trace_json(run.recorder, run.summary, in.graph, static_cast<int>(p.groups.size())));
    }
    files.commit();
    // With an output on standard output the text goes to standard error.
    std::FILE* text = report_path == io::kStdout || trace_path == io::kStdout ? stderr : stdout;
    fmt::print(text, "{}", sim::format_run(run, params, labels));
    for (const std::string& path : {report_path, trace_path}) {
      if (!path.empty() && path != io::kStdout) fmt::print(text, "wrote {}\n", path);
    }
    return apps::kExitOk;
  });
}
