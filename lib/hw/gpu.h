#pragma once
// GPU types and the hardware catalogue: datasheet peaks, the efficiency factors that turn
// peaks into achievable rates, instance presets and network presets. Units are SI (see
// core/units.h): bytes, bytes/s, FLOP/s, seconds, USD.
//
// Every spec carries the source of its figures. The catalogue is data (cost_models/*.json);
// io/catalog_io reads it. A cluster may override any field per GPU type, and a measured
// profile replaces the efficiency factors (hw/profile.h).

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hetrl::hw {

// A GPU-to-GPU link inside one node, e.g. "nvlink4". Bandwidth per GPU and per direction.
struct IntraNodeLink {
  std::string name;
  double bandwidth = 0;  // bytes/s
  // The switch reduces in the network (NVLink SHARP): an all-reduce moves each GPU's bytes
  // across its link once each way instead of 2 (n - 1) / n times.
  bool nvls = false;
  // Seconds each step of a ring collective's low-latency protocol adds (an all-reduce over n
  // GPUs takes 2 (n - 1) steps): NCCL's own tuning model puts it near 0.5 us on NVLink
  // (hwLat, ring LL, NVIDIA/nccl src/graph/tuning.cc); PCIe is fitted (cost_models/gpus.json).
  double hop_latency = 0;
  std::string source;
};

// The GEMM sizes (tokens, the rows of a layer's GEMMs) the catalogue's efficiencies were
// measured at: the per-layer GEMM profiles of Llama-2-7B on A100 and H100 (Vidur's public
// profiling data, cost_models/gpus.json) at 256 and 2048 tokens.
inline constexpr double kGemmSmallTokens = 256;
inline constexpr double kGemmLargeTokens = 2048;
// The width (hidden size per GPU) of the GEMMs those efficiencies were measured at: Llama-2-7B's
// hidden size at TP 1.
inline constexpr double kGemmReferenceWidth = 4096;

// The fraction of the tensor peak a GEMM of `tokens` rows reaches: `small` up to
// kGemmSmallTokens, `large` from kGemmLargeTokens, linear in log2(tokens) between the two
// measured sizes.
inline double gemm_efficiency(double small, double large, double tokens) {
  if (tokens <= kGemmSmallTokens) return small;
  if (tokens >= kGemmLargeTokens) return large;
  constexpr double kSmallLog2 = 8, kLargeLog2 = 11;  // of the two sizes
  return small + (large - small) * ((std::log2(tokens) - kSmallLog2) / (kLargeLog2 - kSmallLog2));
}

// A measured GEMM curve: (tokens, fraction of the tensor peak) points, tokens ascending. A
// GEMM's time is linear in its tokens between two points (a fixed part, streaming the weights
// and launching, and a part per row), so the fraction at `tokens` is tokens over that time;
// flat beyond the ends. Interpolating the fraction itself would price a GEMM between two small
// points faster than either, since at a few rows its time barely moves while its fraction
// grows with the rows. Curves are taken through gemm_curve_envelope first. The same holds for a
// curve of rates (FLOP/s) in place of fractions: the rate at `tokens`.
using GemmCurve = std::vector<std::pair<double, double>>;
inline double gemm_curve_efficiency(const GemmCurve& curve, double tokens) {
  if (tokens <= curve.front().first) return curve.front().second;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    const auto& [t1, e1] = curve[i];
    if (tokens == t1) return e1;  // a measured point as measured
    if (tokens < t1) {
      const auto& [t0, e0] = curve[i - 1];
      const double time0 = t0 / e0, time1 = t1 / e1;  // in rows' times at the peak rate
      return tokens / (time0 + (time1 - time0) * (tokens - t0) / (t1 - t0));
    }
  }
  return curve.back().second;
}

// GEMM curves measured at several widths (square GEMMs, n = k = width; hetrl-profile's), widths
// ascending: how a GEMM's rate depends on its width at each token count. On a GPU a narrow GEMM
// of a few rows leaves streaming multiprocessors idle; on a CPU a narrow one's weights stay in
// its caches between the cast and the multiply, and it runs faster than a wide one.
struct WidthCurve {
  double width = 0;
  GemmCurve curve;  // as Efficiency::gemm_curve: (tokens, fraction of the tensor peak)
};
using WidthCurves = std::vector<WidthCurve>;
// Whether GEMMs `width` wide are closer to `reference` than `than` wide, in the logarithm, the
// wider of two as close: the measured width a profile's GEMM curve is taken at, and that
// gemm_width_ratio scales the others from.
bool closer_to_reference(double width, double than, double reference = kGemmReferenceWidth);
// The rate of a GEMM of `tokens` rows at `width` over one at the measured width closest to
// `reference` (closer_to_reference), from the curves measured up to `tokens` rows or more (a
// width's curve says nothing past its last point): the rate's logarithm linear in the width's
// between two measured widths, and the nearest one's beyond them. 1 where fewer than two widths
// reach `tokens`.
double gemm_width_ratio(const WidthCurves& curves, double tokens, double width, double reference);

// The curve a cost model uses from a measured one: a GEMM of fewer rows takes no longer than
// one of more (an engine can pad its rows to the larger size), so a point measured slower than
// a larger token count's takes that count's time. Such points come from a backend's own path
// for very few rows (a CPU BLAS's matrix-vector product) or from noise, and would price a
// decode step of one sequence above one of several.
GemmCurve gemm_curve_envelope(GemmCurve curve);

// Fractions of a datasheet peak that real kernels reach, each in (0, 1].
// The collectives priced apart (a data-parallel ring's: the gradients' all-reduce or
// reduce-scatter, ZeRO's gathers of the weights) and the element types they cross in.
enum class Collective { kAllReduce, kReduceScatter, kAllGather };
inline constexpr int kCollectives = 3;
// A collective's bus bandwidth on large messages, of the link bandwidth as
// Efficiency::collective is, by operation (Collective) and element type ([0]: 16-bit, [1]:
// fp32); 0: not measured, Efficiency::collective's. A GPU runtime's collectives differ a
// little by operation; an MPI transport's differ more (a reduce-scatter is not half an
// all-reduce there, and a sum in bf16 is MPI's user operation, in fp32 its own).
using CollectiveShares = std::array<std::array<double, 2>, kCollectives>;
const char* collective_name(Collective op);  // all_reduce, reduce_scatter, all_gather
// Sets every share `from` has (not 0) in `into`.
void overlay(CollectiveShares& into, const CollectiveShares& from);

// The most of a device's memory bandwidth (as hetrl-profile measures it on a new type: one
// stream of reads) that work counting what it reads and what it writes can reach: twice, its
// writes going beside its reads (an optimizer step, a copy). A catalogue type's datasheet
// bandwidth is already reads and writes together, and a measurement of one cannot pass it.
inline constexpr double kMostReadWriteShare = 2.0;

// A fused attention's backward in forwards (FlashAttention's recomputes the scores): the cost
// model's count of its FLOPs, and hetrl-profile's of the attention it times.
inline constexpr double kAttentionBackwardForwards = 2.5;

struct Efficiency {
  double gemm_large = 0;  // GEMMs of >= kGemmLargeTokens tokens, of the dense tensor peak
  double gemm_small = 0;  // GEMMs of about kGemmSmallTokens tokens, of the dense tensor peak
  double memory = 0;      // streaming weights, of the memory bandwidth
  double collective = 0;  // NCCL bus bandwidth on large messages, of the link bandwidth
  // Measured by operation and type (a profile's); an unset one is `collective`'s.
  CollectiveShares collectives{};
  double attention = 0;   // fused (flash) attention's forward and backward, of the dense tensor peak
  // Of the kernel-level rates above, what a trainer's step reaches end to end on this GPU
  // (sustained clocks under a training loop's load, launch gaps, copies): FSDP-style and
  // Megatron-style trainers alike, DeepSpeed's a share of it (cost::trainer_rate_fraction).
  double training = 0;
  // Of the memory bandwidth, what the optimizer's step reaches (what it reads and writes
  // counted: up to kMostReadWriteShare); 0: `memory`'s (a run measures its own, hetrl-exec
  // --fit-profile).
  double optimizer = 0;
  // Of the memory bandwidth (what it reads and writes counted: up to kMostReadWriteShare), what
  // a copy of weights on the device reaches, as a weight sync copies the trained shard into the engine's; 0: `memory`'s
  // (a run measures its own, hetrl-exec --fit-profile, with every device of the node copying).
  double copy = 0;
  // Of the kernel rates (GEMMs and attention), what an engine's prefill pass reaches; 0: all of
  // them, as a serving engine's fused prefill does on a GPU (a run measures its own,
  // hetrl-exec --fit-profile, on the prefill it timed).
  double prefill = 0;
  // Where a device was measured: how its GEMMs' efficiency depends on their width (the half
  // width of cost::CostParams::gemm_width_half; 0: not at all; gemm_curves, where given, say it
  // instead), and the seconds one decode step of the engine that ran on it takes
  // outside its kernels (cost::CostParams::decode_step_overhead). Unset: the params'.
  std::optional<double> gemm_width_half;
  std::optional<double> decode_step_overhead;
  // Where a device was measured at several widths (gemm_curves): how much of a GEMM's width
  // its inner (reduction) dimension k sets beside its output n, as the exponent s of its
  // width k^s n^(1 - s) (cost::ModelShape::ShardGemm::width). 0.5, the geometric mean: both
  // alike; near 1 on a CPU, whose few-row GEMMs run a dot product of k per output. Unset: 0.5.
  std::optional<double> gemm_reduction_share;
  // Where a device was measured: the rate of a decode step's attention over the KV cache, of
  // the dense tensor peak, as the compute side of its roofline (the cache's read at `memory`
  // the other): a GPU's reads its cache at the memory's pace, a CPU's computes far below its
  // GEMMs' rate. Unset: at the rate of the step's GEMMs.
  std::optional<double> decode_attention;
  // The seconds one tensor-parallel all-reduce of a decode step takes, as a run measured it
  // (hetrl-exec --fit-profile): the collective's own latency and its processes' wait for the
  // slowest of them, which a step's short kernels between two all-reduces leave exposed.
  // Unset: the collective's latency over the node's link (CostModel::small_allreduce_latency).
  std::optional<double> decode_allreduce;
  // Of a tensor-parallel pass's compute, what its processes spend at the pass's all-reduces
  // beyond their transfer, as a run measured it (hetrl-exec --fit-profile): the wait for the
  // slowest shard where the shards do not run evenly (processes sharing a host's cores), which
  // a tensor-parallel split of 1 does not pay. Unset: none, as on dedicated GPUs.
  std::optional<double> tp_wait;
  // A measured profile's GEMM curve (hw/profile.h) through gemm_curve_envelope; where it is
  // given, GEMMs follow it instead of the two-point line between gemm_small and gemm_large.
  GemmCurve gemm_curve;
  // A measured profile's curves at each width it measured (each through gemm_curve_envelope):
  // where two or more are given, a GEMM's width moves its rate by their ratio
  // (gemm_width_ratio) instead of by gemm_width_half, at the token counts both reach.
  WidthCurves gemm_curves;
  // A measured profile's weight-gradient GEMMs (dW = dY^T X, the tokens the inner dimension;
  // hw/profile.h) as a curve like gemm_curve's, at the width gemm_curve was measured at: a
  // training pass runs one of its three GEMMs a layer at this curve's rate over gemm_curve's
  // times the forward's (cost::CostModel::weight_gradient_ratio). Empty: as the forward.
  GemmCurve weight_gradient_curve;
  std::string source;

  // The figures in effect where a type has none of its own (0): the memory efficiency's for the
  // optimizer step and a copy, the kernel rates for prefill.
  double optimizer_share() const { return optimizer > 0 ? optimizer : memory; }
  double copy_share() const { return copy > 0 ? copy : memory; }
  double prefill_share() const { return prefill > 0 ? prefill : 1.0; }

  // Of the link bandwidth, what `op` reaches on large messages of fp32 or 16-bit elements.
  double collective_share(Collective op, bool fp32) const {
    const double measured = collectives[static_cast<std::size_t>(op)][fp32 ? 1 : 0];
    return measured > 0 ? measured : collective;
  }

  double gemm(double tokens) const {
    return gemm_curve.empty() ? gemm_efficiency(gemm_small, gemm_large, tokens) : gemm_curve_efficiency(gemm_curve, tokens);
  }
};

struct GpuSpec {
  std::string name;
  double memory = 0;             // bytes
  double memory_bandwidth = 0;   // bytes/s
  double bf16_flops = 0;         // dense BF16 tensor FLOP/s; 0 where the GPU has no BF16
  double fp16_flops = 0;         // dense FP16 tensor FLOP/s
  double fp32_flops = 0;         // FP32 (non-tensor) FLOP/s
  IntraNodeLink intra_node;
  // The device's memory is its host's (a CPU as a device, hetrl-profile --backend cpu): what
  // reaches the host is on the device, with no load from host memory after it.
  bool memory_is_host = false;
  std::optional<double> price_per_hour;  // USD per GPU-hour
  std::string price_source;
  Efficiency efficiency;
  std::string source;

  // The half-precision tensor peak training and inference run at: BF16, or FP16 where the
  // GPU has no BF16 (V100, T4).
  double tensor_flops() const { return bf16_flops > 0 ? bf16_flops : fp16_flops; }
};

// A cloud instance type usable as a node preset, e.g. "p4de.24xlarge".
struct InstancePreset {
  std::string name;
  std::string gpu;
  int gpus_per_node = 0;
  double nic_bandwidth = 0;  // bytes/s
  std::optional<double> price_per_hour;  // USD per instance-hour
  std::string source;
};

// Bandwidth and one-way latency of a network path.
struct LinkSpec {
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // seconds, one-way
};

struct NetworkPreset {
  std::string name;
  LinkSpec link;
  std::string source;
};

// The hardware catalogue. Lookups by name throw core::InputError naming `where` and the
// closest known name.
struct Catalog {
  std::vector<GpuSpec> gpus;
  std::vector<IntraNodeLink> intra_node_links;
  std::vector<InstancePreset> instances;
  std::vector<NetworkPreset> networks;
  Efficiency default_efficiency;

  const GpuSpec* find_gpu(std::string_view name) const;
  const GpuSpec& gpu(std::string_view name, std::string_view where) const;
  const IntraNodeLink& intra_node_link(std::string_view name, std::string_view where) const;
  const InstancePreset& instance(std::string_view name, std::string_view where) const;
  const NetworkPreset& network(std::string_view name, std::string_view where) const;

  std::vector<std::string> gpu_names() const;
};

// Optional replacements for the fields of one GPU type, as a cluster file or a profile gives
// them. For a type the catalogue knows, any subset; for a new type, at least memory, memory
// bandwidth, FP16 peak, FP32 peak and the intra-node link.
struct GpuTypeOverride {
  std::string name;
  std::optional<double> memory;            // bytes
  std::optional<double> memory_bandwidth;  // bytes/s
  std::optional<double> bf16_flops;
  std::optional<double> fp16_flops;
  std::optional<double> fp32_flops;
  std::optional<std::string> intra_node_link;
  std::optional<double> intra_node_bandwidth;  // bytes/s, a measured link replaces the preset
  std::optional<bool> memory_is_host;
  std::optional<double> price_per_hour;
  std::optional<double> gemm_large;
  std::optional<double> gemm_small;
  std::optional<GemmCurve> gemm_curve;  // (tokens, fraction of the tensor peak)
  std::optional<WidthCurves> gemm_curves;  // by width, each as gemm_curve
  std::optional<GemmCurve> weight_gradient_curve;  // as gemm_curve
  std::optional<double> memory_efficiency;
  std::optional<double> collective;
  std::optional<CollectiveShares> collectives;  // entries of 0 keep the type's own
  // Fitted on a run (hetrl-exec --fit-profile) or measured (hetrl-profile): Efficiency's.
  std::optional<double> training;
  std::optional<double> attention;
  std::optional<double> optimizer_efficiency;
  std::optional<double> copy_efficiency;
  std::optional<double> prefill_efficiency;
  std::optional<double> gemm_width_half;
  std::optional<double> gemm_reduction_share;
  std::optional<double> decode_attention;      // of the tensor peak
  std::optional<double> decode_step_overhead;  // seconds
  std::optional<double> decode_allreduce;      // seconds
  std::optional<double> tp_wait;               // of the compute
  std::string source;
};

// The effective spec of a GPU type: the catalogue's entry (if any) with the override applied.
// Throws core::InputError (without a location; callers add one) when a new type lacks a
// required field or a value is out of range.
GpuSpec apply_override(const Catalog& catalog, const GpuTypeOverride& override_spec);

// Checks a spec's values (positive peaks and bandwidths, efficiencies in (0, 1]).
void validate_gpu_spec(const GpuSpec& spec);

}  // namespace hetrl::hw
