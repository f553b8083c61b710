#include "planner/space.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "planner/layout.h"

namespace hetrl::planner {

std::vector<TaskChoice> strategies(const SearchSpace& space, std::span<const int> tps, bool training) {
  std::vector<TaskChoice> out;
  for (int tp : tps) {
    for (int pp : space.pipeline) {
      if (!training) {
        out.push_back({tp, pp, {}});
        continue;
      }
      for (int zero : space.zero_stages) {
        for (cost::Recompute recompute : space.recompute) {
          for (bool offload : space.optimizer_offload) out.push_back({tp, pp, {zero, recompute, offload}});
        }
      }
    }
  }
  return out;
}

std::vector<TaskChoice> task_choices(const cost::CostModel& model, const workload::ModelCatalog& models,
                                     const SearchSpace& space, int task, const std::vector<int>& nodes) {
  const workload::Task& t = model.graph().tasks[task];
  const workload::ModelArch& arch = models.get(t.model, "");
  std::vector<TaskChoice> out =
      strategies(space, tp_choices(model.cluster(), nodes, {&arch}), t.kind == workload::TaskKind::kTrain);
  std::erase_if(out, [&](const TaskChoice& c) { return !layout_fits(model.cluster(), nodes, c.tp, c.pp, arch.layers); });
  return out;
}

namespace {

// Splits a replica's layers over its stages in proportion to each stage's compute rate
// (TP x dense peak), largest remainders first, at least one layer a stage.
void layers_by_speed(const hw::Cluster& cluster, int layers, plan::Replica& replica) {
  const std::size_t pp = replica.stages.size();
  if (pp == 1) {
    replica.stages[0].layers = layers;
    return;
  }
  // Scratch kept from call to call: a search lays out replicas by the million.
  thread_local std::vector<double> rate;
  thread_local std::vector<std::pair<double, std::size_t>> remainders;
  rate.resize(pp);
  double total = 0;
  for (std::size_t s = 0; s < pp; ++s) {
    const plan::Stage& stage = replica.stages[s];
    rate[s] = static_cast<double>(stage.devices.size()) *
              cluster.gpu_types[cluster.nodes[stage.node].gpu_type].tensor_flops();
    total += rate[s];
  }
  int assigned = 0;
  remainders.clear();
  for (std::size_t s = 0; s < pp; ++s) {
    const double exact = layers * rate[s] / total;
    const int whole = std::max(1, static_cast<int>(std::floor(exact)));
    replica.stages[s].layers = whole;
    assigned += whole;
    remainders.emplace_back(exact - whole, s);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; assigned < layers; i = (i + 1) % pp) {
    ++replica.stages[remainders[i].second].layers;
    ++assigned;
  }
  while (assigned > layers) {
    // Only when rounding up to one layer a stage overshot: take from the largest stages.
    auto largest = std::max_element(replica.stages.begin(), replica.stages.end(),
                                    [](const plan::Stage& a, const plan::Stage& b) { return a.layers < b.layers; });
    --largest->layers;
    --assigned;
  }
}

}  // namespace

namespace {
thread_local std::vector<std::size_t> order_;
}  // namespace

bool realize(const cost::CostModel& model, const workload::ModelCatalog& models, const GroupChoice& choice,
             plan::Group& group) {
  const hw::Cluster& cluster = model.cluster();
  group.gpus.clear();
  for (int node : choice.nodes) {
    for (int d = 0; d < cluster.nodes[node].gpu_count; ++d) group.gpus.push_back({node, d});
  }
  // Tasks in graph order.
  order_.clear();
  for (std::size_t i = 0; i < choice.tasks.size(); ++i) order_.push_back(i);
  std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return choice.tasks[a] < choice.tasks[b]; });
  group.tasks.resize(choice.tasks.size());
  for (std::size_t j = 0; j < order_.size(); ++j) {
    const std::size_t i = order_[j];
    const int task = choice.tasks[i];
    const TaskChoice& c = choice.choices[i];
    const workload::ModelArch& arch = models.get(model.graph().tasks[task].model, "");
    plan::TaskPlacement& placement = group.tasks[j];
    placement.task = task;
    placement.train = c.train;
    if (!uniform_replicas(cluster, choice.nodes, c.tp, c.pp, arch.layers, placement.replicas)) return false;
    for (plan::Replica& replica : placement.replicas) layers_by_speed(cluster, arch.layers, replica);
  }
  return true;
}

bool realize(const cost::CostModel& model, const workload::ModelCatalog& models,
             const std::vector<GroupChoice>& groups, plan::Plan& out) {
  // Reuses `out`'s groups, tasks and replicas so a search builds plans without allocating.
  out.groups.resize(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!realize(model, models, groups[g], out.groups[g])) return false;
  }
  return true;
}

std::vector<std::vector<std::vector<int>>> partitions(const std::vector<int>& items, int max_groups) {
  // Restricted growth strings: item i joins one of the groups so far or opens a new one.
  std::vector<std::vector<std::vector<int>>> out;
  const std::size_t n = items.size();
  if (n == 0) return out;
  std::vector<int> label(n, 0);
  while (true) {
    int groups = 0;
    for (int l : label) groups = std::max(groups, l + 1);
    if (groups <= max_groups) {
      std::vector<std::vector<int>> partition(groups);
      for (std::size_t i = 0; i < n; ++i) partition[label[i]].push_back(items[i]);
      out.push_back(std::move(partition));
    }
    // Next string: increment the last position that may grow.
    std::size_t i = n;
    while (i-- > 1) {
      int max_before = 0;
      for (std::size_t j = 0; j < i; ++j) max_before = std::max(max_before, label[j]);
      if (label[i] <= max_before) {
        ++label[i];
        for (std::size_t j = i + 1; j < n; ++j) label[j] = 0;
        break;
      }
    }
    if (i == 0) break;
  }
  return out;
}

std::vector<std::vector<int>> class_units(const hw::Cluster& cluster, const std::vector<std::vector<int>>& classes,
                                          const std::function<bool(std::size_t)>& few) {
  std::vector<std::vector<int>> units;
  for (int key = 0; key < 3; ++key) {  // classes alone; by GPU type and region; by GPU type
    units.clear();
    std::map<std::pair<int, int>, std::size_t> unit_of;
    for (int cls = 0; cls < static_cast<int>(classes.size()); ++cls) {
      const hw::Node& node = cluster.nodes[classes[cls].front()];
      const std::pair<int, int> id = key == 0   ? std::pair{cls, 0}
                                     : key == 1 ? std::pair{node.gpu_type, cluster.zones[node.zone].region}
                                                : std::pair{node.gpu_type, 0};
      const auto [at, added] = unit_of.emplace(id, units.size());
      if (added) units.emplace_back();
      units[at->second].push_back(cls);
    }
    if (few(units.size())) break;
  }
  return units;
}

}  // namespace hetrl::planner
