#include "planner/layout.h"

#include <algorithm>
#include <numeric>

namespace hetrl::planner {

std::vector<plan::Gpu> gpus_of(const hw::Cluster& cluster, std::span<const int> nodes) {
  std::vector<plan::Gpu> gpus;
  for (int node : nodes) {
    for (int d = 0; d < cluster.nodes[node].gpu_count; ++d) gpus.push_back({node, d});
  }
  return gpus;
}

bool uniform_replicas(const hw::Cluster& cluster, std::span<const int> nodes, int tp, int pp,
                      int layers, std::vector<plan::Replica>& out) {
  out.clear();
  if (tp < 1 || pp < 1 || pp > layers) return false;
  std::vector<plan::Stage> stages;
  for (int node : nodes) {
    const int count = cluster.nodes[node].gpu_count;
    if (count % tp != 0) return false;
    for (int first = 0; first < count; first += tp) {
      plan::Stage stage;
      stage.node = node;
      for (int d = first; d < first + tp; ++d) stage.devices.push_back(d);
      stages.push_back(std::move(stage));
    }
  }
  if (stages.empty() || stages.size() % pp != 0) return false;
  const int replicas = static_cast<int>(stages.size()) / pp;
  for (int r = 0; r < replicas; ++r) {
    plan::Replica replica;
    replica.share = 1.0 / replicas;
    for (int s = 0; s < pp; ++s) {
      plan::Stage stage = stages[r * pp + s];
      stage.layers = layers / pp + (s < layers % pp ? 1 : 0);
      replica.stages.push_back(std::move(stage));
    }
    out.push_back(std::move(replica));
  }
  return true;
}

std::vector<int> tp_choices(const hw::Cluster& cluster, std::span<const int> nodes,
                            const std::vector<const workload::ModelArch*>& models) {
  std::vector<int> out;
  if (nodes.empty()) return out;
  int smallest = cluster.nodes[nodes.front()].gpu_count;
  for (int node : nodes) smallest = std::min(smallest, cluster.nodes[node].gpu_count);
  for (int tp = 1; tp <= smallest; tp *= 2) {
    const bool divides = std::all_of(models.begin(), models.end(),
                                     [tp](const workload::ModelArch* m) { return m->heads % tp == 0; });
    if (divides) out.push_back(tp);
  }
  return out;
}

double balance_shares(plan::Evaluator& evaluator, plan::Plan& plan, int rounds) {
  const plan::Prediction* prediction = &evaluator.evaluate(plan);
  if (!prediction->feasible) return 0;
  double best = prediction->samples_per_second;
  plan::Plan best_plan = plan;
  for (int round = 0; round < rounds; ++round) {
    for (plan::Group& group : plan.groups) {
      for (plan::TaskPlacement& placement : group.tasks) {
        const std::vector<double>& seconds = prediction->tasks[placement.task].replica_seconds;
        if (placement.replicas.size() < 2) continue;
        double total = 0;
        for (std::size_t r = 0; r < placement.replicas.size(); ++r) {
          if (seconds[r] > 0) placement.replicas[r].share /= seconds[r];
          total += placement.replicas[r].share;
        }
        for (plan::Replica& replica : placement.replicas) replica.share /= total;
      }
    }
    prediction = &evaluator.evaluate(plan);
    if (!prediction->feasible) break;
    if (prediction->samples_per_second > best) {
      best = prediction->samples_per_second;
      best_plan = plan;
    }
  }
  plan = std::move(best_plan);
  return best;
}

}  // namespace hetrl::planner
