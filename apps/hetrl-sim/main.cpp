// hetrl-sim: simulate RL iterations of a plan event by event, to check what the cost model's
// closed forms approximate and to show where the time goes; or several plans side by side on
// the same sampled response lengths; or sample response lengths into a trace file.

#include <fmt/format.h>

#include <algorithm>

#include "common/tool.h"
#include "core/error.h"
#include "core/version.h"
#include "cost/cost_model.h"
#include "io/catalog_io.h"
#include "io/files.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "io/sim_io.h"
#include "plan/evaluate.h"
#include "sim/recorder.h"
#include "sim/simulator.h"

namespace {

using namespace hetrl;

constexpr const char* kExamples = R"(Examples:
  hetrl-sim --cluster c.json --workload w.json --plan plan.json --iterations 5 \
            --report report.json --trace trace.json      (open trace.json in Perfetto)
  hetrl-sim --cluster c.json --workload w.json --compare a.json b.json
  hetrl-sim lengths --mean-tokens 1024 --max-tokens 4096 --sigma 0.8 --count 2000 -o t.csv)";

struct Outcome {
  sim::SimSummary summary;
  sim::Recorder recorder;
  plan::Prediction predicted;
};

Outcome run_plan(const cost::CostModel& model, const plan::Plan& p, const sim::SimParams& params,
                 const std::string& name) {
  Outcome o;
  plan::Evaluator evaluator(model);
  o.predicted = evaluator.evaluate(p);
  if (!o.predicted.feasible) {
    throw core::JobError(fmt::format("{}: the plan does not fit: {}", name, o.predicted.infeasible));
  }
  std::vector<sim::Listener*> listeners{&o.recorder};
  o.summary = sim::simulate(model, p, params, listeners);
  return o;
}

// The busiest links, by utilisation over the run.
void print_links(const sim::SimSummary& s, const sim::SimParams& params) {
  std::vector<std::size_t> used;
  for (std::size_t l = 0; l < s.links.size(); ++l) {
    if (s.link_use[l].bytes > 0) used.push_back(l);
  }
  if (used.empty() || s.end <= 0) {
    fmt::print("  links: no transfers between groups\n");
    return;
  }
  auto utilisation = [&](std::size_t l) { return s.link_use[l].bytes / (s.links[l].capacity * s.end); };
  std::stable_sort(used.begin(), used.end(),
                   [&](std::size_t a, std::size_t b) { return utilisation(a) > utilisation(b); });
  constexpr std::size_t kShown = 4;
  fmt::print("  links ({}), busiest first:\n",
             params.link_contention ? "transfers share them fairly" : "each transfer as if alone");
  for (std::size_t i = 0; i < std::min(kShown, used.size()); ++i) {
    const std::size_t l = used[i];
    fmt::print("    {:<32} {:8.2f} GB per iteration, busy {:.2f} s, {:.1f}% utilised\n",
               s.links[l].name, s.link_use[l].bytes / params.iterations / 1e9,
               s.link_use[l].busy_seconds / params.iterations, 100 * utilisation(l));
  }
  if (used.size() > kShown) fmt::print("    ... {} more in the report\n", used.size() - kShown);
}

std::string percent(double simulated, double predicted) {
  return predicted > 0 ? fmt::format("{:+.1f}%", 100.0 * (simulated / predicted - 1)) : "n/a";
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
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--seed", params.seed, "Seed of the sampled response lengths")->capture_default_str();
  app.add_option("--report", report_path, "Write the report (hetrl.simreport/v1) here");
  app.add_option("--trace", trace_path, "Write a Chrome trace-event file here (opens in Perfetto)");
  bool no_contention = false;
  app.add_flag("--no-contention", no_contention,
               "Move every transfer as if it were alone on its links (the cost model's assumption)");
  plan_option->excludes(compare_option);

  CLI::App* lengths = app.add_subcommand("lengths", "Sample response lengths into a trace file (CSV)");
  double mean = 0, sigma = workload::kDefaultLognormalSigma;
  int max_tokens = 0, count = 0;
  std::uint64_t lengths_seed = 1;
  std::string lengths_output;
  lengths->add_option("--mean-tokens", mean, "Mean length after the clamp")->required();
  lengths->add_option("--max-tokens", max_tokens, "The clamp: the longest response")->required();
  lengths->add_option("--sigma", sigma, "Shape of the lognormal")->capture_default_str();
  lengths->add_option("--count", count, "How many lengths")->required()->check(CLI::Range(1, 10000000));
  lengths->add_option("--seed", lengths_seed, "Seed")->capture_default_str();
  lengths->add_option("-o,--output", lengths_output, "The CSV file to write")->required();

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
      fmt::print("wrote {} lengths (lognormal, mean {} and max {} tokens, sigma {}, seed {}) to {}\n",
                 count, mean, max_tokens, sigma, lengths_seed, lengths_output);
      return apps::kExitOk;
    }
    if (plan_path.empty() && compare.empty()) apps::usage_error("give --plan FILE or --compare FILE...");
    params.link_contention = !no_contention;
    if (!compare.empty() && (!report_path.empty() || !trace_path.empty())) {
      apps::usage_error("--report and --trace take one plan: use --plan");
    }
    const io::Catalogs& catalogs = io::builtin_catalogs();
    const io::Inputs in = io::load_inputs(cluster_path, workload_path, catalogs);
    const cost::CostModel model(in.cluster, in.workload.workload, in.graph, catalogs.models);
    if (!compare.empty()) {
      std::vector<std::pair<std::string, Outcome>> outcomes;
      for (const std::string& file : compare) {
        const plan::Plan p = io::read_plan(file, in.cluster, in.graph, catalogs.models);
        outcomes.emplace_back(file, run_plan(model, p, params, file));
      }
      fmt::print("{} iterations of {} on {}, seed {}: the same sampled lengths for every plan\n\n",
                 params.iterations, in.workload.name, in.cluster.name, params.seed);
      fmt::print("{:<32} {:>13} {:>13} {:>8} {:>11} {:>10}\n", "plan", "simulated s", "predicted s",
                 "diff", "samples/s", "tail s");
      for (const auto& [file, o] : outcomes) {
        fmt::print("{:<32} {:>13.2f} {:>13.2f} {:>8} {:>11.2f} {:>10.2f}\n", file,
                   o.summary.iteration_seconds, o.predicted.iteration_seconds,
                   percent(o.summary.iteration_seconds, o.predicted.iteration_seconds),
                   o.summary.samples_per_second, o.summary.tail_seconds / params.iterations);
      }
      return apps::kExitOk;
    }
    const plan::Plan p = io::read_plan(plan_path, in.cluster, in.graph, catalogs.models);
    const Outcome o = run_plan(model, p, params, plan_path);
    if (!report_path.empty()) {
      io::write_file_atomic(report_path,
                            io::sim_report_json({plan_path, in.cluster_hash, in.workload_hash, params},
                                                o.summary, o.recorder, o.predicted, in.graph));
    }
    if (!trace_path.empty()) {
      io::write_file_atomic(trace_path, io::chrome_trace_json(o.recorder, o.summary, in.graph,
                                                              static_cast<int>(p.groups.size())));
    }
    fmt::print("simulated {} iterations of {} ({}) on {}, seed {}: {} events\n", params.iterations,
               plan_path, in.workload.name, in.cluster.name, params.seed, o.summary.events);
    fmt::print("  iteration {:.2f} s (cost model {:.2f} s, {}) | {:.2f} samples/s | {:.0f} tokens/s\n",
               o.summary.iteration_seconds, o.predicted.iteration_seconds,
               percent(o.summary.iteration_seconds, o.predicted.iteration_seconds),
               o.summary.samples_per_second, o.summary.tokens_per_second);
    fmt::print("  generation tail: {:.2f} replica-seconds per iteration drain a shrinking batch\n",
               o.summary.tail_seconds / params.iterations);
    for (std::size_t g = 0; g < o.summary.group_busy.size(); ++g) {
      const double busy = o.summary.group_busy[g] / params.iterations;
      fmt::print("  group {}: busy {:.2f} s per iteration, idle {:.2f} s\n", g, busy,
                 std::max(0.0, o.summary.end / params.iterations - busy));
    }
    print_links(o.summary, params);
    if (!report_path.empty()) fmt::print("wrote {}\n", report_path);
    if (!trace_path.empty()) fmt::print("wrote {}\n", trace_path);
    return apps::kExitOk;
  });
}
