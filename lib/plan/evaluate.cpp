#include "plan/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "core/units.h"
#include "plan/periodic.h"

namespace hetrl::plan {

using workload::TaskKind;

Evaluator::Evaluator(const cost::CostModel& model) : model_(model) {
  const workload::TaskGraph& graph = model.graph();
  const hw::Cluster& cluster = model.cluster();
  // Each role (actor, critic, reference, reward) holds weights of its own, even where two name
  // the same architecture.
  std::vector<workload::Role> roles;
  for (const workload::Task& task : graph.tasks) {
    if (task.model.empty() || !task.role) {
      role_of_task_.push_back(-1);
      continue;
    }
    auto it = std::find(roles.begin(), roles.end(), *task.role);
    if (it == roles.end()) it = roles.insert(roles.end(), *task.role);
    role_of_task_.push_back(static_cast<int>(it - roles.begin()));
  }
  role_count_ = static_cast<int>(roles.size());

  order_ = graph.topological_order();
  edges_into_.resize(graph.tasks.size());
  for (std::size_t i = 0; i < graph.edges.size(); ++i) edges_into_[graph.edges[i].to].push_back(static_cast<int>(i));
  location_ = graph.host_tasks();
  sync_ = graph.weight_sync();

  // Nodes alike share a class, so alike replicas are priced once.
  node_class_ = cluster.node_classes().of_node;
  for (const hw::Node& node : cluster.nodes) max_gpus_per_node_ = std::max(max_gpus_per_node_, node.gpu_count);
  slot_of_gpu_.assign(cluster.nodes.size() * max_gpus_per_node_, -1);
  for (const hw::Node& node : cluster.nodes) {
    const std::optional<double> price = cluster.node_price_per_hour(node);
    gpu_price_.push_back(price ? *price / node.gpu_count : -1.0);
  }
  for (std::size_t node = 0; node < cluster.nodes.size(); ++node) {
    usable_.push_back(model.usable_memory(static_cast<int>(node)));
    every_node_runs_precision_ = every_node_runs_precision_ && model.runs_precision(static_cast<int>(node));
  }
}

int Evaluator::extend_signature(int parent, int item) {
  for (int c = signatures_[parent].first_child; c >= 0; c = signatures_[c].next_sibling) {
    if (signatures_[c].item == item) return c;
  }
  const int child = static_cast<int>(signatures_.size());
  signatures_.push_back({parent, item, -1, signatures_[parent].first_child});
  signatures_[parent].first_child = child;
  return child;
}

const Evaluator::GpuNeed& Evaluator::need_of(int signature, bool offload) {
  if (needs_.size() < signatures_.size()) needs_.resize(signatures_.size());
  GpuNeed& need = needs_[signature];
  if (need.weights >= 0) return need;
  // What each role keeps there and the largest transient need, the stages in the order added.
  chain_.clear();
  for (int s = signature; s > 0; s = signatures_[s].parent) chain_.push_back(signatures_[s].item);
  cells_.assign(static_cast<std::size_t>(role_count_), cost::RoleMemory{});
  Transient t;
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    const MemoryItem& item = items_[*it];
    cells_[item.role].add(item.kind, item.mem);
    t.activations = std::max(t.activations, item.mem.activations);
    t.kv_cache = std::max(t.kv_cache, item.mem.kv_cache_min);
    t.alone = std::max(t.alone, item.mem.resident() + std::max(item.mem.activations, item.mem.kv_cache_min));
    t.resident = std::max(t.resident, item.mem.resident());
  }
  need = GpuNeed{};
  need.resident = t.resident;
  if (offload) {
    // One task's weights and state at a time: the largest of them, counted as weights.
    need.weights = t.alone;
    need.state = need.used = t.alone;
    return need;
  }
  double weights = 0;
  for (const cost::RoleMemory& cell : cells_) {
    weights += cell.weights();
    if (!cell.trained) continue;  // no training state
    need.gradients += cell.gradients;
    need.optimizer += cell.optimizer;
  }
  need.weights = weights;
  // Tasks take turns: the transient need is the largest one, a cache or activations.
  if (t.kv_cache >= t.activations) {
    need.kv_cache = t.kv_cache;
  } else {
    need.activations = t.activations;
  }
  need.state = need.weights + need.gradients + need.optimizer;
  need.used = need.weights + need.gradients + need.optimizer + need.activations + need.kv_cache;
  return need;
}

inline MemoryUse Evaluator::memory_of(const Group& group, std::size_t first, int slot) {
  MemoryUse use;
  use.gpu = group.gpus[slot];
  use.capacity = usable_[use.gpu.node];
  const GpuNeed& need = need_of(slot_signature_[first + slot], group.offload);
  use.weights = need.weights;
  use.gradients = need.gradients;
  use.optimizer = need.optimizer;
  use.activations = need.activations;
  use.kv_cache = need.kv_cache;
  return use;
}

bool Evaluator::check_memory(const Plan& plan) {
  const workload::TaskGraph& graph = model_.graph();
  budget_offset_.clear();
  budgets_all_.clear();
  evaluated_ = &plan;
  // Per plan: signatures of different groups start from different items, only the empty one
  // is shared.
  items_.clear();
  signatures_.assign(1, Signature{});
  needs_.clear();
  slot_signature_.clear();
  placement_slots_.clear();
  placement_resident_.clear();
  // A task uses each GPU of its group at most once.
  std::size_t bound = 0;
  for (const Group& group : plan.groups) bound += group.gpus.size() * group.tasks.size();
  if (device_slots_.size() < bound) device_slots_.resize(bound);
  int next_slot = 0;
  // The GPU furthest over its capacity, as a fraction of it, over every group: a plan is as
  // close to fitting as that GPU (a group made to fit must not make the plan look further off).
  double furthest = 0;
  int furthest_group = -1;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const Group& group = plan.groups[g];
    const int slots = static_cast<int>(group.gpus.size());
    for (int i = 0; i < slots; ++i) {
      slot_of_gpu_[group.gpus[i].node * max_gpus_per_node_ + group.gpus[i].device] = i;
    }
    // Per GPU: the chain of stage memories put on it, as a signature.
    const std::size_t first_slot = slot_signature_.size();
    slot_signature_.resize(first_slot + slots, 0);
    int* group_signature = slot_signature_.data() + first_slot;
    for (const TaskPlacement& placement : group.tasks) {
      placement_slots_.push_back(next_slot);
      placement_resident_.push_back(0);
      const int role = role_of_task_[placement.task];
      const TaskKind kind = graph.tasks[placement.task].kind;
      const int dp = static_cast<int>(placement.replicas.size());
      int* slot_out = device_slots_.data() + placement_slots_.back();
      int last_tp = -1, last_layers = -1, last_index = -1, last_pp = -1;
      int item = -1;
      shape_items_.clear();
      for (const Replica& replica : placement.replicas) {
        const int pp = static_cast<int>(replica.stages.size());
        bool described = false;
        for (int s = 0; s < pp; ++s) {
          const Stage& stage = replica.stages[s];
          const int tp = static_cast<int>(stage.devices.size());
          // Stages alike in shape need the same memory: price each shape once (one item), so
          // GPUs holding alike stages share their signatures.
          if (tp != last_tp || stage.layers != last_layers || s != last_index || pp != last_pp) {
            last_tp = tp;
            last_layers = stage.layers;
            last_index = s;
            last_pp = pp;
            const StageShape shape{tp, stage.layers, s, pp};
            const auto seen = std::find_if(shape_items_.begin(), shape_items_.end(),
                                           [&](const auto& x) { return x.first == shape; });
            if (seen != shape_items_.end()) {
              item = seen->second;
            } else {
              if (!described) {
                described = true;
                stages_.clear();
                for (const Stage& x : replica.stages) {
                  stages_.push_back({x.node, static_cast<int>(x.devices.size()), x.layers});
                }
              }
              items_.push_back({kind, role, model_.stage_memory(placement.task, stages_, s, dp, placement.train)});
              item = static_cast<int>(items_.size()) - 1;
              shape_items_.emplace_back(shape, item);
            }
          }
          assert(next_slot + tp <= static_cast<int>(device_slots_.size()));
          const int* slot_row = slot_of_gpu_.data() + stage.node * max_gpus_per_node_;
          // Devices that held the same stages get the same signature: extend each run once.
          int last_parent = -1, last_child = -1;
          for (int d = 0; d < tp; ++d) {
            const int slot = slot_row[stage.devices[d]];
            slot_out[d] = slot;
            int& signature = group_signature[slot];
            if (signature != last_parent) {
              last_parent = signature;
              last_child = extend_signature(signature, item);
            }
            signature = last_child;
          }
          if (group.offload) {
            placement_resident_.back() = std::max(placement_resident_.back(), items_[item].mem.resident());
          }
          slot_out += tp;
          next_slot += tp;
        }
      }
    }
    for (const Gpu& gpu : group.gpus) slot_of_gpu_[gpu.node * max_gpus_per_node_ + gpu.device] = -1;
    budget_offset_.push_back(static_cast<int>(budgets_all_.size()));
    GroupPrediction& gp = prediction_.groups[g];
    double tightest = std::numeric_limits<double>::infinity();
    int tightest_slot = 0;
    double group_furthest = 0;  // the furthest of this group's GPUs over their capacity
    int group_furthest_slot = -1;
    for (int i = 0; i < slots; ++i) {
      const GpuNeed& need = need_of(group_signature[i], group.offload);
      const double capacity = usable_[group.gpus[i].node];
      // Offloaded, generation's cache has what the largest task's state leaves.
      budgets_all_.push_back(capacity - (group.offload ? need.resident : need.state));
      const double headroom = capacity - need.used;
      if (headroom < tightest) {
        tightest = headroom;
        tightest_slot = i;
      }
      if (headroom < 0 && -headroom / capacity > group_furthest) {
        group_furthest = -headroom / capacity;
        group_furthest_slot = i;
      }
    }
    // A group over its memory shows its GPU furthest over (as a fraction of its capacity).
    if (group_furthest_slot >= 0) tightest_slot = group_furthest_slot;
    if (slots > 0) gp.tightest = memory_of(group, first_slot, tightest_slot);
    if (group_furthest > furthest) {
      furthest = group_furthest;
      furthest_group = static_cast<int>(g);
    }
  }
  if (furthest_group >= 0) {
    report_overflow(furthest_group);
    return false;
  }
  return true;
}

std::span<const MemoryUse> Evaluator::gpu_memory(int group) {
  assert(evaluated_ != nullptr);
  const std::size_t first = budget_offset_[group];
  const std::size_t end = group + 1 < static_cast<int>(budget_offset_.size())
                              ? static_cast<std::size_t>(budget_offset_[group + 1])
                              : budgets_all_.size();
  gpu_memory_.clear();
  for (std::size_t i = first; i < end; ++i) {
    gpu_memory_.push_back(memory_of(evaluated_->groups[group], first, static_cast<int>(i - first)));
  }
  return gpu_memory_;
}

void Evaluator::report_overflow(int group) {
  // Says why: the GPU furthest over its capacity (check_memory left it as the group's tightest).
  const MemoryUse& use = prediction_.groups[group].tightest;
  const auto over = [](const MemoryUse& m) { return (m.used() - m.capacity) / m.capacity; };
  const hw::Cluster& cluster = model_.cluster();
  const hw::Node& node = cluster.nodes[use.gpu.node];
  constexpr double kGiB = core::kGiB;
  prediction_.overflow = over(use);
  prediction_.infeasible = fmt::format(
      "GPU {}:{} ({}, group {}) needs {:.1f} GiB of its {:.1f} GiB usable, {:.1f} GiB over (weights {:.1f}, "
      "gradients {:.1f}, optimizer {:.1f}, activations {:.1f}, KV cache and engine workspace {:.1f})",
      node.name, use.gpu.device, cluster.gpu_types[node.gpu_type].name, group, use.used() / kGiB,
      use.capacity / kGiB, (use.used() - use.capacity) / kGiB, use.weights / kGiB, use.gradients / kGiB, use.optimizer / kGiB,
      use.activations / kGiB, use.kv_cache / kGiB);
}

bool Evaluator::runs_precision(const Plan& plan) {
  if (every_node_runs_precision_) return true;
  for (const Group& group : plan.groups) {
    for (const Gpu& gpu : group.gpus) {
      if (model_.runs_precision(gpu.node)) continue;
      const hw::Cluster& cluster = model_.cluster();
      const hw::Node& node = cluster.nodes[gpu.node];
      prediction_.infeasible = fmt::format(
          "GPU {}:{} ({}) has no {} tensor cores and the workload's precision is {}; \"precision\": \"auto\" "
          "runs such GPUs in FP16",
          node.name, gpu.device, cluster.gpu_types[node.gpu_type].name, model_.dtype(gpu.node),
          workload::precision_name(model_.workload().precision));
      // Below every plan that only overflows memory: the closest to running is one that does.
      prediction_.overflow = std::numeric_limits<double>::infinity();
      return false;
    }
  }
  return true;
}

bool Evaluator::same_replica(const Replica& a, int a_first, const Replica& b, int b_first) const {
  if (a.share != b.share || a.stages.size() != b.stages.size()) return false;
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    const cost::Stage& x = all_stages_[a_first + s];
    const cost::Stage& y = all_stages_[b_first + s];
    if (node_class_[x.node] != node_class_[y.node] || x.tp != y.tp || x.layers != y.layers ||
        all_budgets_[a_first + s] != all_budgets_[b_first + s]) {
      return false;
    }
  }
  return true;
}

double Evaluator::task_seconds(int group, int placement_index, const TaskPlacement& placement,
                               bool explain) {
  const workload::TaskGraph& graph = model_.graph();
  const bool generate = graph.tasks[placement.task].kind == TaskKind::kGenerate;
  const int dp = static_cast<int>(placement.replicas.size());
  const double samples = model_.workload().samples_per_iteration();
  const double* budgets_of_slot = budgets_all_.data() + budget_offset_[group];
  const int* slot = device_slots_.data() + placement_slots_[placement_index];
  TaskPrediction& tp = prediction_.tasks[placement.task];
  tp.replica_seconds.resize(placement.replicas.size());
  all_stages_.clear();
  all_budgets_.clear();
  stage_offsets_.clear();
  priced_.clear();
  double slowest = 0;
  int slowest_replica = 0;
  const bool train = graph.tasks[placement.task].kind == TaskKind::kTrain;
  // All stages first: a training task's replicas form the ring its collectives run on.
  for (const Replica& replica : placement.replicas) {
    stage_offsets_.push_back(static_cast<int>(all_stages_.size()));
    for (const Stage& s : replica.stages) {
      const int tp_size = static_cast<int>(s.devices.size());
      all_stages_.push_back({s.node, tp_size, s.layers});
      double budget = 0;
      if (generate) {
        budget = std::numeric_limits<double>::infinity();
        for (int d = 0; d < tp_size; ++d) budget = std::min(budget, budgets_of_slot[slot[d]]);
      }
      slot += tp_size;
      all_budgets_.push_back(budget);
    }
  }
  spans_.clear();
  for (std::size_t r = 0; r < placement.replicas.size(); ++r) {
    spans_.emplace_back(all_stages_.data() + stage_offsets_[r], placement.replicas[r].stages.size());
  }
  const cost::DataParallel ring = train ? model_.data_parallel(spans_) : cost::DataParallel(dp);
  for (std::size_t r = 0; r < placement.replicas.size(); ++r) {
    const Replica& replica = placement.replicas[r];
    const int first = stage_offsets_[r];
    // Replicas alike for the cost model are priced once (most often, like the last one priced).
    double seconds = -1;
    for (std::size_t j = priced_.size(); j-- > 0;) {
      const int k = priced_[j];
      if (same_replica(replica, first, placement.replicas[k], stage_offsets_[k])) {
        seconds = tp.replica_seconds[k];
        break;
      }
    }
    if (seconds < 0) {
      cost::Breakdown breakdown;
      const std::span<const cost::Stage> stages(all_stages_.data() + first, replica.stages.size());
      const std::span<const double> budgets(all_budgets_.data() + first, replica.stages.size());
      seconds = model_.replica_seconds(placement.task, stages, replica.share * samples, ring,
                                       placement.train, budgets, breakdown);
      priced_.push_back(static_cast<int>(r));
    }
    tp.replica_seconds[r] = seconds;
    if (explain && generate) {
      tp.kv_budget.emplace_back(all_budgets_.begin() + first,
                                all_budgets_.begin() + first + static_cast<std::ptrdiff_t>(replica.stages.size()));
    }
    if (seconds > slowest) {
      slowest = seconds;
      slowest_replica = static_cast<int>(r);
    }
  }
  cost::Breakdown sync(explain);
  if (train && dp > 1) {
    const cost::SyncOverlap hidden = model_.gradient_sync_overlap(
        placement.task, spans_[static_cast<std::size_t>(slowest_replica)],
        placement.replicas[static_cast<std::size_t>(slowest_replica)].share * samples, placement.train);
    model_.gradient_sync_seconds(placement.task, spans_, ring, placement.train, sync, hidden);
  }
  if (group_offload_) {
    // Its weights and state come back from host memory before it runs and go back after.
    sync.add("offload and reload (host memory)",
             2.0 * placement_resident_[placement_index] / model_.params().host_bandwidth);
  }
  if (explain) {
    // The slowest replica's terms, priced again with the terms kept.
    const Replica& replica = placement.replicas[slowest_replica];
    const std::span<const cost::Stage> stages(all_stages_.data() + stage_offsets_[slowest_replica],
                                              replica.stages.size());
    const std::span<const double> budgets(all_budgets_.data() + stage_offsets_[slowest_replica],
                                          replica.stages.size());
    cost::Breakdown terms(true);
    model_.replica_seconds(placement.task, stages, replica.share * samples, ring, placement.train,
                           budgets, terms);
    tp.terms = terms.terms();
    tp.terms.insert(tp.terms.end(), sync.terms().begin(), sync.terms().end());
  }
  return slowest + sync.total();
}

double Evaluator::weight_sync_seconds(const Plan& plan, bool explain) {
  if (!sync_.exists()) return 0;
  // The part on the generation group's GPUs: resharding the weights it trained itself, or
  // loading those another group sent (their transfer is the edge into the sync, priced in
  // schedule()).
  const int gt = plan.group_of(sync_.trainer);
  const int gg = plan.group_of(sync_.reader);
  if (gg < 0) return 0;  // a partial plan: priced when generation is placed
  cost::Breakdown out(explain);
  const std::vector<TaskPlacement>& placements = plan.groups[gg].tasks;
  if (gt == gg) {
    // Each GPU's slice of the trained actor, then each generation GPU's with it.
    const auto slices = [&](const TaskPlacement& placement, auto&& visit) {
      const int zero_shards = placement.train.zero_stage == 3 ? static_cast<int>(placement.replicas.size()) : 1;
      for (const Replica& replica : placement.replicas) {
        int first_layer = 0;
        for (const Stage& s : replica.stages) {
          const int tp = static_cast<int>(s.devices.size());
          for (int i = 0; i < tp; ++i) {
            visit(s.node, s.devices[static_cast<std::size_t>(i)], cost::WeightSlice{first_layer, s.layers, tp, i, zero_shards});
          }
          first_layer += s.layers;
        }
      }
    };
    // held_ is all empty slices between calls: the slots set here are emptied again below.
    held_.resize(slot_of_gpu_.size());
    held_slots_.clear();
    const auto slot = [&](int node, int device) { return static_cast<std::size_t>(node * max_gpus_per_node_ + device); };
    for (const TaskPlacement& placement : placements) {
      if (placement.task != sync_.trainer) continue;
      slices(placement, [&](int node, int device, const cost::WeightSlice& slice) {
        held_[slot(node, device)] = slice;
        held_slots_.push_back(slot(node, device));
      });
    }
    reshard_gpus_.clear();
    for (const TaskPlacement& placement : placements) {
      if (placement.task != sync_.reader) continue;
      slices(placement, [&](int node, int device, const cost::WeightSlice& slice) {
        reshard_gpus_.push_back({node, slice, held_[slot(node, device)]});
      });
    }
    for (std::size_t s : held_slots_) held_[s] = {};
    model_.reshard_seconds(sync_.reader, reshard_gpus_, out);
  } else {
    all_stages_.clear();
    stage_offsets_.clear();
    for (const TaskPlacement& placement : placements) {
      if (placement.task != sync_.reader) continue;
      for (const Replica& replica : placement.replicas) {
        stage_offsets_.push_back(static_cast<int>(all_stages_.size()));
        for (const Stage& s : replica.stages) {
          all_stages_.push_back({s.node, static_cast<int>(s.devices.size()), s.layers});
        }
      }
    }
    stage_offsets_.push_back(static_cast<int>(all_stages_.size()));
    spans_.clear();
    for (std::size_t r = 0; r + 1 < stage_offsets_.size(); ++r) {
      spans_.emplace_back(all_stages_.data() + stage_offsets_[r],
                          static_cast<std::size_t>(stage_offsets_[r + 1] - stage_offsets_[r]));
    }
    model_.weight_load_seconds(sync_.reader, spans_, out);
  }
  if (explain) prediction_.tasks[sync_.task].terms = out.terms();
  return out.total();
}

void Evaluator::describe_groups(const Plan& plan) {
  const hw::Cluster& cluster = model_.cluster();
  group_gpus_per_node_.resize(plan.groups.size());
  double price = 0;
  bool priced = true;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    group_gpus_per_node_[g].assign(cluster.nodes.size(), 0);
    for (const Gpu& gpu : plan.groups[g].gpus) {
      ++group_gpus_per_node_[g][gpu.node];
      if (gpu_price_[gpu.node] >= 0) {
        price += gpu_price_[gpu.node];
      } else {
        priced = false;
      }
    }
  }
  prediction_.price_per_hour = priced ? std::optional<double>(price) : std::nullopt;
  group_sets_.resize(plan.groups.size());
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    model_.describe_gpu_set(group_gpus_per_node_[g], group_sets_[g]);
  }
}

void Evaluator::start(const Plan& plan) {
  const int n = static_cast<int>(model_.graph().tasks.size());
  prediction_.feasible = false;
  prediction_.infeasible.clear();
  prediction_.overflow = 0;
  prediction_.iteration_seconds = 0;
  prediction_.samples_per_second = 0;
  prediction_.tokens_per_second = 0;
  prediction_.tasks.resize(n);
  for (TaskPrediction& t : prediction_.tasks) {
    t.group = -1;
    t.start = t.seconds = t.weights_in = 0;
    t.terms.clear();
    t.replica_seconds.clear();
    t.kv_budget.clear();
  }
  prediction_.groups.assign(plan.groups.size(), GroupPrediction{});
  task_group_.assign(n, -1);
  describe_groups(plan);
}

const Prediction& Evaluator::evaluate(const Plan& plan, bool explain) {
  start(plan);
  if (!runs_precision(plan) || !check_memory(plan)) return prediction_;
  int placement_index = 0;  // placements in check_memory's order, which kept their GPUs' slots
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    for (const TaskPlacement& placement : plan.groups[g].tasks) {
      TaskPrediction& tp = prediction_.tasks[placement.task];
      tp.group = static_cast<int>(g);
      group_offload_ = plan.groups[g].offload;
      tp.seconds = task_seconds(static_cast<int>(g), placement_index++, placement, explain);
      task_group_[placement.task] = static_cast<int>(g);
    }
  }
  finish(plan, explain);
  return prediction_;
}

const Prediction& Evaluator::compose(const Plan& plan, std::span<const GroupPart* const> parts) {
  assert(parts.size() == plan.groups.size());
  start(plan);
  evaluated_ = nullptr;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const GroupPart& part = *parts[g];
    assert(part.tasks.size() == plan.groups[g].tasks.size());
    prediction_.groups[g].tightest = part.tightest;
    for (std::size_t j = 0; j < part.tasks.size(); ++j) {
      const int task = plan.groups[g].tasks[j].task;
      TaskPrediction& tp = prediction_.tasks[task];
      tp.group = static_cast<int>(g);
      tp.seconds = part.tasks[j].seconds;
      for (const auto& [seconds, count] : part.tasks[j].replica_seconds) {
        tp.replica_seconds.insert(tp.replica_seconds.end(), count, seconds);
      }
      task_group_[task] = static_cast<int>(g);
    }
  }
  finish(plan, false);
  return prediction_;
}

void Evaluator::part_of(const Plan& plan, int group, GroupPart& out) const {
  assert(prediction_.feasible);
  out.tightest = prediction_.groups[group].tightest;
  out.tasks.resize(plan.groups[group].tasks.size());
  for (std::size_t j = 0; j < out.tasks.size(); ++j) {
    const TaskPrediction& tp = prediction_.tasks[plan.groups[group].tasks[j].task];
    GroupPart::Task& task = out.tasks[j];
    task.seconds = tp.seconds;
    task.replica_seconds.clear();
    for (double seconds : tp.replica_seconds) {
      if (task.replica_seconds.empty() || task.replica_seconds.back().first != seconds) {
        task.replica_seconds.emplace_back(seconds, 0);
      }
      ++task.replica_seconds.back().second;
    }
  }
}

void Evaluator::finish(const Plan& plan, bool explain) {
  const workload::TaskGraph& graph = model_.graph();
  for (int t = 0; t < static_cast<int>(graph.tasks.size()); ++t) {
    const TaskKind kind = graph.tasks[t].kind;
    if (kind == TaskKind::kCpu) {
      prediction_.tasks[t].seconds = model_.cpu_seconds(t);
      if (explain) prediction_.tasks[t].terms = {{"CPU", prediction_.tasks[t].seconds}};
      task_group_[t] = location_[t] >= 0 ? task_group_[location_[t]] : -1;
    } else if (kind == TaskKind::kWeightSync) {
      prediction_.tasks[t].seconds = weight_sync_seconds(plan, explain);
    }
  }
  schedule(plan, explain);
}

const Prediction& Evaluator::reprice(const Plan& plan) {
  assert(evaluated_ == &plan && prediction_.feasible);
  prediction_.feasible = false;
  for (TaskPrediction& t : prediction_.tasks) {
    t.terms.clear();
    t.kv_budget.clear();
  }
  for (GroupPrediction& group : prediction_.groups) group.busy_seconds = 0;
  int placement_index = 0;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    for (const TaskPlacement& placement : plan.groups[g].tasks) {
      group_offload_ = plan.groups[g].offload;
      prediction_.tasks[placement.task].seconds =
          task_seconds(static_cast<int>(g), placement_index++, placement, false);
    }
  }
  schedule(plan, false);
  return prediction_;
}

void Evaluator::schedule(const Plan& plan, bool explain) {
  const workload::TaskGraph& graph = model_.graph();
  const workload::Workload& workload = model_.workload();
  const int n = static_cast<int>(graph.tasks.size());
  // The schedule of one iteration.
  finish_.assign(n, 0.0);
  group_free_.assign(plan.groups.size(), 0.0);
  edge_transfer_.assign(graph.edges.size(), 0.0);
  // The group whose GPUs each task occupies, in turn with its other tasks: a GPU task's own,
  // and the weight sync's reader's (it reshards or loads the new weights into generation).
  gpu_group_.resize(n);
  for (int t = 0; t < n; ++t) gpu_group_[t] = graph.tasks[t].on_gpu() ? prediction_.tasks[t].group : -1;
  const int sync_group = sync_.exists() ? task_group_[sync_.reader] : -1;
  if (sync_group >= 0) gpu_group_[sync_.task] = sync_group;
  double makespan = 0;
  for (int t : order_) {
    TaskPrediction& tp = prediction_.tasks[t];
    double ready = 0;
    double waited = 0;
    for (const int i : edges_into_[t]) {
      const workload::Edge& e = graph.edges[i];
      if (e.previous_iteration()) {
        const int from_group = task_group_[e.from];
        if (t == sync_.task) {
          // The trained weights cross to the generation group's host memory while it works on
          // earlier iterations: in the steady state only.
          edge_transfer_[i] = 0;
          tp.weights_in = 0;
          if (from_group < 0 || sync_group < 0 || from_group == sync_group) continue;
          cost::Breakdown weights(explain);
          edge_transfer_[i] = model_.weight_transfer_seconds(sync_.bytes, group_sets_[from_group],
                                                             group_sets_[sync_group], weights);
          tp.weights_in = edge_transfer_[i];
          if (explain) tp.terms.insert(tp.terms.end(), weights.terms().begin(), weights.terms().end());
          continue;
        }
        // The weights it reads, trained in another group the iteration before: in the
        // steady state only.
        if (!graph.reads_weights(e) || from_group < 0 || task_group_[t] < 0 || from_group == task_group_[t]) continue;
        cost::Breakdown weights;
        edge_transfer_[i] = model_.weight_transfer_seconds(e.bytes, group_sets_[from_group],
                                                           group_sets_[task_group_[t]], weights);
        if (explain) tp.terms.push_back({"(receives its trained weights from another group)", edge_transfer_[i]});
        continue;
      }
      double arrive = finish_[e.from];
      const int from_group = task_group_[e.from];
      edge_transfer_[i] = 0;
      if (graph.moves_data(e) && from_group >= 0 && task_group_[t] >= 0 && from_group != task_group_[t]) {
        const double transfer =
            model_.transfer_seconds(e.bytes, group_sets_[from_group], group_sets_[task_group_[t]]);
        edge_transfer_[i] = transfer;
        arrive += transfer;
        waited = std::max(waited, transfer);
      }
      ready = std::max(ready, arrive);
    }
    if (explain && waited > 0) tp.terms.push_back({"(waits for inputs from other groups)", waited});
    // A GPU task of a partial plan (not placed) takes no time and no group.
    const int group = gpu_group_[t];
    tp.start = group >= 0 ? std::max(ready, group_free_[group]) : ready;
    finish_[t] = tp.start + tp.seconds;
    if (group >= 0) {
      group_free_[group] = finish_[t];
      prediction_.groups[group].busy_seconds += tp.seconds;
    }
    makespan = std::max(makespan, finish_[t]);
  }
  // Steady state: iterations overlap as far as the dependencies allow (the next generation
  // waits only for the new weights, up to the staleness bound; a group runs its tasks in turn,
  // iteration after iteration). An iteration takes the period of that repeating schedule.
  task_seconds_.resize(n);
  for (int t = 0; t < n; ++t) task_seconds_[t] = prediction_.tasks[t].seconds;
  schedule_edges(graph, order_, task_seconds_, edge_transfer_, gpu_group_,
                 static_cast<int>(plan.groups.size()), cycle_edges_, first_in_group_, last_in_group_);
  const double period = period_solver_.period(n, cycle_edges_, order_);
  const double iteration = period > 0 ? period : makespan;
  prediction_.makespan_seconds = makespan;
  // Inputs are bounded (core::kSmallestQuantity), so times stay finite; a cluster built in code
  // may still hold a rate of zero in all but name.
  const bool finite = std::isfinite(iteration) && std::all_of(prediction_.tasks.begin(), prediction_.tasks.end(),
                                                              [](const TaskPrediction& t) { return std::isfinite(t.seconds); });
  if (!finite) {
    prediction_.infeasible = "a predicted time is not finite: a rate of the cluster is too small to price";
    prediction_.overflow = std::numeric_limits<double>::infinity();
    return;
  }
  prediction_.feasible = true;
  prediction_.iteration_seconds = iteration;
  const double samples = workload.samples_per_iteration();
  prediction_.samples_per_second = samples / iteration;
  prediction_.tokens_per_second =
      samples * (workload.prompt_length_tokens + model_.mean_response()) / iteration;
}

}  // namespace hetrl::plan
