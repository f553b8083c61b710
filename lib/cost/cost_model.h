#pragma once
// The analytical cost model: seconds and bytes of every RL task on any placement, from the
// model's shape (cost/shape.h), the GPUs' datasheet peaks times calibrated efficiencies, and
// the cluster's links. Planners never time anything: they all call this, so their plans
// compare fairly. Every estimate can be broken into named terms (Breakdown).
//
// Reading map:
//   - generation_seconds: prefill (compute-bound) + decode. A decode step costs, per stage,
//     its kernels in turn, each at its own bound: the weights' GEMMs (the larger of their
//     compute and the stage's weights read once), then the attention over the live KV cache
//     (the larger of its FLOPs and the cache read once), plus TP all-reduces. The batch
//     drains as sequences finish: the step count is the expected longest response of the
//     whole iteration (generation ends with the replica that holds it), and the live batch
//     follows the survival curve of the response-length distribution. The KV cache caps how
//     many sequences run at once; beyond that, sequences queue, each slot starting the next
//     as its own one ends, and the batch drains from the ages the slots are at when the queue
//     empties (cost/queue.h).
//   - forward_seconds (scoring) and train_seconds: micro-batches through the pipeline, paced
//     by the slowest stage, and per flush a bubble of one micro-batch of every other stage
//     ((PP - 1) micro-batch times where the stages are even), TP all-reduces per layer, pipeline
//     sends between stages, and for training the optimizer step per mini-batch. A micro-batch
//     is its GEMMs (at the GEMM efficiency for its tokens and width), its fused attention (at
//     the attention efficiency), its element-wise work (at the memory bandwidth), the
//     trainer's share of those kernel rates (the GPU's Efficiency::training)
//     and, under ZeRO-3, the layer gathers its compute does not hide.
//   - Coefficients are fitted on published measurements and checked on others:
//     benchmarks/calibration (README.md there says which coefficient comes from which rows).
//   - gradient_sync_seconds: the DP all-reduce of a train task's fp32 gradients across its
//     replicas, a ring at the slowest link it crosses (replicas may be of different GPU types
//     and zones); with CostParams::dp_overlap only what the step's last backward and first
//     forward do not hide (gradient_sync_overlap).
//   - transfer_seconds: data between GPU sets over the bottleneck path (node NICs in parallel,
//     capped by the zone links crossed). weight_transfer_seconds: the trained weights to
//     generation in another group (the transfer, or a broadcast inside the generation group);
//     reshard_seconds: to generation on the GPUs that trained them (a copy on each GPU of what
//     its training shard holds, the rest over the node's links); weight_load_seconds: from
//     host memory into generation in another group (the transfer there overlaps generation).
//   - memory: weights, gradients, optimizer state (ZeRO stage 0-3), activations (with or
//     without recompute), KV cache per stage (stage_memory); what the roles sharing a GPU keep
//     there between their tasks (RoleMemory); a floor over any layout (least_resident_bytes).
//
// Units: seconds, bytes, FLOP. All rates are per GPU.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"
#include "cost/queue.h"
#include "cost/shape.h"
#include "hw/cluster.h"
#include "workload/model.h"
#include "workload/rl_graph.h"

namespace hetrl::cost {

// The framework a training or scoring pass runs in. FSDP-style trainers (verl's default,
// torchtitan, llm-foundry) and Megatron-style ones reach the GPU's Efficiency::training of the
// kernel rates (fitted on FSDP rows: H100 0.73; Megatron-Core's H100 rows need the same once
// their gradient sync overlaps, benchmarks/calibration/README.md); DeepSpeed's engine, running
// Hugging Face modules with its ZeRO hooks (DeepSpeed-Chat), kDeepSpeedTrainingFraction of it.
enum class Trainer : std::uint8_t { kFsdp, kMegatron, kDeepSpeed };
// Fitted on the one DeepSpeed-Chat run whose phases are measured (16 V100, OPT-1.3B actor and
// OPT-350M critic, ZeRO-2, 4 samples of 512 tokens a GPU: training 1.06 s a step against
// 0.51 s at the FSDP-style rate, eager kernels; benchmarks/calibration/README.md).
inline constexpr double kDeepSpeedTrainingFraction = 0.39;
// Of the kernel rates, what a trainer reaches on a GPU of `training_efficiency`
// (hw::Efficiency::training).
inline double trainer_rate_fraction(Trainer trainer, double training_efficiency) {
  return trainer == Trainer::kDeepSpeed ? kDeepSpeedTrainingFraction * training_efficiency : training_efficiency;
}

// Names of a training estimate's terms that hetrl-exec measures apart (exec::predicted_parts);
// the rest of a training estimate is its passes'.
inline constexpr char kOptimizerStepTerm[] = "optimizer step";
inline constexpr char kOffloadedOptimizerStepTerm[] = "optimizer step on the CPU (gradients out, Adam, weights back)";
inline constexpr char kGradientAllReduceTerm[] = "DP gradient all-reduce";
// ZeRO-1 and 2's: the gradients reduce-scattered, each replica's updated shard of the weights
// all-gathered (Megatron's distributed optimiser, DeepSpeed's ZeRO).
// With tied embeddings over pipeline stages: the first stage's embedding and the last stage's
// head are one matrix, whose two gradients the stages sum before each step (Megatron's
// embedding group all-reduce; hetrl-exec sends the first's to the last and the sum back).
inline constexpr char kTiedEmbeddingTerm[] = "tied embedding gradient sum (first and last stages)";
inline constexpr char kGradientReduceScatterTerm[] = "DP gradient reduce-scatter + weight all-gather";
// Of a ZeRO-3 replica's passes: its layers' weight gathers and gradient reduce-scatters that
// the compute does not hide.
inline constexpr char kZero3GatherTerm[] = "ZeRO-3 gathers beyond the compute";
// After a ZeRO-3 replica's last step: its weights gathered whole once more, a layer at a time,
// for the tasks that read them next (the weight sync, the next iteration's scoring), as
// FSDP's full-parameter gather before a weight sync does.
inline constexpr char kZero3FinalGatherTerm[] = "ZeRO-3 weights gathered whole after the last step";
// Of a tensor-parallel replica's passes: its all-reduces' transfer, and their wait for the
// slowest shard where its type has one (hw::Efficiency::tp_wait).
inline constexpr char kPassAllReduceTerm[] = "TP all-reduce";
inline constexpr char kTpWaitTerm[] = "TP all-reduces' wait for the slowest shard";
// And the prefill's of a generation task (its other terms are the decode steps').
inline constexpr char kPrefillComputeTerm[] = "prefill compute";
inline constexpr char kPrefillAllReduceTerm[] = "prefill TP all-reduce";
inline constexpr char kDecodeAllReduceTerm[] = "decode TP all-reduce";
// A decode step's kernels, each at its own bound: the weights' GEMMs and the attention over
// the KV cache, bound by their compute or by reading the weights or the cache.
inline constexpr char kDecodeComputeTerm[] = "decode kernels bound by compute";
inline constexpr char kDecodeMemoryTerm[] = "decode kernels bound by memory (weights, KV cache)";
// And the weight sync's inside a group.
inline constexpr char kWeightCopyTerm[] = "weight copy on the GPU";
inline constexpr char kWeightGatherTerm[] = "weight gather over the node's links";

// Documented defaults; each can be changed by whoever builds a CostModel.
struct CostParams {
  // Memory no task may use: CUDA context, allocator fragmentation, framework buffers. vLLM's
  // default gpu_memory_utilization of 0.9 leaves the same tenth.
  double memory_reserve_fraction = 0.10;
  // NCCL runs small messages with a low-latency protocol and large ones with a high-bandwidth
  // one and picks the faster: time = min(collective_latency + 2 (n - 1) x the link's
  // hop_latency + volume / (link x small_collective_efficiency), large_collective_latency +
  // volume / (link x the GPU's collective efficiency)), volume the bus volume (2 (n - 1) / n of
  // the bytes; the bytes with NVLS). Fitted on the 8-GPU A100 and H100 nccl-tests rows of the
  // calibration set (1 MB to 8 GB): small-message slopes 126 GB/s of NVLink 3's 300 and 189
  // GB/s of NVLink 4's 450 (0.42 both), fixed costs 36-43 us (33 us and 14 NVLink hops of
  // 0.5 us) and 131-197 us.
  double collective_latency = 33e-6;
  double small_collective_efficiency = 0.42;
  double large_collective_latency = 160e-6;
  // Of a node NIC's bandwidth, what NCCL's inter-node all-reduces reach: 0.8 of it after a
  // fixed cost of 500 us reproduces the 355-357 GB/s bus bandwidth of 8 GB on 8 and 16
  // p5.48xlarge nodes (3,200 Gb/s EFA each, calibration set) within 7%; messages of tens of MB
  // run at 0.29 of it after 120 us (the 32 MB all-reduce on 2 nodes; the 8-byte floor on A3
  // Mega is 123 us). The faster of the two.
  double nic_efficiency = 0.8;
  double nic_collective_latency = 500e-6;
  double nic_small_efficiency = 0.29;
  double nic_small_latency = 120e-6;
  // Tokens per micro-batch of forward and training passes (gradient accumulation beyond).
  double micro_batch_tokens = 8192;
  // GEMMs narrower than the catalogue's measured width (hidden size over the square root of
  // TP, hw::kGemmReferenceWidth) reach less of the peak, wider ones more: the efficiency scales by
  // w / (w + gemm_width_half), relative to its value at the reference width, up to
  // max_gemm_efficiency (cuBLAS at 8192^3 on A100: 81% of peak, published kernels table).
  // Fitted on the calibration rows of the fit split (benchmarks/calibration), whose models'
  // widths it takes as their hidden sizes; a type measured at several widths prices each of a
  // model's GEMMs at its own width instead (CostModel::width_curve).
  double gemm_width_half = 1024;
  // Of a GEMM's width on a type measured at several widths, the share its inner dimension sets
  // (hw::Efficiency::gemm_reduction_share, which a measured type may have): the geometric mean.
  double gemm_reduction_share = 0.5;
  double max_gemm_efficiency = 0.85;
  // The trainer's framework, which sets what share of the kernel rates its training and
  // scoring passes reach (trainer_rate_fraction).
  Trainer trainer = Trainer::kFsdp;
  // TP all-reduces of training and scoring passes overlapped with the GEMMs (Megatron-Core's
  // TP communication overlap), else exposed.
  bool tp_overlap = false;
  // The data-parallel gradient sync overlapped with the compute (Megatron-Core's
  // --overlap-grad-reduce and --overlap-param-gather, PyTorch DDP's gradient buckets): the
  // reduction during the backward of a step's last micro-batch, the weights' all-gather during
  // the next step's first forward (CostModel::gradient_sync_overlap); else it runs after the
  // step's passes, as hetrl-exec runs it.
  bool dp_overlap = false;
  // Tensor parallelism splits the embedding and the LM head over the vocabulary, as Megatron
  // and vLLM do (ModelShape::vocab_parallel). hetrl-exec's tensor-parallel shards hold them
  // whole, and its cost model says so.
  bool vocab_parallel = true;
  // Tensor parallelism's shards split the norms' and residual adds' tokens too, as Megatron's
  // sequence parallelism does (ModelShape::sequence_parallel; the all-reduces become a
  // reduce-scatter and an all-gather of the same volume). hetrl-exec's shards do them whole
  // for every token, and its cost model says so.
  bool sequence_parallel = true;
  // The training backward computes the language head's logits again instead of keeping them
  // (rows x vocab), as chunked and fused cross-entropy kernels do and hetrl-exec does: the
  // head's GEMMs then run four times a step, not three.
  bool head_recompute = false;
  // ZeRO-3's gathers and reduce-scatters of the next layer run while this one computes (FSDP's
  // prefetch on a stream of their own), so only what is longer than the compute shows; else
  // each runs in line with its layer's compute, as hetrl-exec's one stream runs them.
  bool zero3_prefetch = true;
  // Prefill is chunked; each chunk pays the TP collectives' fixed cost once per layer.
  double prefill_chunk_tokens = 8192;
  // What an inference engine holds besides its weights and KV cache whatever the model:
  // CUDA graphs, NCCL and sampler buffers (an estimate, not fitted). The activations of one
  // prefill chunk through a layer come on top (generation_workspace): vLLM profiles that
  // peak before it sizes the cache, TensorRT-LLM reserves it.
  double engine_reserve = 1.0 * core::kGiB;
  // Fixed cost of one decode step of a replica outside the GPU's kernels: the inference
  // engine's scheduling, sampling and launches. vLLM's, as verl runs it: 3 ms, fitted on the
  // rollout of verl's GRPO row (fit split: 181 s predicted without it against 261 s measured,
  // most of the steps those of the long tail's handful of sequences). Engines that replay CUDA graphs from C++
  // (TensorRT-LLM, TGI) pay next to nothing: their rows fit with 0; DeepSpeed-Chat's hybrid
  // engine, which does not, pays more (benchmarks/calibration/README.md lists the values).
  double decode_step_overhead = 3e-3;
  // Fixed cost of one layer of a prefill chunk's forward pass (kernel launches, the engine's
  // scheduling): fitted on the first-token latency of a 128-token prompt on Llama-2-7B, A100
  // (TensorRT-LLM, 16 ms measured against 9.3 ms of GEMMs and weight streaming: 0.21 ms a
  // layer; fit split).
  double prefill_layer_overhead = 0.2e-3;
  // Bytes a trained parameter's gradient takes on the GPU beside its bf16 weight and Adam's 12
  // bytes of fp32 state. 2 counts FSDP's mixed precision (verl's trainers: fp32 sharded
  // parameters and gradients and Adam's two moments, 16 bytes a parameter, the bf16 weights
  // gathered for a layer's compute only) as 2 + 2 + 12; trainers that keep fp32 gradients
  // beside bf16 weights and an fp32 master copy (Megatron's main gradients, hetrl-exec's) hold
  // 4: 18 bytes a parameter (Megatron Core's distributed optimizer guide).
  double gradient_bytes_held = 2;
  // Bytes the Adam step reads and writes per parameter: fp32 master, momentum and variance
  // read and written (24), fp32 gradient read (4), bf16 weight written (2).
  double adam_bytes_per_param = 30;
  // Around the update, as Megatron's optimizer step runs it: the fp32 gradients read for
  // their norm (clipping) and written zero for the next step's accumulation.
  double grad_norm_bytes_per_param = 4;
  double grad_zero_bytes_per_param = 4;
  // CPU work: GAE / group normalisation per response token, and a rule-based reward per
  // sample (run by parallel workers; per-sample cost after parallelism).
  double cpu_seconds_per_token = 2e-9;
  double rule_reward_seconds_per_sample = 2e-4;
  // Points of the midpoint quadrature over the draining decode batch: 16 is within 0.01% of
  // 1024 on the 64-GPU benchmark scenario. At most kMaxDecodePoints.
  int decode_points = 16;
  static constexpr int kMaxDecodePoints = 64;
  // Bytes per second between a GPU and host memory, each way, for offloaded weights and
  // state: pinned copies over PCIe 4.0 x16 reach about 25 GB/s of its 31.5 (NVIDIA's
  // bandwidthTest on A100 hosts reports 24-26 GB/s).
  double host_bandwidth = 25e9;
  // Bytes per second a node's CPUs read and write their memory running an offloaded Adam step
  // (DeepSpeed's vectorised CPU Adam is bound by it), shared by the node's GPUs: two sockets of
  // eight DDR4-3200 channels peak near 410 GB/s; half of it is an estimate, not fitted.
  double host_memory_bandwidth = 200e9;
  // Sequences an inference engine decodes at once, at most, whatever room the KV cache leaves:
  // verl's rollout default (max_num_seqs 1024; vLLM's own default is 256).
  double max_num_seqs = 1024;
  // The KV cache is allocated in blocks of this many tokens (vLLM's default block_size): a
  // sequence holds its tokens rounded up to whole blocks.
  double kv_block_tokens = 16;
};

// Activation recompute of a training pass: none keeps every activation the backward reads;
// selective keeps the fused attention's output and every second GEMM's and recomputes the rest
// in the backward (torchtitan's per-op policy: "selective", "op"); full keeps each layer's input
// only and runs the whole forward again.
enum class Recompute : std::uint8_t { kNone, kSelective, kFull };
const char* recompute_name(Recompute r);  // "none", "selective", "full"

struct TrainOptions {
  int zero_stage = 1;  // 0: none; 1: optimizer state; 2: + gradients; 3: + weights
  Recompute recompute = Recompute::kNone;
  // ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840): the fp32 master weights and Adam moments
  // live in host memory and the CPUs run the Adam step; each step the GPU's gradient shard goes
  // out and its updated bf16 weights come back over PCIe.
  bool optimizer_offload = false;
  friend bool operator==(const TrainOptions&, const TrainOptions&) = default;
};

// Compute behind which a step's gradient sync runs (CostModel::gradient_sync_overlap).
struct SyncOverlap {
  double backward = 0;  // seconds: the gradients' reduction runs during it
  double forward = 0;   // seconds: the updated weights' all-gather runs during it
};

// One pipeline stage of a replica: `tp` GPUs of one node holding `layers` layers.
struct Stage {
  int node = 0;
  int tp = 1;
  int layers = 0;
};

// The data-parallel replicas of a task as their collectives see them: NCCL-style rings
// through the replicas, one per GPU position of a replica, all at the pace of the slowest hop
// (CostModel::data_parallel). From a count alone: replicas on links that cost nothing.
struct DataParallel {
  int replicas = 1;
  // Bytes/s per ring, achieved, by collective and element type (hw::CollectiveShares' order):
  // a hop inside a node runs at the rate its GPU type measured for the operation, a hop
  // between nodes at the NICs' whatever the operation.
  hw::CollectiveShares bandwidth = unlimited();
  double hop_latency = 0;  // seconds, the slowest hop's one-way latency
  DataParallel(int count = 1) : replicas(count) {}  // NOLINT: a count is the common case
  double bandwidth_of(hw::Collective op, bool fp32) const {
    return bandwidth[static_cast<std::size_t>(op)][fp32 ? 1 : 0];
  }
  // Seconds of one pass round the ring of `bytes` per GPU of the whole, with the fixed cost of
  // a collective: a reduce-scatter or an all-gather, or half an all-reduce (`op`'s rate).
  double pass_seconds(hw::Collective op, bool fp32, double bytes, double fixed) const {
    if (replicas <= 1) return 0;
    return fixed + (replicas - 1) * hop_latency + (replicas - 1.0) / replicas * bytes / bandwidth_of(op, fp32);
  }

 private:
  static hw::CollectiveShares unlimited() {
    hw::CollectiveShares all;
    for (auto& by_type : all) by_type.fill(std::numeric_limits<double>::infinity());
    return all;
  }
};

// Named parts of an estimate. Collecting the terms is optional so the search's hot path pays
// only for the sum.
class Breakdown {
 public:
  explicit Breakdown(bool keep_terms = false) : keep_terms_(keep_terms) {}
  void add(const char* name, double seconds) {
    total_ += seconds;
    if (keep_terms_) terms_.push_back({name, seconds});
  }
  double total() const { return total_; }
  struct Term {
    const char* name;
    double seconds;
  };
  const std::vector<Term>& terms() const { return terms_; }

 private:
  bool keep_terms_;
  double total_ = 0;
  std::vector<Term> terms_;
};

// Per-GPU memory of one stage of one task, in bytes.
struct StageMemory {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;   // transient: needed only while the task runs
  // Generation: the engine's workspace and the KV cache of one longest sequence.
  double kv_cache_min = 0;
  // Which slice of the model the GPU holds: TP degree, stage count, stage index and layers
  // (layout_key). A forward pass holding the slice a training pass trains reads its weights.
  std::uint64_t layout = 0;
  double resident() const { return weights + gradients + optimizer; }
};

// Marks a layout whose weights are sharded over data-parallel replicas (ZeRO-3).
inline constexpr std::uint64_t kShardedLayout = std::uint64_t{1} << 63;
// The slice of a model one GPU of a stage holds, as StageMemory::layout keeps it (never 0).
inline std::uint64_t layout_key(int tp, int pp, int index, int layers) {
  return (static_cast<std::uint64_t>(tp) << 48) | (static_cast<std::uint64_t>(pp) << 32) |
         (static_cast<std::uint64_t>(index) << 16) | static_cast<std::uint64_t>(layers);
}

// What one role (actor, critic, reference, reward: each holds weights of its own, even when two
// name the same architecture) keeps on one GPU over the tasks of a group that run there. The
// tasks take turns, but a role's weights and training state stay between them: a role trained
// on the GPU holds its training state; its forward passes read the trained weights when they
// hold the same whole slice of the model (the same layout on this GPU, not sharded by ZeRO-3),
// and otherwise keep a copy in their own layout; its
// generation keeps the generation layout (an inference engine's own copy). A role only run
// forward or generating holds the larger of its layouts. Activations and KV cache are not
// kept: a GPU needs the largest of its tasks' transient needs on top of its roles' memory.
struct RoleMemory {
  // Training state is on the GPU. add() sets it; a caller that adds a role's tasks one by one
  // and wants every partial sum to be a floor of the whole sets it before adding the forward
  // passes of a role it will train (until the training layout is known, forward passes are
  // taken to share it).
  bool trained = false;
  double train_weights = 0;
  double gradients = 0;
  double optimizer = 0;
  std::uint64_t train_layout = 0;  // 0 until a training pass is added
  double infer_weights = 0;        // the largest forward layout
  std::uint64_t infer_layout = 0;  // its layout; 0 when forward passes of two layouts were added
  double generate_weights = 0;

  void add(workload::TaskKind kind, const StageMemory& stage) {
    switch (kind) {
      case workload::TaskKind::kTrain: add_training(stage, stage.resident()); break;
      case workload::TaskKind::kForward: add_forward(stage); break;
      default: generate_weights = std::max(generate_weights, stage.weights); break;
    }
  }
  // The same for one stage on many GPUs: cells[slot * stride] for each slot.
  static void add(workload::TaskKind kind, const StageMemory& stage, RoleMemory* cells,
                  std::span<const int> slots, std::size_t stride) {
    const auto each = [&](auto&& f) {
      for (int slot : slots) f(cells[static_cast<std::size_t>(slot) * stride]);
    };
    switch (kind) {
      case workload::TaskKind::kTrain: {
        const double resident = stage.resident();
        each([&](RoleMemory& m) { m.add_training(stage, resident); });
        break;
      }
      case workload::TaskKind::kForward: each([&](RoleMemory& m) { m.add_forward(stage); }); break;
      default: each([&](RoleMemory& m) { m.generate_weights = std::max(m.generate_weights, stage.weights); }); break;
    }
  }
  double weights() const {
    if (!trained) return std::max(infer_weights, generate_weights);
    const bool reads_trained = train_layout == 0 || (infer_layout != 0 && infer_layout == train_layout);
    return train_weights + std::max(generate_weights, reads_trained ? 0.0 : infer_weights);
  }
  double resident() const { return weights() + gradients + optimizer; }

 private:
  // A role's tasks train it once; the largest state is kept should a plan train it twice.
  void add_training(const StageMemory& stage, double resident) {
    trained = true;
    if (resident > train_weights + gradients + optimizer) {
      train_weights = stage.weights;
      gradients = stage.gradients;
      optimizer = stage.optimizer;
      train_layout = stage.layout;
    }
  }
  void add_forward(const StageMemory& stage) {
    if (infer_weights == 0) {
      infer_layout = stage.layout;
    } else if (stage.layout != infer_layout) {
      infer_layout = 0;
    }
    infer_weights = std::max(infer_weights, stage.weights);
  }
};

// The half-precision format a GPU computes a workload in: "bf16" or "fp16".
inline const char* dtype_of(const hw::GpuSpec& gpu, workload::Precision precision) {
  switch (precision) {
    case workload::Precision::kBf16: return "bf16";
    case workload::Precision::kFp16: return "fp16";
    case workload::Precision::kAuto: break;
  }
  return gpu.bf16_flops > 0 ? "bf16" : "fp16";
}

class CostModel {
 public:
  CostModel(const hw::Cluster& cluster, const workload::Workload& workload,
            const workload::TaskGraph& graph, const workload::ModelCatalog& models,
            CostParams params = {});

  const hw::Cluster& cluster() const { return cluster_; }
  const workload::Workload& workload() const { return workload_; }
  const workload::TaskGraph& graph() const { return graph_; }
  const CostParams& params() const { return params_; }
  // The shape of a task's model (GPU tasks only).
  const ModelShape& shape(int task) const { return shapes_[task]; }
  double usable_memory(int node) const;
  // The dense tensor peak a node's GPUs run the workload's precision at (FLOP/s), and whether
  // they run it at all (a GPU without BF16 cannot run a workload that asks for BF16).
  double peak_flops(int node) const { return peak_flops_[cluster_.nodes[node].gpu_type]; }
  bool runs_precision(int node) const { return peak_flops(node) > 0; }
  // The format a node's GPUs compute in (dtype_of).
  const char* dtype(int node) const { return dtype_of(gpu(node), workload_.precision); }
  // The mean response length of the workload's distribution, in tokens.
  double mean_response() const { return mean_response_; }

  // Seconds a replica takes for `samples` samples of a GPU task. For generation,
  // `kv_budget` is the memory per GPU of each stage left for the KV cache.
  // For training, `dp` says the replicas (ZeRO shards over them; ZeRO-3 gathers each layer's
  // weights over their ring for every micro-batch's forward and backward).
  double replica_seconds(int task, std::span<const Stage> stages, double samples,
                         const DataParallel& dp, const TrainOptions& train,
                         std::span<const double> kv_budget, Breakdown& out) const;

  // The ring of a task's replicas (each a span of stages), as collectives between them see it.
  DataParallel data_parallel(std::span<const std::span<const Stage>> replicas) const;

  // Memory per GPU of stage `index` of a replica of `task` with `dp` replicas.
  StageMemory stage_memory(int task, std::span<const Stage> stages, int index, int dp,
                           const TrainOptions& train) const;

  // The DP gradient sync of a train task over its replicas, per optimizer step times the
  // steps of an iteration: ZeRO-0 all-reduces the fp32 gradients; ZeRO-1 and 2 reduce-scatter
  // them and all-gather the updated bf16 weights; ZeRO-3 reduce-scatters each micro-batch's
  // gradients within its passes.
  // With CostParams::dp_overlap, what `hidden` covers of it does not count.
  double gradient_sync_seconds(int task, std::span<const std::span<const Stage>> replicas,
                               const TrainOptions& train, Breakdown& out, const SyncOverlap& hidden = {}) const {
    return gradient_sync_seconds(task, replicas, data_parallel(replicas), train, out, hidden);
  }
  // The same over their ring, computed once by the caller.
  double gradient_sync_seconds(int task, std::span<const std::span<const Stage>> replicas, const DataParallel& ring,
                               const TrainOptions& train, Breakdown& out, const SyncOverlap& hidden = {}) const;
  // What a step's compute hides of its gradient sync where the trainer overlaps them
  // (CostParams::dp_overlap; none otherwise): the reduction runs bucket by bucket during the
  // backward of the step's last micro-batch, the weights' all-gather during the next step's
  // first forward. Both on the first pipeline stage, whose backward ends the step and whose
  // forward starts it (later stages wait for the pipeline to fill and drain, longer windows).
  // `stages` and `samples`: the slowest replica's, the one the ring waits for.
  SyncOverlap gradient_sync_overlap(int task, std::span<const Stage> stages, double samples,
                                    const TrainOptions& train) const;

  // Seconds of a CPU task.
  double cpu_seconds(int task) const;

  // A set of GPUs as transfers see it: their share of their nodes' NICs and where they are.
  struct GpuSet {
    double gpus = 0;
    double nic_bandwidth = 0;         // bytes/s: each node's NIC times the share of its GPUs
    std::vector<double> gpus_per_zone;
    int nodes = 0;
    double slowest_nic = 0;  // bytes/s: the slowest NIC of its nodes
    std::vector<std::pair<int, int>> on_nodes;  // (node, its GPUs of the set), by node
  };
  // `gpus_per_node` is indexed by node.
  void describe_gpu_set(std::span<const int> gpus_per_node, GpuSet& out) const;

  // Moving `bytes` spread evenly over the GPUs of set A to the GPUs of set B. What moves
  // between GPUs of A and of B on one node crosses that node's GPU links, as many at once as
  // the fewer of the two have GPUs there; the rest crosses the node NICs in parallel, each zone
  // link crossed carrying its share; the slowest of these sets the pace.
  double transfer_seconds(double bytes, const GpuSet& a, const GpuSet& b) const;

  // A transfer whose shares inside nodes (for_each_shared_node) sum to within this of the
  // whole leaves no node: the rest is their rounding.
  static constexpr double kWithinRounding = 1e-9;
  // How a transfer from A to B stays inside nodes: calls f(node, fraction, gpus_a, gpus_b) for
  // every node with GPUs of both, `fraction` the share of the bytes that moves between them
  // there (the share of A's GPUs on it times the share of B's), gpus_a and gpus_b theirs there.
  template <class F>
  void for_each_shared_node(const GpuSet& a, const GpuSet& b, F&& f) const {
    auto i = a.on_nodes.begin();
    auto j = b.on_nodes.begin();
    while (i != a.on_nodes.end() && j != b.on_nodes.end()) {
      if (i->first < j->first) {
        ++i;
      } else if (j->first < i->first) {
        ++j;
      } else {
        f(i->first, i->second / a.gpus * j->second / b.gpus, i->second, j->second);
        ++i;
        ++j;
      }
    }
  }

  // How a transfer from A to B spreads over zones: calls f(zone_a, zone_b, fraction, path)
  // for every pair of zones with GPUs of A in zone_a and of B in zone_b, `fraction` the share
  // of the bytes that goes from one to the other, `path` the link between them.
  template <class F>
  void for_each_zone_pair(const GpuSet& a, const GpuSet& b, F&& f) const {
    const int zones = static_cast<int>(cluster_.zones.size());
    for (int za = 0; za < zones; ++za) {
      if (a.gpus_per_zone[za] == 0) continue;
      for (int zb = 0; zb < zones; ++zb) {
        if (b.gpus_per_zone[zb] == 0) continue;
        f(za, zb, a.gpus_per_zone[za] / a.gpus * b.gpus_per_zone[zb] / b.gpus,
          zone_paths_(za, zb));
      }
    }
  }

  // The trained weights (`bytes`) reaching a generation group on other GPUs: across to it over
  // the bottleneck path, then by a pipelined broadcast to each of its nodes, no faster than its
  // slowest NIC; the slower of the two sets the pace.
  double weight_transfer_seconds(double bytes, const GpuSet& trainer, const GpuSet& reader,
                                 Breakdown& out) const;
  // One GPU of a generation replica at a weight sync inside its group: its node, the slice of
  // the actor it loads, and the slice of the trained actor its own training shard holds
  // (layers 0: it trains none).
  struct ReshardGpu {
    int node = 0;
    WeightSlice loads;
    WeightSlice holds;
  };
  // The trained weights reaching the generation replicas of task `reader` on the GPUs that
  // trained them: each GPU copies on the device what its own training shard holds of its
  // generation shard (read and written at the copy share of its memory bandwidth,
  // hw::Efficiency::copy) and gathers the rest over its node's links, all at once; the slowest
  // sets the time. Training and generation in the same layout copy only; ZeRO-3's shards, or
  // another TP or PP, gather most.
  double reshard_seconds(int reader, std::span<const ReshardGpu> gpus, Breakdown& out) const;
  // The new weights, received into host memory while generation ran on the old ones (the
  // asynchronous overlap), copied into the generation replicas of task `reader`: each GPU loads
  // its own shard from its node's host memory at host_bandwidth, all in parallel; none on a
  // device whose memory is its host's (GpuSpec::memory_is_host).
  double weight_load_seconds(int reader, std::span<const std::span<const Stage>> replicas,
                             Breakdown& out) const;

  // The least memory the roles of `tasks` keep resident on all their GPUs together, whatever
  // their layout: per role, the largest of its tasks' weights in bf16, or 16 bytes a parameter
  // (weights, gradients and Adam state; 18 with fp32 gradients held, CostParams::
  // gradient_bytes_held) for training. A
  // bound for the planners' space, where the optimizer stays on the GPU.
  double least_resident_bytes(std::span<const int> tasks) const;

  // Seconds of one all-reduce of `bytes` over `ranks` GPUs on one node.
  double node_allreduce_seconds(int node, int ranks, double bytes) const;
  // The fixed cost of NCCL's low-latency protocol for an all-reduce over `ranks` GPUs of a
  // node: CostParams::collective_latency and 2 (ranks - 1) steps of the node's GPU link.
  double small_allreduce_latency(int node, int ranks) const {
    return params_.collective_latency + 2.0 * (ranks - 1) * cluster_.nodes[node].intra_node.hop_latency;
  }
  // Seconds a tensor-parallel stage's pass of `compute` seconds waits at its all-reduces for
  // the slowest shard: its type's measured share of the compute (hw::Efficiency::tp_wait),
  // none at TP 1 or without one.
  double tp_wait(const Stage& stage, double compute) const {
    const std::optional<double>& share = gpu(stage.node).efficiency.tp_wait;
    return stage.tp > 1 && share ? *share * compute : 0.0;
  }
  // Seconds of one all-reduce of `bytes` held by every GPU of the first `nodes` nodes, using
  // `gpus_per_node` GPUs of each, as NCCL runs it hierarchically: a reduce inside each node,
  // an all-reduce between the nodes over their NICs and the zone links, a broadcast inside
  // each node, pipelined so that the slower of the two levels sets the pace.
  double allreduce_seconds(int nodes, int gpus_per_node, double bytes) const;

  // The expected longest response among n, and the survival (fraction of sequences still
  // generating) at step k.
  double expected_max_length(double n) const;
  double survival(double step) const;

  // The pieces of generation_seconds, for the simulator to step through one decode at a time.
  struct StepCost {
    double compute = 0;  // kernels bound by their compute
    double memory = 0;   // kernels bound by reading the weights or the KV cache
    double tp = 0;       // TP all-reduces
    double p2p = 0;      // sends between pipeline stages
    double overhead = 0;  // the engine's fixed cost of a step
    double total() const { return compute + memory + tp + p2p + overhead; }
    void add(const StepCost& other, double weight);
  };
  // What a decode step costs on each stage, as coefficients of the batch and context, so
  // the quadrature over the draining batch is a few multiplications per point.
  struct DecodeStage {
    double flops_fixed = 0;        // per sequence
    double flops_per_context = 0;  // per sequence and token of context
    double rate = 0;               // peak FLOP/s of the stage's TP group
    double gemm_small = 0;  // efficiencies (see hw::Efficiency)
    double gemm_large = 0;
    const hw::GemmCurve* gemm_curve = nullptr;  // a measured curve, which replaces the two above
    // Of flops_fixed, the LM head's, and where the type prices it on a curve of its own (wider
    // GEMMs than the layers'), that curve; null: at the layers' efficiency.
    double head_flops = 0;
    const hw::GemmCurve* head_curve = nullptr;
    double weight_seconds = 0;        // streaming the stage's weights once
    double kv_seconds_per_token = 0;  // streaming one token of KV cache
    // FLOP/s of the attention over the cache where the type measured its own (hw::Efficiency::
    // decode_attention); 0: at the GEMMs' rate.
    double attention_flops = 0;
    double attention_rate(double gemm_efficiency) const {
      return attention_flops > 0 ? attention_flops : rate * gemm_efficiency;
    }
    double tp_fixed = 0;
    double tp_per_sequence = 0;
    double p2p_fixed = 0;
    double p2p_per_sequence = 0;
    double overhead = 0;  // the engine's seconds a step outside the kernels on this stage's GPUs
  };
  using DecodeStages = std::vector<DecodeStage>;
  // A step's FLOPs a sequence on a stage, its head's counted as the layers' FLOPs that take as
  // long at `efficiency` (the layers' at `batch` rows) where it has a curve of its own.
  static double head_priced(const DecodeStage& d, double efficiency, double batch) {
    if (d.head_curve == nullptr) return d.flops_fixed;
    return d.flops_fixed + d.head_flops * (efficiency / hw::gemm_curve_efficiency(*d.head_curve, batch) - 1.0);
  }
  // A stage's kernels in a step of `batch` sequences over `context` cached tokens, the GEMMs at
  // `efficiency`: the weights' GEMMs, then the attention over the cache, each at its own bound,
  // added to `compute` or `memory` by what bounds it.
  static void add_kernels(const DecodeStage& d, double efficiency, double batch, double context, double& compute,
                          double& memory) {
    const double gemms = batch * head_priced(d, efficiency, batch) / (d.rate * efficiency);
    (gemms > d.weight_seconds ? compute : memory) += std::max(gemms, d.weight_seconds);
    const double attention = d.flops_per_context * context / d.attention_rate(efficiency);
    const double cache = context * d.kv_seconds_per_token;
    (attention > cache ? compute : memory) += std::max(attention, cache);
  }
  // Fills `out` (reused between calls to spare allocations).
  void decode_stages(int task, std::span<const Stage> stages, DecodeStages& out) const;
  // One decode step of `batch` sequences whose contexts add up to `total_context` tokens.
  StepCost decode_step(const DecodeStages& stages, double batch, double total_context) const;
  // The drain's decode steps, `live` sequences at the start: the quadrature over its points,
  // each weighing drain_steps_ / decode_points steps (the sum of decode_step at each point).
  StepCost drain_steps(const DecodeStages& stages, double live) const;
  // `steps` decode steps priced at the midpoints of `points` equal parts of them, where `live`
  // times `share` sequences run (one at least) at `sequence_context` tokens each.
  StepCost tail_steps(const DecodeStages& stages, double live, const double* share, const double* log2_share,
                      const double* sequence_context, double steps) const;
  // A generation of `waves` times `slots` sequences through a cache of `slots` (QueueTable).
  StepCost queue_steps(const DecodeStages& stages, double slots, double waves) const;
  // Tokens of cache a sequence holds: the prompt and mean response in whole blocks.
  double sequence_kv_tokens() const;

  // Prefill of `samples` prompts (compute-bound, chunked, through the pipeline): compute and
  // TP all-reduce seconds.
  std::pair<double, double> prefill_seconds(int task, std::span<const Stage> stages,
                                            double samples) const;
  // Memory per GPU of a generation stage besides weights and KV cache: the engine's reserve
  // and one prefill chunk's activations through a layer.
  double generation_workspace(int task, const Stage& stage) const {
    return params_.engine_reserve +
           params_.prefill_chunk_tokens * activation_bytes_per_token_layer(task, stage.tp, Recompute::kNone);
  }
  // Tokens of KV cache a replica holds, given the memory per GPU of each stage left for its
  // workspace and cache, and how many sequences run at once at the mean context (at least one).
  double kv_capacity_tokens(int task, std::span<const Stage> stages,
                            std::span<const double> kv_budget) const;
  double concurrent_sequences(int task, std::span<const Stage> stages,
                              std::span<const double> kv_budget) const;
  // The memory per GPU of `stage` for its workspace and a cache that holds `sequences`
  // sequences at once (below max_num_seqs): the KV budget concurrent_sequences inverts.
  double kv_budget_holding(int task, const Stage& stage, double sequences) const;
  // A floor under a generation replica's seconds for any positive number of samples and any
  // KV budget: each of the expected longest response's decode steps streams every stage's
  // weights and pays its fixed collective and send costs (planners bound with it).
  double generation_floor(int task, std::span<const Stage> stages) const;

 private:
  double generation_seconds(int task, std::span<const Stage> stages, double samples,
                            std::span<const double> kv_budget, Breakdown& out) const;
  double pass_seconds(int task, std::span<const Stage> stages, double samples, const DataParallel& dp,
                      const TrainOptions& train, bool training, Breakdown& out) const;
  // One micro-batch of `micro` tokens through `stage` (the last one with the head): its GEMMs,
  // attention and element-wise work, a forward pass or a training pass (forward, backward and
  // what `recompute` runs again).
  double stage_pass_compute(int task, const Stage& stage, bool last, double micro, bool training,
                            Recompute recompute) const;
  // A replica's `samples` as a pass runs them over `pp` stages: its micro-batches a step (at
  // least one a stage) and the tokens of each.
  std::pair<double, double> micro_batching(double samples, int pp, bool training) const;
  double stage_link_bandwidth(int node_a, int node_b, int ranks) const;
  const hw::GpuSpec& gpu(int node) const;
  // Korthikanti et al. 2022 (arXiv 2205.05198): 34 x hidden bytes per token per layer
  // without the attention-score term flash attention removes; tensor parallelism splits 24 x
  // hidden of it and sequence parallelism (which Megatron and verl's Megatron backend run
  // with TP) the other 10. Full recompute keeps only each layer's bf16 input, split the same;
  // selective keeps what ModelShape::selective_activation_bytes counts.
  double activation_bytes_per_token_layer(int task, int tp, Recompute recompute) const {
    switch (recompute) {
      case Recompute::kSelective: return shapes_[task].selective_activation_bytes / tp;
      case Recompute::kFull: return 2.0 * shapes_[task].hidden / tp;
      case Recompute::kNone: break;
    }
    return 34.0 * shapes_[task].hidden / tp;
  }
  // The GEMM efficiency of `tokens` rows on a stage of TP `tp` on `node`'s GPUs (see
  // CostParams::gemm_width_half; a GPU type measured at its own width half has it, and one
  // measured at several widths its curve at the stage's width, width_curve), at most the
  // larger of CostParams::max_gemm_efficiency and the best the type was measured to reach.
  // A task's GEMMs by part: its layers' (each at its own width, FLOP-weighted) and its LM
  // head's. A type measured at several widths prices each at its widths; the others the same.
  enum class GemmPart { kLayers = 0, kHead = 1 };
  double gemm_efficiency(int task, int node, int tp, double tokens, GemmPart part = GemmPart::kLayers) const;
  // Of the forward GEMM's rate at `tokens` rows, what a training pass's weight-gradient GEMM
  // (dW = dY^T X, the rows its inner dimension) reaches on `node`'s GPUs: the type's measured
  // weight-gradient curve over its GEMM curve, both at the width the profile measured them at
  // (hw::Efficiency::weight_gradient_curve); past the curve's last point, that point's
  // efficiency over the forward's where it is higher, else 1; 1 without a curve.
  double weight_gradient_ratio(int node, double tokens) const;
  double gemm_width_scale(int task, int tp, int gpu_type) const;
  // A GPU type measured at several widths (hw::Efficiency::gemm_curves): the GEMM curve of a
  // task's part on a stage of TP `tp`. At each token count the type's rate moved by
  // hw::gemm_width_ratio to each of the part's GEMMs' widths (ModelShape::layer_gemms on a
  // shard, or the head's), and of the layers' the rate their FLOPs run at together (their
  // FLOPs over the sum of each GEMM's FLOPs over its rate). Null for other types, and at a TP
  // of kWidthScales or more (the type's curve then as it is).
  const hw::GemmCurve* width_curve(int gpu_type, int task, int tp, GemmPart part = GemmPart::kLayers) const {
    const auto& curves = width_curves_[static_cast<std::size_t>(gpu_type)];
    if (curves.empty() || tp < 1 || tp >= kWidthScales) return nullptr;
    const hw::GemmCurve& curve =
        curves[(static_cast<std::size_t>(task) * kWidthScales + static_cast<std::size_t>(tp)) * kGemmParts +
               static_cast<std::size_t>(part)];
    return curve.empty() ? nullptr : &curve;
  }
  hw::GemmCurve make_width_curve(int gpu_type, int task, int tp, GemmPart part) const;
  // The width gemm_width_scale prices a task's GEMMs at on a type without curves by width: the
  // hidden size's on a shard, as the catalogue's efficiencies were fitted.
  double gemm_width(int task, int tp) const { return shapes_[task].hidden / std::sqrt(static_cast<double>(tp)); }
  static constexpr std::size_t kGemmParts = 2;
  static constexpr int kWidthScales = 65;  // TP degrees whose scale is kept per task and GPU type
  // Seconds of one decode step outside the kernels on a GPU type (CostParams's, or the type's
  // measured engine).
  double decode_overhead(int gpu_type) const {
    const auto& own = cluster_.gpu_types[static_cast<std::size_t>(gpu_type)].efficiency.decode_step_overhead;
    return own ? *own : params_.decode_step_overhead;
  }

  const hw::Cluster& cluster_;
  const workload::Workload& workload_;
  const workload::TaskGraph& graph_;
  CostParams params_;
  hw::ZonePaths zone_paths_;
  std::vector<ModelShape> shapes_;  // per task (empty shape for CPU tasks)
  std::vector<bool> lm_head_;       // per task: logits over the vocabulary, or a scalar head
  std::vector<double> peak_flops_;  // per GPU type, in the workload's precision (0: not run)
  // Per GPU type, task and TP below kWidthScales: gemm_width_scale.
  std::vector<double> width_scale_;
  // Per GPU type measured at several widths, per task, TP below kWidthScales and part:
  // width_curve.
  std::vector<std::vector<hw::GemmCurve>> width_curves_;
  std::vector<double> max_gemm_;  // per GPU type: the cap of gemm_efficiency
  double samples_ = 0;
  double prompt_ = 0;
  double mean_response_ = 0;
  double head_fraction_ = 0;  // of a training pass's tokens, those the LM head scores
  double max_response_ = 0;
  std::vector<double> survival_table_;  // survival at max_response * i / (size - 1)
  std::vector<double> max_length_table_;  // expected max of n = 2^i - 1 draws
  // The decode steps of the iteration's expected longest response: all its tokens but
  // prefill's first.
  double drain_steps_ = 0;
  std::vector<double> drain_survival_;    // survival at the drain's quadrature points
  std::vector<double> drain_log2_survival_;  // its log2 (-inf where none survive)
  std::vector<double> drain_context_;        // prompt and response length at each point
  QueueTable queue_;  // generations with more sequences than their cache holds
};

}  // namespace hetrl::cost
