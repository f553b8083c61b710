#include "io/compare_io.h"

#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {

using detail::OrderedJson;

namespace {

OrderedJson optional_number(std::optional<double> value) {
  return value ? OrderedJson(detail::file_units(*value)) : OrderedJson(nullptr);
}

}  // namespace

std::string comparison_json(const ComparisonInputs& inputs, const std::vector<plan::ClusterSummary>& rows) {
  OrderedJson out;
  out["schema"] = "hetrl.compare/v1";
  core::Provenance provenance{"hetrl-plan", HETRL_VERSION, {{"workload", inputs.workload_hash}}};
  for (std::size_t i = 0; i < rows.size() && i < inputs.cluster_hashes.size(); ++i) {
    provenance.inputs.emplace_back(rows[i].file, inputs.cluster_hashes[i]);
  }
  detail::write_provenance(out, provenance);
  out["workload"] = inputs.workload_name;
  out["planner"] = inputs.planner;
  out["objective"] = inputs.objective;
  out["budget_per_hour"] = optional_number(inputs.budget_per_hour);
  out["min_throughput"] = optional_number(inputs.min_throughput);
  OrderedJson clusters = OrderedJson::array();
  for (const plan::ClusterSummary& s : rows) {
    OrderedJson c;
    c["cluster"] = s.cluster;
    c["file"] = s.file;
    c["found"] = s.found;
    if (!s.found) c["why_not"] = s.why_not;
    OrderedJson gpus = OrderedJson::array();
    for (const plan::ClusterSummary::TypeUse& t : s.gpus) {
      gpus.push_back({{"gpu_type", t.gpu_type}, {"used", t.used}, {"total", t.total}});
    }
    c["gpus"] = std::move(gpus);
    c["cluster_usd_per_hour"] = optional_number(s.cluster_price_per_hour);
    if (s.found) {
      c["groups"] = s.groups;
      c["iteration_seconds"] = detail::file_units(s.iteration_seconds);
      c["samples_per_second"] = detail::file_units(s.samples_per_second);
      c["tokens_per_second"] = detail::file_units(s.tokens_per_second);
      c["plan_usd_per_hour"] = optional_number(s.plan_price_per_hour);
      c["usd_per_1k_samples"] = optional_number(s.dollars_per_1k_samples());
      c["bottleneck_task"] = {{"task", s.bottleneck_task}, {"seconds", detail::file_units(s.bottleneck_task_seconds)}};
      c["bottleneck_link"] = s.bottleneck_link.empty()
                                 ? OrderedJson(nullptr)
                                 : OrderedJson{{"transfer", s.bottleneck_link},
                                               {"seconds", detail::file_units(s.bottleneck_link_seconds)}};
    }
    c["planning_seconds"] = detail::file_units(s.planning_seconds);
    clusters.push_back(std::move(c));
  }
  out["clusters"] = std::move(clusters);
  return detail::dump(out);
}

}  // namespace hetrl::io
