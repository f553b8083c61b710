// What each fuzz target loads, as a user's file or flags reach the loader:
//
//   cluster   hetrl.cluster/v1 JSON                     (io::parse_cluster)
//   workload  hetrl.workload/v1 JSON                    (io::parse_workload)
//   plan      hetrl.plan/v1 JSON on tests/cli/data's valid.json and grpo_small.json, then
//             evaluated as `hetrl-plan evaluate` does   (io::parse_plan, plan::Evaluator)
//   profile   hetrl.profile JSON                        (io::parse_profile)
//   trace     response-length CSV, first column         (io::parse_length_trace)
//   models    a user's model file                       (io::parse_model_catalog)
//   specs     hetrl-cluster's flags, one a line: "node SPEC", "preset SPEC", "link SPEC",
//             "region SPEC", "price SPEC", "intra SPEC", "cross-zone SPEC",
//             "cross-region SPEC"                       (io::build_cluster)
//   market    hetrl.market/v1 JSON                      (io::parse_market)
//   execreport  hetrl.execreport/v1 JSON, as hetrl-exec --fit-on reads it
//                                                       (io::parse_exec_report)

#include "targets.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "cost/cost_model.h"
#include "io/catalog_io.h"
#include "io/cluster_io.h"
#include "io/cluster_specs.h"
#include "io/exec_io.h"
#include "io/inputs.h"
#include "io/market_io.h"
#include "io/plan_io.h"
#include "io/profile_io.h"
#include "io/workload_io.h"
#include "plan/evaluate.h"

#ifndef HETRL_FUZZ_DATA
#error "HETRL_FUZZ_DATA names tests/cli/data"
#endif

namespace hetrl::fuzz {
namespace {

constexpr const char* kData = HETRL_FUZZ_DATA;

// The plan target's cluster, workload and cost model, loaded once.
struct PlanInputs {
  io::Inputs inputs;
  std::unique_ptr<cost::CostModel> model;
};

const PlanInputs& plan_inputs() {
  static const PlanInputs loaded = [] {
    PlanInputs p;
    const std::string data(kData);
    p.inputs = io::load_inputs(data + "/valid.json", data + "/grpo_small.json", io::builtin_catalogs());
    p.model = std::make_unique<cost::CostModel>(p.inputs.cluster, p.inputs.workload.workload, p.inputs.graph,
                                                p.inputs.workload.models);
    return p;
  }();
  return loaded;
}

void load_specs(std::string_view text, const io::Catalogs& catalogs) {
  io::ClusterSpecs specs;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view flag = line.substr(0, space);
    std::string value(line.substr(space + 1));
    if (flag == "node") {
      specs.nodes.push_back(std::move(value));
    } else if (flag == "preset") {
      specs.preset_nodes.push_back(std::move(value));
    } else if (flag == "link") {
      specs.links.push_back(std::move(value));
    } else if (flag == "region") {
      specs.regions.push_back(std::move(value));
    } else if (flag == "price") {
      specs.prices.push_back(std::move(value));
    } else if (flag == "intra") {
      specs.intra_zone = std::move(value);
    } else if (flag == "cross-zone") {
      specs.cross_zone = std::move(value);
    } else if (flag == "cross-region") {
      specs.cross_region = std::move(value);
    }
  }
  io::build_cluster(specs, catalogs);
}

void load_unchecked(std::string_view target, std::string_view text) {
  const io::Catalogs& catalogs = io::builtin_catalogs();
  if (target == "cluster") {
    io::parse_cluster(text, "fuzz.json", catalogs.hardware);
  } else if (target == "workload") {
    io::parse_workload(text, "fuzz.json", kData, catalogs.algorithms, catalogs.models);
  } else if (target == "plan") {
    const PlanInputs& p = plan_inputs();
    const plan::Plan plan =
        io::parse_plan(text, "fuzz.json", p.inputs.cluster, p.inputs.graph, p.inputs.workload.models);
    plan::Evaluator evaluator(*p.model);
    evaluator.evaluate(plan, true);
  } else if (target == "profile") {
    io::parse_profile(text, "fuzz.json");
  } else if (target == "trace") {
    io::parse_length_trace(text, "fuzz.csv", "");
  } else if (target == "models") {
    io::parse_model_catalog(text, "fuzz.json", true);
  } else if (target == "specs") {
    load_specs(text, catalogs);
  } else if (target == "market") {
    io::parse_market(text, "fuzz.json", catalogs.hardware);
  } else if (target == "execreport") {
    io::parse_exec_report(text, "fuzz.json");
  } else {
    throw std::invalid_argument("unknown fuzz target \"" + std::string(target) + "\"");
  }
}

}  // namespace

const std::vector<std::string_view>& targets() {
  static const std::vector<std::string_view> names{"cluster", "workload", "plan",   "profile",   "trace",
                                                   "models",  "specs",    "market", "execreport"};
  return names;
}

void load(std::string_view target, std::string_view text) {
  try {
    load_unchecked(target, text);
  } catch (const core::InputError&) {
    // The one failure a loader may have: the tools print it and exit 2.
  }
}

}  // namespace hetrl::fuzz
