#pragma once
// Measuring a device: what hetrl-profile runs. Each measurement is a curve over sizes; each
// point times an operation over several repeats (each long enough for the clock to resolve it,
// ended by synchronize()) and keeps the median and range of one operation's time. Then the
// figures the cost model uses are fitted from the curves (fit()).
//
// A point's repeats are spread over several passes through every measurement rather than taken
// back to back: on a shared machine a burst of load from elsewhere then slows one pass's
// repeats of a point, which the median leaves out, instead of all of them. The first pass
// decides which points are measured and how many calls a repeat makes; the others replay it.
//
// Sizes follow LLM layers: GEMMs of 1 to 8192 tokens against the hidden sizes of the
// catalogue's models (decode-like up to 256 tokens, prefill-like above), memory traffic from
// 1 MiB to 1 GiB, the AdamW step over 64 Ki parameters and up, decode attention over KV caches
// of a Llama-style head layout, and a pass's causal attention over packed sequences, forward
// and backward. A point whose time the previous points predict to exceed the
// point budget is left out (a slow device, or --quick), so a CPU finishes in seconds and a GPU
// still measures the large sizes; the first two points of every curve are always measured.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "device/backend.h"
#include "device/comm.h"
#include "hw/profile.h"

namespace hetrl::profile {

struct ProfileParams {
  bool quick = false;
  int passes = 3;                    // passes through every measurement, each timing every point
  int repeats = 2;                   // timed repeats per point in each pass
  double repeat_seconds = 2e-3;      // each repeat runs the operation until it lasts this long
  double point_seconds = 1.5;        // a point predicted to take longer, over every pass, is left out
  device::DType dtype = device::DType::kBf16;  // GEMMs and attention (fp32 is also measured at one size)
  // GEMM widths (n = k), ascending. Each of a model's GEMMs is priced at the geometric mean of
  // its weight's two dimensions on a shard, which tensor parallelism takes below the model's:
  // from 240 (the k and v of the catalogue's smallest model at TP 2) to tens of thousands (a
  // language head), so a profile from 256 up, whose ends price those beyond them.
  std::vector<int> widths{256, 512, 1024, 2048, 4096, 5120, 8192};
  // Decode's batches of a few sequences get points of their own (4 and 8 tokens): the curve is
  // read as linear in log2 of the tokens between points, which need not hold from 1 to 16. The
  // device's GEMM row limits join these (gemm_tokens).
  std::vector<int> tokens{1, 4, 8, 16, 64, 256, 512, 1024, 2048, 4096, 8192};
  // A pass's attention: (sequences, length) packed together, from one short sequence (which
  // every device affords: its cost grows with the square of the length, and a CPU's is some
  // hundred times its GEMMs') to a micro-batch's worth of tokens, as far as the budget goes.
  std::vector<std::pair<int, int>> pass_attention{{1, 128}, {1, 512}, {4, 1024}, {4, 2048}, {8, 4096}};
  double largest_buffer = 1 << 30;   // bytes, memory traffic and transfers
  // Bytes a bucket of a gradient's all-reduce: hetrl-exec's (PyTorch DDP's default).
  double gradient_bucket = static_cast<double>(device::kGradientBucketBytes);

  // The settings of --quick: fewer sizes, one repeat a pass, a tighter point budget.
  static ProfileParams quick_settings();
};

// Called before each step with its name and the fraction of steps done.
using Progress = std::function<void(const std::string& step, double done)>;

// Measures `backend`'s device. With several processes (`comm`, one device each), rank 0
// measures its device while the others wait, then all of them measure collectives over every
// process and transfers between each pair; every process must call this, and only rank 0's
// profile has the device's own curves. Throws device::DeviceError when the device fails.
hw::GpuProfile measure(device::Backend& backend, device::Communicator& comm, const core::Clock& clock,
                       const ProfileParams& params, const Progress& progress = {});

// The token counts a GEMM curve is measured at: `tokens`, with each of the device's GEMM row
// limits below the most of them (DeviceInfo::gemm_row_limits: its rate breaks past one, where
// the curve's reading, linear in log2 of the tokens between points, would not see it), ascending.
std::vector<int> gemm_tokens(std::vector<int> tokens, const device::DeviceInfo& info);

// Fills the fitted figures of `profile` from its measurements: the GEMM curve (at each token
// count, the rate of the width closest to the cost model's reference width), the small- and
// large-GEMM rates (256 tokens, and the best at 2048 or more), fp32 peak, memory bandwidth
// (reading the largest buffer), the optimizer step's rate (over the most parameters), launch
// overhead, host-to-device bandwidth (the largest transfer), the best decode attention rate,
// a pass's attention rate (at the most tokens), the best all-reduce bus bandwidth, and between devices the median pair's bandwidth (largest
// transfer) and latency (smallest).
void fit(hw::GpuProfile& profile);

// The catalogue type a device's name names ("NVIDIA H100 80GB HBM3" -> H100-SXM), or "" when
// none does: the model word of a type's name (its first with a digit) must appear in the
// device's, and its memory be within 10% of the device's.
std::string match_gpu_type(const device::DeviceInfo& info, const hw::Catalog& catalog);

// The name of a new type for a device the catalogue does not know: "cpu-amd-epyc" for the
// host, "gpu-..." for others; lowercase words joined by '-'.
std::string new_type_name(const device::DeviceInfo& info);

}  // namespace hetrl::profile
