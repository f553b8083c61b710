// A queued generation, simulated and in closed form: one replica of Qwen2.5-7B on an A100
// generating 1,024 responses after 512-token prompts through a KV cache with room for SLOTS
// sequences (1 to 16 waves), for several response-length distributions. The simulator
// (sim::ReplicaGeneration) steps through drawn lengths, DRAWS draws (seeds 1..DRAWS) of 1,024
// each; the cost model prices the distribution (CostModel::replica_seconds). Prints CSV rows:
//   lengths,slots,waves,draws,simulated_s,closed_s,simulated_over_closed
// Usage: queue_bench [DRAWS]   (default 32)

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "cost/cost_model.h"
#include "hw/cluster_builder.h"
#include "io/catalog_io.h"
#include "sim/event_queue.h"
#include "sim/generation.h"
#include "workload/rl_graph.h"

using namespace hetrl;

namespace {

constexpr int kSamples = 1024;

struct Lengths {
  std::string name;
  workload::ResponseLengths response;
};

std::vector<Lengths> distributions() {
  std::vector<Lengths> out;
  workload::ResponseLengths fixed;
  fixed.kind = workload::LengthKind::kFixed;
  fixed.fixed_tokens = 512;
  out.push_back({"fixed 512", fixed});
  workload::ResponseLengths two;
  two.kind = workload::LengthKind::kTrace;
  two.trace = {100, 900};
  out.push_back({"100 or 900", two});
  for (double sigma : {0.4, 0.8, 1.2}) {
    workload::ResponseLengths spread;
    spread.kind = workload::LengthKind::kLognormal;
    spread.mean_tokens = 500;
    spread.max_tokens = 4096;
    spread.sigma = sigma;
    out.push_back({fmt::format("lognormal 500 sigma {}", sigma), spread});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int draws = argc > 1 ? std::atoi(argv[1]) : 32;
    if (draws < 1) throw core::InputError("DRAWS must be a positive number");
    const io::Catalogs& catalogs = io::builtin_catalogs();
    hw::ClusterBuildParams params = hw::default_build_params(catalogs.hardware);
    params.node_groups.push_back(hw::parse_node_spec("a:1xA100-SXM-80G", catalogs.hardware));
    const hw::Cluster cluster = hw::build_cluster(params, catalogs.hardware);
    fmt::print("lengths,slots,waves,draws,simulated_s,closed_s,simulated_over_closed\n");
    for (const Lengths& lengths : distributions()) {
      workload::Workload w;
      w.algorithm = "grpo";
      w.role(workload::Role::kActor) = {workload::RoleModel::Kind::kModel, "Qwen2.5-7B"};
      w.role(workload::Role::kReward).kind = workload::RoleModel::Kind::kRule;
      w.prompts_per_iteration = kSamples / 2;
      w.samples_per_prompt = 2;
      w.prompt_length_tokens = 512;
      w.response = lengths.response;
      const workload::TaskGraph graph = workload::build_task_graph(w, catalogs.algorithms, catalogs.models);
      const cost::CostModel model(cluster, w, graph, catalogs.models);
      const int task = graph.find("generate");
      const std::vector<cost::Stage> one{{0, 1, 28}};
      for (int slots : {1024, 683, 512, 384, 256, 160, 100, 64}) {
        const std::vector<double> budget{model.kv_budget_holding(task, one[0], slots)};
        double simulated = 0;
        for (int seed = 1; seed <= draws; ++seed) {
          sim::EventQueue queue;
          sim::ReplicaGeneration replica(model, task, one, budget,
                                         w.response.sample(kSamples, static_cast<std::uint64_t>(seed)));
          replica.start(queue, [] {});
          queue.run();
          simulated += replica.finished_at();
        }
        simulated /= draws;
        cost::Breakdown closed;
        model.replica_seconds(task, one, kSamples, 1, {}, budget, closed);
        const double waves = kSamples / model.concurrent_sequences(task, one, budget);
        fmt::print("{},{},{:.3f},{},{:.4f},{:.4f},{:.4f}\n", lengths.name, slots, waves, draws, simulated,
                   closed.total(), simulated / closed.total());
      }
    }
  } catch (const core::InputError& e) {
    fmt::print(stderr, "queue: {}\n", e.what());
    return 2;
  }
  return 0;
}
