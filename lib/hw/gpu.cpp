#include "hw/gpu.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"

namespace hetrl::hw {
namespace {

template <typename T>
std::vector<std::string> names_of(const std::vector<T>& items) {
  std::vector<std::string> names;
  names.reserve(items.size());
  for (const T& item : items) names.push_back(item.name);
  return names;
}

template <typename T>
const T& lookup(const std::vector<T>& items, std::string_view name, std::string_view what,
                std::string_view where) {
  for (const T& item : items) {
    if (item.name == name) return item;
  }
  throw core::InputError(core::located(
      where, fmt::format("unknown {} {}{}", what, core::quoted(name),
                         core::did_you_mean(name, names_of(items)))));
}

void require_positive(double value, std::string_view field, std::string_view gpu) {
  if (!(value > 0)) {
    throw core::InputError(
        fmt::format("GPU type {}: {} must be positive, found {}", core::quoted(gpu), field, value));
  }
}

void require_fraction(double value, std::string_view field, std::string_view gpu, double most = 1.0) {
  if (!(value > 0 && value <= most)) {
    throw core::InputError(fmt::format("GPU type {}: efficiency {} must be in (0, {}], found {}",
                                       core::quoted(gpu), field, most, value));
  }
}

}  // namespace

const char* collective_name(Collective op) {
  switch (op) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllGather: return "all_gather";
  }
  return "?";
}

void overlay(CollectiveShares& into, const CollectiveShares& from) {
  for (int op = 0; op < kCollectives; ++op) {
    for (int fp32 = 0; fp32 < 2; ++fp32) {
      if (from[op][fp32] != 0) into[op][fp32] = from[op][fp32];
    }
  }
}

const GpuSpec* Catalog::find_gpu(std::string_view name) const {
  for (const GpuSpec& spec : gpus) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const GpuSpec& Catalog::gpu(std::string_view name, std::string_view where) const {
  return lookup(gpus, name, "GPU type", where);
}

const IntraNodeLink& Catalog::intra_node_link(std::string_view name,
                                              std::string_view where) const {
  return lookup(intra_node_links, name, "intra-node link", where);
}

const InstancePreset& Catalog::instance(std::string_view name, std::string_view where) const {
  return lookup(instances, name, "instance type", where);
}

const NetworkPreset& Catalog::network(std::string_view name, std::string_view where) const {
  return lookup(networks, name, "network preset", where);
}

std::vector<std::string> Catalog::gpu_names() const { return names_of(gpus); }

void validate_gpu_spec(const GpuSpec& spec) {
  require_positive(spec.memory, "memory", spec.name);
  require_positive(spec.memory_bandwidth, "memory bandwidth", spec.name);
  require_positive(spec.fp16_flops, "FP16 tensor peak", spec.name);
  require_positive(spec.fp32_flops, "FP32 peak", spec.name);
  if (spec.bf16_flops < 0) require_positive(spec.bf16_flops, "BF16 tensor peak", spec.name);
  require_positive(spec.intra_node.bandwidth, "intra-node link bandwidth", spec.name);
  if (spec.price_per_hour && *spec.price_per_hour < 0) {
    throw core::InputError(fmt::format("GPU type {}: price must not be negative, found {}",
                                       core::quoted(spec.name), *spec.price_per_hour));
  }
  require_fraction(spec.efficiency.gemm_large, "gemm_large", spec.name);
  require_fraction(spec.efficiency.gemm_small, "gemm_small", spec.name);
  require_fraction(spec.efficiency.memory, "memory", spec.name);
  require_fraction(spec.efficiency.collective, "collective", spec.name);
  for (int op = 0; op < kCollectives; ++op) {
    for (int fp32 = 0; fp32 < 2; ++fp32) {
      const double share = spec.efficiency.collectives[op][fp32];
      if (share == 0) continue;
      require_fraction(share, fmt::format("collective {} in {}", collective_name(static_cast<Collective>(op)),
                                          fp32 ? "fp32" : "bf16"),
                       spec.name);
    }
  }
  require_fraction(spec.efficiency.attention, "attention", spec.name);
  if (spec.efficiency.decode_attention) require_fraction(*spec.efficiency.decode_attention, "decode attention", spec.name);
  require_fraction(spec.efficiency.training, "training", spec.name);
  if (spec.efficiency.optimizer != 0) require_fraction(spec.efficiency.optimizer, "optimizer", spec.name, kMostReadWriteShare);
  if (spec.efficiency.copy != 0) require_fraction(spec.efficiency.copy, "copy", spec.name, kMostReadWriteShare);
  if (spec.efficiency.prefill != 0) require_fraction(spec.efficiency.prefill, "prefill", spec.name);
  if (spec.efficiency.gemm_width_half && !(*spec.efficiency.gemm_width_half >= 0 && std::isfinite(*spec.efficiency.gemm_width_half))) {
    throw core::InputError(fmt::format("GPU type {}: gemm_width_half must be a finite number at least 0, found {}",
                                       core::quoted(spec.name), *spec.efficiency.gemm_width_half));
  }
  if (spec.efficiency.gemm_reduction_share &&
      !(*spec.efficiency.gemm_reduction_share >= 0 && *spec.efficiency.gemm_reduction_share <= 1)) {
    throw core::InputError(fmt::format("GPU type {}: gemm_reduction_share must be between 0 and 1, found {}",
                                       core::quoted(spec.name), *spec.efficiency.gemm_reduction_share));
  }
  if (spec.efficiency.decode_step_overhead &&
      !(*spec.efficiency.decode_step_overhead >= 0 && *spec.efficiency.decode_step_overhead < 1e3)) {
    throw core::InputError(fmt::format("GPU type {}: decode step overhead must be between 0 and 1000 s, found {}",
                                       core::quoted(spec.name), *spec.efficiency.decode_step_overhead));
  }
  if (spec.efficiency.decode_allreduce &&
      !(*spec.efficiency.decode_allreduce >= 0 && *spec.efficiency.decode_allreduce < 1e3)) {
    throw core::InputError(fmt::format("GPU type {}: decode all-reduce seconds must be between 0 and 1000, found {}",
                                       core::quoted(spec.name), *spec.efficiency.decode_allreduce));
  }
  if (spec.efficiency.tp_wait && !(*spec.efficiency.tp_wait >= 0 && *spec.efficiency.tp_wait < 10)) {
    throw core::InputError(fmt::format("GPU type {}: tp_wait must be at least 0 and below 10 (of the compute), found {}",
                                       core::quoted(spec.name), *spec.efficiency.tp_wait));
  }
  const auto require_curve = [&](const GemmCurve& curve, const std::string& what) {
    double previous = 0;
    for (const auto& [tokens, fraction] : curve) {
      if (!(tokens > previous)) {
        throw core::InputError(fmt::format("GPU type {}: the {}'s tokens must be positive and ascending, found {} after {}",
                                           core::quoted(spec.name), what, tokens, previous));
      }
      require_fraction(fraction, what, spec.name);
      previous = tokens;
    }
  };
  require_curve(spec.efficiency.gemm_curve, "GEMM curve");
  require_curve(spec.efficiency.weight_gradient_curve, "weight-gradient GEMM curve");
  double previous_width = 0;
  for (const WidthCurve& w : spec.efficiency.gemm_curves) {
    if (!(w.width > previous_width) || !std::isfinite(w.width)) {
      throw core::InputError(fmt::format("GPU type {}: the GEMM curves' widths must be positive and ascending, found {} "
                                         "after {}", core::quoted(spec.name), w.width, previous_width));
    }
    if (w.curve.empty()) {
      throw core::InputError(fmt::format("GPU type {}: the GEMM curve at width {:g} has no points", core::quoted(spec.name),
                                         w.width));
    }
    require_curve(w.curve, fmt::format("GEMM curve at width {:g}", w.width));
    previous_width = w.width;
  }
}

bool closer_to_reference(double width, double than, double reference) {
  const double a = std::abs(std::log2(width / reference));
  const double b = std::abs(std::log2(than / reference));
  return a < b - 1e-9 || (a < b + 1e-9 && width > than);
}

double gemm_width_ratio(const WidthCurves& curves, double tokens, double width, double reference) {
  // The widths measured this far, and each one's rate at `tokens`.
  std::vector<std::pair<double, double>> reach;  // (log width, log rate)
  const WidthCurve* closest = nullptr;
  for (const WidthCurve& w : curves) {
    if (w.curve.empty() || w.curve.back().first < tokens) continue;
    reach.emplace_back(std::log(w.width), std::log(gemm_curve_efficiency(w.curve, tokens)));
    if (!closest || closer_to_reference(w.width, closest->width, reference)) closest = &w;
  }
  if (reach.size() < 2) return 1.0;
  // Against the measured width closest to the reference: the one hetrl-profile takes a type's
  // curve from at this token count.
  const double base = std::log(gemm_curve_efficiency(closest->curve, tokens));
  const auto log_rate = [&](double at) {
    const double x = std::log(at);
    if (x <= reach.front().first) return reach.front().second;
    for (std::size_t i = 1; i < reach.size(); ++i) {
      if (x <= reach[i].first) {
        const auto& [x0, y0] = reach[i - 1];
        const auto& [x1, y1] = reach[i];
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
      }
    }
    return reach.back().second;
  };
  return std::exp(log_rate(width) - base);
}

GemmCurve gemm_curve_envelope(GemmCurve curve) {
  // Left as given where it is not a valid curve: validate_gpu_spec says why.
  double previous = 0;
  for (const auto& [tokens, fraction] : curve) {
    if (!(tokens > previous) || !(fraction > 0 && fraction <= 1)) return curve;
    previous = tokens;
  }
  for (std::size_t i = curve.size(); i-- > 1;) {
    auto& [tokens, fraction] = curve[i - 1];
    const double later_time = curve[i].first / curve[i].second;
    if (tokens / fraction > later_time) fraction = tokens / later_time;
  }
  return curve;
}

GpuSpec apply_override(const Catalog& catalog, const GpuTypeOverride& o) {
  GpuSpec spec;
  const GpuSpec* base = catalog.find_gpu(o.name);
  if (base) {
    spec = *base;
  } else {
    std::vector<std::string> missing;
    if (!o.memory) missing.emplace_back("memory_gib");
    if (!o.memory_bandwidth) missing.emplace_back("memory_bandwidth_gb_per_s");
    if (!o.fp16_flops) missing.emplace_back("fp16_dense_tflops");
    if (!o.fp32_flops) missing.emplace_back("fp32_tflops");
    if (!o.intra_node_link) missing.emplace_back("intra_node_link");
    if (!missing.empty()) {
      std::string list;
      for (const std::string& field : missing) list += (list.empty() ? "" : ", ") + field;
      throw core::InputError(fmt::format(
          "GPU type {} is not in the catalogue{}; a new type needs {}", core::quoted(o.name),
          core::did_you_mean(o.name, catalog.gpu_names()), list));
    }
    spec.name = o.name;
    spec.efficiency = catalog.default_efficiency;
  }
  if (o.memory) spec.memory = *o.memory;
  if (o.memory_bandwidth) spec.memory_bandwidth = *o.memory_bandwidth;
  if (o.bf16_flops) spec.bf16_flops = *o.bf16_flops;
  if (o.fp16_flops) spec.fp16_flops = *o.fp16_flops;
  if (o.fp32_flops) spec.fp32_flops = *o.fp32_flops;
  if (o.intra_node_link) spec.intra_node = catalog.intra_node_link(*o.intra_node_link, "");
  if (o.intra_node_bandwidth) spec.intra_node.bandwidth = *o.intra_node_bandwidth;
  if (o.memory_is_host) spec.memory_is_host = *o.memory_is_host;
  if (o.price_per_hour) {
    spec.price_per_hour = *o.price_per_hour;
    spec.price_source = o.source;
  }
  const bool efficiency_changed = o.gemm_large || o.gemm_small || o.gemm_curve || o.gemm_curves ||
                                  o.weight_gradient_curve || o.memory_efficiency || o.collective || o.training ||
                                  o.attention || o.optimizer_efficiency || o.copy_efficiency || o.prefill_efficiency ||
                                  o.gemm_width_half || o.gemm_reduction_share || o.decode_attention || o.decode_step_overhead ||
                                  o.decode_allreduce || o.tp_wait || o.collectives;
  if (o.gemm_curve) spec.efficiency.gemm_curve = gemm_curve_envelope(*o.gemm_curve);
  if (o.gemm_curves) {
    spec.efficiency.gemm_curves = *o.gemm_curves;
    for (WidthCurve& w : spec.efficiency.gemm_curves) w.curve = gemm_curve_envelope(std::move(w.curve));
  }
  if (o.weight_gradient_curve) spec.efficiency.weight_gradient_curve = gemm_curve_envelope(*o.weight_gradient_curve);
  if (o.gemm_large) spec.efficiency.gemm_large = *o.gemm_large;
  if (o.gemm_small) spec.efficiency.gemm_small = *o.gemm_small;
  if (o.memory_efficiency) spec.efficiency.memory = *o.memory_efficiency;
  if (o.collective) spec.efficiency.collective = *o.collective;
  if (o.collectives) overlay(spec.efficiency.collectives, *o.collectives);
  if (o.training) spec.efficiency.training = *o.training;
  if (o.attention) spec.efficiency.attention = *o.attention;
  if (o.optimizer_efficiency) spec.efficiency.optimizer = *o.optimizer_efficiency;
  if (o.copy_efficiency) spec.efficiency.copy = *o.copy_efficiency;
  if (o.prefill_efficiency) spec.efficiency.prefill = *o.prefill_efficiency;
  if (o.gemm_width_half) spec.efficiency.gemm_width_half = *o.gemm_width_half;
  if (o.gemm_reduction_share) spec.efficiency.gemm_reduction_share = *o.gemm_reduction_share;
  if (o.decode_attention) spec.efficiency.decode_attention = *o.decode_attention;
  if (o.decode_step_overhead) spec.efficiency.decode_step_overhead = *o.decode_step_overhead;
  if (o.decode_allreduce) spec.efficiency.decode_allreduce = *o.decode_allreduce;
  if (o.tp_wait) spec.efficiency.tp_wait = *o.tp_wait;
  if (efficiency_changed && !o.source.empty()) spec.efficiency.source = o.source;
  if (!o.source.empty()) spec.source = base ? o.source + "; otherwise " + base->source : o.source;
  validate_gpu_spec(spec);
  return spec;
}

}  // namespace hetrl::hw
