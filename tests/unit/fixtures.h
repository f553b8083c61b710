#pragma once
// Small clusters and workloads built in code, shared by the unit tests.

#include <string>
#include <vector>

#include "cost/cost_model.h"
#include "hw/cluster_builder.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "workload/rl_graph.h"

namespace hetrl::testing {

inline const io::Catalogs& catalogs() { return io::builtin_catalogs(); }

// One node per spec (hetrl-cluster build --nodes syntax), the catalogue's network defaults.
inline hw::Cluster make_cluster(const std::vector<std::string>& nodes) {
  hw::ClusterBuildParams params = hw::default_build_params(catalogs().hardware);
  for (const std::string& spec : nodes) {
    params.node_groups.push_back(hw::parse_node_spec(spec, catalogs().hardware));
  }
  return hw::build_cluster(params, catalogs().hardware);
}

// PPO with one model for actor, critic and reference, a rule reward and fixed lengths.
inline workload::Workload ppo(const std::string& model, int prompts, int prompt, int response,
                              int mini_batches) {
  workload::Workload w;
  w.algorithm = "ppo";
  for (workload::Role r : {workload::Role::kActor, workload::Role::kCritic, workload::Role::kReference}) {
    w.role(r) = {workload::RoleModel::Kind::kModel, model};
  }
  w.role(workload::Role::kReward).kind = workload::RoleModel::Kind::kRule;
  w.prompts_per_iteration = prompts;
  w.prompt_length_tokens = prompt;
  w.response.kind = workload::LengthKind::kFixed;
  w.response.fixed_tokens = response;
  w.mini_batches = mini_batches;
  w.validate(catalogs().algorithms, catalogs().models);
  return w;
}

// The same workload one step off-policy (asynchronous, staleness 1) for "async", as it is for "sync".
inline workload::Workload in_mode(workload::Workload w, const std::string& mode) {
  if (mode == "async") {
    w.mode = workload::Mode::kAsync;
    w.max_staleness = 1;
  }
  return w;
}

// The same workload with lognormal response lengths of this mean and maximum.
inline workload::Workload long_tailed(workload::Workload w, double mean_tokens, int max_tokens) {
  w.response.kind = workload::LengthKind::kLognormal;
  w.response.mean_tokens = mean_tokens;
  w.response.max_tokens = max_tokens;
  return w;
}

// A cluster and a workload from tests/cli/data, with their graph and cost model.
struct FileInstance {
  io::Inputs in;
  cost::CostModel model;
  FileInstance(const std::string& cluster, const std::string& workload)
      : in(io::load_inputs(std::string(HETRL_TEST_DATA) + "/" + cluster,
                           std::string(HETRL_TEST_DATA) + "/" + workload, catalogs())),
        model(in.cluster, in.workload.workload, in.graph, catalogs().models) {}
};

// One of benchmarks/paper's scenarios (a network and a workload), loaded as hetrl-plan loads it.
inline io::Inputs paper_scenario(const std::string& network, const std::string& workload) {
  const std::string dir = HETRL_PAPER_SCENARIOS;
  return io::load_inputs(dir + "/clusters/" + network + ".json", dir + "/workloads/" + workload + ".json", catalogs());
}

struct Fixture {
  hw::Cluster cluster;
  workload::Workload workload;
  workload::TaskGraph graph;
  cost::CostModel model;
  Fixture(hw::Cluster c, workload::Workload w, cost::CostParams params = {})
      : cluster(std::move(c)),
        workload(std::move(w)),
        graph(workload::build_task_graph(workload, catalogs().algorithms, catalogs().models)),
        model(cluster, workload, graph, catalogs().models, params) {}
  int task(const char* name) const { return graph.find(name); }
};

}  // namespace hetrl::testing
