#include "io/sim_io.h"

#include <fmt/format.h>

#include <map>

#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {

using detail::OrderedJson;

std::string sim_report_json(const SimReportInputs& inputs, const sim::SimSummary& summary,
                            const sim::Recorder& recorder, const plan::Prediction& predicted,
                            const workload::TaskGraph& graph) {
  OrderedJson out;
  out["schema"] = "hetrl.simreport/v1";
  core::Provenance provenance{"hetrl-sim", HETRL_VERSION,
                              {{"cluster", inputs.cluster_hash}, {"workload", inputs.workload_hash}}};
  detail::write_provenance(out, provenance);
  out["plan"] = inputs.plan_file;
  out["iterations"] = inputs.params.iterations;
  out["seed"] = inputs.params.seed;
  out["events"] = summary.events;
  out["iteration_seconds"] = detail::file_units(summary.iteration_seconds);
  out["predicted_iteration_seconds"] = detail::file_units(predicted.iteration_seconds);
  out["samples_per_second"] = detail::file_units(summary.samples_per_second);
  out["tokens_per_second"] = detail::file_units(summary.tokens_per_second);
  OrderedJson ends = OrderedJson::array();
  for (double e : summary.iteration_end) ends.push_back(detail::file_units(e));
  out["iteration_end_seconds"] = std::move(ends);
  // Per task: the mean time per iteration, simulated and predicted.
  std::map<int, std::pair<double, int>> per_task;
  for (const sim::TaskRun& r : recorder.tasks) {
    auto& [sum, count] = per_task[r.task];
    sum += r.end - r.start;
    ++count;
  }
  OrderedJson tasks = OrderedJson::object();
  for (const auto& [task, stats] : per_task) {
    tasks[graph.tasks[task].name] = {
        {"seconds", detail::file_units(stats.first / stats.second)},
        {"predicted_seconds", detail::file_units(predicted.tasks[task].seconds)}};
  }
  out["tasks"] = std::move(tasks);
  OrderedJson groups = OrderedJson::array();
  const double iterations = std::max(1, inputs.params.iterations);
  for (double busy : summary.group_busy) {
    groups.push_back({{"busy_seconds_per_iteration", detail::file_units(busy / iterations)},
                      {"idle_seconds_per_iteration",
                       detail::file_units(std::max(0.0, summary.end - busy) / iterations)}});
  }
  out["groups"] = std::move(groups);
  out["generation_tail_seconds_per_iteration"] = detail::file_units(summary.tail_seconds / iterations);
  return detail::dump(out);
}

std::string chrome_trace_json(const sim::Recorder& recorder, const workload::TaskGraph& graph,
                              int groups) {
  OrderedJson events = OrderedJson::array();
  // Process names: one per group, and one for the CPU and the weight sync.
  for (int g = 0; g < groups; ++g) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", g},
                      {"args", {{"name", fmt::format("group {}", g)}}}});
  }
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", groups},
                    {"args", {{"name", "CPU and weight sync"}}}});
  auto micros = [](double seconds) { return detail::file_units(seconds * 1e6); };
  for (const sim::TaskRun& r : recorder.tasks) {
    events.push_back({{"name", graph.tasks[r.task].name}, {"cat", "task"}, {"ph", "X"},
                      {"ts", micros(r.start)}, {"dur", micros(r.end - r.start)},
                      {"pid", r.group >= 0 ? r.group : groups}, {"tid", 0},
                      {"args", {{"iteration", r.iteration}}}});
  }
  for (const sim::ReplicaRun& r : recorder.replicas) {
    events.push_back({{"name", fmt::format("{} replica {}", graph.tasks[r.task].name, r.replica)},
                      {"cat", "replica"}, {"ph", "X"}, {"ts", micros(r.start)},
                      {"dur", micros(r.end - r.start)}, {"pid", r.group}, {"tid", 1 + r.replica},
                      {"args", {{"iteration", r.iteration}, {"sequences", r.sequences},
                                {"decode_steps", r.steps},
                                {"tail_seconds", detail::file_units(r.tail_seconds)}}}});
  }
  OrderedJson out;
  out["traceEvents"] = std::move(events);
  out["displayTimeUnit"] = "ms";
  return detail::dump(out);
}

}  // namespace hetrl::io
