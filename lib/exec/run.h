#pragma once
// Running a plan's RL iterations with real computation on this process's device, measuring
// every task (docs/exec.md, "Running a plan").
//
// Reading map: each layout (TP split) a plan uses of a role is a Transformer on the device,
// generation's copies of the actor apart (the weight sync refreshes them, a reshard the other
// layouts of a trained role); each iteration runs the task graph in topological order. A GPU
// task runs replica by replica as the plan places it, each replica on its share of the samples
// (split as hetrl-sim splits them), and the task's measured time is its slowest replica's. In
// one process the replicas, which the plan gives GPUs of their own, run one after another on
// this device, each timed alone (a TP replica's shards in turn, pipeline stages as one model).
// Under mpirun (RunSettings::comm) a process stands for each plan GPU and runs the replicas on
// it (place_on_ranks in run.cpp): a replica's tensor-parallel shards over its processes, its
// pipeline stages each on their own (the rows handed on between them, training's micro-batches
// in 1F1B's schedule). Each process runs its plan group's tasks only, iteration by iteration,
// and takes what they read of other groups' work when it needs it (posted host messages, so no
// group waits for a reader): groups overlap in time as the task graph lets them, generation
// in a group of its own running up to the workload's staleness bound ahead of training (the
// weight sync takes the weights of the iteration 1 + the bound back, as hetrl-sim has it; in
// training's own group, the newest; one process keeps the same weights for it). Generation runs continuous batching at the concurrency the
// cost model gives the replica's KV cache, over response lengths drawn by hetrl-sim's sampler;
// scoring and training run micro-batches of at most the cost model's micro-batch tokens
// (samples of alike lengths together, padded to the longest); training runs the workload's
// epochs and mini-batches. CPU tasks (advantages, a rule reward) are timed on the host.
//
// What is not run yet throws core::JobError saying so (a trained role in two layouts, kv heads
// copied in a replica trained over processes, a process count other than the plan's GPUs).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost_model.h"
#include "device/backend.h"
#include "device/comm.h"
#include "exec/rl.h"
#include "plan/evaluate.h"
#include "plan/plan.h"

namespace hetrl::exec {

struct RunSettings {
  // The processes of the run under mpirun, one plan GPU each (null, or one process: every
  // replica here).
  device::Communicator* comm = nullptr;
  int iterations = 1;
  std::uint64_t seed = 1;
  float temperature = 1.0f;
  float learning_rate = 1e-5f;  // AdamW's, every training step
  device::DType dtype = device::DType::kBf16;
  RlSettings rl;
};

// A stretch of one replica's work, as run: seconds from the start of the run.
struct ReplicaSpan {
  int replica = 0;
  double start = 0, end = 0;
  int samples = 0;
  long long decode_steps = 0;  // generation
};

// Where a training replica's time went, summed over its mini-batches: the micro-batches'
// forward and backward passes (tensor-parallel all-reduces inside them), the wait for the
// other data-parallel replicas to finish theirs, the gradients' all-reduce over the replicas
// (with the loss's), and the optimizer step.
struct TrainParts {
  double passes = 0;
  double replica_wait = 0;
  double gradient_reduce = 0;
  double optimizer_step = 0;
  double weight_gathers = 0;  // of the passes: ZeRO-3's gathers and reduce-scatters
};

struct TaskMeasurement {
  double seconds = 0;                   // the slowest replica's, or the host's for a CPU task
  std::vector<double> replica_seconds;  // GPU tasks
  long long tokens = 0;                 // tokens the task processed (generated, for generation)
  bool ran = false;
  double start = 0, end = 0;            // seconds from the start of the run, as run here
  std::vector<ReplicaSpan> spans;       // each replica's stretches of work (a trainer's, one a mini-batch)
  std::vector<long long> replica_decode_steps;  // generation
  std::vector<long long> replica_prefill_passes;  // generation: passes within the prefill chunk
  std::vector<double> replica_prefill_seconds;  // generation: the prefills' part of replica_seconds
  // Where the tensor-parallel all-reduces were timed (RunResult::collectives_timed): each
  // replica's seconds in them (its stage's processes' mean, what they lose to the slowest
  // beside the collective's own time; the slowest stage's) and their count on that stage (0
  // for a replica of TP 1): a generation replica's decode steps', a scoring or training
  // replica's passes'.
  std::vector<double> replica_tp_collective_seconds;
  std::vector<long long> replica_tp_collective_calls;
  std::vector<TrainParts> replica_parts;        // training
};

struct IterationMeasurement {
  std::vector<TaskMeasurement> tasks;  // indexed like the task graph
  double policy_loss = 0;              // the actor's last mini-batch (0 without actor training)
  double value_loss = 0;               // the critic's last mini-batch
  double policy_grad_norm = 0;         // the actor's gradient norm at its last step
  double value_grad_norm = 0;          // the critic's
  double mean_score = 0;               // the reward over the iteration's samples
  long long decode_steps = 0;
  long long prefill_passes = 0;  // generation's, every replica's
  // As run, in seconds from the start of the run: its first task's start and its last task's
  // end, and its period: from the previous iteration's end (the first's from its own start) to
  // its end. Under mpirun the groups overlap iterations, so that periods fall below the
  // iteration's tasks in turn.
  double start = 0, end = 0, period = 0;
};

// A device's memory over a run: what was in use at its peak, by purpose, beside the cost model's
// need of the plan GPU the device stands for.
struct DeviceMemory {
  // At the moment of the device's peak (device::Backend::memory_peak_by_purpose): the weights
  // include ZeRO-3's gathered units; activations are a training pass's saved tensors; workspace
  // what the models keep for reuse between steps.
  device::MemoryByPurpose peak{};
  // Under mpirun, the cost model's need (plan::Evaluator::gpu_memory): none in one process, whose
  // device runs every plan GPU's replicas in turn.
  std::optional<plan::MemoryUse> predicted;
  double peak_bytes() const;  // the sum of peak: device::Backend::memory_peak
};

struct RunResult {
  std::vector<IterationMeasurement> iterations;
  std::size_t parameter_bytes = 0;  // of every model held
  // The tensor-parallel all-reduces were timed on the host (transformer.h, TensorParallel::
  // timed): under mpirun on the MPI transport.
  bool collectives_timed = false;
  // Each process's device memory at its most over the run, by rank (one entry in one process).
  std::vector<DeviceMemory> devices;
};

// The cost model's parameters for what run_plan executes: its defaults, but a tensor-parallel
// shard holds the embedding and the language head whole (cost::CostParams::vocab_parallel),
// and the training backward computes the head's logits again (CostParams::head_recompute).
cost::CostParams executor_cost_params();

// Samples dealt to data-parallel replicas by their shares, as trainers balance a batch's
// sequence lengths over their data-parallel ranks (verl's balance_batch): each replica takes
// as many samples as a contiguous split by the shares gives it, and the longest sample left
// goes to the replica whose tokens stand lowest against its share, so that the replicas'
// tokens come near their shares of the whole and they finish together, as the cost model
// prices them. `samples` index `tokens`; each replica's samples come in ascending order.
std::vector<std::vector<std::size_t>> deal(const std::vector<std::size_t>& samples, const std::vector<long long>& tokens,
                                           const std::vector<double>& shares);

// One step of a pipeline stage's training schedule: micro-batch `micro_batch`'s forward or
// backward pass, and whether it is of the schedule's steady part (a forward and a backward in
// turn), where a stage's send and its next receive from the same peer go as one exchange.
struct PipelineStep {
  bool forward = true;
  int micro_batch = 0;
  bool steady = false;
  friend bool operator==(const PipelineStep&, const PipelineStep&) = default;
};

// 1F1B's schedule (Megatron's) for stage `stage` of `stages` over `micro_batches`: the forwards
// of the first stages - stage - 1 micro-batches (all, where there are fewer), then a forward
// and the oldest waiting backward in turn (the steady part), then the backwards left; so at
// most stages - stage micro-batches wait for their backward at once, and the backwards run in
// order.
std::vector<PipelineStep> one_f_one_b(int stages, int stage, int micro_batches);

// `model` prices the workload the run executes (scaled as it runs): its cluster, workload,
// graph and catalogue name what runs; `plan` must have passed validation against them.
// progress(iteration, task) is called before each task.
RunResult run_plan(device::Backend& backend, const cost::CostModel& model, const workload::ModelCatalog& models,
                   const plan::Plan& plan, const RunSettings& settings,
                   const std::function<void(int, int)>& progress = {});

}  // namespace hetrl::exec
