#pragma once
// Fitting a device's figures on a run of a plan: the calibration loop's second half
// (hetrl-exec --fit-profile; docs/exec.md, "Calibrating the cost model").
//
// A profile measures kernels one at a time; a run measures what the tasks built of them take,
// with what a profile cannot see: an engine's work between decode steps, a trainer's passes
// falling short of its GEMMs' rate, an optimizer step bound by arithmetic instead of memory.
// The fit adjusts six figures of the run's GPU type, each the coefficient of one term of the
// cost model, so that the simulator (the run's own response lengths, hetrl-sim's draws for the
// same seed) gives each task what was measured:
//   - the passes' share of the kernel rates (hw::Efficiency::training): forward and training
//     passes' compute;
//   - the share of a tensor-parallel pass's compute its processes spend at its all-reduces
//     beyond their transfer (hw::Efficiency::tp_wait), on the passes' all-reduces the run
//     timed (under mpirun on MPI: each scoring and training task's slowest replica's, against
//     the cost model's all-reduce terms; held without them). On a shared host it is the wait
//     for the shard that ran slower since the last all-reduce, which TP 1 does not pay: left
//     to the pass efficiency, it would price every plan's passes as the fitted plan's TP;
//   - the optimizer step's share of the memory bandwidth (hw::Efficiency::optimizer);
//   - the engine's seconds a decode step outside its kernels (hw::Efficiency::
//     decode_step_overhead);
//   - the share of the memory bandwidth a weight copy on the device reaches with every device
//     of the node busy (hw::Efficiency::copy), on the weight sync where it copies the trained
//     shard into the engine's (held where it does not: a sync between groups, or none);
//   - the share of the kernel rates the engine's prefill reaches (hw::Efficiency::prefill), on
//     the prefills the run timed apart (each generation task's slowest replica's, against the
//     cost model's prefill terms; held without them), so that the decode step overhead is left
//     to explain the decode steps alone.
// Before them, where the run timed its decode steps' tensor-parallel all-reduces (under mpirun
// on MPI), the seconds one takes (hw::Efficiency::decode_allreduce) is measured outright: their
// seconds over their count. On a shared host most of it is the wait for the group's slowest
// process at each of a step's 2 x layers all-reduces, which the TP 1 plans do not pay: left to
// the decode step overhead, it would price every plan's steps as the fitted plan's TP does.
// It minimises the squared log ratios of simulated to measured task seconds (each task's median
// over the measured iterations) by Gauss-Newton over the figures' logarithms, with a weak pull
// towards where they started (a figure no task informs stays put), each within its range.
// The optimizer efficiency is fitted on the optimizer steps the run timed apart (each training
// task's slowest replica's, against the cost model's step term), which pin it whatever the
// passes' noise; a run without them leaves an optimizer efficiency the type already has
// (hetrl-profile's AdamW step, or a cluster file's) held, and fits the other two.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cost/cost_model.h"
#include "exec/run.h"
#include "hw/cluster.h"
#include "plan/plan.h"
#include "workload/model.h"
#include "workload/rl_graph.h"

namespace hetrl::exec {

struct CalibrationInputs {
  const hw::Cluster* cluster = nullptr;  // the run's, whose GPU type is fitted
  const workload::Workload* workload = nullptr;  // as it ran (scaled models, cut batch)
  const workload::TaskGraph* graph = nullptr;
  const workload::ModelCatalog* models = nullptr;
  const plan::Plan* plan = nullptr;
  // Seconds per measured iteration and task (indexed like the graph; negative: not run). The
  // iterations of several runs of the same plan, seed and warm-up may be pooled here, each run's
  // after the other's, with `iteration_of` saying which iteration of its run each one was.
  std::vector<std::vector<double>> measured;
  int warmup = 0;          // iterations run before the measured ones
  unsigned long long seed = 1;  // the run's: the simulator draws the same response lengths
  // Seconds per measured iteration and task of the optimizer step of a training task's slowest
  // replica (indexed like the graph; negative: not a training task, or not timed apart).
  std::vector<std::vector<double>> optimizer_steps;
  // Seconds per measured iteration and task of the prefill of a generation task's slowest
  // replica (indexed like the graph; negative: not a generation task, or not timed apart).
  std::vector<std::vector<double>> prefills;
  // Each measured iteration's index among its run's measured iterations (empty: one run, 0, 1,
  // ... in order), so that each is set against the simulator's iteration with its samples.
  std::vector<int> iteration_of;
  // Seconds per measured iteration and task in the decode steps' tensor-parallel all-reduces
  // of a generation task's slowest replica, and their count (indexed like the graph; empty, or
  // a count of 0: not timed, or TP 1).
  std::vector<std::vector<double>> decode_all_reduce;
  std::vector<std::vector<long long>> decode_all_reduces;
  // Seconds per measured iteration and task in the passes' tensor-parallel all-reduces of a
  // scoring or training task's slowest replica (indexed like the graph; empty, or 0: not
  // timed, or TP 1).
  std::vector<std::vector<double>> pass_all_reduce;
};

struct CalibrationRow {
  std::string task;
  double measured = 0;  // median over the iterations
  double before = 0;    // simulated, with the figures the run started from
  double after = 0;     // simulated, with the fitted figures
};

struct Calibration {
  int gpu_type = 0;  // index in the cluster's GPU types
  double pass_efficiency = 0;
  double optimizer_efficiency = 0;
  // Kept where it started: the run timed no optimizer step apart and the type had one.
  bool optimizer_held = false;
  int optimizer_steps = 0;  // training tasks whose timed optimizer steps the fit used
  double decode_step_overhead = 0;  // seconds
  // The copy efficiency, fitted on the weight sync where the run's copied weights on the
  // devices, else the type's own (none: it had none, and the memory efficiency stands for it).
  std::optional<double> copy_efficiency;
  bool copy_held = false;
  // The prefill efficiency, fitted on the prefills the run timed apart, else the type's own
  // (none: it had none, and prefill runs at the kernel rates).
  std::optional<double> prefill_efficiency;
  int prefills = 0;  // generation tasks whose timed prefills the fit used
  // The seconds one TP all-reduce of a decode step took: the run's timed ones' total over their
  // count (none: it timed none, and the type's own stays).
  std::optional<double> decode_allreduce;
  long long decode_all_reduces = 0;  // how many it was measured over
  // Of a tensor-parallel pass's compute, what its all-reduces take beyond their transfer
  // (hw::Efficiency::tp_wait), fitted on the passes' all-reduces the run timed, else the
  // type's own (none: it had none).
  std::optional<double> tp_wait;
  int tp_passes = 0;  // scoring and training tasks whose timed all-reduces the fit used
  // GPU tasks the run measured, graph order (with the weight sync where it informed the copy).
  std::vector<CalibrationRow> rows;
};

// The GPU types (indices in the cluster's) of the plan's GPUs, in the order first met.
std::vector<int> plan_gpu_types(const plan::Plan& plan, const hw::Cluster& cluster);

// The median of measured seconds (0 for none).
double median(std::vector<double> values);

// A training task's estimate (its terms, evaluated with explain) in the parts hetrl-exec
// measures: the optimizer step's term, the data-parallel gradient all-reduce's (with the tied
// embedding's gradient sum between the first and last stages, timed with it), and every other
// term (compute, tensor-parallel all-reduces, ZeRO-3 gathers, pipeline sends) the passes'. The
// estimate has no wait between replicas (replica_wait 0).
TrainParts predicted_parts(std::span<const cost::Breakdown::Term> terms);

// The parts of the replica that took longest (none: zeros).
TrainParts slowest_parts(const TaskMeasurement& m);

// Seconds in tensor-parallel all-reduces and how many ran.
struct TpCollectives {
  double seconds = 0;
  long long calls = 0;
};

// The tensor-parallel all-reduces of the replica that took longest, where the run timed them
// (TaskMeasurement::replica_tp_collective_seconds; none: zeros): a generation task's decode
// steps', a scoring or training task's passes'.
TpCollectives slowest_tp_collectives(const TaskMeasurement& m);

// A scoring or training task's estimate of its passes' tensor-parallel all-reduces: their
// transfer and their wait for the slowest shard (cost::kPassAllReduceTerm, cost::kTpWaitTerm).
double predicted_pass_all_reduce(std::span<const cost::Breakdown::Term> terms);

// Where a generation task's time goes: the prompts' prefill passes (with their first tokens'
// sampling) and the decode steps, and of these their tensor-parallel all-reduces (measured
// where the run timed them: RunResult::collectives_timed) and how many ran.
struct GenerationParts {
  double prefill = 0;
  double decode = 0;
  double decode_all_reduce = 0;
  long long decode_all_reduces = 0;
};

// A generation task's estimate (its terms, evaluated with explain) in those parts: the
// prefill's terms, and every other (the decode steps', their engine overhead) the decode's;
// the decode's TP all-reduce term also apart.
GenerationParts predicted_generation_parts(std::span<const cost::Breakdown::Term> terms);

// The parts of the generation replica that took longest (none: zeros).
GenerationParts slowest_generation_parts(const TaskMeasurement& m);

// One part of a generation or training task's time, for the report and the table.
struct TaskPart {
  const char* key = "";        // the report's name ("passes", "prefill", ...)
  const char* label = "";      // the table's ("wait for replicas", "decode steps", ...)
  bool data_parallel = false;  // a part only data-parallel replicas have
  double predicted = 0;        // the estimate's (its terms, evaluated with explain)
  std::vector<double> measured;  // each iteration the task ran: its slowest replica's
  std::vector<long long> calls;  // a part of collectives: how many ran in each (else empty)
};

// Task `task`'s parts (a generation task's prefill and decode, and its decode steps' TP
// all-reduces where the run timed them and the estimate has some; a training task's passes,
// replica wait, gradient all-reduce and optimizer step; a training or scoring task's passes'
// TP all-reduces where the run timed them and the estimate has some; none for a CPU task or
// the weight sync) from its estimate's terms and the run.
std::vector<TaskPart> task_parts(workload::TaskKind kind, std::span<const cost::Breakdown::Term> terms,
                                 const RunResult& run, std::size_t task);

// Throws core::InputError when the plan's GPUs are of more than one type (a profile describes
// one) and core::JobError when the run measured no GPU task or the plan does not fit.
Calibration calibrate(const CalibrationInputs& in);

}  // namespace hetrl::exec
