#include "exec/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <string_view>

#include "core/error.h"
#include "cost/cost_model.h"
#include "plan/evaluate.h"
#include "sim/run_text.h"

namespace hetrl::exec {
namespace {

// Pass efficiency, optimizer efficiency, decode step overhead, copy efficiency, prefill
// efficiency, TP wait.
constexpr int kFigures = 6;
// Where a type has no TP wait, the fit's start (the logarithms need one above 0): about what
// two processes sharing a host's cores wait (docs/exec.md).
constexpr double kTpWaitStart = 0.05;
using Figures = std::array<double, kFigures>;  // their logarithms

// The pull towards the start, against the squared log ratios of the tasks: weak enough that
// a figure a task informs goes where the task says, strong enough to keep one no task informs.
constexpr double kPrior = 1e-3;
// Gauss-Newton's finite-difference step and its iterations.
constexpr double kStep = 0.02;
constexpr int kIterations = 12;

// Solves the k x k system a x = b (a symmetric positive definite) in place.
void solve(std::array<std::array<double, kFigures>, kFigures>& a, Figures& b) {
  for (int i = 0; i < kFigures; ++i) {
    for (int j = 0; j < i; ++j) {
      double s = a[i][j];
      for (int k = 0; k < j; ++k) s -= a[i][k] * a[j][k];
      a[i][j] = s / a[j][j];
    }
    double d = a[i][i];
    for (int k = 0; k < i; ++k) d -= a[i][k] * a[i][k];
    a[i][i] = std::sqrt(std::max(d, 1e-300));
  }
  for (int i = 0; i < kFigures; ++i) {
    for (int k = 0; k < i; ++k) b[i] -= a[i][k] * b[k];
    b[i] /= a[i][i];
  }
  for (int i = kFigures; i-- > 0;) {
    for (int k = i + 1; k < kFigures; ++k) b[i] -= a[k][i] * b[k];
    b[i] /= a[i][i];
  }
}

// What the simulator gives at some figures, each task's median over the measured iterations
// (-1: not run), each training task's optimizer step, each generation task's prefill and each
// scoring or training task's passes' TP all-reduces as the cost model prices them (-1: none).
struct Simulated {
  std::vector<double> tasks;
  std::vector<double> optimizer_steps;
  std::vector<double> prefills;
  std::vector<double> pass_all_reduces;
};

// Whether the plan's weight sync copies weights on a device (a reshard inside a group whose
// trainer holds part of what generation loads): the run's sync then informs the copy share.
bool sync_copies(const CalibrationInputs& in) {
  const int task = in.graph->weight_sync().task;
  if (task < 0) return false;
  const cost::CostModel model(*in.cluster, *in.workload, *in.graph, *in.models, executor_cost_params());
  plan::Evaluator evaluator(model);
  const plan::Prediction& predicted = evaluator.evaluate(*in.plan, /*explain=*/true);
  if (static_cast<std::size_t>(task) >= predicted.tasks.size()) return false;
  const auto& terms = predicted.tasks[static_cast<std::size_t>(task)].terms;
  return std::any_of(terms.begin(), terms.end(), [](const cost::Breakdown::Term& t) {
    return std::string_view(t.name) == cost::kWeightCopyTerm && t.seconds > 0;
  });
}

class Fit {
 public:
  // `steps_measured`: the run timed optimizer steps apart, to fit the optimizer efficiency on;
  // `sync_measured`: its weight sync copied on the devices, to fit the copy efficiency on;
  // `prefills_measured`: it timed generation's prefill apart, to fit the prefill efficiency on;
  // `tp_measured`: its passes' TP all-reduces, to fit the TP wait on.
  Fit(const CalibrationInputs& in, int type, bool steps_measured, bool sync_measured, bool prefills_measured,
      bool tp_measured)
      : in_(in), type_(type), cluster_(*in.cluster), steps_measured_(steps_measured),
        prefills_measured_(prefills_measured), tp_measured_(tp_measured) {
    const hw::Efficiency& e = in.cluster->gpu_types[static_cast<std::size_t>(type)].efficiency;
    start_ = {e.training, e.optimizer_share(),
              e.decode_step_overhead.value_or(cost::CostParams{}.decode_step_overhead),
              e.copy_share(), e.prefill_share(), e.tp_wait.value_or(kTpWaitStart)};
    // A start of no overhead or wait at all still needs a scale to search on.
    start_[2] = std::max(start_[2], 1e-5);
    start_[5] = std::max(start_[5], 1e-3);
    // Without the run's own steps, an optimizer efficiency the type already has was measured
    // (hetrl-profile times the step alone) or given: held, so that run noise in the training
    // tasks cannot trade it against the passes' figure, of which the step is a small part.
    held_[1] = !steps_measured && e.optimizer > 0;
    // Without a copy in the run's sync, nothing informs the copy efficiency.
    held_[3] = !sync_measured;
    // Within a generation task the prefill is a small part: only its own timing informs it.
    held_[4] = !prefills_measured;
    // The wait is a part of the passes that the tasks' times alone cannot tell from a slower
    // compute: only the all-reduces' own timing informs it.
    held_[5] = !tp_measured;
    tp_wait_given_ = e.tp_wait.has_value();
    for (std::size_t i = 0; i < in.measured.size(); ++i) iterations_ = std::max(iterations_, iteration(i) + 1);
  }

  bool held(int k) const { return held_[static_cast<std::size_t>(k)]; }
  // The decode all-reduce's measured seconds, in every simulation from now on.
  void measured_decode_allreduce(double seconds) { decode_allreduce_ = seconds; }

  // Measured iteration i's index among its run's.
  int iteration(std::size_t i) const {
    return in_.iteration_of.empty() ? static_cast<int>(i) : in_.iteration_of[i];
  }

  // The figures at `x` (logarithms relative to the start), each within its range.
  Figures values(const Figures& x) const {
    Figures v;
    for (int k = 0; k < kFigures; ++k) v[k] = start_[k] * std::exp(x[k]);
    v[0] = std::clamp(v[0], 1e-3, 1.0);
    v[1] = std::clamp(v[1], 1e-3, hw::kMostReadWriteShare);
    v[2] = std::clamp(v[2], 0.0, 1.0);
    v[3] = std::clamp(v[3], 1e-3, hw::kMostReadWriteShare);
    v[4] = std::clamp(v[4], 1e-3, 1.0);
    v[5] = std::clamp(v[5], 1e-4, 5.0);
    return v;
  }
  Figures clamp(const Figures& x) const {
    const Figures v = values(x);
    Figures out;
    for (int k = 0; k < kFigures; ++k) out[k] = std::log(std::max(v[k], 1e-12) / start_[k]);
    return out;
  }

  Simulated simulate(const Figures& x) {
    const Figures v = values(x);
    hw::Efficiency& e = cluster_.gpu_types[static_cast<std::size_t>(type_)].efficiency;
    e.training = v[0];
    e.optimizer = v[1];
    e.decode_step_overhead = v[2];
    e.copy = v[3];
    e.prefill = v[4];
    if (!held_[5] || tp_wait_given_) e.tp_wait = v[5];  // not one the fit invented
    if (decode_allreduce_) e.decode_allreduce = *decode_allreduce_;
    const cost::CostModel model(cluster_, *in_.workload, *in_.graph, *in_.models, executor_cost_params());
    sim::SimParams params;
    params.iterations = in_.warmup + iterations_;
    params.seed = in_.seed;
    const sim::PlanRun run = sim::run_plan(model, *in_.plan, params, "the plan");
    // Each task's seconds in each simulated iteration, then in each measured one's.
    const std::size_t tasks = in_.graph->tasks.size();
    std::vector<std::vector<double>> by_iteration(static_cast<std::size_t>(iterations_), std::vector<double>(tasks, -1.0));
    for (const sim::TaskRun& r : run.recorder.tasks) {
      if (r.iteration >= in_.warmup) {
        by_iteration[static_cast<std::size_t>(r.iteration - in_.warmup)][static_cast<std::size_t>(r.task)] = r.end - r.start;
      }
    }
    std::vector<std::vector<double>> per_task(tasks);
    for (std::size_t i = 0; i < in_.measured.size(); ++i) {
      const std::vector<double>& it = by_iteration[static_cast<std::size_t>(iteration(i))];
      for (std::size_t t = 0; t < tasks; ++t) {
        if (it[t] >= 0) per_task[t].push_back(it[t]);
      }
    }
    Simulated out{std::vector<double>(per_task.size(), -1.0), std::vector<double>(per_task.size(), -1.0),
                  std::vector<double>(per_task.size(), -1.0), std::vector<double>(per_task.size(), -1.0)};
    for (std::size_t t = 0; t < per_task.size(); ++t) {
      if (!per_task[t].empty()) out.tasks[t] = median(per_task[t]);
    }
    // No part to set the priced ones against.
    if (!steps_measured_ && !prefills_measured_ && !tp_measured_) return out;
    plan::Evaluator evaluator(model);
    const plan::Prediction& predicted = evaluator.evaluate(*in_.plan, /*explain=*/true);
    for (std::size_t t = 0; t < per_task.size() && t < predicted.tasks.size(); ++t) {
      const workload::TaskKind kind = in_.graph->tasks[t].kind;
      if (kind == workload::TaskKind::kTrain || kind == workload::TaskKind::kForward) {
        const double all_reduce = predicted_pass_all_reduce(predicted.tasks[t].terms);
        if (all_reduce > 0) out.pass_all_reduces[t] = all_reduce;
      }
      if (kind == workload::TaskKind::kTrain) {
        const double step = predicted_parts(predicted.tasks[t].terms).optimizer_step;
        if (step > 0) out.optimizer_steps[t] = step;
      } else if (kind == workload::TaskKind::kGenerate) {
        const double prefill = predicted_generation_parts(predicted.tasks[t].terms).prefill;
        if (prefill > 0) out.prefills[t] = prefill;
      }
    }
    return out;
  }

 private:
  const CalibrationInputs& in_;
  int type_;
  hw::Cluster cluster_;  // the run's, its GPU type's figures set for each simulation
  Figures start_{};
  std::array<bool, kFigures> held_{};  // kept where they started
  bool steps_measured_;                // the run's optimizer steps are fitted on: price them
  bool prefills_measured_;             // and its prefills
  bool tp_measured_;                   // and its passes' TP all-reduces
  bool tp_wait_given_ = false;         // the type has a TP wait of its own
  int iterations_ = 0;                 // the measured iterations' most in one run
  std::optional<double> decode_allreduce_;
};

}  // namespace

std::vector<int> plan_gpu_types(const plan::Plan& plan, const hw::Cluster& cluster) {
  std::vector<int> types;
  for (const plan::Group& g : plan.groups) {
    for (const plan::Gpu& gpu : g.gpus) {
      const int type = cluster.nodes[static_cast<std::size_t>(gpu.node)].gpu_type;
      if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
    }
  }
  return types;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n == 0 ? 0 : n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

TrainParts predicted_parts(std::span<const cost::Breakdown::Term> terms) {
  TrainParts parts;
  for (const cost::Breakdown::Term& term : terms) {
    const std::string_view name = term.name;
    if (name == cost::kOptimizerStepTerm || name == cost::kOffloadedOptimizerStepTerm) {
      parts.optimizer_step += term.seconds;
    } else if (name == cost::kGradientAllReduceTerm || name == cost::kGradientReduceScatterTerm ||
               name == cost::kTiedEmbeddingTerm || name == cost::kZero3FinalGatherTerm) {
      parts.gradient_reduce += term.seconds;
    } else {
      if (name == cost::kZero3GatherTerm) parts.weight_gathers += term.seconds;  // a part of the passes'
      parts.passes += term.seconds;
    }
  }
  return parts;
}

TrainParts slowest_parts(const TaskMeasurement& m) {
  if (m.replica_parts.empty() || m.replica_parts.size() != m.replica_seconds.size()) return {};
  const auto slowest = std::max_element(m.replica_seconds.begin(), m.replica_seconds.end());
  return m.replica_parts[static_cast<std::size_t>(slowest - m.replica_seconds.begin())];
}

GenerationParts predicted_generation_parts(std::span<const cost::Breakdown::Term> terms) {
  GenerationParts parts;
  for (const cost::Breakdown::Term& term : terms) {
    const std::string_view name = term.name;
    (name == cost::kPrefillComputeTerm || name == cost::kPrefillAllReduceTerm ? parts.prefill : parts.decode) +=
        term.seconds;
    if (name == cost::kDecodeAllReduceTerm) parts.decode_all_reduce += term.seconds;
  }
  return parts;
}

GenerationParts slowest_generation_parts(const TaskMeasurement& m) {
  if (m.replica_prefill_seconds.empty() || m.replica_prefill_seconds.size() != m.replica_seconds.size()) return {};
  const auto slowest = std::max_element(m.replica_seconds.begin(), m.replica_seconds.end());
  const auto r = static_cast<std::size_t>(slowest - m.replica_seconds.begin());
  const TpCollectives all_reduces = slowest_tp_collectives(m);
  return {m.replica_prefill_seconds[r], std::max(0.0, *slowest - m.replica_prefill_seconds[r]), all_reduces.seconds,
          all_reduces.calls};
}

TpCollectives slowest_tp_collectives(const TaskMeasurement& m) {
  const std::size_t n = m.replica_seconds.size();
  if (n == 0 || m.replica_tp_collective_seconds.size() != n || m.replica_tp_collective_calls.size() != n) return {};
  const auto r = static_cast<std::size_t>(std::max_element(m.replica_seconds.begin(), m.replica_seconds.end()) -
                                          m.replica_seconds.begin());
  return {m.replica_tp_collective_seconds[r], m.replica_tp_collective_calls[r]};
}

double predicted_pass_all_reduce(std::span<const cost::Breakdown::Term> terms) {
  double seconds = 0;
  for (const cost::Breakdown::Term& term : terms) {
    const std::string_view name = term.name;
    if (name == cost::kPassAllReduceTerm || name == cost::kTpWaitTerm) seconds += term.seconds;
  }
  return seconds;
}

namespace {

template <class Parts>
struct PartField {
  const char* key;
  const char* label;
  bool data_parallel;
  double Parts::*member;
};

template <class Parts>
std::vector<TaskPart> parts_of(const Parts& expected, Parts (*slowest)(const TaskMeasurement&), const RunResult& run,
                               std::size_t task, std::initializer_list<PartField<Parts>> fields) {
  std::vector<Parts> measured;
  for (const IterationMeasurement& it : run.iterations) {
    if (it.tasks[task].ran) measured.push_back(slowest(it.tasks[task]));
  }
  std::vector<TaskPart> out;
  for (const PartField<Parts>& f : fields) {
    TaskPart part{f.key, f.label, f.data_parallel, expected.*f.member, {}, {}};
    for (const Parts& m : measured) part.measured.push_back(m.*f.member);
    out.push_back(std::move(part));
  }
  return out;
}

// A scoring or training task's passes' TP all-reduces where the run timed some and the
// estimate has some: each iteration's slowest replica's, with their count.
void add_pass_all_reduce(std::span<const cost::Breakdown::Term> terms, const RunResult& run, std::size_t task,
                         std::vector<TaskPart>& parts) {
  const double expected = predicted_pass_all_reduce(terms);
  if (!run.collectives_timed || expected <= 0) return;
  TaskPart part{"tp_all_reduce", "TP all-reduce", false, expected, {}, {}};
  for (const IterationMeasurement& it : run.iterations) {
    if (!it.tasks[task].ran) continue;
    const TpCollectives measured = slowest_tp_collectives(it.tasks[task]);
    part.measured.push_back(measured.seconds);
    part.calls.push_back(measured.calls);
  }
  parts.push_back(std::move(part));
}

}  // namespace

std::vector<TaskPart> task_parts(workload::TaskKind kind, std::span<const cost::Breakdown::Term> terms,
                                 const RunResult& run, std::size_t task) {
  if (kind == workload::TaskKind::kGenerate) {
    using P = GenerationParts;
    const P expected = predicted_generation_parts(terms);
    std::vector<TaskPart> parts =
        parts_of<P>(expected, &slowest_generation_parts, run, task,
                    {{"prefill", "prefill", false, &P::prefill}, {"decode", "decode steps", false, &P::decode}});
    if (run.collectives_timed && expected.decode_all_reduce > 0) {
      TaskPart all_reduce = parts_of<P>(expected, &slowest_generation_parts, run, task,
                                        {{"decode_all_reduce", "decode TP all-reduce", false, &P::decode_all_reduce}})
                                .front();
      for (const IterationMeasurement& it : run.iterations) {
        if (it.tasks[task].ran) all_reduce.calls.push_back(slowest_generation_parts(it.tasks[task]).decode_all_reduces);
      }
      parts.push_back(std::move(all_reduce));
    }
    return parts;
  }
  if (kind == workload::TaskKind::kTrain) {
    using P = TrainParts;
    const P expected = predicted_parts(terms);
    std::vector<TaskPart> parts = parts_of<P>(expected, &slowest_parts, run, task,
                                              {{"passes", "passes", false, &P::passes},
                                               {"replica_wait", "wait for replicas", true, &P::replica_wait},
                                               {"gradient_reduce", "gradient all-reduce", true, &P::gradient_reduce},
                                               {"optimizer_step", "optimizer step", false, &P::optimizer_step}});
    // ZeRO-3's gathers where the run timed them: all of them measured, against the estimate's
    // that the compute does not hide.
    TaskPart gathers = parts_of<P>(expected, &slowest_parts, run, task,
                                   {{"weight_gathers", "ZeRO-3 gathers", true, &P::weight_gathers}})
                           .front();
    if (std::any_of(gathers.measured.begin(), gathers.measured.end(), [](double s) { return s > 0; })) {
      parts.push_back(std::move(gathers));
    }
    add_pass_all_reduce(terms, run, task, parts);
    return parts;
  }
  std::vector<TaskPart> parts;
  if (kind == workload::TaskKind::kForward) add_pass_all_reduce(terms, run, task, parts);
  return parts;
}

Calibration calibrate(const CalibrationInputs& in) {
  const workload::TaskGraph& graph = *in.graph;
  const std::vector<int> types = plan_gpu_types(*in.plan, *in.cluster);
  if (types.size() != 1) {
    throw core::InputError(fmt::format("the plan runs on {} GPU types; a fitted profile describes one", types.size()));
  }
  const int type = types.front();

  // The GPU tasks measured, each its median over the iterations, and the weight sync where it
  // copies weights on the devices.
  const bool copies = sync_copies(in);
  std::vector<int> tasks;
  std::vector<double> measured(graph.tasks.size(), -1.0);
  for (std::size_t t = 0; t < graph.tasks.size(); ++t) {
    const workload::TaskKind kind = graph.tasks[t].kind;
    if (kind != workload::TaskKind::kGenerate && kind != workload::TaskKind::kForward &&
        kind != workload::TaskKind::kTrain && !(kind == workload::TaskKind::kWeightSync && copies)) {
      continue;
    }
    std::vector<double> seconds;
    for (const std::vector<double>& it : in.measured) {
      if (t < it.size() && it[t] > 0) seconds.push_back(it[t]);
    }
    if (seconds.empty()) continue;
    measured[t] = median(seconds);
    tasks.push_back(static_cast<int>(t));
  }
  if (tasks.empty()) throw core::JobError("the run measured no GPU task to fit the profile on");

  // Parts of the tasks of some kinds the run timed apart (training tasks' optimizer steps,
  // generation tasks' prefills, scoring and training tasks' TP all-reduces), each its median
  // over the iterations into `medians`.
  const auto timed = [&](std::initializer_list<workload::TaskKind> kinds,
                         const std::vector<std::vector<double>>& per_iteration, std::vector<double>& medians) {
    std::vector<int> out;
    medians.assign(graph.tasks.size(), -1.0);
    for (int t : tasks) {
      const auto i = static_cast<std::size_t>(t);
      if (std::find(kinds.begin(), kinds.end(), graph.tasks[i].kind) == kinds.end()) continue;
      std::vector<double> seconds;
      for (const std::vector<double>& it : per_iteration) {
        if (i < it.size() && it[i] > 0) seconds.push_back(it[i]);
      }
      if (seconds.empty()) continue;
      medians[i] = median(seconds);
      out.push_back(t);
    }
    return out;
  };
  std::vector<double> measured_steps, measured_prefills, measured_tp;
  const std::vector<int> steps = timed({workload::TaskKind::kTrain}, in.optimizer_steps, measured_steps);
  const std::vector<int> prefills = timed({workload::TaskKind::kGenerate}, in.prefills, measured_prefills);
  const std::vector<int> tp_tasks =
      timed({workload::TaskKind::kTrain, workload::TaskKind::kForward}, in.pass_all_reduce, measured_tp);

  const bool sync_measured =
      copies && std::find(tasks.begin(), tasks.end(), graph.weight_sync().task) != tasks.end();
  Fit fit(in, type, !steps.empty(), sync_measured, !prefills.empty(), !tp_tasks.empty());
  // The log ratios of simulated to measured: the tasks', the optimizer steps', the prefills'.
  const auto residuals = [&](const Simulated& simulated) {
    std::vector<double> r;
    const auto add = [&](double s, double m) { r.push_back(s > 0 ? std::log(s / m) : 0.0); };
    for (int t : tasks) add(simulated.tasks[static_cast<std::size_t>(t)], measured[static_cast<std::size_t>(t)]);
    for (int t : steps) {
      add(simulated.optimizer_steps[static_cast<std::size_t>(t)], measured_steps[static_cast<std::size_t>(t)]);
    }
    for (int t : prefills) {
      add(simulated.prefills[static_cast<std::size_t>(t)], measured_prefills[static_cast<std::size_t>(t)]);
    }
    for (int t : tp_tasks) {
      add(simulated.pass_all_reduces[static_cast<std::size_t>(t)], measured_tp[static_cast<std::size_t>(t)]);
    }
    return r;
  };
  const auto objective = [&](const std::vector<double>& r, const Figures& x) {
    double sum = 0;
    for (double v : r) sum += v * v;
    for (double v : x) sum += kPrior * v * v;
    return sum;
  };

  Figures x{};
  const Simulated before = fit.simulate(x);
  // The decode steps' timed TP all-reduces: their seconds over their count.
  double all_reduce_seconds = 0;
  long long all_reduces = 0;
  for (std::size_t i = 0; i < in.decode_all_reduce.size() && i < in.decode_all_reduces.size(); ++i) {
    for (std::size_t t = 0; t < in.decode_all_reduce[i].size() && t < in.decode_all_reduces[i].size(); ++t) {
      if (in.decode_all_reduces[i][t] <= 0) continue;
      all_reduce_seconds += in.decode_all_reduce[i][t];
      all_reduces += in.decode_all_reduces[i][t];
    }
  }
  std::optional<double> all_reduce;
  if (all_reduces > 0) {
    all_reduce = all_reduce_seconds / static_cast<double>(all_reduces);
    fit.measured_decode_allreduce(*all_reduce);
  }
  std::vector<double> r = residuals(all_reduce ? fit.simulate(x) : before);
  double best = objective(r, x);
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    // The Jacobian of the residuals in the figures' logarithms, by backward differences (an
    // efficiency at its upper bound of 1 can only come down).
    std::vector<Figures> jacobian(r.size());
    for (int k = 0; k < kFigures; ++k) {
      if (fit.held(k)) continue;  // a column of zeros: the prior keeps it at the start
      Figures moved = x;
      moved[k] -= kStep;
      const std::vector<double> rk = residuals(fit.simulate(moved));
      for (std::size_t i = 0; i < r.size(); ++i) jacobian[i][k] = (r[i] - rk[i]) / kStep;
    }
    std::array<std::array<double, kFigures>, kFigures> normal{};
    Figures gradient{};
    for (std::size_t i = 0; i < r.size(); ++i) {
      for (int a = 0; a < kFigures; ++a) {
        gradient[a] -= jacobian[i][a] * r[i];
        for (int b = 0; b < kFigures; ++b) normal[a][b] += jacobian[i][a] * jacobian[i][b];
      }
    }
    for (int a = 0; a < kFigures; ++a) {
      normal[a][a] += kPrior;
      gradient[a] -= kPrior * x[a];
    }
    solve(normal, gradient);
    // Halve the step until it helps.
    bool improved = false;
    for (double scale = 1.0; scale > 1e-3 && !improved; scale *= 0.5) {
      Figures next;
      for (int k = 0; k < kFigures; ++k) next[k] = x[k] + scale * gradient[k];
      next = fit.clamp(next);
      const std::vector<double> rn = residuals(fit.simulate(next));
      const double value = objective(rn, next);
      if (value < best - 1e-12) {
        improved = true;
        x = next;
        r = rn;
        best = value;
      }
    }
    if (!improved) break;
  }

  const Figures v = fit.values(x);
  const Simulated after = fit.simulate(x);
  Calibration out;
  out.gpu_type = type;
  out.pass_efficiency = v[0];
  out.optimizer_efficiency = v[1];
  out.optimizer_held = fit.held(1);
  out.optimizer_steps = static_cast<int>(steps.size());
  out.decode_step_overhead = v[2];
  const double type_copy = in.cluster->gpu_types[static_cast<std::size_t>(type)].efficiency.copy;
  if (!fit.held(3) || type_copy > 0) out.copy_efficiency = v[3];
  out.copy_held = fit.held(3);
  const double type_prefill = in.cluster->gpu_types[static_cast<std::size_t>(type)].efficiency.prefill;
  if (!fit.held(4) || type_prefill > 0) out.prefill_efficiency = v[4];
  out.prefills = static_cast<int>(prefills.size());
  out.decode_allreduce = all_reduce;
  out.decode_all_reduces = all_reduces;
  const std::optional<double>& type_tp_wait = in.cluster->gpu_types[static_cast<std::size_t>(type)].efficiency.tp_wait;
  if (!fit.held(5) || type_tp_wait) out.tp_wait = v[5];
  out.tp_passes = static_cast<int>(tp_tasks.size());
  for (int t : tasks) {
    const auto i = static_cast<std::size_t>(t);
    out.rows.push_back({graph.tasks[i].name, measured[i], before.tasks[i], after.tasks[i]});
  }
  return out;
}

}  // namespace hetrl::exec
