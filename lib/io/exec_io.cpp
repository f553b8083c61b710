#include "io/exec_io.h"

#include <vector>

#include "device/numeric.h"
#include "exec/calibrate.h"
#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {

using detail::OrderedJson;

std::string exec_report_json(const ExecReportInputs& inputs, const exec::RunResult& run,
                             const plan::Prediction& predicted, const std::vector<std::vector<double>>& simulated,
                             const workload::TaskGraph& graph) {
  OrderedJson out;
  out["schema"] = "hetrl.execreport/v1";
  core::Provenance provenance{"hetrl-exec", HETRL_VERSION,
                              {{"cluster", inputs.cluster_hash}, {"workload", inputs.workload_hash}}};
  detail::write_provenance(out, provenance);
  out["plan"] = inputs.plan_file;
  out["backend"] = inputs.backend;
  out["device"] = inputs.device;
  out["dtype"] = device::dtype_name(inputs.settings.dtype);
  out["iterations"] = inputs.settings.iterations;
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
    // A generation or training task's parts: the prediction's and, per iteration, the slowest
    // replica's.
    const std::vector<exec::TaskPart> parts = exec::task_parts(graph.tasks[t].kind, predicted.tasks[t].terms, run, t);
    if (!parts.empty()) {
      OrderedJson by_part = OrderedJson::object();
      for (const exec::TaskPart& part : parts) {
        OrderedJson measured = OrderedJson::array();
        for (const double s : part.measured) measured.push_back(detail::file_units(s));
        by_part[part.key] = {{"predicted_seconds", detail::file_units(part.predicted)}, {"seconds", std::move(measured)}};
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
                          {"decode_steps", it.decode_steps}});
  }
  out["iteration_stats"] = std::move(iterations);
  return detail::dump(out);
}

}  // namespace hetrl::io
