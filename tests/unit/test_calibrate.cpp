// Fitting a GPU type's figures on a run (exec/calibrate.h): "measurements" made by the
// simulator with known figures are fitted back from other starting figures; a plan on two GPU
// types is refused.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "approx.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "exec/calibrate.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "plan/evaluate.h"
#include "sim/run_text.h"

namespace hetrl::exec {
namespace {

struct Run {
  io::Inputs in;
  plan::Plan plan;
};

Run load() {
  const std::string data = HETRL_TEST_DATA;
  io::Inputs in = io::load_inputs(data + "/exec_cluster.json", data + "/exec_ppo.json", io::builtin_catalogs());
  plan::Plan p = io::read_plan(data + "/plan_exec_ppo.json", in.cluster, in.graph, in.workload.models);
  return {std::move(in), std::move(p)};
}

// Each measured iteration's task seconds as the simulator gives them on `cluster`.
std::vector<std::vector<double>> simulate(const Run& run, const hw::Cluster& cluster, int warmup, int iterations,
                                          unsigned long long seed) {
  const cost::CostModel model(cluster, run.in.workload.workload, run.in.graph, run.in.workload.models,
                              executor_cost_params());
  sim::SimParams params;
  params.iterations = warmup + iterations;
  params.seed = seed;
  const sim::PlanRun s = sim::run_plan(model, run.plan, params, "plan");
  std::vector<std::vector<double>> out(static_cast<std::size_t>(iterations),
                                       std::vector<double>(run.in.graph.tasks.size(), -1.0));
  for (const sim::TaskRun& r : s.recorder.tasks) {
    if (r.iteration >= warmup) out[static_cast<std::size_t>(r.iteration - warmup)][static_cast<std::size_t>(r.task)] = r.end - r.start;
  }
  return out;
}

// The part hetrl-exec times apart, as the cost model prices it on `cluster`, for each measured
// iteration: the optimizer step of every training task (`kind` kTrain) or the prefill of every
// generation task (kGenerate); -1 for the other tasks.
std::vector<std::vector<double>> priced_parts(const Run& run, const hw::Cluster& cluster, int iterations,
                                              workload::TaskKind kind) {
  const cost::CostModel model(cluster, run.in.workload.workload, run.in.graph, run.in.workload.models,
                              executor_cost_params());
  plan::Evaluator evaluator(model);
  const plan::Prediction& predicted = evaluator.evaluate(run.plan, /*explain=*/true);
  std::vector<double> out(run.in.graph.tasks.size(), -1.0);
  for (std::size_t t = 0; t < out.size(); ++t) {
    if (run.in.graph.tasks[t].kind != kind) continue;
    const auto& terms = predicted.tasks[t].terms;
    out[t] = kind == workload::TaskKind::kTrain ? predicted_parts(terms).optimizer_step
                                                : predicted_generation_parts(terms).prefill;
  }
  return std::vector<std::vector<double>>(static_cast<std::size_t>(iterations), out);
}

// Task `name` of the run's plan as one replica of TP 2 over the node's two GPUs; its index.
std::size_t one_tp2_replica(Run& run, const char* name) {
  const int task = run.in.graph.find(name);
  REQUIRE(task >= 0);
  plan::TaskPlacement* placement = nullptr;
  for (plan::Group& g : run.plan.groups) {
    for (plan::TaskPlacement& t : g.tasks) {
      if (t.task == task) placement = &t;
    }
  }
  REQUIRE(placement != nullptr);
  plan::Replica one = placement->replicas.front();
  one.share = 1.0;
  one.stages.front().devices = {0, 1};
  placement->replicas = {one};
  return static_cast<std::size_t>(task);
}

TEST_CASE("calibration: figures the runs were made with are fitted back from others") {
  const Run run = load();
  hw::Cluster truth = run.in.cluster;
  REQUIRE(truth.gpu_types.size() == 1);
  hw::Efficiency& e = truth.gpu_types[0].efficiency;
  const double pass = 0.43, optimizer = 0.21, overhead = 7e-3, copy = 0.37;
  REQUIRE(e.training != hetrl::testing::approx(pass).epsilon(0.1));
  REQUIRE(e.copy == 0);  // the memory efficiency stands for it
  REQUIRE(e.memory != hetrl::testing::approx(copy).epsilon(0.1));
  e.training = pass;
  e.optimizer = optimizer;
  e.decode_step_overhead = overhead;
  e.copy = copy;
  const int warmup = 1;
  const unsigned long long seed = 5;
  CalibrationInputs in{&run.in.cluster, &run.in.workload.workload, &run.in.graph, &run.in.workload.models, &run.plan,
                       simulate(run, truth, warmup, 3, seed), warmup, seed, {}, {}, {}, {}, {}, {}};
  const Calibration fit = calibrate(in);
  CHECK(fit.gpu_type == 0);
  CHECK(fit.pass_efficiency == hetrl::testing::approx(pass).epsilon(0.02));
  CHECK(fit.optimizer_efficiency == hetrl::testing::approx(optimizer).epsilon(0.05));
  CHECK(fit.decode_step_overhead == hetrl::testing::approx(overhead).epsilon(0.02));
  CHECK_FALSE(fit.optimizer_held);
  CHECK(fit.optimizer_steps == 0);  // none timed apart: the training tasks inform it
  // The plan trains and generates on the same GPUs in the same layout: its weight sync is a
  // copy on each, which the copy efficiency prices.
  CHECK_FALSE(fit.copy_held);
  REQUIRE(fit.copy_efficiency);
  CHECK(*fit.copy_efficiency == hetrl::testing::approx(copy).epsilon(0.02));
  // Every GPU task the run measured and the weight sync, each now simulated as measured and
  // not before.
  int generation = 0, passes = 0, syncs = 0;
  for (const CalibrationRow& row : fit.rows) {
    CAPTURE(row.task);
    CHECK(row.measured > 0);
    CHECK(row.after == hetrl::testing::approx(row.measured).epsilon(0.01));
    CHECK(row.before != hetrl::testing::approx(row.measured).epsilon(0.05));
    generation += row.task == "generate";
    syncs += row.task == "weight_sync";
    ++passes;
  }
  CHECK(generation == 1);
  CHECK(syncs == 1);
  CHECK(passes == 8);  // generate, four scoring tasks, two trainers, the weight sync

  // A run whose tasks were not measured has nothing to fit on.
  for (std::vector<double>& it : in.measured) it.assign(it.size(), -1.0);
  CHECK_THROWS_AS(calibrate(in), core::JobError);
}

TEST_CASE("calibration: runs pooled, each iteration set against the simulator's same iteration") {
  const Run run = load();
  hw::Cluster truth = run.in.cluster;
  hw::Efficiency& e = truth.gpu_types[0].efficiency;
  const double pass = 0.43, overhead = 7e-3;
  e.training = pass;
  e.decode_step_overhead = overhead;
  const int warmup = 1;
  const unsigned long long seed = 5;
  // One run of three iterations and one of one, as if two hetrl-exec runs of the same plan and
  // seed: their iterations 0 drew the same samples.
  const std::vector<std::vector<double>> three = simulate(run, truth, warmup, 3, seed);
  const int train = run.in.graph.find("actor_train");
  REQUIRE(train >= 0);
  const auto g = static_cast<std::size_t>(train);
  // The iterations differ (their tokens do): set against the wrong ones, the medians would not
  // match.
  REQUIRE(three[0][g] != hetrl::testing::approx(three[1][g]).epsilon(0.02));
  REQUIRE(three[0][g] != hetrl::testing::approx(three[2][g]).epsilon(0.02));
  CalibrationInputs in{&run.in.cluster, &run.in.workload.workload, &run.in.graph, &run.in.workload.models, &run.plan,
                       {three[0], three[1], three[2], three[0]}, warmup, seed, {}, {}, {0, 1, 2, 0}, {}, {}, {}};
  const Calibration fit = calibrate(in);
  CHECK(fit.pass_efficiency == hetrl::testing::approx(pass).epsilon(0.02));
  CHECK(fit.decode_step_overhead == hetrl::testing::approx(overhead).epsilon(0.02));
  REQUIRE_FALSE(fit.rows.empty());
  for (const CalibrationRow& row : fit.rows) {
    CAPTURE(row.task);
    CHECK(row.after == hetrl::testing::approx(row.measured).epsilon(0.005));
  }
}

TEST_CASE("calibration: an optimizer efficiency the type has is held without the run's steps, fitted on them") {
  const Run run = load();
  hw::Cluster truth = run.in.cluster;
  hw::Efficiency& e = truth.gpu_types[0].efficiency;
  const double pass = 0.43, optimizer = 0.21, overhead = 7e-3;
  e.training = pass;
  e.optimizer = optimizer;
  e.decode_step_overhead = overhead;
  // The run's cluster has the step's measured figure, a little off the truth: the training
  // tasks' seconds would move it, and the pass efficiency with it, were it fitted.
  hw::Cluster measured = run.in.cluster;
  const double held = 0.2;
  measured.gpu_types[0].efficiency.optimizer = held;
  const int warmup = 1;
  const unsigned long long seed = 5;
  CalibrationInputs in{&measured, &run.in.workload.workload, &run.in.graph, &run.in.workload.models, &run.plan,
                       simulate(run, truth, warmup, 3, seed), warmup, seed, {}, {}, {}, {}, {}, {}};
  const Calibration fit = calibrate(in);
  CHECK(fit.optimizer_held);
  CHECK(fit.optimizer_efficiency == held);
  CHECK(fit.pass_efficiency == hetrl::testing::approx(pass).epsilon(0.05));
  CHECK(fit.decode_step_overhead == hetrl::testing::approx(overhead).epsilon(0.02));

  // The run's optimizer steps timed apart: the efficiency is fitted on them, the held figure
  // (a quick profile's, off the truth by half) notwithstanding.
  measured.gpu_types[0].efficiency.optimizer = optimizer / 2;
  in.optimizer_steps = priced_parts(run, truth, 3, workload::TaskKind::kTrain);
  const Calibration from_steps = calibrate(in);
  CHECK_FALSE(from_steps.optimizer_held);
  CHECK(from_steps.optimizer_steps == 2);  // actor_train, critic_train
  CHECK(from_steps.optimizer_efficiency == hetrl::testing::approx(optimizer).epsilon(0.02));
  CHECK(from_steps.pass_efficiency == hetrl::testing::approx(pass).epsilon(0.02));
  CHECK(from_steps.decode_step_overhead == hetrl::testing::approx(overhead).epsilon(0.02));
}

TEST_CASE("calibration: the decode steps' timed TP all-reduces give their seconds, and the step overhead the rest") {
  Run run = load();
  // Generation as one replica of TP 2 over the node's two GPUs.
  const std::size_t g = one_tp2_replica(run, "generate");
  hw::Cluster truth = run.in.cluster;
  hw::Efficiency& e = truth.gpu_types[0].efficiency;
  const double pass = 0.43, overhead = 5e-3, all_reduce = 0.4e-3;
  e.training = pass;
  e.decode_step_overhead = overhead;
  e.decode_allreduce = all_reduce;
  const int warmup = 1;
  const unsigned long long seed = 5;
  CalibrationInputs in{&run.in.cluster, &run.in.workload.workload, &run.in.graph, &run.in.workload.models, &run.plan,
                       simulate(run, truth, warmup, 3, seed), warmup, seed, {}, {}, {}, {}, {}, {}};
  // Without the all-reduces timed, the step overhead takes them in: well above the truth.
  const Calibration blind = calibrate(in);
  CHECK_FALSE(blind.decode_allreduce);
  CAPTURE(blind.decode_step_overhead);
  CHECK(blind.decode_step_overhead > 1.5 * overhead);
  // Timed (iterations of 200, 300 and 0 all-reduces: one at 1.1 times the figure, one at 0.9
  // and one not timed), their seconds over their count give it, and the overhead comes back.
  in.decode_all_reduce.assign(3, std::vector<double>(run.in.graph.tasks.size(), 0.0));
  in.decode_all_reduces.assign(3, std::vector<long long>(run.in.graph.tasks.size(), 0));
  in.decode_all_reduce[0][g] = 200 * 1.1 * all_reduce;
  in.decode_all_reduces[0][g] = 200;
  in.decode_all_reduce[1][g] = 300 * (all_reduce - 200 * 0.1 * all_reduce / 300);
  in.decode_all_reduces[1][g] = 300;
  const Calibration fit = calibrate(in);
  REQUIRE(fit.decode_allreduce);
  CHECK(*fit.decode_allreduce == hetrl::testing::approx(all_reduce).epsilon(1e-9));
  CHECK(fit.decode_all_reduces == 500);
  CHECK(fit.decode_step_overhead == hetrl::testing::approx(overhead).epsilon(0.02));
  CHECK(fit.pass_efficiency == hetrl::testing::approx(pass).epsilon(0.02));
  for (const CalibrationRow& row : fit.rows) {
    CAPTURE(row.task);
    CHECK(row.after == hetrl::testing::approx(row.measured).epsilon(0.01));
  }
}

TEST_CASE("calibration: the passes' timed TP all-reduces give the TP wait, and the pass efficiency the compute's") {
  Run run = load();
  // The reference's scoring and the critic's training as one replica of TP 2 over the node's
  // two GPUs; the rest at TP 1.
  const std::size_t ref = one_tp2_replica(run, "ref_logprob"), critic = one_tp2_replica(run, "critic_train");
  hw::Cluster truth = run.in.cluster;
  hw::Efficiency& e = truth.gpu_types[0].efficiency;
  REQUIRE_FALSE(e.tp_wait);
  const double pass = 0.43, wait = 0.12;
  e.training = pass;
  e.tp_wait = wait;
  const int warmup = 1;
  const unsigned long long seed = 5;
  CalibrationInputs in{&run.in.cluster, &run.in.workload.workload, &run.in.graph, &run.in.workload.models, &run.plan,
                       simulate(run, truth, warmup, 3, seed), warmup, seed, {}, {}, {}, {}, {}, {}};
  // Without the all-reduces timed, no wait is fitted (nor priced: the TP 1 tasks and the TP 2
  // ones share one pass efficiency, which misses both).
  const Calibration blind = calibrate(in);
  CHECK_FALSE(blind.tp_wait);
  CHECK(blind.tp_passes == 0);
  CHECK(blind.pass_efficiency != hetrl::testing::approx(pass).epsilon(0.01));
  // Timed as the truth prices them (transfer and wait), the wait comes back, and the pass
  // efficiency with it.
  const cost::CostModel model(truth, run.in.workload.workload, run.in.graph, run.in.workload.models,
                              executor_cost_params());
  plan::Evaluator evaluator(model);
  const plan::Prediction& predicted = evaluator.evaluate(run.plan, /*explain=*/true);
  std::vector<double> all_reduce(run.in.graph.tasks.size(), 0.0);
  for (const std::size_t t : {ref, critic}) {
    all_reduce[t] = predicted_pass_all_reduce(predicted.tasks[t].terms);
    REQUIRE(all_reduce[t] > 0);
  }
  // (the TP 1 tasks have none to time)
  CHECK(predicted_pass_all_reduce(predicted.tasks[static_cast<std::size_t>(run.in.graph.find("actor_train"))].terms) == 0);
  in.pass_all_reduce.assign(3, all_reduce);
  const Calibration fit = calibrate(in);
  REQUIRE(fit.tp_wait);
  CHECK(*fit.tp_wait == hetrl::testing::approx(wait).epsilon(0.03));
  CHECK(fit.tp_passes == 2);
  CHECK(fit.pass_efficiency == hetrl::testing::approx(pass).epsilon(0.02));
  for (const CalibrationRow& row : fit.rows) {
    CAPTURE(row.task);
    CHECK(row.after == hetrl::testing::approx(row.measured).epsilon(0.01));
  }
}

TEST_CASE("calibration: a plan on two GPU types is refused (a profile describes one)") {
  const Run run = load();
  hw::Cluster two = run.in.cluster;
  hw::GpuSpec other = two.gpu_types[0];
  other.name = "L4-other";
  two.gpu_types.push_back(other);
  hw::Node second = two.nodes[0];
  second.name = "lab-l4-other";
  second.gpu_type = 1;
  two.nodes.push_back(second);
  plan::Plan p = run.plan;
  // One of the group's GPUs on the second node.
  REQUIRE(p.groups[0].gpus.size() == 2);
  p.groups[0].gpus[1].node = 1;
  CalibrationInputs in{&two, &run.in.workload.workload, &run.in.graph, &run.in.workload.models, &p,
                       {std::vector<double>(run.in.graph.tasks.size(), 1.0)}, 0, 1, {}, {}, {}, {}, {}, {}};
  CHECK_THROWS_WITH_AS(calibrate(in), doctest::Contains("2 GPU types"), core::InputError);
}

TEST_CASE("training's parts: the estimate's terms split into passes, gradient all-reduce and step, summing to it") {
  Run run = load();
  // actor_train's two replicas without ZeRO (an all-reduce of the gradients, the executor's),
  // critic_train's one.
  plan::TaskPlacement* actor = nullptr;
  for (plan::Group& g : run.plan.groups) {
    for (plan::TaskPlacement& t : g.tasks) {
      if (run.in.graph.tasks[static_cast<std::size_t>(t.task)].name == "actor_train") actor = &t;
    }
  }
  REQUIRE(actor);
  REQUIRE(actor->replicas.size() == 2);
  actor->train.zero_stage = 0;
  const cost::CostModel model(run.in.cluster, run.in.workload.workload, run.in.graph, run.in.workload.models);
  plan::Evaluator evaluator(model);
  const plan::Prediction& predicted = evaluator.evaluate(run.plan, /*explain=*/true);
  REQUIRE(predicted.feasible);
  for (const char* name : {"actor_train", "critic_train"}) {
    CAPTURE(name);
    const plan::TaskPrediction& task = predicted.tasks[static_cast<std::size_t>(run.in.graph.find(name))];
    const TrainParts parts = predicted_parts(task.terms);
    CHECK(parts.passes > 0);
    CHECK(parts.optimizer_step > 0);
    CHECK(parts.passes + parts.gradient_reduce + parts.optimizer_step ==
          hetrl::testing::approx(task.seconds).epsilon(1e-9));
    CHECK((parts.gradient_reduce > 0) == (std::string(name) == "actor_train"));
  }
}

TEST_CASE("generation's parts: the estimate's terms split into prefill and decode, summing to it") {
  const Run run = load();
  const cost::CostModel model(run.in.cluster, run.in.workload.workload, run.in.graph, run.in.workload.models);
  plan::Evaluator evaluator(model);
  const plan::Prediction& predicted = evaluator.evaluate(run.plan, /*explain=*/true);
  REQUIRE(predicted.feasible);
  const plan::TaskPrediction& task = predicted.tasks[static_cast<std::size_t>(run.in.graph.find("generate"))];
  const GenerationParts parts = predicted_generation_parts(task.terms);
  CHECK(parts.prefill > 0);
  CHECK(parts.decode > parts.prefill);  // a few hundred prompt tokens, responses decoded a token a step
  CHECK(parts.prefill + parts.decode == hetrl::testing::approx(task.seconds).epsilon(1e-9));
}

TEST_CASE("generation's parts: a measured task's are its slowest replica's, its decode the rest") {
  TaskMeasurement m;
  m.replica_seconds = {1.0, 3.0, 2.0};
  m.replica_prefill_seconds = {0.2, 0.5, 0.9};
  const GenerationParts slowest = slowest_generation_parts(m);
  CHECK(slowest.prefill == 0.5);
  CHECK(slowest.decode == hetrl::testing::approx(2.5));
  // A task measured without them (not generation) has none.
  m.replica_prefill_seconds.clear();
  CHECK(slowest_generation_parts(m).prefill == 0);
  CHECK(slowest_generation_parts(m).decode == 0);
}

TEST_CASE("task parts: a scoring or training task's passes' TP all-reduces where the run timed them") {
  RunResult run;
  run.iterations.resize(2);
  for (std::size_t i = 0; i < 2; ++i) {
    run.iterations[i].tasks.resize(1);
    TaskMeasurement& m = run.iterations[i].tasks[0];
    m.ran = true;
    // The second replica the slowest: its all-reduces count, not the first's.
    m.replica_seconds = {1.0, 2.0 + static_cast<double>(i)};
    m.replica_tp_collective_seconds = {0.9, 0.2 + 0.1 * static_cast<double>(i)};
    m.replica_tp_collective_calls = {48, 96};
    m.replica_parts.resize(2);
  }
  const std::vector<cost::Breakdown::Term> terms = {
      {"forward compute", 2.0}, {cost::kPassAllReduceTerm, 0.125}, {cost::kTpWaitTerm, 0.0625}};
  CHECK(predicted_pass_all_reduce(terms) == 0.1875);
  CHECK(slowest_tp_collectives(run.iterations[1].tasks[0]).seconds == hetrl::testing::approx(0.3));
  // Not timed (one process, or not on MPI): no part.
  CHECK(task_parts(workload::TaskKind::kForward, terms, run, 0).empty());
  run.collectives_timed = true;
  for (const workload::TaskKind kind : {workload::TaskKind::kForward, workload::TaskKind::kTrain}) {
    const std::vector<TaskPart> parts = task_parts(kind, terms, run, 0);
    REQUIRE_FALSE(parts.empty());
    const TaskPart& tp = parts.back();
    CHECK(std::string(tp.key) == "tp_all_reduce");
    CHECK(tp.predicted == 0.1875);
    REQUIRE(tp.measured.size() == 2);
    CHECK(tp.measured[0] == hetrl::testing::approx(0.2));
    CHECK(tp.measured[1] == hetrl::testing::approx(0.3));
    CHECK(tp.calls == std::vector<long long>{96, 96});
  }
  // An estimate with none (TP 1) has no part to set them against.
  const std::vector<cost::Breakdown::Term> alone = {{"forward compute", 2.0}};
  CHECK(task_parts(workload::TaskKind::kForward, alone, run, 0).empty());
}

TEST_CASE("task parts: a training task's four, two of them data-parallel, measured where the task ran") {
  RunResult run;
  run.iterations.resize(3);
  for (IterationMeasurement& it : run.iterations) it.tasks.resize(2);
  const double passes[] = {1.5, 9.0, 2.5};
  for (std::size_t i = 0; i < 3; ++i) {
    TaskMeasurement& m = run.iterations[i].tasks[1];
    m.ran = i != 1;  // the second iteration did not run it
    m.replica_seconds = {passes[i] + 0.5, 0.5};
    m.replica_parts = {{.passes = passes[i], .replica_wait = 0.1, .gradient_reduce = 0.2, .optimizer_step = 0.3}, {}};
  }
  const std::vector<cost::Breakdown::Term> terms = {{cost::kOptimizerStepTerm, 0.25}, {"forward and backward", 2.0}};
  const std::vector<TaskPart> parts = task_parts(workload::TaskKind::kTrain, terms, run, 1);
  REQUIRE(parts.size() == 4);
  CHECK(std::string(parts[0].key) == "passes");
  CHECK(parts[0].predicted == 2.0);
  CHECK(parts[0].measured == std::vector<double>{1.5, 2.5});
  CHECK((parts[1].data_parallel && parts[2].data_parallel && !parts[0].data_parallel && !parts[3].data_parallel));
  CHECK(std::string(parts[3].key) == "optimizer_step");
  CHECK(parts[3].predicted == 0.25);
  CHECK(parts[3].measured == std::vector<double>{0.3, 0.3});
  // A generation task's two; none for a scoring task.
  const std::vector<TaskPart> generation = task_parts(workload::TaskKind::kGenerate, terms, run, 1);
  REQUIRE(generation.size() == 2);
  CHECK(std::string(generation[0].key) == "prefill");
  CHECK(generation[0].predicted == 0);
  CHECK(generation[1].predicted == 2.25);
  CHECK(task_parts(workload::TaskKind::kForward, terms, run, 1).empty());
}

TEST_CASE("task parts: ZeRO-3's gathers a fifth part of the passes where the run measured some") {
  RunResult run;
  run.iterations.resize(2);
  for (IterationMeasurement& it : run.iterations) {
    it.tasks.resize(1);
    it.tasks[0].ran = true;
    it.tasks[0].replica_seconds = {3.0, 2.0};
    it.tasks[0].replica_parts = {{.passes = 2.5, .weight_gathers = 0.75}, {.passes = 1.5, .weight_gathers = 0.5}};
  }
  const std::vector<cost::Breakdown::Term> terms = {{"forward + backward compute", 2.0},
                                                    {cost::kZero3GatherTerm, 0.25},
                                                    {cost::kZero3FinalGatherTerm, 0.125}};
  const std::vector<TaskPart> parts = task_parts(workload::TaskKind::kTrain, terms, run, 0);
  REQUIRE(parts.size() == 5);
  CHECK(parts[0].predicted == 2.25);  // the passes hold the gathers the compute does not hide
  // The whole weights gathered after the last step: timed with the gradients' sync.
  CHECK(std::string(parts[2].key) == "gradient_reduce");
  CHECK(parts[2].predicted == 0.125);
  CHECK(std::string(parts[4].key) == "weight_gathers");
  CHECK(parts[4].data_parallel);
  CHECK(parts[4].predicted == 0.25);
  CHECK(parts[4].measured == std::vector<double>{0.75, 0.75});  // the slowest replica's
  // None measured (one process, or no ZeRO-3): the four parts.
  for (IterationMeasurement& it : run.iterations) {
    for (TrainParts& p : it.tasks[0].replica_parts) p.weight_gathers = 0;
  }
  CHECK(task_parts(workload::TaskKind::kTrain, terms, run, 0).size() == 4);
}

TEST_CASE("training's parts: a measured task's are its slowest replica's") {
  TaskMeasurement m;
  m.replica_seconds = {1.0, 3.0, 2.0};
  m.replica_parts = {{.passes = 0.8, .replica_wait = 0.9, .gradient_reduce = 0.1, .optimizer_step = 0.1},
                     {.passes = 2.5, .replica_wait = 0.0, .gradient_reduce = 0.2, .optimizer_step = 0.3},
                     {.passes = 1.6, .replica_wait = 0.7, .gradient_reduce = 0.2, .optimizer_step = 0.2}};
  const TrainParts slowest = slowest_parts(m);
  CHECK(slowest.passes == 2.5);
  CHECK(slowest.replica_wait == 0);
  CHECK(slowest.gradient_reduce == 0.2);
  CHECK(slowest.optimizer_step == 0.3);
  // A task measured without parts (not training) has none.
  m.replica_parts.clear();
  CHECK(slowest_parts(m).passes == 0);
}

TEST_CASE("calibration: the prefill efficiency is fitted on the run's timed prefills, the decode overhead on the rest") {
  // Prompts of 512 tokens: a prefill bound by its GEMMs, not by streaming the weights once.
  Run run = load();
  run.in.workload.workload.prompt_length_tokens = 512;
  const io::Catalogs& catalogs = io::builtin_catalogs();
  run.in.graph = workload::build_task_graph(run.in.workload.workload, catalogs.algorithms, catalogs.models);
  hw::Cluster truth = run.in.cluster;
  hw::Efficiency& e = truth.gpu_types[0].efficiency;
  const double pass = 0.43, optimizer = 0.21, overhead = 7e-3, prefill = 0.55;
  REQUIRE(e.prefill == 0);  // prefill at the kernel rates
  e.training = pass;
  e.optimizer = optimizer;
  e.decode_step_overhead = overhead;
  e.prefill = prefill;
  const int warmup = 1;
  const unsigned long long seed = 5;
  CalibrationInputs in{&run.in.cluster, &run.in.workload.workload, &run.in.graph, &run.in.workload.models,
                       &run.plan, simulate(run, truth, warmup, 3, seed), warmup, seed,
                       priced_parts(run, truth, 3, workload::TaskKind::kTrain),
                       priced_parts(run, truth, 3, workload::TaskKind::kGenerate), {}, {}, {}, {}};
  const Calibration fit = calibrate(in);
  CHECK(fit.prefills == 1);
  REQUIRE(fit.prefill_efficiency);
  CHECK(*fit.prefill_efficiency == hetrl::testing::approx(prefill).epsilon(0.02));
  CHECK(fit.decode_step_overhead == hetrl::testing::approx(overhead).epsilon(0.02));
  CHECK(fit.pass_efficiency == hetrl::testing::approx(pass).epsilon(0.02));

  // Without the prefills timed apart nothing informs it: held (the type has none to keep), and
  // the slower prefill lands on the decode steps' overhead.
  in.prefills.clear();
  const Calibration blind = calibrate(in);
  CHECK(blind.prefills == 0);
  CHECK_FALSE(blind.prefill_efficiency);
  CHECK(blind.decode_step_overhead > 1.02 * overhead);
}

}  // namespace
}  // namespace hetrl::exec
