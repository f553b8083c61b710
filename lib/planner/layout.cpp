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

bool layout_fits(const hw::Cluster& cluster, std::span<const int> nodes, int tp, int pp, int layers) {
  if (tp < 1 || pp < 1 || pp > layers || nodes.empty()) return false;
  int stages = 0;
  for (int node : nodes) {
    const int count = cluster.nodes[node].gpu_count;
    if (count % tp != 0) return false;
    stages += count / tp;
  }
  return stages % pp == 0;
}

bool uniform_replicas(const hw::Cluster& cluster, std::span<const int> nodes, int tp, int pp,
                      int layers, std::vector<plan::Replica>& out) {
  if (!layout_fits(cluster, nodes, tp, pp, layers)) {
    out.clear();
    return false;
  }
  int stages = 0;
  for (int node : nodes) stages += cluster.nodes[node].gpu_count / tp;
  const int replicas = stages / pp;
  // Reuses the elements `out` already has, and those an earlier call set aside (a placement
  // of TP 1 has eight times the replicas of one of TP 8, and a search alternates them), so a
  // search that lays out plan after plan does not allocate anew each time.
  thread_local std::vector<plan::Replica> spare;
  while (static_cast<int>(out.size()) > replicas) {
    spare.push_back(std::move(out.back()));
    out.pop_back();
  }
  while (static_cast<int>(out.size()) < replicas && !spare.empty()) {
    out.push_back(std::move(spare.back()));
    spare.pop_back();
  }
  out.resize(replicas);
  int r = 0, s = 0;
  for (int node : nodes) {
    for (int first = 0; first < cluster.nodes[node].gpu_count; first += tp) {
      plan::Replica& replica = out[r];
      replica.share = 1.0 / replicas;
      replica.stages.resize(pp);
      plan::Stage& stage = replica.stages[s];
      stage.node = node;
      stage.devices.resize(tp);
      for (int d = 0; d < tp; ++d) stage.devices[d] = first + d;
      stage.layers = layers / pp + (s < layers % pp ? 1 : 0);
      if (++s == pp) {
        s = 0;
        ++r;
      }
    }
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

const plan::Prediction& balance_shares(plan::Evaluator& evaluator, plan::Plan& plan, int rounds) {
  const plan::Prediction* prediction = &evaluator.evaluate(plan);
  if (!prediction->feasible) return *prediction;
  // Given the strategies, a task's time depends only on its own shares, so each task keeps
  // the better of its old and its re-weighted shares; the choice does not depend on the rest
  // of the plan.
  thread_local std::vector<std::vector<double>> old_shares;
  thread_local std::vector<double> old_seconds;
  for (int round = 0; round < rounds; ++round) {
    old_seconds.clear();
    bool changed = false;
    std::size_t placed = 0;
    for (plan::Group& group : plan.groups) {
      for (plan::TaskPlacement& placement : group.tasks) {
        const std::vector<double>& seconds = prediction->tasks[placement.task].replica_seconds;
        // Kept from call to call, with their capacity.
        if (old_shares.size() <= placed) old_shares.emplace_back();
        std::vector<double>& shares = old_shares[placed++];
        shares.clear();
        for (const plan::Replica& replica : placement.replicas) shares.push_back(replica.share);
        old_seconds.push_back(prediction->tasks[placement.task].seconds);
        if (placement.replicas.size() < 2) continue;
        double total = 0;
        for (std::size_t r = 0; r < placement.replicas.size(); ++r) {
          if (seconds[r] > 0) placement.replicas[r].share /= seconds[r];
          total += placement.replicas[r].share;
        }
        for (plan::Replica& replica : placement.replicas) replica.share /= total;
        changed = true;
      }
    }
    if (!changed) break;
    prediction = &evaluator.reprice(plan);
    bool restored = false;
    std::size_t i = 0;
    for (plan::Group& group : plan.groups) {
      for (plan::TaskPlacement& placement : group.tasks) {
        if (!(prediction->tasks[placement.task].seconds < old_seconds[i])) {
          for (std::size_t r = 0; r < placement.replicas.size(); ++r) {
            placement.replicas[r].share = old_shares[i][r];
          }
          restored = true;
        }
        ++i;
      }
    }
    if (restored) prediction = &evaluator.reprice(plan);
  }
  return *prediction;
}

}  // namespace hetrl::planner
