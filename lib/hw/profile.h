#pragma once
// A measured device profile (what hetrl-profile writes) and how it replaces datasheet figures.
//
// A profile has the machine it was measured on, the raw measurements (each a curve over sizes,
// every point the median and range of several timed repeats) and the figures fitted from them
// that the cost model uses. For a GPU type the catalogue knows, the fitted rates against its
// datasheet peaks become that type's efficiency factors (measured / peak; the optimizer step's
// rate against the memory bandwidth is its optimizer efficiency), and a measured
// GPU-to-GPU bandwidth replaces the intra-node link's; a rate above the datasheet peak means
// the profile names the wrong GPU type, and is an error. A device the catalogue does not know
// (the CPU backend's host, a new GPU) becomes a GPU type of its own whose peaks are the
// measured rates.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/provenance.h"
#include "hw/gpu.h"

namespace hetrl::hw {

// Seconds of one operation over a point's timed repeats.
struct TimeSpread {
  double median = 0;
  double min = 0;
  double max = 0;
  int repeats = 0;
};

struct GemmMeasurement {
  std::string dtype;  // fp32, bf16, fp16
  int tokens = 0;     // m: rows (tokens) through the layer
  int n = 0;          // output features
  int k = 0;          // input features
  TimeSpread seconds;
  // The backward's weight-gradient GEMM of the same layer instead of its forward: dW[n][k] +=
  // dY^T X, fp32 out, its inner dimension the tokens. Its output is the whole weight whatever
  // the tokens, so at few tokens it need not run at the forward's rate.
  bool weight_gradient = false;
  double flops() const { return 2.0 * tokens * n * k; }
};

// The forward GEMMs measured on a weight that is not square, their best rate (FLOP/s) by token
// count and (n, k): what the reduction share is fitted on (profile::fit) and shown from. fp32
// ones count only where nothing else was measured (beside half precision they give the fp32
// peak alone).
using GemmShapeRates = std::map<int, std::map<std::pair<int, int>, double>>;
GemmShapeRates gemm_shape_rates(const std::vector<GemmMeasurement>& gemms);

// Memory traffic: read, write or copy on the device, or host_to_device, device_to_host.
struct BandwidthMeasurement {
  std::string op;
  double bytes = 0;  // moved per operation (a copy counts what it reads and what it writes)
  TimeSpread seconds;
};

struct AttentionMeasurement {
  std::string dtype;
  int batch = 0, length = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double bytes = 0;  // the cache read per step
  TimeSpread seconds;
  // A step's FLOPs as the cost model counts them (cost::ModelShape::layer_flops' attention
  // term): 4 head_dim a query head and cached position, the scores and their weighted sum.
  double flops() const { return 4.0 * batch * length * heads * head_dim; }
  int group() const { return kv_heads > 0 ? heads / kv_heads : 0; }
};

// Causal attention over packed sequences as a training or scoring pass runs it: the forward
// (with the log-sum-exp the backward reads) and the backward, timed apart.
struct PassAttentionMeasurement {
  std::string dtype;
  int sequences = 0, length = 0, heads = 0, kv_heads = 0, head_dim = 0;
  TimeSpread forward, backward;
  // The forward's FLOPs as the cost model counts them (cost::ModelShape::attention_flops): 4
  // head_dim a query head and position it sees, length / 2 positions a token on average.
  double flops() const { return 2.0 * sequences * heads * head_dim * static_cast<double>(length) * length; }
  // Forward and backward together (the backward as kAttentionBackwardForwards forwards, as the
  // cost model counts it), and their rate over the two medians.
  double both_flops() const { return (1 + kAttentionBackwardForwards) * flops(); }
  double flops_per_second() const { return both_flops() / (forward.median + backward.median); }
};

struct CollectiveMeasurement {
  std::string op;  // all_reduce, all_gather, reduce_scatter, broadcast
  std::string dtype;  // of the elements: bf16 (fp16) or fp32; a v2 file without it: the settings'
  int ranks = 0;
  double bytes = 0;  // per rank
  TimeSpread seconds;
  double bus_bandwidth = 0;  // bytes/s, NCCL's bus bandwidth convention
  // Where the message went in pieces of this many bytes, one after another (an all-reduce of a
  // trainer's gradients, device::all_reduce_in_buckets); 0: at once.
  double bucket = 0;
};

// Moving bytes between two endpoints of one machine: "host", or a device by its process's
// rank, "device0", "device1" (a profile measured by several processes, one device each).
struct TransferMeasurement {
  std::string from, to;
  double bytes = 0;
  TimeSpread seconds;
};

// One AdamW step over `parameters` parameters as a trainer runs it (device::Backend::adamw:
// fp32 master weights, moments and gradient, the working copy in `dtype`); `bytes`: what it
// reads and writes, the master weights and moments both ways, the gradient read, the working
// copy written (30 bytes a parameter in bf16, cost::CostParams::adam_bytes_per_param).
struct OptimizerMeasurement {
  std::string dtype;
  double parameters = 0;
  double bytes = 0;
  TimeSpread seconds;
};

struct DeviceDescription {
  std::string backend;  // cpu or cuda
  std::string name;
  int count = 1;
  double memory = 0;  // bytes
  int compute_units = 0;
  std::string driver;
  std::string runtime;
};

// How a profile was measured (v2).
struct ProfileSettings {
  bool quick = false;
  std::string dtype;  // of the GEMMs and attention
  int repeats = 0;    // timed repeats of each point in all
  int passes = 1;     // passes through every measurement the repeats were spread over
};

struct GpuProfile {
  core::Provenance provenance;
  std::string gpu_type;  // a catalogue type, or the name of the new type the device becomes
  std::string device_name;
  std::string host;
  std::optional<DeviceDescription> device;  // v2
  std::optional<ProfileSettings> settings;  // v2

  // v2: the raw measurements.
  std::vector<GemmMeasurement> gemms;
  std::vector<BandwidthMeasurement> bandwidths;
  std::vector<AttentionMeasurement> attention;
  std::vector<PassAttentionMeasurement> pass_attention;
  std::vector<CollectiveMeasurement> collectives;
  std::vector<TransferMeasurement> transfers;  // device to device
  std::vector<OptimizerMeasurement> optimizer_steps;
  std::optional<TimeSpread> launch;

  // Fitted (v1's measurements). FLOP/s and bytes/s.
  std::optional<double> gemm_large_flops;         // GEMMs of >= 2048 tokens
  std::optional<double> gemm_small_flops;         // GEMMs of about 256 tokens
  std::optional<double> memory_bandwidth;         // reading device memory
  std::optional<double> intra_node_bandwidth;     // per direction, GPU to GPU (v2: the median pair)
  std::optional<double> allreduce_bus_bandwidth;  // bus bandwidth, 16-bit, the best message
  // v2: each collective's bus bandwidth at its largest message, by operation and element type
  // (the 16-bit all-reduce's too): what a data-parallel ring's gradients and gathers reach.
  struct CollectiveRate {
    std::string op, dtype;
    double bus_bandwidth = 0;  // bytes/s
  };
  std::vector<CollectiveRate> collective_rates;
  // v2 only.
  std::optional<double> fp32_flops;                      // large fp32 GEMMs
  std::vector<std::pair<double, double>> gemm_curve;     // (tokens, FLOP/s), tokens ascending
  // The GEMMs measured at each width (square, n = k), as their own curves of (tokens, FLOP/s):
  // how the rate depends on the width (hw::gemm_width_ratio). gemm_curve is the reference
  // width's where it was measured far enough.
  WidthCurves gemm_curves;
  // The weight-gradient GEMMs (GemmMeasurement::weight_gradient) as (tokens, FLOP/s), measured
  // at the width gemm_curve takes: a training pass's third GEMM of every layer runs at it.
  std::vector<std::pair<double, double>> weight_gradient_curve;
  std::optional<double> launch_overhead;                 // seconds
  std::optional<double> host_to_device_bandwidth;        // bytes/s
  std::optional<double> decode_attention_bandwidth;      // bytes/s of KV cache read
  // Decode attention measured at two group sizes (query heads a KV head): its FLOPs a second
  // at its best point (AttentionMeasurement::flops), the compute side of its roofline; of the
  // tensor peak, hw::Efficiency::decode_attention. Unset: a profile of one group size cannot
  // tell compute from the cache's read.
  std::optional<double> decode_attention_flops;
  // A pass's attention, forward and backward together (PassAttentionMeasurement's
  // flops_per_second), at the most tokens measured: of the tensor peak, the attention
  // efficiency (hw::Efficiency::attention).
  std::optional<double> attention_flops;
  std::optional<double> intra_node_latency;              // seconds, one small transfer GPU to GPU
  // Bytes/s the optimizer step moves over the most parameters measured (too many for a cache);
  // of the memory bandwidth, it is the optimizer efficiency (hw::Efficiency::optimizer).
  std::optional<double> optimizer_bandwidth;
  // Bytes/s a copy on the device reads and writes together over the largest buffer copied; of
  // the memory bandwidth, it is the copy efficiency (hw::Efficiency::copy).
  std::optional<double> copy_bandwidth;
  // GEMMs measured at two widths: the half width of the GEMM efficiency's dependence on it
  // (cost::CostParams::gemm_width_half; 0 where the wider ones are no faster).
  std::optional<double> gemm_width_half;
  // GEMMs measured at a narrow and a wide width, and at the two shapes between them (the wide
  // width out and the narrow in, and the other way): how much of a GEMM's width its inner
  // (reduction) dimension sets (hw::Efficiency::gemm_reduction_share).
  std::optional<double> gemm_reduction_share;

  // Fitted on a run of a plan (hetrl-exec --fit-profile; docs/exec.md): of the kernel rates,
  // what forward and training passes reach (Efficiency::training); of the memory bandwidth,
  // what the optimizer step reaches, and what a weight sync's copy on the device reaches; of
  // the kernel rates, what the engine's prefill reaches; the seconds a decode step of the
  // engine takes outside its kernels, and one of its tensor-parallel all-reduces (measured
  // where the run had some); of a tensor-parallel pass's compute, what its all-reduces take
  // beyond their transfer (Efficiency::tp_wait; where the run timed them).
  std::optional<double> pass_efficiency;
  std::optional<double> optimizer_efficiency;
  std::optional<double> copy_efficiency;
  std::optional<double> prefill_efficiency;
  std::optional<double> decode_step_overhead;
  std::optional<double> decode_allreduce;
  std::optional<double> tp_wait;
  // What they were fitted on: each task's measured seconds against the prediction before and
  // after the fit (the run's response lengths, as hetrl-sim draws them).
  struct CalibrationRow {
    std::string task;
    double measured = 0, before = 0, after = 0;
  };
  struct Calibration {
    std::string plan;
    int iterations = 0;  // measured, over all the runs
    int runs = 1;        // runs of the plan whose iterations were pooled
    std::vector<CalibrationRow> tasks;
  };
  std::optional<Calibration> calibration;
};

// `source` names the profile in the override (e.g. its file name and hash). A type the
// catalogue does not know needs the device's memory and the fitted GEMM and memory rates.
GpuTypeOverride override_from_profile(const GpuProfile& profile, const Catalog& catalog,
                                      const std::string& source);

// Merges `later` into `earlier` (same GPU type): fields `later` sets win.
void merge_override(GpuTypeOverride& earlier, const GpuTypeOverride& later);

// What the catalogue expects a GPU type to reach (datasheet peaks times its efficiencies), as
// a profile's fitted figures (a measured curve by its own points), for comparison with a
// measured one, or as the start of a profile fitted on a run (hetrl-exec --fit-profile).
GpuProfile datasheet_profile(const GpuSpec& spec);

}  // namespace hetrl::hw
