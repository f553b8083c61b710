#include "io/profile_io.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "io/files.h"
#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {
namespace {

using detail::ObjectReader;
using detail::OrderedJson;
using detail::Range;

constexpr double kMicrosecond = 1e-6;

// A figure derived from others (a rate from a time), written for readers at 6 significant
// digits, so it does not vary in the last digits when a file is read and written again.
double derived(double value) { return std::stod(fmt::format("{:.6g}", value)); }

// An attention measurement's head layout.
template <typename Measurement>
void read_heads(ObjectReader& a, Measurement& x) {
  x.heads = static_cast<int>(a.integer("heads", 1, 1 << 20));
  x.kv_heads = static_cast<int>(a.integer("kv_heads", 1, 1 << 20));
  x.head_dim = static_cast<int>(a.integer("head_dim", 1, 1 << 20));
}

hw::TimeSpread read_spread(ObjectReader& r, std::string_view unit_name, double unit) {
  hw::TimeSpread s;
  s.median = r.number(std::string("median_") + std::string(unit_name), Range::kPositive) * unit;
  s.min = r.number(std::string("min_") + std::string(unit_name), Range::kPositive) * unit;
  s.max = r.number(std::string("max_") + std::string(unit_name), Range::kPositive) * unit;
  s.repeats = static_cast<int>(r.integer("repeats", 1, 1000000));
  if (!(s.min <= s.median && s.median <= s.max)) {
    throw core::InputError(core::located(r.where(), "expected min <= median <= max"));
  }
  return s;
}

void write_spread(OrderedJson& out, const hw::TimeSpread& s, std::string_view unit_name, double unit) {
  out[std::string("median_") + std::string(unit_name)] = detail::file_units(s.median / unit);
  out[std::string("min_") + std::string(unit_name)] = detail::file_units(s.min / unit);
  out[std::string("max_") + std::string(unit_name)] = detail::file_units(s.max / unit);
  out["repeats"] = s.repeats;
}

// Measurements of moved bytes, each written as its own fields, its time spread in ms and the
// rate it moved its bytes at (derived, for readers).
template <typename Measurement, typename Fields>
OrderedJson rated_rows(const std::vector<Measurement>& measurements, Fields fields) {
  OrderedJson rows = OrderedJson::array();
  for (const Measurement& x : measurements) {
    OrderedJson row = fields(x);
    write_spread(row, x.seconds, "ms", core::kMillisecond);
    row["gb_per_s"] = derived(x.bytes / x.seconds.median / core::kGBps);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string dtype(ObjectReader& r) {
  return r.optional_choice<std::string>("dtype", {{"fp32", "fp32"}, {"bf16", "bf16"}, {"fp16", "fp16"}}, "bf16");
}

// Each object of the array `key` (absent: none), read by `read`, then checked for unknown keys.
template <typename Read>
void read_rows(ObjectReader& m, std::string_view key, Read read) {
  if (!m.has(key)) return;
  for (ObjectReader& row : m.object_array(key, true)) {
    read(row);
    row.finish();
  }
}

void read_measurements_v2(ObjectReader& m, hw::GpuProfile& p) {
  if (auto launch = m.optional_object("launch")) {
    p.launch = read_spread(*launch, "us", kMicrosecond);
    launch->finish();
  }
  read_rows(m, "gemm", [&](ObjectReader& g) {
    hw::GemmMeasurement& x = p.gemms.emplace_back();
    x.dtype = dtype(g);
    x.weight_gradient =
        g.optional_choice<bool>("op", {{"forward", false}, {"weight_gradient", true}}, false);
    x.tokens = static_cast<int>(g.integer("tokens", 1, 1 << 30));
    x.n = static_cast<int>(g.integer("n", 1, 1 << 30));
    x.k = static_cast<int>(g.integer("k", 1, 1 << 30));
    x.seconds = read_spread(g, "ms", core::kMillisecond);
    (void)g.optional_number("tflops", Range::kPositive);  // derived, written for readers
  });
  read_rows(m, "memory", [&](ObjectReader& b) {
    hw::BandwidthMeasurement& x = p.bandwidths.emplace_back();
    x.op = b.optional_choice<std::string>("op",
                                          {{"read", "read"},
                                           {"write", "write"},
                                           {"copy", "copy"},
                                           {"host_to_device", "host_to_device"},
                                           {"device_to_host", "device_to_host"}},
                                          "read");
    x.bytes = b.number("bytes", Range::kPositive);
    x.seconds = read_spread(b, "ms", core::kMillisecond);
    (void)b.optional_number("gb_per_s", Range::kPositive);
  });
  read_rows(m, "attention", [&](ObjectReader& a) {
    hw::AttentionMeasurement& x = p.attention.emplace_back();
    x.dtype = dtype(a);
    x.batch = static_cast<int>(a.integer("batch", 1, 1 << 30));
    x.length = static_cast<int>(a.integer("length", 1, 1 << 30));
    read_heads(a, x);
    x.bytes = a.number("bytes", Range::kPositive);
    x.seconds = read_spread(a, "ms", core::kMillisecond);
    (void)a.optional_number("gb_per_s", Range::kPositive);
  });
  read_rows(m, "pass_attention", [&](ObjectReader& a) {
    hw::PassAttentionMeasurement& x = p.pass_attention.emplace_back();
    x.dtype = dtype(a);
    x.sequences = static_cast<int>(a.integer("sequences", 1, 1 << 30));
    x.length = static_cast<int>(a.integer("length", 1, 1 << 30));
    read_heads(a, x);
    ObjectReader forward = a.object("forward");
    x.forward = read_spread(forward, "ms", core::kMillisecond);
    ObjectReader backward = a.object("backward");
    x.backward = read_spread(backward, "ms", core::kMillisecond);
    (void)a.optional_number("tflops", Range::kPositive);
  });
  read_rows(m, "optimizer", [&](ObjectReader& o) {
    hw::OptimizerMeasurement& x = p.optimizer_steps.emplace_back();
    x.dtype = dtype(o);
    x.parameters = o.number("parameters", Range::kPositive);
    x.bytes = o.number("bytes", Range::kPositive);
    x.seconds = read_spread(o, "ms", core::kMillisecond);
    (void)o.optional_number("gb_per_s", Range::kPositive);
  });
  read_rows(m, "collectives", [&](ObjectReader& c) {
    hw::CollectiveMeasurement& x = p.collectives.emplace_back();
    x.op = c.optional_choice<std::string>("op",
                                          {{"all_reduce", "all_reduce"},
                                           {"all_gather", "all_gather"},
                                           {"reduce_scatter", "reduce_scatter"},
                                           {"broadcast", "broadcast"}},
                                          "all_reduce");
    // Before they were measured in two types, in the GEMMs' (the settings').
    x.dtype = c.has("dtype") ? dtype(c) : (p.settings ? p.settings->dtype : "bf16");
    x.ranks = static_cast<int>(c.integer("ranks", 2, 1 << 20));
    x.bytes = c.number("bytes", Range::kPositive);
    x.seconds = read_spread(c, "ms", core::kMillisecond);
    x.bus_bandwidth = c.number("bus_gb_per_s", Range::kPositive) * core::kGBps;
    x.bucket = c.optional_number("bucket_bytes", Range::kPositive).value_or(0.0);
  });
  read_rows(m, "transfers", [&](ObjectReader& t) {
    hw::TransferMeasurement& x = p.transfers.emplace_back();
    x.from = t.string("from");
    x.to = t.string("to");
    if (x.from == x.to) throw core::InputError(core::located(t.where("to"), "expected an endpoint other than from"));
    x.bytes = t.number("bytes", Range::kPositive);
    x.seconds = read_spread(t, "ms", core::kMillisecond);
    (void)t.optional_number("gb_per_s", Range::kPositive);
  });
}

void read_fitted(ObjectReader& f, hw::GpuProfile& p, bool v2) {
  p.gemm_large_flops = f.optional_quantity("gemm_large_tflops", core::kTflops);
  p.gemm_small_flops = f.optional_quantity("gemm_small_tflops", core::kTflops);
  p.memory_bandwidth = f.optional_quantity("memory_bandwidth_gb_per_s", core::kGBps);
  p.intra_node_bandwidth = f.optional_quantity("intra_node_bandwidth_gb_per_s", core::kGBps);
  p.allreduce_bus_bandwidth = f.optional_quantity("allreduce_bus_gb_per_s", core::kGBps);
  if (!v2) return;
  p.fp32_flops = f.optional_quantity("fp32_tflops", core::kTflops);
  read_rows(f, "collectives_bus_gb_per_s", [&](ObjectReader& c) {
    hw::GpuProfile::CollectiveRate& x = p.collective_rates.emplace_back();
    (void)c.string("op");  // required
    x.op = c.optional_choice<std::string>(
        "op", {{"all_reduce", "all_reduce"}, {"all_gather", "all_gather"}, {"reduce_scatter", "reduce_scatter"}}, "");
    x.dtype = dtype(c);
    x.bus_bandwidth = c.number("bus_gb_per_s", Range::kPositive) * core::kGBps;
  });
  p.launch_overhead = f.optional_quantity("launch_overhead_us", kMicrosecond);
  p.host_to_device_bandwidth = f.optional_quantity("host_to_device_gb_per_s", core::kGBps);
  p.decode_attention_bandwidth = f.optional_quantity("decode_attention_gb_per_s", core::kGBps);
  p.decode_attention_flops = f.optional_quantity("decode_attention_tflops", core::kTflops);
  p.attention_flops = f.optional_quantity("attention_tflops", core::kTflops);
  p.intra_node_latency = f.optional_quantity("intra_node_latency_us", kMicrosecond);
  p.optimizer_bandwidth = f.optional_quantity("optimizer_gb_per_s", core::kGBps);
  p.copy_bandwidth = f.optional_quantity("copy_gb_per_s", core::kGBps);
  p.gemm_width_half = f.optional_number("gemm_width_half", Range::kNonNegative);
  p.gemm_reduction_share = f.optional_number("gemm_reduction_share", Range::kUnitInterval);
  p.pass_efficiency = f.optional_number("pass_efficiency", Range::kFraction);
  // Shares of what they read and write, up to hw::kMostReadWriteShare (checked on adoption).
  p.optimizer_efficiency = f.optional_number("optimizer_efficiency", Range::kPositive);
  p.copy_efficiency = f.optional_number("copy_efficiency", Range::kPositive);
  p.prefill_efficiency = f.optional_number("prefill_efficiency", Range::kFraction);
  if (auto ms = f.optional_number("decode_step_overhead_ms", Range::kNonNegative)) {
    p.decode_step_overhead = *ms * core::kMillisecond;
  }
  if (auto ms = f.optional_number("decode_allreduce_ms", Range::kNonNegative)) {
    p.decode_allreduce = *ms * core::kMillisecond;
  }
  p.tp_wait = f.optional_number("tp_wait", Range::kNonNegative);
  if (auto c = f.optional_object("calibration")) {
    hw::GpuProfile::Calibration calibration;
    calibration.plan = c->string("plan");
    calibration.iterations = static_cast<int>(c->integer("iterations", 1, 1000000));
    calibration.runs = static_cast<int>(c->optional_integer("runs", 1, 1000000).value_or(1));
    read_rows(*c, "tasks", [&](ObjectReader& t) {
      calibration.tasks.push_back({t.string("task"), t.number("measured_s", Range::kNonNegative),
                                   t.number("before_s", Range::kNonNegative), t.number("after_s", Range::kNonNegative)});
    });
    c->finish();
    p.calibration = std::move(calibration);
  }
  // The fitted curve may be absent (an empty one is none); a width's must have points.
  const auto read_curve = [](ObjectReader& from, bool required, std::vector<std::pair<double, double>>& curve,
                             const char* key = "gemm_curve") {
    if (!required && !from.has(key)) return;
    double previous = 0;
    for (ObjectReader& point : from.object_array(key, !required)) {
      const double tokens = point.number("tokens", Range::kPositive);
      if (tokens <= previous) {
        throw core::InputError(core::located(point.where("tokens"), "expected tokens in ascending order"));
      }
      previous = tokens;
      curve.emplace_back(tokens, point.number("tflops", Range::kPositive) * core::kTflops);
      point.finish();
    }
  };
  read_curve(f, false, p.gemm_curve);
  read_curve(f, false, p.weight_gradient_curve, "weight_gradient_curve");
  double previous_width = 0;
  read_rows(f, "gemm_curves", [&](ObjectReader& at) {
    const double width = at.number("width", Range::kPositive);
    if (width <= previous_width) {
      throw core::InputError(core::located(at.where("width"), "expected widths in ascending order"));
    }
    previous_width = width;
    hw::WidthCurve w{width, {}};
    read_curve(at, true, w.curve);
    p.gemm_curves.push_back(std::move(w));
  });
}

}  // namespace

hw::GpuProfile parse_profile(std::string_view text, std::string_view file) {
  const detail::Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  const bool v2 = json.is_object() && json.contains("schema") && json["schema"] == "hetrl.profile/v2";
  detail::check_schema(root, v2 ? "hetrl.profile/v2" : "hetrl.profile/v1");
  hw::GpuProfile profile;
  profile.provenance = detail::read_provenance(root);
  profile.gpu_type = root.string("gpu_type");
  profile.device_name = root.optional_string("device_name").value_or("");
  profile.host = root.optional_string("host").value_or("");
  if (!v2) {
    ObjectReader m = root.object("measurements");
    read_fitted(m, profile, false);
    m.finish();
    root.finish();
    return profile;
  }
  if (auto d = root.optional_object("device")) {
    hw::DeviceDescription device;
    device.backend = d->optional_choice<std::string>("backend", {{"cpu", "cpu"}, {"cuda", "cuda"}}, "cuda");
    device.name = d->string("name");
    device.count = static_cast<int>(d->optional_integer("count", 1, 1 << 20).value_or(1));
    device.memory = d->number("memory_gib", Range::kPositive) * core::kGiB;
    device.compute_units = static_cast<int>(d->optional_integer("compute_units", 1, 1 << 24).value_or(1));
    device.driver = d->optional_string("driver").value_or("");
    device.runtime = d->optional_string("runtime").value_or("");
    d->finish();
    if (profile.device_name.empty()) profile.device_name = device.name;
    profile.device = device;
  }
  if (auto s = root.optional_object("settings")) {
    hw::ProfileSettings settings;
    settings.quick = s->optional_boolean("quick").value_or(false);
    settings.dtype = dtype(*s);
    settings.repeats = static_cast<int>(s->optional_integer("repeats", 1, 1000000).value_or(1));
    settings.passes = static_cast<int>(s->optional_integer("passes", 1, settings.repeats).value_or(1));
    s->finish();
    profile.settings = settings;
  }
  if (auto m = root.optional_object("measurements")) {
    read_measurements_v2(*m, profile);
    m->finish();
  }
  if (auto f = root.optional_object("fitted")) {
    read_fitted(*f, profile, true);
    f->finish();
  }
  root.finish();
  return profile;
}

hw::GpuProfile read_profile(const std::string& path) { return parse_profile(read_text_file(path), path); }

std::string profile_to_json(const hw::GpuProfile& p) {
  OrderedJson out;
  out["schema"] = "hetrl.profile/v2";
  detail::write_provenance(out, p.provenance);
  out["gpu_type"] = p.gpu_type;
  if (!p.host.empty()) out["host"] = p.host;
  if (p.device) {
    const hw::DeviceDescription& d = *p.device;
    out["device"] = {{"backend", d.backend},
                     {"name", d.name},
                     {"count", d.count},
                     {"memory_gib", detail::file_units(d.memory / core::kGiB)},
                     {"compute_units", d.compute_units},
                     {"driver", d.driver},
                     {"runtime", d.runtime}};
  }
  if (p.settings) {
    out["settings"] = {{"quick", p.settings->quick}, {"dtype", p.settings->dtype}, {"repeats", p.settings->repeats},
                       {"passes", p.settings->passes}};
  }
  OrderedJson m = OrderedJson::object();
  if (p.launch) {
    OrderedJson launch;
    write_spread(launch, *p.launch, "us", kMicrosecond);
    m["launch"] = std::move(launch);
  }
  OrderedJson gemm = OrderedJson::array();
  for (const hw::GemmMeasurement& g : p.gemms) {
    OrderedJson row{{"op", g.weight_gradient ? "weight_gradient" : "forward"},
                    {"dtype", g.dtype},
                    {"tokens", g.tokens},
                    {"n", g.n},
                    {"k", g.k}};
    write_spread(row, g.seconds, "ms", core::kMillisecond);
    row["tflops"] = derived(g.flops() / g.seconds.median / core::kTflops);
    gemm.push_back(std::move(row));
  }
  m["gemm"] = std::move(gemm);
  m["memory"] = rated_rows(p.bandwidths, [](const hw::BandwidthMeasurement& b) {
    return OrderedJson{{"op", b.op}, {"bytes", b.bytes}};
  });
  m["attention"] = rated_rows(p.attention, [](const hw::AttentionMeasurement& a) {
    return OrderedJson{{"dtype", a.dtype},       {"batch", a.batch},       {"length", a.length}, {"heads", a.heads},
                       {"kv_heads", a.kv_heads}, {"head_dim", a.head_dim}, {"bytes", a.bytes}};
  });
  OrderedJson pass_attention = OrderedJson::array();
  for (const hw::PassAttentionMeasurement& a : p.pass_attention) {
    OrderedJson row{{"dtype", a.dtype},       {"sequences", a.sequences}, {"length", a.length}, {"heads", a.heads},
                    {"kv_heads", a.kv_heads}, {"head_dim", a.head_dim}};
    OrderedJson forward, backward;
    write_spread(forward, a.forward, "ms", core::kMillisecond);
    write_spread(backward, a.backward, "ms", core::kMillisecond);
    row["forward"] = std::move(forward);
    row["backward"] = std::move(backward);
    row["tflops"] = derived(a.flops_per_second() / core::kTflops);
    pass_attention.push_back(std::move(row));
  }
  m["pass_attention"] = std::move(pass_attention);
  m["optimizer"] = rated_rows(p.optimizer_steps, [](const hw::OptimizerMeasurement& o) {
    return OrderedJson{{"dtype", o.dtype}, {"parameters", o.parameters}, {"bytes", o.bytes}};
  });
  OrderedJson collectives = OrderedJson::array();
  for (const hw::CollectiveMeasurement& c : p.collectives) {
    OrderedJson row{{"op", c.op}, {"dtype", c.dtype}, {"ranks", c.ranks}, {"bytes", c.bytes}};
    write_spread(row, c.seconds, "ms", core::kMillisecond);
    row["bus_gb_per_s"] = detail::file_units(c.bus_bandwidth / core::kGBps);
    if (c.bucket > 0) row["bucket_bytes"] = c.bucket;
    collectives.push_back(std::move(row));
  }
  m["collectives"] = std::move(collectives);
  m["transfers"] = rated_rows(p.transfers, [](const hw::TransferMeasurement& t) {
    return OrderedJson{{"from", t.from}, {"to", t.to}, {"bytes", t.bytes}};
  });
  out["measurements"] = std::move(m);
  OrderedJson f = OrderedJson::object();
  const auto put = [&](const char* key, const std::optional<double>& value, double unit) {
    if (value) f[key] = detail::file_units(*value / unit);
  };
  put("gemm_large_tflops", p.gemm_large_flops, core::kTflops);
  put("gemm_small_tflops", p.gemm_small_flops, core::kTflops);
  put("fp32_tflops", p.fp32_flops, core::kTflops);
  const auto curve_json = [](const std::vector<std::pair<double, double>>& points) {
    OrderedJson curve = OrderedJson::array();
    for (const auto& [tokens, flops] : points) {
      curve.push_back({{"tokens", tokens}, {"tflops", detail::file_units(flops / core::kTflops)}});
    }
    return curve;
  };
  if (!p.gemm_curve.empty()) f["gemm_curve"] = curve_json(p.gemm_curve);
  if (!p.gemm_curves.empty()) {
    OrderedJson curves = OrderedJson::array();
    for (const hw::WidthCurve& w : p.gemm_curves) {
      OrderedJson at = OrderedJson::object();
      at["width"] = w.width;
      at["gemm_curve"] = curve_json(w.curve);
      curves.push_back(std::move(at));
    }
    f["gemm_curves"] = std::move(curves);
  }
  if (!p.weight_gradient_curve.empty()) f["weight_gradient_curve"] = curve_json(p.weight_gradient_curve);
  put("memory_bandwidth_gb_per_s", p.memory_bandwidth, core::kGBps);
  put("intra_node_bandwidth_gb_per_s", p.intra_node_bandwidth, core::kGBps);
  put("allreduce_bus_gb_per_s", p.allreduce_bus_bandwidth, core::kGBps);
  if (!p.collective_rates.empty()) {
    OrderedJson rates = OrderedJson::array();
    for (const hw::GpuProfile::CollectiveRate& r : p.collective_rates) {
      rates.push_back({{"op", r.op}, {"dtype", r.dtype}, {"bus_gb_per_s", detail::file_units(r.bus_bandwidth / core::kGBps)}});
    }
    f["collectives_bus_gb_per_s"] = std::move(rates);
  }
  put("host_to_device_gb_per_s", p.host_to_device_bandwidth, core::kGBps);
  put("decode_attention_gb_per_s", p.decode_attention_bandwidth, core::kGBps);
  put("decode_attention_tflops", p.decode_attention_flops, core::kTflops);
  put("attention_tflops", p.attention_flops, core::kTflops);
  put("optimizer_gb_per_s", p.optimizer_bandwidth, core::kGBps);
  put("copy_gb_per_s", p.copy_bandwidth, core::kGBps);
  put("launch_overhead_us", p.launch_overhead, kMicrosecond);
  put("intra_node_latency_us", p.intra_node_latency, kMicrosecond);
  put("gemm_width_half", p.gemm_width_half, 1.0);
  put("gemm_reduction_share", p.gemm_reduction_share, 1.0);
  put("pass_efficiency", p.pass_efficiency, 1.0);
  put("optimizer_efficiency", p.optimizer_efficiency, 1.0);
  put("copy_efficiency", p.copy_efficiency, 1.0);
  put("prefill_efficiency", p.prefill_efficiency, 1.0);
  put("decode_step_overhead_ms", p.decode_step_overhead, core::kMillisecond);
  put("decode_allreduce_ms", p.decode_allreduce, core::kMillisecond);
  put("tp_wait", p.tp_wait, 1.0);
  if (p.calibration) {
    OrderedJson tasks = OrderedJson::array();
    for (const hw::GpuProfile::CalibrationRow& row : p.calibration->tasks) {
      tasks.push_back({{"task", row.task},
                       {"measured_s", detail::file_units(row.measured)},
                       {"before_s", detail::file_units(row.before)},
                       {"after_s", detail::file_units(row.after)}});
    }
    f["calibration"] = {{"plan", p.calibration->plan},
                        {"iterations", p.calibration->iterations},
                        {"runs", p.calibration->runs},
                        {"tasks", std::move(tasks)}};
  }
  out["fitted"] = std::move(f);
  return detail::dump(out);
}

}  // namespace hetrl::io
