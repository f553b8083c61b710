#include "profile/report.h"

#include <fmt/format.h>

#include <optional>

#include "core/units.h"

namespace hetrl::profile {
namespace {

std::string cell(const std::optional<double>& value, double unit, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value / unit) : std::string("-");
}

// The datasheet curve's rate at `tokens` (its points are the same token counts or bracket them).
std::optional<double> curve_at(const hw::GpuProfile& p, double tokens) {
  for (const auto& [t, flops] : p.gemm_curve) {
    if (t == tokens) return flops;
  }
  return std::nullopt;
}

}  // namespace

std::string format_profile_table(const hw::GpuProfile& m, const hw::GpuProfile* d) {
  std::string out;
  if (m.device) {
    out += fmt::format("device   {} ({} backend, {} x, {:.1f} GiB, {} compute units)\n", m.device->name, m.device->backend,
                       m.device->count, m.device->memory / core::kGiB, m.device->compute_units);
    out += fmt::format("software {}; {}\n", m.device->driver, m.device->runtime);
  }
  out += fmt::format("type     {}{}\n", m.gpu_type, d ? "   compared with the datasheet of " + d->gpu_type : "");
  if (m.settings) {
    out += fmt::format("settings {}{} GEMMs and attention, {} repeats a point\n", m.settings->quick ? "quick, " : "",
                       m.settings->dtype, m.settings->repeats);
  }
  out += fmt::format("\n{:<34} {:>12} {:>12} {:>9}\n", "figure", "measured", "datasheet", "ratio");
  const auto row = [&](const char* name, const std::optional<double>& measured, const std::optional<double>& sheet,
                       double unit, const char* format) {
    if (!measured && !(d && sheet)) return;
    const std::string ratio =
        measured && d && sheet && *sheet > 0 ? fmt::format("{:.2f}", *measured / *sheet) : std::string("-");
    out += fmt::format("{:<34} {:>12} {:>12} {:>9}\n", name, cell(measured, unit, format),
                       d ? cell(sheet, unit, format) : std::string("-"), ratio);
  };
  const hw::GpuProfile none;
  const hw::GpuProfile& s = d ? *d : none;
  row("GEMM >= 2048 tokens (TFLOP/s)", m.gemm_large_flops, s.gemm_large_flops, core::kTflops, "{:.3g}");
  row("GEMM 256 tokens (TFLOP/s)", m.gemm_small_flops, s.gemm_small_flops, core::kTflops, "{:.3g}");
  row("GEMM fp32 (TFLOP/s)", m.fp32_flops, s.fp32_flops, core::kTflops, "{:.3g}");
  row("memory read (GB/s)", m.memory_bandwidth, s.memory_bandwidth, core::kGBps, "{:.4g}");
  row("decode attention, KV read (GB/s)", m.decode_attention_bandwidth, s.decode_attention_bandwidth, core::kGBps,
      "{:.4g}");
  row("GPU to GPU (GB/s)", m.intra_node_bandwidth, s.intra_node_bandwidth, core::kGBps, "{:.4g}");
  row("all-reduce bus (GB/s)", m.allreduce_bus_bandwidth, s.allreduce_bus_bandwidth, core::kGBps, "{:.4g}");
  row("host to device (GB/s)", m.host_to_device_bandwidth, s.host_to_device_bandwidth, core::kGBps, "{:.4g}");
  row("launch overhead (us)", m.launch_overhead, s.launch_overhead, 1e-6, "{:.3g}");
  if (!m.gemm_curve.empty()) {
    out += fmt::format("\n{:<34} {:>12} {:>12} {:>9}\n", "GEMM by tokens (TFLOP/s)", "measured", "datasheet", "ratio");
    for (const auto& [tokens, flops] : m.gemm_curve) {
      const std::optional<double> sheet = d ? curve_at(*d, tokens) : std::nullopt;
      out += fmt::format("{:<34} {:>12.3g} {:>12} {:>9}\n", fmt::format("  {:.0f} tokens", tokens), flops / core::kTflops,
                         sheet ? fmt::format("{:.3g}", *sheet / core::kTflops) : std::string("-"),
                         sheet ? fmt::format("{:.2f}", flops / *sheet) : std::string("-"));
    }
  }
  return out;
}

}  // namespace hetrl::profile
