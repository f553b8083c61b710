#include "planner/ilp_configs.h"

#include <algorithm>
#include <limits>

#include "planner/layout.h"

namespace hetrl::planner::ilp_detail {

using workload::TaskKind;

std::vector<Allocation> enumerate_allocations(const cost::CostModel& model,
                                              const std::vector<std::vector<int>>& classes) {
  const hw::Cluster& cluster = model.cluster();
  const std::size_t k = classes.size();
  std::vector<Allocation> out;
  std::vector<int> counts(k, 0);
  std::vector<int> gpus_per_node(cluster.nodes.size(), 0);
  while (true) {
    std::size_t c = 0;
    for (; c < k; ++c) {
      if (++counts[c] <= static_cast<int>(classes[c].size())) break;
      counts[c] = 0;
    }
    if (c == k) break;
    Allocation a;
    a.counts = counts;
    std::fill(gpus_per_node.begin(), gpus_per_node.end(), 0);
    for (std::size_t cls = 0; cls < k; ++cls) {
      for (int i = 0; i < counts[cls]; ++i) {
        const int node = classes[cls][i];
        a.nodes.push_back(node);
        gpus_per_node[node] = cluster.nodes[node].gpu_count;
        a.price += cluster.node_price_per_hour(cluster.nodes[node]).value_or(0.0);
      }
    }
    model.describe_gpu_set(gpus_per_node, a.set);
    out.push_back(std::move(a));
  }
  return out;
}

std::size_t Composer::KeyHash::operator()(const std::vector<int>& v) const {
  std::size_t h = 1469598103934665603ULL;  // FNV-1a
  for (int x : v) h = (h ^ static_cast<std::size_t>(x)) * 1099511628211ULL;
  return h;
}

Composer::Composer(const cost::CostModel& model, const workload::ModelCatalog& models,
                   const SearchSpace& space, const std::vector<Allocation>& allocations,
                   const core::Clock& clock, double deadline, long long max_configs)
    : model_(model), models_(models), space_(space), allocations_(allocations), clock_(clock),
      deadline_(deadline), max_configs_(max_configs), sync_task_(model.graph().weight_sync().task),
      evaluator_(model), busy_cap_(allocations.size(), std::numeric_limits<double>::infinity()) {}

bool Composer::out_of_time() {
  if (end_ == ComposeEnd::kDone && clock_.seconds() > deadline_) end_ = ComposeEnd::kTimeLimit;
  return end_ != ComposeEnd::kDone;
}

std::vector<std::vector<double>> Composer::floors(const std::vector<int>& tasks) {
  std::vector<std::vector<double>> out(model_.graph().tasks.size());
  for (int t : tasks) out[t].assign(allocations_.size(), std::numeric_limits<double>::infinity());
  for (std::size_t a = 0; a < allocations_.size(); ++a) {
    for (int t : tasks) {
      const std::vector<Option>& options = options_for(t, static_cast<int>(a));
      if (out_of_time()) return {};
      if (!options.empty()) out[t][a] = options.front().seconds;
    }
    options_.clear();
  }
  return out;
}

ComposeEnd Composer::compose(const std::set<std::vector<int>>& groups) {
  for (std::size_t a = 0; a < allocations_.size() && end_ == ComposeEnd::kDone; ++a) {
    for (const std::vector<int>& group : groups) {
      const auto usable = usable_.find(group);
      if (usable != usable_.end() && !usable->second[a]) continue;
      compose_group(group, static_cast<int>(a));
      if (end_ != ComposeEnd::kDone) break;
    }
    options_.clear();
  }
  return end_;
}

const std::vector<Config>& Composer::configs(const std::vector<int>& group, int allocation) const {
  static const std::vector<Config> kNone;
  const auto found = configs_.find({group, allocation});
  return found == configs_.end() ? kNone : found->second;
}

long long Composer::kept() const {
  long long kept = 0;
  for (const auto& [key, configs] : configs_) kept += static_cast<long long>(configs.size());
  return kept;
}

const std::vector<TaskChoice>& Composer::choices_for(int task, int allocation) {
  const auto key = std::make_pair(task, allocation);
  auto found = choices_.find(key);
  if (found == choices_.end()) {
    found = choices_.emplace(key, task_choices(model_, models_, space_, task, allocations_[allocation].nodes)).first;
  }
  return found->second;
}

long long Composer::space_size(const std::set<std::vector<int>>& groups) {
  constexpr long long kMany = 1LL << 60;
  long long total = 0;
  for (const std::vector<int>& group : groups) {
    for (std::size_t a = 0; a < allocations_.size(); ++a) {
      long long product = 1;
      for (int t : group) {
        const long long n = static_cast<long long>(choices_for(t, static_cast<int>(a)).size());
        product = n == 0 ? 0 : (product > kMany / n ? kMany : product * n);
      }
      total = std::min(kMany, total + product);
    }
  }
  return total;
}

const std::vector<Composer::Option>& Composer::options_for(int task, int allocation) {
  const auto key = std::make_pair(task, allocation);
  const auto found = options_.find(key);
  if (found != options_.end()) return found->second;
  std::vector<Option>& out = options_[key];
  const bool generate = model_.graph().tasks[task].kind == TaskKind::kGenerate;
  std::vector<GroupChoice> group(1);
  group[0].tasks = {task};
  group[0].nodes = allocations_[allocation].nodes;
  plan::Plan p;
  std::map<std::vector<double>, int> signatures;
  std::vector<double> resident;
  for (const TaskChoice& choice : choices_for(task, allocation)) {
    if (out_of_time()) return out;
    group[0].choices = {choice};
    if (!realize(model_, models_, group, p)) continue;
    const plan::Prediction& balanced = balance_shares(evaluator_, p, 1);
    if (!balanced.feasible) continue;
    Option o;
    o.choice = choice;
    if (generate) {
      // Its time depends on the memory the group's other tasks leave for the KV cache; the
      // largest share is at least 1 / dp, and no replica is faster than its floor.
      o.seconds = std::numeric_limits<double>::infinity();
      std::vector<cost::Stage> stages;
      for (const plan::Replica& r : p.groups[0].tasks[0].replicas) {
        stages.clear();
        for (const plan::Stage& st : r.stages) {
          stages.push_back({st.node, static_cast<int>(st.devices.size()), st.layers});
        }
        o.seconds = std::min(o.seconds, model_.generation_floor(task, stages));
      }
    } else {
      o.seconds = balanced.tasks[task].seconds;
    }
    resident.clear();
    for (const plan::MemoryUse& use : evaluator_.gpu_memory(0)) {
      o.memory.push_back({use.weights, use.gradients, use.optimizer, use.activations, use.kv_cache});
      resident.push_back(use.weights + use.gradients + use.optimizer);
    }
    // Which slice of the model each GPU holds, so a forward pass composed with its role's
    // training reads the trained weights exactly when the evaluator says it does.
    const plan::Group& g = p.groups[0];
    const plan::TaskPlacement& placement = g.tasks[0];
    const int dp = static_cast<int>(placement.replicas.size());
    std::vector<cost::Stage> stages;
    for (const plan::Replica& r : placement.replicas) {
      stages.clear();
      for (const plan::Stage& st : r.stages) stages.push_back({st.node, static_cast<int>(st.devices.size()), st.layers});
      for (int index = 0; index < static_cast<int>(stages.size()); ++index) {
        const std::uint64_t layout = model_.stage_memory(task, stages, index, dp, placement.train).layout;
        for (int device : r.stages[index].devices) {
          const auto slot = std::find(g.gpus.begin(), g.gpus.end(), plan::Gpu{r.stages[index].node, device}) - g.gpus.begin();
          o.memory[static_cast<std::size_t>(slot)].layout = layout;
        }
      }
    }
    // Options alike in memory share a signature: what each GPU keeps, and the slice it holds
    // (which decides whether a forward pass composed with it reads its weights).
    for (const cost::StageMemory& m : o.memory) resident.push_back(static_cast<double>(m.layout));
    o.signature = signatures.emplace(resident, static_cast<int>(signatures.size())).first->second;
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(), [](const Option& a, const Option& b) { return a.seconds < b.seconds; });
  return out;
}

void Composer::prepare(Search& s, const std::vector<int>& tasks, int allocation) {
  const workload::TaskGraph& graph = model_.graph();
  s.tasks = tasks;
  s.allocation = allocation;
  s.cap = busy_cap_[allocation];
  s.generate = -1;
  s.trainer = -1;
  s.order.clear();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] == graph.weight_sync().trainer) s.trainer = static_cast<int>(i);
    if (graph.tasks[tasks[i]].kind == TaskKind::kGenerate) {
      s.generate = static_cast<int>(i);
    } else {
      s.order.push_back(static_cast<int>(i));
    }
  }
  // Each role keeps its own memory on every GPU; a role trained here is marked so before its
  // tasks are added, so every partial sum is a floor of the whole (its forward passes reuse the
  // trained weights).
  std::vector<workload::Role> roles;
  s.role_of.assign(tasks.size(), 0);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const workload::Role role = *graph.tasks[tasks[i]].role;
    auto it = std::find(roles.begin(), roles.end(), role);
    s.role_of[i] = static_cast<int>(it - roles.begin());
    if (it == roles.end()) roles.push_back(role);
  }
  s.roles = static_cast<int>(roles.size());
  s.capacity.clear();
  for (int node : allocations_[allocation].nodes) {
    for (int d = 0; d < model_.cluster().nodes[node].gpu_count; ++d) s.capacity.push_back(model_.usable_memory(node));
  }
  s.slots = static_cast<int>(s.capacity.size());
  s.initial.assign(static_cast<std::size_t>(s.roles) * s.slots, cost::RoleMemory{});
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (graph.tasks[tasks[i]].kind != TaskKind::kTrain) continue;
    for (int slot = 0; slot < s.slots; ++slot) {
      s.initial[static_cast<std::size_t>(s.role_of[i]) * s.slots + slot].trained = true;
    }
  }
  const std::size_t depth = s.order.size() + 1;
  s.saved.assign(depth, std::vector<cost::RoleMemory>(s.slots));
  s.total.assign(depth, std::vector<double>(s.slots, 0.0));
  s.transient.assign(depth, std::vector<double>(s.slots, 0.0));
  s.rest_floor.assign(depth, 0.0);
  for (std::size_t d = s.order.size(); d-- > 0;) {
    s.rest_floor[d] = s.rest_floor[d + 1] + s.options[s.order[d]]->front().seconds;
  }
  s.pick.assign(tasks.size(), 0);
  s.front.clear();
}

void Composer::compose_group(const std::vector<int>& tasks, int allocation) {
  std::vector<Config>& out = configs_[{tasks, allocation}];
  Search& s = search_;
  s.options.assign(tasks.size(), nullptr);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    s.options[i] = &options_for(tasks[i], allocation);
    if (end_ != ComposeEnd::kDone || s.options[i]->empty()) return;
  }
  prepare(s, tasks, allocation);
  const std::size_t gen_options = s.generate >= 0 ? s.options[s.generate]->size() : 1;
  for (std::size_t g = 0; g < gen_options && end_ == ComposeEnd::kDone; ++g) {
    double busy = 0;
    s.cells = s.initial;
    std::fill(s.total[0].begin(), s.total[0].end(), 0.0);
    std::fill(s.transient[0].begin(), s.transient[0].end(), 0.0);
    s.generation.clear();
    if (s.generate >= 0) {
      s.pick[s.generate] = static_cast<int>(g);
      const Option& o = (*s.options[s.generate])[g];
      if (!add_option(s, 0, s.generate, o)) continue;
      busy = o.seconds;
    }
    descend(s, 0, busy);
  }
  if (end_ == ComposeEnd::kDone) price_front(s, out);
}

void Composer::price_front(Search& s, std::vector<Config>& out) {
  // The composed figures agree with the evaluator's to rounding; keep its, and the undominated.
  std::vector<GroupChoice> group(1);
  group[0].tasks = s.tasks;
  group[0].nodes = allocations_[s.allocation].nodes;
  plan::Plan p;
  for (Config& c : s.front) {
    group[0].choices = c.choices;
    if (!realize(model_, models_, group, p)) continue;
    const plan::Prediction& prediction = balance_shares(evaluator_, p, 1);
    if (!prediction.feasible) continue;
    for (std::size_t i = 0; i < s.tasks.size(); ++i) c.seconds[i] = prediction.tasks[s.tasks[i]].seconds;
    c.sync = sync_task_ >= 0 ? prediction.tasks[sync_task_].seconds : 0.0;
    keep_if_not_dominated(out, std::move(c));
  }
}

namespace {

// Adds a task's memory to its role's cells on every GPU and the GPUs' totals, stopping at the
// first GPU over its capacity (false). The kind is fixed at compile time, so the role rule's
// dispatch is decided once, not per GPU.
template <TaskKind kKind>
bool fold(cost::RoleMemory* row, const std::vector<cost::StageMemory>& memory, const std::vector<double>& capacity,
          std::vector<double>& total, std::vector<double>& transient) {
  for (std::size_t slot = 0; slot < capacity.size(); ++slot) {
    cost::RoleMemory& cell = row[slot];
    const cost::StageMemory& m = memory[slot];
    const double before = cell.resident();
    cell.add(kKind, m);
    total[slot] += cell.resident() - before;
    transient[slot] = std::max(transient[slot], m.activations + m.kv_cache_min);
    if (capacity[slot] - (total[slot] + transient[slot]) < 0) return false;
  }
  return true;
}

}  // namespace

bool Composer::add_option(Search& s, std::size_t depth, int i, const Option& o) {
  // Generation is added at depth 0 in place; the others fold into depth + 1.
  const bool in_place = i == s.generate;
  const std::size_t to = in_place ? depth : depth + 1;
  if (!in_place) {
    s.total[to] = s.total[depth];
    s.transient[to] = s.transient[depth];
  }
  cost::RoleMemory* row = s.cells.data() + static_cast<std::size_t>(s.role_of[i]) * s.slots;
  bool fits = false;
  switch (model_.graph().tasks[s.tasks[i]].kind) {
    case TaskKind::kTrain: fits = fold<TaskKind::kTrain>(row, o.memory, s.capacity, s.total[to], s.transient[to]); break;
    case TaskKind::kForward: fits = fold<TaskKind::kForward>(row, o.memory, s.capacity, s.total[to], s.transient[to]); break;
    default: fits = fold<TaskKind::kGenerate>(row, o.memory, s.capacity, s.total[to], s.transient[to]); break;
  }
  if (!fits && !in_place) remove_option(s, depth, i);
  return fits;
}

void Composer::remove_option(Search& s, std::size_t depth, int i) {
  const std::vector<cost::RoleMemory>& saved = s.saved[depth];
  std::copy(saved.begin(), saved.end(), s.cells.begin() + static_cast<std::ptrdiff_t>(s.role_of[i]) * s.slots);
}

void Composer::descend(Search& s, std::size_t d, double busy) {
  if (d == s.order.size()) {
    leaf(s, busy);
    return;
  }
  const int i = s.order[d];
  const std::vector<Option>& options = *s.options[i];
  // The role's cells as they are here: each option is added to them and taken off again.
  const cost::RoleMemory* row = s.cells.data() + static_cast<std::size_t>(s.role_of[i]) * s.slots;
  std::copy(row, row + s.slots, s.saved[d].begin());
  for (std::size_t k = 0; k < options.size() && end_ == ComposeEnd::kDone; ++k) {
    // Options come fastest first: past the cap, so are the rest.
    if (busy + options[k].seconds + s.rest_floor[d + 1] > s.cap) break;
    if (!add_option(s, d, i, options[k])) continue;
    s.pick[i] = static_cast<int>(k);
    descend(s, d + 1, busy + options[k].seconds);
    remove_option(s, d, i);
  }
}

void Composer::leaf(Search& s, double busy) {
  if (++composed_ % 4096 == 0 && out_of_time()) return;
  if (composed_ > max_configs_) {
    end_ = ComposeEnd::kTooMany;
    return;
  }
  Config c;
  c.choices.resize(s.tasks.size());
  c.seconds.resize(s.tasks.size());
  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    const Option& o = (*s.options[i])[s.pick[i]];
    c.choices[i] = o.choice;
    c.seconds[i] = o.seconds;
  }
  if (s.generate >= 0) {
    // Generation's time depends only on the resident memory of the others, and the weight
    // sync's on the trainer's strategy: look them up by the others' memory signatures and the
    // trainer's strategy, or price the whole group once for them.
    s.key.clear();
    for (int i : s.order) s.key.push_back((*s.options[i])[s.pick[i]].signature);
    // The weight sync reshards from the trainer's layout: its strategy, not only its memory.
    if (s.trainer >= 0) s.key.push_back(s.pick[s.trainer]);
    auto it = s.generation.find(s.key);
    if (it == s.generation.end()) {
      std::vector<GroupChoice> group(1);
      group[0].tasks = s.tasks;
      group[0].nodes = allocations_[s.allocation].nodes;
      group[0].choices = c.choices;
      // The search found it fits; the evaluator may disagree only at the last bit, and then
      // this leaf is dropped but the price is not kept for others with the same memory.
      if (!realize(model_, models_, group, scratch_)) return;
      const plan::Prediction& prediction = balance_shares(evaluator_, scratch_, 1);
      if (!prediction.feasible) return;
      GenerationPrice price;
      price.seconds = prediction.tasks[s.tasks[s.generate]].seconds;
      price.sync = sync_task_ >= 0 ? prediction.tasks[sync_task_].seconds : 0.0;
      it = s.generation.emplace(s.key, price).first;
    }
    busy += it->second.seconds - c.seconds[s.generate];
    if (busy > s.cap) return;
    c.seconds[s.generate] = it->second.seconds;
    c.sync = it->second.sync;
  }
  keep_if_not_dominated(s.front, std::move(c));
}

bool Composer::dominates(const Config& a, const Config& b) {
  for (std::size_t i = 0; i < a.seconds.size(); ++i) {
    if (a.seconds[i] > b.seconds[i]) return false;
  }
  return a.sync <= b.sync;
}

void Composer::keep_if_not_dominated(std::vector<Config>& front, Config c) {
  // The period only grows with any duration and a group's price depends on its nodes alone, so
  // a configuration no faster than another in every task is never needed for the optimum.
  for (const Config& f : front) {
    if (dominates(f, c)) return;
  }
  std::erase_if(front, [&](const Config& f) { return dominates(c, f); });
  front.push_back(std::move(c));
}

}  // namespace hetrl::planner::ilp_detail
