#include "profile/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/units.h"

namespace hetrl::profile {
namespace {

std::string cell(const std::optional<double>& value, double unit, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value / unit) : std::string("-");
}

// The reference curve's rate at `tokens`, where it has that point.
std::optional<double> curve_at(const hw::GpuProfile& p, double tokens) {
  for (const auto& [t, flops] : p.gemm_curve) {
    if (t == tokens) return flops;
  }
  return std::nullopt;
}

constexpr double kMiB = 1024.0 * 1024.0;

std::string bytes_text(double bytes) {
  if (bytes >= core::kGiB) return fmt::format("{:.0f} GiB", bytes / core::kGiB);
  if (bytes >= kMiB) return fmt::format("{:.0f} MiB", bytes / kMiB);
  if (bytes >= 1024) return fmt::format("{:.0f} KiB", bytes / 1024);
  return fmt::format("{:.0f} B", bytes);
}

// The GEMMs' rates at each width measured, by tokens: how the width moves them.
std::string width_table(const hw::GpuProfile& m) {
  if (m.gemm_curves.empty()) return "";
  std::string out = fmt::format("\n{:<34}", "GEMM by width (TFLOP/s)");
  std::vector<double> tokens;
  for (const hw::WidthCurve& w : m.gemm_curves) {
    out += fmt::format(" {:>10}", fmt::format("{:g}", w.width));
    for (const auto& point : w.curve) tokens.push_back(point.first);
  }
  out += "\n";
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  for (const double t : tokens) {
    out += fmt::format("{:<34}", fmt::format("  {:.0f} tokens", t));
    for (const hw::WidthCurve& w : m.gemm_curves) {
      const auto at = std::find_if(w.curve.begin(), w.curve.end(), [&](const auto& point) { return point.first == t; });
      out += fmt::format(" {:>10}", at == w.curve.end() ? std::string("-") : fmt::format("{:.3g}", at->second / core::kTflops));
    }
    out += "\n";
  }
  return out;
}

// The GEMMs of one weight in its two shapes between the narrowest width and the widest (the
// wide width out, the narrow one in, and the other way), by tokens: what the reduction share
// is fitted on.
std::string shapes_table(const hw::GpuProfile& m) {
  const hw::GemmShapeRates shapes = hw::gemm_shape_rates(m.gemms);
  if (shapes.empty()) return "";
  std::set<std::pair<int, int>> seen;
  for (const auto& [tokens, rates] : shapes) {
    for (const auto& [shape, rate] : rates) seen.insert(shape);
  }
  std::string out = fmt::format("\n{:<34}", "GEMM by shape, n x k (TFLOP/s)");
  for (const auto& [n, k] : seen) out += fmt::format(" {:>12}", fmt::format("{} x {}", n, k));
  out += "\n";
  for (const auto& [tokens, rates] : shapes) {
    out += fmt::format("{:<34}", fmt::format("  {} tokens", tokens));
    for (const auto& shape : seen) {
      const auto at = rates.find(shape);
      out += fmt::format(" {:>12}", at == rates.end() ? std::string("-") : fmt::format("{:.3g}", at->second / core::kTflops));
    }
    out += "\n";
  }
  return out;
}

// The weight-gradient GEMMs by tokens beside the forward's at the same width: how much faster a
// training pass's third GEMM runs at few tokens.
std::string weight_gradient_table(const hw::GpuProfile& m) {
  if (m.weight_gradient_curve.empty()) return "";
  std::string out =
      fmt::format("\n{:<34} {:>12} {:>12} {:>9}\n", "GEMM weight gradient (TFLOP/s)", "gradient", "forward", "ratio");
  for (const auto& [tokens, flops] : m.weight_gradient_curve) {
    const std::optional<double> forward = curve_at(m, tokens);
    out += fmt::format("{:<34} {:>12.3g} {:>12} {:>9}\n", fmt::format("  {:.0f} tokens", tokens), flops / core::kTflops,
                       forward ? fmt::format("{:.3g}", *forward / core::kTflops) : std::string("-"),
                       forward ? fmt::format("{:.2f}", flops / *forward) : std::string("-"));
  }
  return out;
}

// Decode attention's KV read rate by query heads a KV head, sequences and cached positions,
// and a pass's attention by its points: where the attention kernels reach their rate and where
// they fall short of it (a rate that falls as the group grows: bound by compute).
std::string attention_tables(const hw::GpuProfile& m) {
  std::string out;
  if (!m.attention.empty()) {
    std::vector<int> lengths;
    std::vector<std::pair<int, int>> rows;  // (group, batch)
    for (const hw::AttentionMeasurement& a : m.attention) {
      lengths.push_back(a.length);
      rows.emplace_back(a.group(), a.batch);
    }
    std::sort(lengths.begin(), lengths.end());
    lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    out += fmt::format("\n{:<34}", "decode attention (KV GB/s)");
    for (const int length : lengths) out += fmt::format(" {:>10}", fmt::format("{} pos", length));
    out += "\n";
    for (const auto& [group, batch] : rows) {
      out += fmt::format("{:<34}", fmt::format("  {} sequences, {} heads a KV", batch, group));
      for (const int length : lengths) {
        const auto at = std::find_if(m.attention.begin(), m.attention.end(), [&](const hw::AttentionMeasurement& a) {
          return a.group() == group && a.batch == batch && a.length == length;
        });
        out += fmt::format(" {:>10}", at == m.attention.end() ? std::string("-")
                                                              : fmt::format("{:.4g}", at->bytes / at->seconds.median / core::kGBps));
      }
      out += "\n";
    }
  }
  if (!m.pass_attention.empty()) {
    out += fmt::format("\n{:<34} {:>12} {:>12} {:>9}\n", "pass attention (sequences x length)", "forward ms",
                       "backward ms", "TFLOP/s");
    for (const hw::PassAttentionMeasurement& a : m.pass_attention) {
      out += fmt::format("{:<34} {:>12.4g} {:>12.4g} {:>9.3g}\n", fmt::format("  {} x {}", a.sequences, a.length),
                         a.forward.median * 1e3, a.backward.median * 1e3, a.flops_per_second() / core::kTflops);
    }
  }
  return out;
}

// Each collective's bus bandwidth by type at its smallest message, at 1 MiB, at its best and
// at its largest (the rate a data-parallel ring's large messages are priced at).
std::string collectives_table(const hw::GpuProfile& m) {
  if (m.collectives.empty()) return "";
  std::string out = fmt::format("\n{:<34} {:>10} {:>10} {:>18} {:>18}\n",
                                fmt::format("collectives, {} processes (bus GB/s)", m.collectives.front().ranks),
                                "smallest", "1 MiB", "best (message)", "largest");
  std::vector<std::string> order;
  std::map<std::string, std::vector<const hw::CollectiveMeasurement*>> by_op;
  for (const hw::CollectiveMeasurement& c : m.collectives) {
    const std::string name =
        c.op + " " + c.dtype + (c.bucket > 0 ? fmt::format(", {} buckets", bytes_text(c.bucket)) : std::string());
    if (by_op[name].empty()) order.push_back(name);
    by_op[name].push_back(&c);
  }
  const auto rate = [](const hw::CollectiveMeasurement* c) {
    return fmt::format("{:.4g} ({})", c->bus_bandwidth / core::kGBps, bytes_text(c->bytes));
  };
  for (const std::string& name : order) {
    const auto& rows = by_op[name];
    const auto best = *std::max_element(rows.begin(), rows.end(), [](auto* a, auto* b) {
      return a->bus_bandwidth < b->bus_bandwidth;
    });
    const auto largest = *std::max_element(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->bytes < b->bytes; });
    std::string at_mib = "-";
    for (const auto* c : rows) {
      if (c->bytes == kMiB) at_mib = fmt::format("{:.4g}", c->bus_bandwidth / core::kGBps);
    }
    out += fmt::format("{:<34} {:>10.4g} {:>10} {:>18} {:>18}\n", "  " + name, rows.front()->bus_bandwidth / core::kGBps,
                       at_mib, rate(best), rate(largest));
  }
  return out;
}

// The largest transfer's rate between each pair of devices, sender by row.
std::string transfer_matrix(const hw::GpuProfile& m) {
  if (m.transfers.empty()) return "";
  std::vector<std::string> names;
  std::map<std::pair<std::string, std::string>, const hw::TransferMeasurement*> largest;
  for (const hw::TransferMeasurement& t : m.transfers) {
    for (const std::string& e : {t.from, t.to}) {
      if (std::find(names.begin(), names.end(), e) == names.end()) names.push_back(e);
    }
    const hw::TransferMeasurement*& at = largest[{t.from, t.to}];
    if (!at || t.bytes > at->bytes) at = &t;
  }
  std::string out = fmt::format("\n{:<34}", "device to device (GB/s), from \\ to");
  for (const std::string& n : names) out += fmt::format(" {:>9}", n);
  out += "\n";
  for (const std::string& from : names) {
    out += fmt::format("{:<34}", "  " + from);
    for (const std::string& to : names) {
      const auto at = largest.find({from, to});
      out += at == largest.end() ? fmt::format(" {:>9}", "-")
                                 : fmt::format(" {:>9.4g}", at->second->bytes / at->second->seconds.median / core::kGBps);
    }
    out += "\n";
  }
  return out;
}

// What a run fitted (hetrl-exec --fit-profile), and each task's seconds before and after.
std::string calibration_table(const hw::GpuProfile& m) {
  if (!m.pass_efficiency && !m.optimizer_efficiency && !m.copy_efficiency && !m.prefill_efficiency &&
      !m.decode_step_overhead && !m.decode_allreduce && !m.tp_wait) return "";
  std::string out = "\nfitted on a run";
  if (m.calibration) {
    out += fmt::format(" of {} ({} iteration{})", m.calibration->plan, m.calibration->iterations,
                       m.calibration->iterations == 1 ? "" : "s");
  }
  out += "\n";
  const auto figure = [&](const char* name, const std::optional<double>& value, double unit, const char* format) {
    if (value) out += fmt::format("{:<34} {:>12}\n", name, fmt::format(fmt::runtime(format), *value / unit));
  };
  figure("pass efficiency", m.pass_efficiency, 1.0, "{:.3f}");
  figure("optimizer efficiency", m.optimizer_efficiency, 1.0, "{:.3f}");
  figure("weight copy efficiency", m.copy_efficiency, 1.0, "{:.3f}");
  figure("prefill efficiency", m.prefill_efficiency, 1.0, "{:.3f}");
  figure("decode step overhead (ms)", m.decode_step_overhead, core::kMillisecond, "{:.3g}");
  figure("decode TP all-reduce (ms)", m.decode_allreduce, core::kMillisecond, "{:.3g}");
  figure("TP passes' wait (of the compute)", m.tp_wait, 1.0, "{:.3f}");
  if (m.calibration && !m.calibration->tasks.empty()) {
    out += fmt::format("\n{:<34} {:>12} {:>12} {:>9}\n", "task (seconds)", "measured", "before", "after");
    for (const hw::GpuProfile::CalibrationRow& row : m.calibration->tasks) {
      out += fmt::format("{:<34} {:>12.4g} {:>12.4g} {:>9.4g}\n", "  " + row.task, row.measured, row.before, row.after);
    }
  }
  return out;
}

}  // namespace

std::string format_profile_table(const hw::GpuProfile& m, const Reference& reference) {
  const hw::GpuProfile* d = reference.profile;
  const std::string& column = reference.column;
  std::string out;
  if (m.device) {
    out += fmt::format("device   {} ({} backend, {} x, {:.1f} GiB, {} compute units)\n", m.device->name, m.device->backend,
                       m.device->count, m.device->memory / core::kGiB, m.device->compute_units);
    out += fmt::format("software {}; {}\n", m.device->driver, m.device->runtime);
  }
  out += fmt::format("type     {}{}\n", m.gpu_type, d ? "   compared with " + reference.described : "");
  if (m.settings) {
    out += fmt::format("settings {}{} GEMMs and attention, {} repeats a point{}\n", m.settings->quick ? "quick, " : "",
                       m.settings->dtype, m.settings->repeats,
                       m.settings->passes > 1 ? fmt::format(" over {} passes", m.settings->passes) : "");
  }
  out += fmt::format("\n{:<34} {:>12} {:>12} {:>9}\n", "figure", "measured", column, "ratio");
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
  row("decode attention (TFLOP/s)", m.decode_attention_flops, s.decode_attention_flops, core::kTflops, "{:.3g}");
  row("attention, pass (TFLOP/s)", m.attention_flops, s.attention_flops, core::kTflops, "{:.3g}");
  row("optimizer step (GB/s)", m.optimizer_bandwidth, s.optimizer_bandwidth, core::kGBps, "{:.4g}");
  row("copy, read + write (GB/s)", m.copy_bandwidth, s.copy_bandwidth, core::kGBps, "{:.4g}");
  row("GPU to GPU (GB/s)", m.intra_node_bandwidth, s.intra_node_bandwidth, core::kGBps, "{:.4g}");
  row("GPU to GPU latency (us)", m.intra_node_latency, s.intra_node_latency, 1e-6, "{:.3g}");
  row("all-reduce bus (GB/s)", m.allreduce_bus_bandwidth, s.allreduce_bus_bandwidth, core::kGBps, "{:.4g}");
  row("host to device (GB/s)", m.host_to_device_bandwidth, s.host_to_device_bandwidth, core::kGBps, "{:.4g}");
  row("launch overhead (us)", m.launch_overhead, s.launch_overhead, 1e-6, "{:.3g}");
  row("GEMM width half", m.gemm_width_half, s.gemm_width_half, 1.0, "{:.4g}");
  row("GEMM reduction share", m.gemm_reduction_share, s.gemm_reduction_share, 1.0, "{:.3g}");
  if (!m.gemm_curve.empty()) {
    out += fmt::format("\n{:<34} {:>12} {:>12} {:>9}\n", "GEMM by tokens (TFLOP/s)", "measured", column, "ratio");
    for (const auto& [tokens, flops] : m.gemm_curve) {
      const std::optional<double> sheet = d ? curve_at(*d, tokens) : std::nullopt;
      out += fmt::format("{:<34} {:>12.3g} {:>12} {:>9}\n", fmt::format("  {:.0f} tokens", tokens), flops / core::kTflops,
                         sheet ? fmt::format("{:.3g}", *sheet / core::kTflops) : std::string("-"),
                         sheet ? fmt::format("{:.2f}", flops / *sheet) : std::string("-"));
    }
  }
  out += width_table(m);
  out += shapes_table(m);
  out += weight_gradient_table(m);
  out += attention_tables(m);
  out += collectives_table(m);
  out += transfer_matrix(m);
  out += calibration_table(m);
  return out;
}

}  // namespace hetrl::profile
