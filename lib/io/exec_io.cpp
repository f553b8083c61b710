#include "io/exec_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/error.h"
#include "device/numeric.h"
#include "exec/calibrate.h"
#include "io/files.h"
#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {

using detail::OrderedJson;

std::string exec_report_json(const ExecReportInputs& inputs, const exec::RunResult& run,
                             const plan::Prediction& predicted, const std::vector<std::vector<double>>& simulated,
                             const workload::TaskGraph& graph) {
  OrderedJson out;
  out["schema"] = "hetrl.execreport/v1";
  core::Provenance provenance{
      "hetrl-exec",
      HETRL_VERSION,
      {{"cluster", inputs.cluster_hash}, {"workload", inputs.workload_hash}, {"plan", inputs.plan_hash}}};
  detail::write_provenance(out, provenance);
  out["plan"] = inputs.plan_file;
  out["backend"] = inputs.backend;
  out["device"] = inputs.device;
  out["dtype"] = device::dtype_name(inputs.settings.dtype);
  out["iterations"] = inputs.settings.iterations;
  out["warmup"] = inputs.warmup;
  out["seed"] = inputs.settings.seed;
  out["temperature"] = inputs.settings.temperature;
  out["learning_rate"] = inputs.settings.learning_rate;
  out["batch_scale"] = inputs.batch_scale;
  OrderedJson models = OrderedJson::array();
  for (const workload::ModelArch& m : inputs.models) {
    models.push_back({{"name", m.name},
                      {"layers", m.layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"head_dim", m.head_dim},
                      {"ffn_hidden", m.ffn_hidden},
                      {"vocab", m.vocab}});
  }
  out["models"] = std::move(models);
  out["parameter_bytes"] = run.parameter_bytes;
  // Per device (a process under mpirun), its memory at its most, what was in use for each purpose
  // then and, where one process stands for one plan GPU, the cost model's need of that GPU by term.
  OrderedJson devices = OrderedJson::array();
  for (const exec::DeviceMemory& memory : run.devices) {
    OrderedJson device = {{"peak_bytes", std::llround(memory.peak_bytes())}};
    OrderedJson at_peak = OrderedJson::object();
    for (const device::Purpose purpose : device::kAllPurposes) {
      at_peak[device::purpose_name(purpose)] = memory.peak[static_cast<std::size_t>(purpose)];
    }
    device["peak_by_purpose"] = std::move(at_peak);
    if (const std::optional<plan::MemoryUse>& need = memory.predicted) {
      device["predicted_bytes"] = std::llround(need->used());
      device["predicted_by_purpose"] = {{"weights", std::llround(need->weights)},
                                        {"gradients", std::llround(need->gradients)},
                                        {"optimizer", std::llround(need->optimizer)},
                                        {"activations", std::llround(need->activations)},
                                        {"kv_cache", std::llround(need->kv_cache)}};
    }
    devices.push_back(std::move(device));
  }
  out["devices"] = std::move(devices);
  out["predicted_iteration_seconds"] = detail::file_units(predicted.iteration_seconds);
  // Per task: the measured seconds of each iteration (its slowest replica's), the replicas' of
  // each iteration, and the prediction.
  OrderedJson tasks = OrderedJson::object();
  for (std::size_t t = 0; t < graph.tasks.size(); ++t) {
    OrderedJson seconds = OrderedJson::array(), replicas = OrderedJson::array(), tokens = OrderedJson::array();
    bool ran = false;
    for (const exec::IterationMeasurement& it : run.iterations) {
      const exec::TaskMeasurement& m = it.tasks[t];
      ran = ran || m.ran;
      seconds.push_back(detail::file_units(m.seconds));
      OrderedJson r = OrderedJson::array();
      for (double s : m.replica_seconds) r.push_back(detail::file_units(s));
      replicas.push_back(std::move(r));
      tokens.push_back(m.tokens);
    }
    if (!ran) continue;
    OrderedJson sim = OrderedJson::array();
    for (const std::vector<double>& it : simulated) {
      if (it[t] >= 0) sim.push_back(detail::file_units(it[t]));
    }
    OrderedJson task = {{"predicted_seconds", detail::file_units(predicted.tasks[t].alone())},
                        {"simulated_seconds", std::move(sim)},
                        {"seconds", std::move(seconds)},
                        {"replica_seconds", std::move(replicas)},
                        {"tokens", std::move(tokens)}};
    // A generation, scoring or training task's parts: the prediction's and, per iteration, the
    // slowest replica's.
    const std::vector<exec::TaskPart> parts = exec::task_parts(graph.tasks[t].kind, predicted.tasks[t].terms, run, t);
    if (!parts.empty()) {
      OrderedJson by_part = OrderedJson::object();
      for (const exec::TaskPart& part : parts) {
        OrderedJson measured = OrderedJson::array();
        for (const double s : part.measured) measured.push_back(detail::file_units(s));
        by_part[part.key] = {{"predicted_seconds", detail::file_units(part.predicted)}, {"seconds", std::move(measured)}};
        if (!part.calls.empty()) by_part[part.key]["calls"] = part.calls;
      }
      task["parts"] = std::move(by_part);
    }
    tasks[graph.tasks[t].name] = std::move(task);
  }
  out["tasks"] = std::move(tasks);
  OrderedJson iterations = OrderedJson::array();
  for (const exec::IterationMeasurement& it : run.iterations) {
    iterations.push_back({{"policy_loss", detail::file_units(it.policy_loss)},
                          {"value_loss", detail::file_units(it.value_loss)},
                          {"policy_grad_norm", detail::file_units(it.policy_grad_norm)},
                          {"value_grad_norm", detail::file_units(it.value_grad_norm)},
                          {"mean_score", detail::file_units(it.mean_score)},
                          {"decode_steps", it.decode_steps},
                          {"prefill_passes", it.prefill_passes}});
  }
  out["iteration_stats"] = std::move(iterations);
  // Each iteration as run: its first task's start and last task's end (seconds from the run's
  // start) and its period, from the previous one's end.
  OrderedJson as_run = OrderedJson::array();
  for (const exec::IterationMeasurement& it : run.iterations) {
    as_run.push_back({{"start_seconds", detail::file_units(it.start)},
                      {"end_seconds", detail::file_units(it.end)},
                      {"period_seconds", detail::file_units(it.period)}});
  }
  out["iterations_as_run"] = std::move(as_run);
  return detail::dump(out);
}

namespace {

using detail::Json;
using detail::ObjectReader;
using detail::Range;

// An array of seconds, each a finite number not below 0.
std::vector<double> seconds_array(ObjectReader& r, std::string_view key) {
  const Json& value = r.value(key);
  if (!value.is_array()) r.fail(key, fmt::format("expected an array of seconds, found {}", detail::describe(value)));
  std::vector<double> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const Json& v = value[i];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      throw core::InputError(core::located(fmt::format("{}/{}", r.where(key), i),
                                           fmt::format("expected seconds (a number not below 0), found {}",
                                                       detail::describe(v))));
    }
    out.push_back(v.get<double>());
  }
  return out;
}

// A part's seconds, one per iteration the task ran, spread over the measured iterations (0
// where it did not run); with `calls`, also the count of collectives in each (a whole number
// from 0), spread alike.
std::vector<double> part_seconds(ObjectReader& parts, std::string_view key, const std::vector<double>& task_seconds,
                                 std::vector<long long>* calls = nullptr) {
  ObjectReader part = parts.object(key);
  (void)part.number("predicted_seconds", Range::kNonNegative);
  const std::vector<double> measured = seconds_array(part, "seconds");
  std::vector<long long> counted;
  if (calls) {
    const Json& value = part.value("calls");
    if (!value.is_array() || value.size() != measured.size()) {
      part.fail("calls", fmt::format("expected an array of {} counts, one for each of the part's seconds, found {}",
                                     measured.size(),
                                     value.is_array() ? fmt::format("{} of them", value.size()) : detail::describe(value)));
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (!value[i].is_number_unsigned()) {
        throw core::InputError(core::located(fmt::format("{}/{}", part.where("calls"), i),
                                             fmt::format("expected a whole number from 0, found {}",
                                                         detail::describe(value[i]))));
      }
      counted.push_back(static_cast<long long>(value[i].get<unsigned long long>()));
    }
  }
  part.finish();
  const auto ran = static_cast<std::size_t>(
      std::count_if(task_seconds.begin(), task_seconds.end(), [](double v) { return v > 0; }));
  if (measured.size() != ran) {
    parts.fail(key, fmt::format("expected seconds for each of the {} iterations the task ran, found {}", ran,
                                measured.size()));
  }
  std::vector<double> out(task_seconds.size(), 0.0);
  if (calls) calls->assign(task_seconds.size(), 0);
  std::size_t next = 0;
  for (std::size_t i = 0; i < task_seconds.size(); ++i) {
    if (task_seconds[i] <= 0) continue;
    if (calls) (*calls)[i] = counted[next];
    out[i] = measured[next++];
  }
  return out;
}

}  // namespace

ExecRecord parse_exec_report(std::string_view text, std::string_view file) {
  const Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.execreport/v1");
  ExecRecord r;
  const core::Provenance provenance = detail::read_provenance(root);
  for (const auto& [name, hash] : provenance.inputs) {
    if (name == "plan") r.plan_hash = hash;
    if (name == "workload") r.workload_hash = hash;
  }
  r.backend = root.string("backend");
  r.device = root.string("device");
  r.dtype = root.string("dtype");
  r.iterations = static_cast<int>(root.integer("iterations", 1, 1000000));
  if (auto warmup = root.optional_integer("warmup", 0, 1000000)) r.warmup = static_cast<int>(*warmup);
  if (const Json& seed = root.value("seed"); seed.is_number_unsigned()) {
    r.seed = seed.get<unsigned long long>();
  } else {
    root.fail("seed", fmt::format("expected a whole number from 0, found {}", detail::describe(seed)));
  }
  r.batch_scale = root.number("batch_scale", Range::kPositive);
  for (ObjectReader& m : root.object_array("models", true)) {
    workload::ModelArch& a = r.models.emplace_back();
    a.name = m.string("name");
    a.layers = static_cast<int>(m.integer("layers", 1, 1 << 20));
    a.hidden = static_cast<int>(m.integer("hidden", 1, 1 << 30));
    a.heads = static_cast<int>(m.integer("heads", 1, 1 << 20));
    a.kv_heads = static_cast<int>(m.integer("kv_heads", 1, 1 << 20));
    a.head_dim = static_cast<int>(m.integer("head_dim", 1, 1 << 20));
    a.ffn_hidden = static_cast<int>(m.integer("ffn_hidden", 1, 1 << 30));
    a.vocab = static_cast<int>(m.integer("vocab", 1, 1 << 30));
    m.finish();
  }
  for (auto& [name, t] : root.object_map("tasks")) {
    ExecRecord::Task& task = r.tasks.emplace_back();
    task.name = name;
    task.seconds = seconds_array(t, "seconds");
    if (task.seconds.size() != static_cast<std::size_t>(r.iterations)) {
      t.fail("seconds", fmt::format("expected one for each of the report's {} iterations, found {}", r.iterations,
                                    task.seconds.size()));
    }
    if (auto parts = t.optional_object("parts")) {
      if (parts->has("optimizer_step")) task.optimizer_steps = part_seconds(*parts, "optimizer_step", task.seconds);
      if (parts->has("prefill")) task.prefills = part_seconds(*parts, "prefill", task.seconds);
      if (parts->has("decode_all_reduce")) {
        task.decode_all_reduce = part_seconds(*parts, "decode_all_reduce", task.seconds, &task.decode_all_reduces);
      }
      if (parts->has("tp_all_reduce")) {
        std::vector<long long> calls;
        task.pass_all_reduce = part_seconds(*parts, "tp_all_reduce", task.seconds, &calls);
      }
    }
  }
  return r;
}

ExecRecord read_exec_report(const std::string& path) { return parse_exec_report(read_text_file(path), path); }

}  // namespace hetrl::io
