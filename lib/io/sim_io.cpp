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
  out["link_contention"] = inputs.params.link_contention;
  // The links that carried traffic: utilisation is the bytes carried over what the link could
  // have carried during the whole run.
  OrderedJson links = OrderedJson::array();
  for (std::size_t l = 0; l < summary.links.size(); ++l) {
    const sim::LinkUse& use = summary.link_use[l];
    if (use.bytes <= 0) continue;
    const sim::Link& link = summary.links[l];
    links.push_back(
        {{"name", link.name},
         {"capacity_bytes_per_second", detail::file_units(link.capacity)},
         {"bytes_per_iteration", detail::file_units(use.bytes / iterations)},
         {"busy_seconds_per_iteration", detail::file_units(use.busy_seconds / iterations)},
         {"utilisation", detail::file_units(summary.end > 0 ? use.bytes / (link.capacity * summary.end) : 0.0)}});
  }
  out["links"] = std::move(links);
  OrderedJson transfers = OrderedJson::array();
  for (const sim::TransferRun& t : recorder.transfers) {
    transfers.push_back({{"iteration", t.iteration},
                         {"from", graph.tasks[t.from_task].name},
                         {"to", graph.tasks[t.to_task].name},
                         {"from_group", t.from_group},
                         {"to_group", t.to_group},
                         {"bytes", detail::file_units(t.bytes)},
                         {"start_seconds", detail::file_units(t.start)},
                         {"end_seconds", detail::file_units(t.end)}});
  }
  out["transfers"] = std::move(transfers);
  return detail::dump(out);
}

std::string chrome_trace_json(const sim::Recorder& recorder, const sim::SimSummary& summary,
                              const workload::TaskGraph& graph, int groups) {
  // Printed event by event: a long simulation has millions, and their tree would take ten
  // times the memory of the text.
  std::string out = "{\n";
  detail::ArrayWriter events(out, "traceEvents");
  // Process names: one per group, and one for the CPU and the weight sync.
  for (int g = 0; g < groups; ++g) {
    events.add({{"name", "process_name"}, {"ph", "M"}, {"pid", g},
                {"args", {{"name", fmt::format("group {}", g)}}}});
  }
  events.add({{"name", "process_name"}, {"ph", "M"}, {"pid", groups},
              {"args", {{"name", "CPU and weight sync"}}}});
  auto micros = [](double seconds) { return detail::file_units(seconds * 1e6); };
  for (const sim::TaskRun& r : recorder.tasks) {
    events.add({{"name", graph.tasks[r.task].name}, {"cat", "task"}, {"ph", "X"},
                {"ts", micros(r.start)}, {"dur", micros(r.end - r.start)},
                {"pid", r.group >= 0 ? r.group : groups}, {"tid", 0},
                {"args", {{"iteration", r.iteration}}}});
  }
  for (const sim::ReplicaRun& r : recorder.replicas) {
    events.add({{"name", fmt::format("{} replica {}", graph.tasks[r.task].name, r.replica)},
                {"cat", "replica"}, {"ph", "X"}, {"ts", micros(r.start)},
                {"dur", micros(r.end - r.start)}, {"pid", r.group}, {"tid", 1 + r.replica},
                {"args", {{"iteration", r.iteration}, {"sequences", r.sequences},
                          {"decode_steps", r.steps},
                          {"tail_seconds", detail::file_units(r.tail_seconds)}}}});
  }
  // Links: a counter track each with its traffic, and the transfers as slices that may overlap.
  const int links = groups + 1;
  events.add({{"name", "process_name"}, {"ph", "M"}, {"pid", links},
              {"args", {{"name", "links"}}}});
  for (const sim::Recorder::LinkRate& r : recorder.link_rates) {
    events.add({{"name", summary.links[r.link].name}, {"ph", "C"}, {"ts", micros(r.time)},
                {"pid", links},
                {"args", {{"GB/s", detail::file_units(r.bytes_per_second / 1e9)}}}});
  }
  for (std::size_t i = 0; i < recorder.transfers.size(); ++i) {
    const sim::TransferRun& t = recorder.transfers[i];
    const std::string name = fmt::format("{} -> {}", graph.tasks[t.from_task].name,
                                         graph.tasks[t.to_task].name);
    const OrderedJson args = {{"iteration", t.iteration}, {"bytes", detail::file_units(t.bytes)},
                              {"from_group", t.from_group}, {"to_group", t.to_group}};
    events.add({{"name", name}, {"cat", "transfer"}, {"ph", "b"}, {"id", i},
                {"ts", micros(t.start)}, {"pid", links}, {"tid", 0}, {"args", args}});
    events.add({{"name", name}, {"cat", "transfer"}, {"ph", "e"}, {"id", i},
                {"ts", micros(t.end)}, {"pid", links}, {"tid", 0}});
  }
  events.close();
  out += ",\n  \"displayTimeUnit\": \"ms\"\n}\n";
  return out;
}

}  // namespace hetrl::io
