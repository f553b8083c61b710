#include "sim/run_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/text.h"

namespace hetrl::sim {
namespace {

// The busiest links, by utilisation over the run.
std::string format_links(const SimSummary& s, const SimParams& params) {
  std::vector<std::size_t> used;
  for (std::size_t l = 0; l < s.links.size(); ++l) {
    if (s.link_use[l].bytes > 0) used.push_back(l);
  }
  if (used.empty() || s.end <= 0) return "  links: no transfers between groups\n";
  auto utilisation = [&](std::size_t l) { return s.link_use[l].bytes / (s.links[l].capacity * s.end); };
  std::stable_sort(used.begin(), used.end(),
                   [&](std::size_t a, std::size_t b) { return utilisation(a) > utilisation(b); });
  constexpr std::size_t kShown = 4;
  std::string out = fmt::format("  links ({}), busiest first:\n", params.link_contention
                                                                        ? "transfers share them fairly"
                                                                        : "each transfer as if alone");
  for (std::size_t i = 0; i < std::min(kShown, used.size()); ++i) {
    const std::size_t l = used[i];
    out += fmt::format("    {:<32} {:8.2f} GB per iteration, busy {:.2f} s, {:.1f}% utilised\n",
                       s.links[l].name, s.link_use[l].bytes / params.iterations / 1e9,
                       s.link_use[l].busy_seconds / params.iterations, 100 * utilisation(l));
  }
  if (used.size() > kShown) out += fmt::format("    ... {} more in the report\n", used.size() - kShown);
  return out;
}

std::string percent(double simulated, double predicted) {
  return predicted > 0 ? core::signed_percent(simulated / predicted - 1) : "n/a";
}

}  // namespace

PlanRun run_plan(const cost::CostModel& model, const plan::Plan& plan, const SimParams& params,
                 const std::string& name) {
  PlanRun run;
  plan::Evaluator evaluator(model);
  run.predicted = evaluator.evaluate(plan);
  if (!run.predicted.feasible) {
    throw core::JobError(fmt::format("{}: the plan does not fit: {}", name, run.predicted.infeasible));
  }
  std::vector<Listener*> listeners{&run.recorder};
  run.summary = simulate(model, plan, params, listeners);
  return run;
}

std::string format_run(const PlanRun& run, const SimParams& params, const RunLabels& labels) {
  const SimSummary& s = run.summary;
  std::string out = fmt::format("simulated {} iterations of {} ({}) on {}, seed {}: {} events\n", params.iterations,
                                labels.plan, labels.workload, labels.cluster, params.seed, s.events);
  out += fmt::format("  iteration {:.2f} s (cost model {:.2f} s, {}) | {:.2f} samples/s | {:.0f} tokens/s\n",
                     s.iteration_seconds, run.predicted.iteration_seconds,
                     percent(s.iteration_seconds, run.predicted.iteration_seconds), s.samples_per_second,
                     s.tokens_per_second);
  out += fmt::format("  generation tail: {:.2f} replica-seconds per iteration drain a shrinking batch\n",
                     s.tail_seconds / params.iterations);
  for (std::size_t g = 0; g < s.group_busy.size(); ++g) {
    const double busy = s.group_busy[g] / params.iterations;
    out += fmt::format("  group {}: busy {:.2f} s per iteration, idle {:.2f} s\n", g, busy,
                       std::max(0.0, s.end / params.iterations - busy));
  }
  return out + format_links(s, params);
}

std::string format_comparison(const std::vector<std::pair<std::string, PlanRun>>& runs, const SimParams& params,
                              const RunLabels& labels) {
  std::string out = fmt::format("{} iterations of {} on {}, seed {}: the same sampled lengths for every plan\n\n",
                                params.iterations, labels.workload, labels.cluster, params.seed);
  out += fmt::format("{:<32} {:>13} {:>13} {:>8} {:>11} {:>10}\n", "plan", "simulated s", "predicted s", "diff",
                     "samples/s", "tail s");
  for (const auto& [file, r] : runs) {
    out += fmt::format("{:<32} {:>13.2f} {:>13.2f} {:>8} {:>11.2f} {:>10.2f}\n", file, r.summary.iteration_seconds,
                       r.predicted.iteration_seconds, percent(r.summary.iteration_seconds, r.predicted.iteration_seconds),
                       r.summary.samples_per_second, r.summary.tail_seconds / params.iterations);
  }
  return out;
}

}  // namespace hetrl::sim
