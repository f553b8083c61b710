#include "hw/profile.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/units.h"

namespace hetrl::hw {
namespace {

std::optional<double> ratio(const std::optional<double>& measured, double peak,
                            std::string_view what, std::string_view unit, double unit_scale,
                            std::string_view gpu) {
  if (!measured) return std::nullopt;
  if (!(*measured > 0)) {
    throw core::InputError(fmt::format("{} must be positive, found {}", what, *measured / unit_scale));
  }
  if (*measured > peak * 1.0001) {
    throw core::InputError(fmt::format(
        "{} of {:.1f} {} is above the {} datasheet peak of {:.1f} {}; does the profile name the "
        "right GPU type?", what, *measured / unit_scale, unit, gpu, peak / unit_scale, unit));
  }
  return std::min(1.0, *measured / peak);
}

template <typename T>
void take(std::optional<T>& into, const std::optional<T>& from) {
  if (from) into = from;
}

}  // namespace

GpuTypeOverride override_from_profile(const GpuProfile& profile, const Catalog& catalog,
                                      const std::string& source) {
  const GpuSpec& spec = catalog.gpu(profile.gpu_type, "/gpu_type");
  GpuTypeOverride o;
  o.name = spec.name;
  o.source = source;
  const double peak = spec.tensor_flops();
  o.gemm_large = ratio(profile.gemm_large_flops, peak, "measured large-GEMM rate", "TFLOP/s",
                       core::kTflops, spec.name);
  o.gemm_small = ratio(profile.gemm_small_flops, peak, "measured small-GEMM rate", "TFLOP/s",
                       core::kTflops, spec.name);
  o.memory_efficiency = ratio(profile.memory_bandwidth, spec.memory_bandwidth,
                              "measured memory bandwidth", "GB/s", core::kGBps, spec.name);
  if (profile.intra_node_bandwidth) {
    if (!(*profile.intra_node_bandwidth > 0)) {
      throw core::InputError("measured intra-node bandwidth must be positive");
    }
    o.intra_node_bandwidth = profile.intra_node_bandwidth;
  }
  const double link = o.intra_node_bandwidth.value_or(spec.intra_node.bandwidth);
  o.collective = ratio(profile.allreduce_bus_bandwidth, link, "measured all-reduce bus bandwidth",
                       "GB/s", core::kGBps, spec.name);
  return o;
}

void merge_override(GpuTypeOverride& earlier, const GpuTypeOverride& later) {
  using O = GpuTypeOverride;
  for (std::optional<double> O::*field :
       {&O::memory, &O::memory_bandwidth, &O::bf16_flops, &O::fp16_flops, &O::fp32_flops, &O::intra_node_bandwidth,
        &O::price_per_hour, &O::gemm_large, &O::gemm_small, &O::memory_efficiency, &O::collective}) {
    take(earlier.*field, later.*field);
  }
  take(earlier.intra_node_link, later.intra_node_link);
  if (!later.source.empty()) {
    earlier.source = earlier.source.empty() ? later.source : earlier.source + "; " + later.source;
  }
}

}  // namespace hetrl::hw
