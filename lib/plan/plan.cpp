#include "plan/plan.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"

namespace hetrl::plan {

std::optional<std::string> PlannerInfo::param(std::string_view key) const {
  for (const auto& [k, value] : params) {
    if (k == key) return value;
  }
  return std::nullopt;
}

std::optional<double> PlannerInfo::stat(std::string_view key) const {
  for (const auto& [k, value] : stats) {
    if (k == key) return value;
  }
  return std::nullopt;
}

const TaskPlacement* Plan::placement(int task) const {
  for (const Group& g : groups) {
    for (const TaskPlacement& p : g.tasks) {
      if (p.task == task) return &p;
    }
  }
  return nullptr;
}

int Plan::gpu_count() const {
  int gpus = 0;
  for (const Group& g : groups) gpus += static_cast<int>(g.gpus.size());
  return gpus;
}

int Plan::group_of(int task) const {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const TaskPlacement& placement : groups[g].tasks) {
      if (placement.task == task) return static_cast<int>(g);
    }
  }
  return -1;
}

void Plan::validate(const hw::Cluster& cluster, const workload::TaskGraph& graph,
                    const workload::ModelCatalog& models) const {
  using core::InputError;
  if (groups.empty()) throw InputError("the plan has no groups");
  std::map<Gpu, int> owner;  // GPU -> group
  const auto gpu_name = [&](const Gpu& gpu) {
    return fmt::format("{}:{}", cluster.nodes[gpu.node].name, gpu.device);
  };
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    if (group.gpus.empty()) throw InputError(fmt::format("group {} has no GPUs", g));
    for (const Gpu& gpu : group.gpus) {
      if (gpu.node < 0 || gpu.node >= static_cast<int>(cluster.nodes.size())) {
        throw InputError(fmt::format("group {}: unknown node", g));
      }
      if (gpu.device < 0 || gpu.device >= cluster.nodes[gpu.node].gpu_count) {
        throw InputError(fmt::format("group {}: node {} has GPUs 0 to {}, not {}", g,
                                     core::quoted(cluster.nodes[gpu.node].name),
                                     cluster.nodes[gpu.node].gpu_count - 1, gpu.device));
      }
      const auto [it, fresh] = owner.emplace(gpu, static_cast<int>(g));
      if (!fresh) {
        throw InputError(fmt::format("GPU {} is in group {} and group {}", gpu_name(gpu),
                                     it->second, g));
      }
    }
    if (group.tasks.empty()) throw InputError(fmt::format("group {} runs no task", g));
  }

  std::vector<int> placed(graph.tasks.size(), -1);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const TaskPlacement& placement : groups[g].tasks) {
      if (placement.task < 0 || placement.task >= static_cast<int>(graph.tasks.size())) {
        throw InputError(fmt::format("group {}: unknown task", g));
      }
      const workload::Task& task = graph.tasks[placement.task];
      const std::string where = fmt::format("group {}, task {}", g, task.name);
      if (!task.on_gpu()) {
        throw InputError(where + ": runs on the CPU or between groups; it is not placed on GPUs");
      }
      if (placed[placement.task] >= 0) {
        throw InputError(fmt::format("task {} is placed twice (groups {} and {})", task.name,
                                     placed[placement.task], g));
      }
      placed[placement.task] = static_cast<int>(g);
      if (placement.replicas.empty()) throw InputError(where + ": no replicas");
      const workload::ModelArch& arch = models.get(task.model, "");
      std::set<Gpu> used;
      double shares = 0;
      for (std::size_t r = 0; r < placement.replicas.size(); ++r) {
        const Replica& replica = placement.replicas[r];
        const std::string rwhere = fmt::format("{}, replica {}", where, r);
        if (!(replica.share > 0)) {
          throw InputError(fmt::format("{}: batch share must be positive, found {}", rwhere,
                                       replica.share));
        }
        shares += replica.share;
        if (replica.stages.empty()) throw InputError(rwhere + ": no stages");
        int layers = 0;
        for (std::size_t s = 0; s < replica.stages.size(); ++s) {
          const Stage& stage = replica.stages[s];
          const std::string swhere = fmt::format("{}, stage {}", rwhere, s);
          const int tp = static_cast<int>(stage.devices.size());
          if (tp == 0) throw InputError(swhere + ": no GPUs");
          if (arch.heads % tp != 0) {
            throw InputError(fmt::format("{}: TP {} does not divide the {} attention heads of {}",
                                         swhere, tp, arch.heads, arch.name));
          }
          if (stage.layers < 1) {
            throw InputError(fmt::format("{}: holds {} layers; a stage holds at least one",
                                         swhere, stage.layers));
          }
          layers += stage.layers;
          for (int device : stage.devices) {
            const Gpu gpu{stage.node, device};
            const auto it = owner.find(gpu);
            if (it == owner.end() || it->second != static_cast<int>(g)) {
              throw InputError(fmt::format("{}: GPU {}:{} is not in group {}", swhere,
                                           cluster.nodes[stage.node].name, device, g));
            }
            if (!used.insert(gpu).second) {
              throw InputError(fmt::format("{}: GPU {} is used twice by the task", swhere,
                                           gpu_name(gpu)));
            }
          }
        }
        if (layers != arch.layers) {
          throw InputError(fmt::format("{}: stages hold {} layers, {} has {}", rwhere, layers,
                                       arch.name, arch.layers));
        }
      }
      if (std::abs(shares - 1.0) > 1e-6) {
        throw InputError(fmt::format("{}: batch shares sum to {}, not 1", where, shares));
      }
      if (placement.train.zero_stage < 0 || placement.train.zero_stage > 3) {
        throw InputError(fmt::format("{}: ZeRO stage must be 0 to 3, found {}", where,
                                     placement.train.zero_stage));
      }
    }
  }
  for (int t : graph.gpu_tasks()) {
    if (placed[t] < 0) throw InputError(fmt::format("task {} is not placed in any group", graph.tasks[t].name));
  }
}

}  // namespace hetrl::plan
