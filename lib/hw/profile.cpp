#include "hw/profile.h"

#include <fmt/format.h>

#include <algorithm>

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

// The measured collectives beside the 16-bit all-reduce (Efficiency::collective), each as
// `share` makes its bus bandwidth a share of the link's; none measured: nullopt.
template <typename Share>
std::optional<CollectiveShares> collective_shares(const GpuProfile& profile, Share share) {
  CollectiveShares shares{};
  bool any = false;
  for (const GpuProfile::CollectiveRate& rate : profile.collective_rates) {
    const bool fp32 = rate.dtype == "fp32";
    for (int op = 0; op < kCollectives; ++op) {
      const auto collective = static_cast<Collective>(op);
      if (rate.op != collective_name(collective) || (collective == Collective::kAllReduce && !fp32)) continue;
      shares[op][fp32 ? 1 : 0] = share(rate.bus_bandwidth, fmt::format("{} {}", rate.dtype, rate.op));
      any = true;
    }
  }
  if (!any) return std::nullopt;
  return shares;
}

// What a run calibrated (hetrl-exec --fit-profile), each checked as a cluster file's would be.
void take_calibration(const GpuProfile& profile, GpuTypeOverride& o) {
  const auto fraction = [&](const std::optional<double>& value, std::string_view what,
                            double most = 1.0) -> std::optional<double> {
    if (value && !(*value > 0 && *value <= most)) {
      throw core::InputError(fmt::format("the profile's {} must be in (0, {}], found {}", what, most, *value));
    }
    return value;
  };
  o.training = fraction(profile.pass_efficiency, "pass efficiency");
  // A fitted figure replaces one the profile measured.
  take(o.optimizer_efficiency, fraction(profile.optimizer_efficiency, "optimizer efficiency", kMostReadWriteShare));
  take(o.copy_efficiency, fraction(profile.copy_efficiency, "copy efficiency", kMostReadWriteShare));
  o.prefill_efficiency = fraction(profile.prefill_efficiency, "prefill efficiency");
  if (profile.decode_step_overhead) {
    if (!(*profile.decode_step_overhead >= 0 && *profile.decode_step_overhead < 1e3)) {
      throw core::InputError(
          fmt::format("the profile's decode step overhead must be between 0 and 1000 s, found {}", *profile.decode_step_overhead));
    }
    o.decode_step_overhead = profile.decode_step_overhead;
  }
  if (profile.decode_allreduce) {
    if (!(*profile.decode_allreduce >= 0 && *profile.decode_allreduce < 1e3)) {
      throw core::InputError(
          fmt::format("the profile's decode all-reduce must be between 0 and 1000 s, found {}", *profile.decode_allreduce));
    }
    o.decode_allreduce = profile.decode_allreduce;
  }
  if (profile.tp_wait) {
    if (!(*profile.tp_wait >= 0 && *profile.tp_wait < 10)) {
      throw core::InputError(
          fmt::format("the profile's TP wait must be at least 0 and below 10 (of the compute), found {}", *profile.tp_wait));
    }
    o.tp_wait = profile.tp_wait;
  }
}

}  // namespace

GemmShapeRates gemm_shape_rates(const std::vector<GemmMeasurement>& gemms) {
  const bool half_measured =
      std::any_of(gemms.begin(), gemms.end(), [](const GemmMeasurement& g) { return g.dtype != "fp32"; });
  GemmShapeRates rates;
  for (const GemmMeasurement& g : gemms) {
    if (g.weight_gradient || g.n == g.k || (g.dtype == "fp32" && half_measured)) continue;
    double& rate = rates[g.tokens][{g.n, g.k}];
    rate = std::max(rate, g.flops() / g.seconds.median);
  }
  return rates;
}

GpuTypeOverride override_from_profile(const GpuProfile& profile, const Catalog& catalog,
                                      const std::string& source) {
  const GpuSpec* known = catalog.find_gpu(profile.gpu_type);
  if (!known) {
    // A device of its own: its peaks are what it was measured to reach.
    if (!profile.device || !profile.gemm_large_flops || !profile.memory_bandwidth) {
      (void)catalog.gpu(profile.gpu_type, "/gpu_type");  // throws, with the closest name
    }
    if (!(*profile.gemm_large_flops > 0) || !(*profile.memory_bandwidth > 0) || !(profile.device->memory > 0)) {
      throw core::InputError(fmt::format("the profile of new type {} needs a positive large-GEMM rate, memory "
                                         "bandwidth and memory", core::quoted(profile.gpu_type)));
    }
    GpuTypeOverride o;
    o.name = profile.gpu_type;
    o.source = source;
    if (profile.device->backend == "cpu") o.memory_is_host = true;
    o.memory = profile.device->memory;
    o.memory_bandwidth = profile.memory_bandwidth;
    o.bf16_flops = o.fp16_flops = profile.gemm_large_flops;
    o.fp32_flops = profile.fp32_flops.value_or(*profile.gemm_large_flops);
    o.gemm_large = 1.0;
    if (profile.gemm_small_flops) o.gemm_small = std::clamp(*profile.gemm_small_flops / *profile.gemm_large_flops, 1e-3, 1.0);
    const auto fractions = [&](const GemmCurve& rates) {
      GemmCurve curve;
      for (const auto& [tokens, flops] : rates) curve.emplace_back(tokens, std::clamp(flops / *profile.gemm_large_flops, 1e-3, 1.0));
      return curve;
    };
    if (!profile.gemm_curve.empty()) o.gemm_curve = fractions(profile.gemm_curve);
    if (!profile.gemm_curves.empty()) {
      o.gemm_curves.emplace();
      for (const WidthCurve& w : profile.gemm_curves) o.gemm_curves->push_back({w.width, fractions(w.curve)});
    }
    if (!profile.weight_gradient_curve.empty()) o.weight_gradient_curve = fractions(profile.weight_gradient_curve);
    o.memory_efficiency = 1.0;
    // The optimizer step's share of reading memory, what it reads and writes counted: on a CPU
    // it may be bound by its arithmetic instead, or run its writes beside its reads past what
    // one stream of reads reaches (one core keeps too few reads in flight to fill the memory's
    // bandwidth), up to twice it (hw::kMostReadWriteShare).
    if (profile.optimizer_bandwidth) {
      if (!(*profile.optimizer_bandwidth > 0)) {
        throw core::InputError("the measured optimizer step rate must be positive");
      }
      o.optimizer_efficiency = std::min(kMostReadWriteShare, *profile.optimizer_bandwidth / *profile.memory_bandwidth);
    }
    // A copy's share likewise.
    if (profile.copy_bandwidth) {
      if (!(*profile.copy_bandwidth > 0)) throw core::InputError("the measured copy rate must be positive");
      o.copy_efficiency = std::min(kMostReadWriteShare, *profile.copy_bandwidth / *profile.memory_bandwidth);
    }
    // The link between two such devices in a node: nominally PCIe 4, at the measured rate when
    // the profile has one.
    o.intra_node_link = "pcie4";
    if (profile.intra_node_bandwidth) {
      o.intra_node_bandwidth = profile.intra_node_bandwidth;
    } else if (profile.host_to_device_bandwidth) {
      o.intra_node_bandwidth = profile.host_to_device_bandwidth;
    }
    // Collectives between such devices reach the measured bus bandwidth of that link.
    if (profile.allreduce_bus_bandwidth && o.intra_node_bandwidth) {
      o.collective = std::clamp(*profile.allreduce_bus_bandwidth / *o.intra_node_bandwidth, 1e-3, 1.0);
      o.collectives = collective_shares(profile, [&](double bus, const std::string&) {
        return std::clamp(bus / *o.intra_node_bandwidth, 1e-3, 1.0);
      });
    }
    if (profile.gemm_width_half) o.gemm_width_half = profile.gemm_width_half;
    if (profile.gemm_reduction_share) o.gemm_reduction_share = profile.gemm_reduction_share;
    if (profile.decode_attention_flops) {
      if (!(*profile.decode_attention_flops > 0)) throw core::InputError("the measured decode attention rate must be positive");
      o.decode_attention = std::clamp(*profile.decode_attention_flops / *profile.gemm_large_flops, 1e-4, 1.0);
    }
    if (profile.attention_flops) {
      if (!(*profile.attention_flops > 0)) throw core::InputError("the measured attention rate must be positive");
      o.attention = std::clamp(*profile.attention_flops / *profile.gemm_large_flops, 1e-4, 1.0);
    }
    take_calibration(profile, o);
    return o;
  }
  const GpuSpec& spec = *known;
  GpuTypeOverride o;
  o.name = spec.name;
  o.source = source;
  const double peak = spec.tensor_flops();
  o.gemm_large = ratio(profile.gemm_large_flops, peak, "measured large-GEMM rate", "TFLOP/s",
                       core::kTflops, spec.name);
  o.gemm_small = ratio(profile.gemm_small_flops, peak, "measured small-GEMM rate", "TFLOP/s",
                       core::kTflops, spec.name);
  const auto fractions = [&](const GemmCurve& rates, const std::string& where) {
    GemmCurve curve;
    for (const auto& [tokens, flops] : rates) {
      curve.emplace_back(tokens, *ratio(flops, peak, fmt::format("measured GEMM rate at {:g} tokens{}", tokens, where),
                                        "TFLOP/s", core::kTflops, spec.name));
    }
    return curve;
  };
  if (!profile.gemm_curve.empty()) o.gemm_curve = fractions(profile.gemm_curve, "");
  if (!profile.gemm_curves.empty()) {
    o.gemm_curves.emplace();
    for (const WidthCurve& w : profile.gemm_curves) {
      o.gemm_curves->push_back({w.width, fractions(w.curve, fmt::format(" and width {:g}", w.width))});
    }
  }
  if (!profile.weight_gradient_curve.empty()) {
    o.weight_gradient_curve = fractions(profile.weight_gradient_curve, " of the weight gradient");
  }
  o.memory_efficiency = ratio(profile.memory_bandwidth, spec.memory_bandwidth,
                              "measured memory bandwidth", "GB/s", core::kGBps, spec.name);
  o.optimizer_efficiency = ratio(profile.optimizer_bandwidth, spec.memory_bandwidth,
                                 "measured optimizer step rate", "GB/s", core::kGBps, spec.name);
  o.copy_efficiency =
      ratio(profile.copy_bandwidth, spec.memory_bandwidth, "measured copy rate", "GB/s", core::kGBps, spec.name);
  if (profile.intra_node_bandwidth) {
    if (!(*profile.intra_node_bandwidth > 0)) {
      throw core::InputError("measured intra-node bandwidth must be positive");
    }
    o.intra_node_bandwidth = profile.intra_node_bandwidth;
  }
  const double link = o.intra_node_bandwidth.value_or(spec.intra_node.bandwidth);
  o.collective = ratio(profile.allreduce_bus_bandwidth, link, "measured all-reduce bus bandwidth",
                       "GB/s", core::kGBps, spec.name);
  o.collectives = collective_shares(profile, [&](double bus, const std::string& what) {
    return *ratio(bus, link, "measured " + what + " bus bandwidth", "GB/s", core::kGBps, spec.name);
  });
  if (profile.gemm_width_half) o.gemm_width_half = profile.gemm_width_half;
  if (profile.gemm_reduction_share) o.gemm_reduction_share = profile.gemm_reduction_share;
  o.attention = ratio(profile.attention_flops, peak, "measured attention rate", "TFLOP/s", core::kTflops, spec.name);
  o.decode_attention = ratio(profile.decode_attention_flops, peak, "measured decode attention rate", "TFLOP/s",
                             core::kTflops, spec.name);
  take_calibration(profile, o);
  return o;
}

void merge_override(GpuTypeOverride& earlier, const GpuTypeOverride& later) {
  using O = GpuTypeOverride;
  for (std::optional<double> O::*field :
       {&O::memory, &O::memory_bandwidth, &O::bf16_flops, &O::fp16_flops, &O::fp32_flops, &O::intra_node_bandwidth,
        &O::price_per_hour, &O::gemm_large, &O::gemm_small, &O::memory_efficiency, &O::collective, &O::training,
        &O::attention, &O::optimizer_efficiency, &O::copy_efficiency, &O::prefill_efficiency, &O::gemm_width_half,
        &O::gemm_reduction_share, &O::decode_attention, &O::decode_step_overhead,
        &O::decode_allreduce, &O::tp_wait}) {
    take(earlier.*field, later.*field);
  }
  take(earlier.intra_node_link, later.intra_node_link);
  take(earlier.gemm_curve, later.gemm_curve);
  take(earlier.gemm_curves, later.gemm_curves);
  take(earlier.weight_gradient_curve, later.weight_gradient_curve);
  if (later.collectives) {
    CollectiveShares merged = earlier.collectives.value_or(CollectiveShares{});
    overlay(merged, *later.collectives);
    earlier.collectives = merged;
  }
  if (!later.source.empty()) {
    earlier.source = earlier.source.empty() ? later.source : earlier.source + "; " + later.source;
  }
}

GpuProfile datasheet_profile(const GpuSpec& spec) {
  GpuProfile p;
  p.gpu_type = spec.name;
  p.device_name = spec.name + " (datasheet)";
  const double peak = spec.tensor_flops();
  p.gemm_large_flops = peak * spec.efficiency.gemm_large;
  p.gemm_small_flops = peak * spec.efficiency.gemm_small;
  if (spec.efficiency.gemm_curve.empty()) {
    for (double tokens : {1.0, 16.0, 64.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0}) {
      p.gemm_curve.emplace_back(tokens, peak * spec.efficiency.gemm(tokens));
    }
  } else {
    for (const auto& [tokens, fraction] : spec.efficiency.gemm_curve) p.gemm_curve.emplace_back(tokens, peak * fraction);
  }
  for (const WidthCurve& w : spec.efficiency.gemm_curves) {
    WidthCurve rates{w.width, {}};
    for (const auto& [tokens, fraction] : w.curve) rates.curve.emplace_back(tokens, peak * fraction);
    p.gemm_curves.push_back(std::move(rates));
  }
  for (const auto& [tokens, fraction] : spec.efficiency.weight_gradient_curve) {
    p.weight_gradient_curve.emplace_back(tokens, peak * fraction);
  }
  p.gemm_width_half = spec.efficiency.gemm_width_half;
  p.gemm_reduction_share = spec.efficiency.gemm_reduction_share;
  p.fp32_flops = spec.fp32_flops;
  p.memory_bandwidth = spec.memory_bandwidth * spec.efficiency.memory;
  p.intra_node_bandwidth = spec.intra_node.bandwidth;
  p.allreduce_bus_bandwidth = spec.intra_node.bandwidth * spec.efficiency.collective;
  for (int op = 0; op < kCollectives; ++op) {
    for (int fp32 = 0; fp32 < 2; ++fp32) {
      const double share = spec.efficiency.collectives[op][fp32];
      if (share > 0) {
        p.collective_rates.push_back({collective_name(static_cast<Collective>(op)), fp32 ? "fp32" : "bf16",
                                      spec.intra_node.bandwidth * share});
      }
    }
  }
  p.decode_attention_bandwidth = spec.memory_bandwidth * spec.efficiency.memory;
  if (spec.efficiency.decode_attention) p.decode_attention_flops = peak * *spec.efficiency.decode_attention;
  p.attention_flops = peak * spec.efficiency.attention;
  p.optimizer_bandwidth = spec.memory_bandwidth * spec.efficiency.optimizer_share();
  p.copy_bandwidth = spec.memory_bandwidth * spec.efficiency.copy_share();
  return p;
}

}  // namespace hetrl::hw
