#include "planner/ilp_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "plan/periodic.h"
#include "planner/layout.h"

namespace hetrl::planner {
namespace {

using workload::TaskKind;
using Terms = std::vector<std::pair<int, double>>;

struct Config {
  std::vector<TaskChoice> choices;  // per task of the group
  std::vector<double> seconds;      // per task of the group
  double reshard = 0;               // the weight sync when it stays inside the group
};

// One strategy of one task on one allocation, priced with the task alone in the group.
struct Option {
  TaskChoice choice;
  double seconds = 0;  // generation: a floor (its time depends on the memory others leave)
  int signature = 0;   // the task's options with the same resident memory share one
  std::vector<double> resident;   // per GPU of the allocation: weights, gradients, optimizer
  std::vector<double> transient;  // per GPU: activations, or the least KV cache
};

struct VectorHash {
  std::size_t operator()(const std::vector<int>& v) const {
    std::size_t h = 1469598103934665603ULL;
    for (int x : v) h = (h ^ static_cast<std::size_t>(x)) * 1099511628211ULL;
    return h;
  }
};

struct GenerationPrice {
  double seconds = 0;
  double reshard = 0;
};

// The state of the enumeration of one group's configurations on one allocation: per depth of
// the search, the memory so far on every GPU (per model, in total, and the largest transient).
struct Search {
  std::vector<int> tasks;
  int allocation = 0;
  double cap = 0;   // the group's busy time may not exceed this
  int generate = -1;  // position of generation in `tasks`, or -1
  std::vector<int> order;  // the other positions, searched in this order
  std::vector<const std::vector<Option>*> options;  // per position
  std::vector<int> model_of;  // per position: the model's index in the group
  std::vector<bool> additive;  // per position: its model is trained here (memory adds up)
  std::vector<bool> counted;   // per position: its weights count (not a trained model's pass)
  int models = 0, slots = 0;
  std::vector<double> capacity;  // per GPU
  std::vector<std::vector<double>> acc, total, transient;  // per depth
  std::vector<double> rest_floor;  // per depth: the least time the tasks from there on take
  std::vector<int> pick;           // per position: the option chosen
  std::vector<int> key;
  std::unordered_map<std::vector<int>, GenerationPrice, VectorHash> generation;
  std::vector<Config> front;
};

struct Allocation {
  std::vector<int> counts;  // nodes per class
  std::vector<int> nodes;   // representative nodes, by class then index
  cost::CostModel::GpuSet set;
  std::vector<int> gpus_per_node;
  double price = 0;  // USD per hour
};

struct GroupVars {
  std::vector<int> tasks;
  std::vector<int> allocations;             // indices into Builder::allocations_
  std::vector<int> a;                       // column per allocation
  std::vector<int> w;                       // cost objective: T when the allocation is chosen
  std::vector<std::vector<int>> x;          // columns per allocation and configuration
  std::vector<const std::vector<Config>*> configs;  // per allocation
  std::vector<Terms> duration;  // per task of the group: its duration over the group's columns
  Terms busy;                   // the sum of its tasks' durations
};

class Builder {
 public:
  Builder(const cost::CostModel& model, const workload::ModelCatalog& models, const IlpParams& params,
          std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max())
      : model_(model), models_(models), params_(params), evaluator_(model),
        classes_(model.cluster().node_classes().members), host_(model.graph().host_tasks()),
        deadline_(deadline) {
    enumerate_allocations();
    busy_cap_.assign(allocations_.size(), std::numeric_limits<double>::infinity());
    const workload::TaskGraph& graph = model.graph();
    partitions_ = partitions(graph.gpu_tasks());
    const workload::WeightSync sync = graph.weight_sync();
    if (sync.exists()) {
      sync_ = sync.task;
      sync_train_ = sync.trainer;
      sync_generate_ = sync.reader;
      sync_bytes_ = sync.bytes;
    }
  }

  // Lays `warm` out as the space does (the warm start, when it is a plan of the space) and
  // bounds the groups' busy time by the minimum throughput and by that plan, when it meets the
  // constraints: no configuration a better plan could use is lost. Call before build().
  void bound_by(const plan::Plan* warm);
  // `warm` laid out as the space lays out its strategies (shares balanced once); false when it
  // is not a plan of the space.
  bool space_version(const plan::Plan& warm, plan::Plan& out);
  ilp::Model build();
  // The plan of a solution; false when the solution is not a whole plan.
  bool decode(const std::vector<double>& values, plan::Plan& out);

  long long configs() const { return composed_configs_; }
  long long kept_configs() const {
    long long kept = 0;
    for (const auto& [key, configs] : cache_) kept += static_cast<long long>(configs.size());
    return kept;
  }
  int t_column() const { return t_; }
  // The values of every column for the warm plan given to bound_by, or empty when it is not
  // one of the model's.
  std::vector<double> warm_start(const ilp::Model& m);

 private:
  void enumerate_allocations();
  // The configurations of a group's tasks on an allocation that fit, but only those that no
  // other is at least as fast as in every task (and the reshard).
  const std::vector<Config>& configs_for(const std::vector<int>& tasks, int allocation);
  const std::vector<TaskChoice>& choices_for(int task, int allocation);
  // The task's strategies on an allocation that fit alone, priced alone, fastest first.
  const std::vector<Option>& options_for(int task, int allocation);
  bool add_option(Search& s, std::size_t depth, int i, const Option& o);
  // Throws once the build has passed its time limit, or the model its size limit.
  void check_deadline() const;
  void check_size(const ilp::Model& m) const;
  void descend(Search& s, std::size_t depth, double busy);
  void leaf(Search& s, double busy);
  // The space's configurations: for every distinct group of the partitions and every
  // allocation, the product of its tasks' strategy counts.

 public:
  long long count_configs();

 private:
  static bool dominates(const Config& a, const Config& b);
  static void keep_if_not_dominated(std::vector<Config>& front, Config c);
  double transfer(double bytes, int a, int b) const {
    return model_.transfer_seconds(bytes, allocations_[a].set, allocations_[b].set);
  }
  double weight_sync(int train_allocation, int generate_allocation) const;

  const cost::CostModel& model_;
  const workload::ModelCatalog& models_;
  const IlpParams& params_;
  plan::Evaluator evaluator_;
  std::vector<std::vector<int>> classes_;
  std::vector<int> host_;
  std::vector<Allocation> allocations_;
  std::map<std::pair<std::vector<int>, int>, std::vector<Config>> cache_;
  std::map<std::pair<int, int>, std::vector<TaskChoice>> choices_;  // (task, allocation)
  std::map<std::pair<int, int>, std::vector<Option>> options_;      // (task, allocation)
  Search search_;
  plan::Plan scratch_;
  // Per allocation: the most a group on it may be busy per iteration and still be part of a
  // plan better than the incumbent (a group runs its tasks in turn, so the period is at least
  // their sum); infinite without an incumbent.
  std::vector<double> busy_cap_;
  std::optional<plan::Plan> incumbent_;  // the warm plan as the space lays it out
  long long composed_configs_ = 0;
  // The build stops here: the time limit covers building and solving.
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  int sync_ = -1, sync_train_ = -1, sync_generate_ = -1;
  double sync_bytes_ = 0;
  // The model's structure, kept to decode solutions.
  std::vector<std::vector<std::vector<int>>> partitions_;
  std::vector<int> y_;
  std::vector<std::vector<GroupVars>> groups_;  // per partition
  std::map<std::tuple<std::size_t, int, int, int, int>, int> z_;  // (p, g, h, a, b) -> column
  std::vector<int> start_;
  int t_ = -1;
};

bool Builder::space_version(const plan::Plan& warm, plan::Plan& out) {
  // Its groups' tasks and nodes (by class, as the allocations order them) with its strategies,
  // each of which must be one of the space's, on whole nodes, every GPU task placed once.
  std::vector<int> class_of(model_.cluster().nodes.size(), -1);
  for (std::size_t c = 0; c < classes_.size(); ++c) {
    for (int node : classes_[c]) class_of[node] = static_cast<int>(c);
  }
  std::vector<GroupChoice> groups;
  std::vector<int> placed;
  std::vector<int> gpus_used(model_.cluster().nodes.size(), 0);
  for (const plan::Group& g : warm.groups) {
    GroupChoice& choice = groups.emplace_back();
    for (const plan::Gpu& gpu : g.gpus) {
      if (gpu.node < 0 || gpu.node >= static_cast<int>(gpus_used.size())) return false;
      ++gpus_used[gpu.node];
      if (std::find(choice.nodes.begin(), choice.nodes.end(), gpu.node) == choice.nodes.end()) {
        choice.nodes.push_back(gpu.node);
      }
    }
    for (int node : choice.nodes) {
      if (gpus_used[node] != model_.cluster().nodes[node].gpu_count) return false;
    }
    std::stable_sort(choice.nodes.begin(), choice.nodes.end(),
                     [&](int a, int b) { return class_of[a] < class_of[b]; });
    for (const plan::TaskPlacement& t : g.tasks) {
      if (t.replicas.empty()) return false;
      TaskChoice c{static_cast<int>(t.replicas.front().stages.front().devices.size()),
                   static_cast<int>(t.replicas.front().stages.size()), t.train};
      const std::vector<TaskChoice> space = task_choices(model_, models_, params_.space, t.task, choice.nodes);
      const bool known = std::any_of(space.begin(), space.end(), [&](const TaskChoice& x) {
        return x.tp == c.tp && x.pp == c.pp && x.train.zero_stage == c.train.zero_stage &&
               x.train.recompute == c.train.recompute;
      });
      if (!known) return false;
      choice.tasks.push_back(t.task);
      choice.choices.push_back(c);
      placed.push_back(t.task);
    }
  }
  std::sort(placed.begin(), placed.end());
  return placed == model_.graph().gpu_tasks() && realize(model_, models_, groups, out) &&
         balance_shares(evaluator_, out, 1) > 0;
}

void Builder::bound_by(const plan::Plan* warm) {
  const workload::Workload& w = model_.workload();
  const double slack = 1 + 1e-9;
  busy_cap_.assign(allocations_.size(), std::numeric_limits<double>::infinity());
  if (params_.goal.min_throughput) {
    std::fill(busy_cap_.begin(), busy_cap_.end(), w.samples_per_iteration() / *params_.goal.min_throughput * slack);
  }
  incumbent_.reset();
  plan::Plan p;
  if (!warm || !space_version(*warm, p)) return;
  incumbent_ = p;
  const plan::Prediction& prediction = evaluator_.evaluate(p);
  const double period = prediction.iteration_seconds;
  const double price = prediction.price_per_hour.value_or(0.0);
  if (params_.goal.budget_per_hour && price > *params_.goal.budget_per_hour) return;
  if (params_.goal.min_throughput && prediction.samples_per_second < *params_.goal.min_throughput) return;
  for (std::size_t a = 0; a < allocations_.size(); ++a) {
    double cap = busy_cap_[a];
    if (params_.goal.objective == Objective::kThroughput) {
      cap = std::min(cap, period * slack);
    } else if (allocations_[a].price > 0) {
      // Dollars per sample grow with the price of every group and with the period.
      cap = std::min(cap, price * period / allocations_[a].price * slack);
    }
    busy_cap_[a] = cap;
  }
}

void Builder::enumerate_allocations() {
  const hw::Cluster& cluster = model_.cluster();
  const std::size_t k = classes_.size();
  std::vector<int> counts(k, 0);
  while (true) {
    std::size_t c = 0;
    for (; c < k; ++c) {
      if (++counts[c] <= static_cast<int>(classes_[c].size())) break;
      counts[c] = 0;
    }
    if (c == k) break;
    Allocation a;
    a.counts = counts;
    a.gpus_per_node.assign(cluster.nodes.size(), 0);
    for (std::size_t cls = 0; cls < k; ++cls) {
      for (int i = 0; i < counts[cls]; ++i) {
        const int node = classes_[cls][i];
        a.nodes.push_back(node);
        a.gpus_per_node[node] = cluster.nodes[node].gpu_count;
        // Unpriced nodes count 0: the cost objective and a budget require every price.
        a.price += cluster.node_price_per_hour(cluster.nodes[node]).value_or(0.0);
      }
    }
    model_.describe_gpu_set(a.gpus_per_node, a.set);
    allocations_.push_back(std::move(a));
  }
}

const std::vector<Option>& Builder::options_for(int task, int allocation) {
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
  for (const TaskChoice& choice : choices_for(task, allocation)) {
    check_deadline();
    group[0].choices = {choice};
    if (!realize(model_, models_, group, p) || balance_shares(evaluator_, p, 1) <= 0) continue;
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
      o.seconds = evaluator_.evaluate(p).tasks[task].seconds;
    }
    for (const plan::MemoryUse& use : evaluator_.gpu_memory(0)) {
      o.resident.push_back(use.weights + use.gradients + use.optimizer);
      o.transient.push_back(use.activations + use.kv_cache);
    }
    o.signature = signatures.emplace(o.resident, static_cast<int>(signatures.size())).first->second;
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(), [](const Option& a, const Option& b) { return a.seconds < b.seconds; });
  return out;
}

const std::vector<Config>& Builder::configs_for(const std::vector<int>& tasks, int allocation) {
  const auto key = std::make_pair(tasks, allocation);
  const auto found = cache_.find(key);
  if (found != cache_.end()) return found->second;
  std::vector<Config>& out = cache_[key];
  const workload::TaskGraph& graph = model_.graph();
  const Allocation& a = allocations_[allocation];
  Search& s = search_;
  s.tasks = tasks;
  s.allocation = allocation;
  s.cap = busy_cap_[allocation];
  s.generate = -1;
  s.order.clear();
  s.options.assign(tasks.size(), nullptr);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    s.options[i] = &options_for(tasks[i], allocation);
    if (s.options[i]->empty()) return out;
    if (graph.tasks[tasks[i]].kind == TaskKind::kGenerate) {
      s.generate = static_cast<int>(i);
    } else {
      s.order.push_back(static_cast<int>(i));
    }
  }
  // Memory per GPU combines per model as the evaluator does: a trained model holds its
  // training state and its generation weights (forward passes reuse the trained weights);
  // otherwise the larger of its inference and generation weights.
  std::vector<workload::Role> names;  // a model is a role's weights, as the evaluator keys them
  s.model_of.assign(tasks.size(), 0);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const workload::Role role = *graph.tasks[tasks[i]].role;
    auto it = std::find(names.begin(), names.end(), role);
    s.model_of[i] = static_cast<int>(it - names.begin());
    if (it == names.end()) names.push_back(role);
  }
  std::vector<bool> trained(names.size(), false);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (graph.tasks[tasks[i]].kind == TaskKind::kTrain) trained[s.model_of[i]] = true;
  }
  s.additive.assign(tasks.size(), false);
  s.counted.assign(tasks.size(), true);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    s.additive[i] = trained[s.model_of[i]];
    if (s.additive[i] && graph.tasks[tasks[i]].kind != TaskKind::kTrain &&
        graph.tasks[tasks[i]].kind != TaskKind::kGenerate) {
      s.counted[i] = false;
    }
  }
  s.models = static_cast<int>(names.size());
  s.slots = static_cast<int>(s.options[0]->front().resident.size());
  s.capacity.clear();
  for (int node : a.nodes) {
    for (int d = 0; d < model_.cluster().nodes[node].gpu_count; ++d) s.capacity.push_back(model_.usable_memory(node));
  }
  const std::size_t depth = s.order.size() + 1;
  s.acc.assign(depth, std::vector<double>(static_cast<std::size_t>(s.models) * s.slots, 0.0));
  s.total.assign(depth, std::vector<double>(s.slots, 0.0));
  s.transient.assign(depth, std::vector<double>(s.slots, 0.0));
  s.rest_floor.assign(depth, 0.0);
  for (std::size_t d = s.order.size(); d-- > 0;) {
    s.rest_floor[d] = s.rest_floor[d + 1] + s.options[s.order[d]]->front().seconds;
  }
  s.pick.assign(tasks.size(), 0);
  s.front.clear();
  const std::size_t gen_options = s.generate >= 0 ? s.options[s.generate]->size() : 1;
  for (std::size_t g = 0; g < gen_options; ++g) {
    double busy = 0;
    std::fill(s.acc[0].begin(), s.acc[0].end(), 0.0);
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
  // Price what is left as the evaluator prices a whole group (the composed figures agree with
  // it to rounding), and keep the undominated again.
  std::vector<GroupChoice> group(1);
  group[0].tasks = tasks;
  group[0].nodes = a.nodes;
  plan::Plan p;
  for (Config& c : s.front) {
    group[0].choices = c.choices;
    if (!realize(model_, models_, group, p) || balance_shares(evaluator_, p, 1) <= 0) continue;
    const plan::Prediction& prediction = evaluator_.evaluate(p);
    for (std::size_t i = 0; i < tasks.size(); ++i) c.seconds[i] = prediction.tasks[tasks[i]].seconds;
    c.reshard = sync_ >= 0 ? prediction.tasks[sync_].seconds : 0.0;
    keep_if_not_dominated(out, std::move(c));
  }
  return out;
}

void Builder::check_size(const ilp::Model& m) const {
  if (static_cast<long long>(m.columns().size()) <= params_.max_columns) return;
  throw core::JobError(fmt::format(
      "the ILP model would have more than {} columns (node allocations of every group, and their "
      "pairs); use it on fewer nodes, or the hybrid planner", params_.max_columns));
}

void Builder::check_deadline() const {
  if (std::chrono::steady_clock::now() <= deadline_) return;
  throw core::JobError(fmt::format(
      "the ILP's build passed the time limit of {} s after composing {} group configurations; "
      "give it more time, or use the hybrid planner",
      params_.solve.time_limit, composed_configs_));
}

bool Builder::add_option(Search& s, std::size_t depth, int i, const Option& o) {
  // Folds the task's memory into depth + 1 (generation: into depth 0, in place) and checks
  // every GPU.
  const std::size_t to = i == s.generate ? depth : depth + 1;
  std::vector<double>& acc = s.acc[to];
  std::vector<double>& total = s.total[to];
  std::vector<double>& transient = s.transient[to];
  if (to != depth) {
    acc = s.acc[depth];
    total = s.total[depth];
    transient = s.transient[depth];
  }
  const std::size_t base = static_cast<std::size_t>(s.model_of[i]) * s.slots;
  for (int slot = 0; slot < s.slots; ++slot) {
    double& cell = acc[base + slot];
    const double before = cell;
    if (s.counted[i]) cell = s.additive[i] ? cell + o.resident[slot] : std::max(cell, o.resident[slot]);
    total[slot] += cell - before;
    transient[slot] = std::max(transient[slot], o.transient[slot]);
    if (s.capacity[slot] - (total[slot] + transient[slot]) < 0) return false;
  }
  return true;
}

void Builder::descend(Search& s, std::size_t d, double busy) {
  if (d == s.order.size()) {
    leaf(s, busy);
    return;
  }
  const int i = s.order[d];
  const std::vector<Option>& options = *s.options[i];
  for (std::size_t k = 0; k < options.size(); ++k) {
    // Options come fastest first: past the cap, so are the rest.
    if (busy + options[k].seconds + s.rest_floor[d + 1] > s.cap) break;
    if (!add_option(s, d, i, options[k])) continue;
    s.pick[i] = static_cast<int>(k);
    descend(s, d + 1, busy + options[k].seconds);
  }
}

void Builder::leaf(Search& s, double busy) {
  if (++composed_configs_ % 4096 == 0) check_deadline();
  if (composed_configs_ > params_.max_configs) {
    throw core::JobError(fmt::format(
        "the ILP would compose more than {} group configurations; use it on fewer node types or "
        "tasks, or the hybrid planner", params_.max_configs));
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
    // Generation's time depends only on the resident memory of the others: look it up by
    // their options' memory signatures, or price the whole group once for them.
    s.key.clear();
    for (int i : s.order) s.key.push_back((*s.options[i])[s.pick[i]].signature);
    auto it = s.generation.find(s.key);
    if (it == s.generation.end()) {
      std::vector<GroupChoice> group(1);
      group[0].tasks = s.tasks;
      group[0].nodes = allocations_[s.allocation].nodes;
      group[0].choices = c.choices;
      // The search found it fits; the evaluator may disagree only at the last bit, and then
      // this leaf is dropped but the price is not kept for others with the same memory.
      if (!realize(model_, models_, group, scratch_) || balance_shares(evaluator_, scratch_, 1) <= 0) return;
      const plan::Prediction& prediction = evaluator_.evaluate(scratch_);
      GenerationPrice price;
      price.seconds = prediction.tasks[s.tasks[s.generate]].seconds;
      price.reshard = sync_ >= 0 ? prediction.tasks[sync_].seconds : 0.0;
      it = s.generation.emplace(s.key, price).first;
    }
    busy += it->second.seconds - c.seconds[s.generate];
    if (busy > s.cap) return;
    c.seconds[s.generate] = it->second.seconds;
    c.reshard = it->second.reshard;
  }
  keep_if_not_dominated(s.front, std::move(c));
}

const std::vector<TaskChoice>& Builder::choices_for(int task, int allocation) {
  const auto key = std::make_pair(task, allocation);
  auto found = choices_.find(key);
  if (found == choices_.end()) {
    found = choices_.emplace(key, task_choices(model_, models_, params_.space, task,
                                               allocations_[allocation].nodes)).first;
  }
  return found->second;
}

long long Builder::count_configs() {
  constexpr long long kMany = 1LL << 60;  // counts saturate here
  long long total = 0;
  std::set<std::vector<int>> groups;  // a group's configurations are priced once for all partitions
  for (const auto& partition : partitions_) {
    for (const std::vector<int>& group : partition) {
      if (!groups.insert(group).second) continue;
      for (std::size_t a = 0; a < allocations_.size(); ++a) {
        long long product = 1;
        for (int t : group) {
          const long long n = static_cast<long long>(choices_for(t, static_cast<int>(a)).size());
          product = n == 0 ? 0 : (product > kMany / n ? kMany : product * n);
        }
        total = std::min(kMany, total + product);
      }
    }
  }
  return total;
}

bool Builder::dominates(const Config& a, const Config& b) {
  for (std::size_t i = 0; i < a.seconds.size(); ++i) {
    if (a.seconds[i] > b.seconds[i]) return false;
  }
  return a.reshard <= b.reshard;
}

void Builder::keep_if_not_dominated(std::vector<Config>& front, Config c) {
  // The period only grows with any duration and a group's price depends on its nodes alone, so
  // a configuration no faster than another in every task is never needed for the optimum.
  for (const Config& f : front) {
    if (dominates(f, c)) return;
  }
  std::erase_if(front, [&](const Config& f) { return dominates(c, f); });
  front.push_back(std::move(c));
}

double Builder::weight_sync(int train_allocation, int generate_allocation) const {
  cost::Breakdown unused;
  return model_.weight_transfer_seconds(sync_bytes_, allocations_[train_allocation].set,
                                        allocations_[generate_allocation].set, unused);
}

ilp::Model Builder::build() {
  const workload::TaskGraph& graph = model_.graph();
  const workload::Workload& w = model_.workload();
  const int n = static_cast<int>(graph.tasks.size());
  ilp::Model m;
  const std::vector<int> order = graph.topological_order();
  // Durations as linear expressions (terms + constant), built across all partitions: only the
  // chosen partition's variables are non-zero.
  std::vector<Terms> duration(n);
  std::vector<double> duration_constant(n, 0.0);
  std::vector<double> longest(n, 0.0);  // for the big M
  for (int t = 0; t < n; ++t) {
    if (graph.tasks[t].kind == TaskKind::kCpu) {
      duration_constant[t] = longest[t] = model_.cpu_seconds(t);
    }
  }
  // Transfers per edge, as terms over pair variables.
  std::vector<Terms> edge_transfer(graph.edges.size());
  double longest_transfer = 0;

  // Every group's configurations, one allocation at a time: the tasks' strategies priced alone
  // are kept for the allocation at hand only (memory per GPU for every strategy of every task on
  // thousands of allocations of hundreds of GPUs would not fit).
  std::set<std::vector<int>> distinct;
  for (const auto& partition : partitions_) distinct.insert(partition.begin(), partition.end());
  for (std::size_t a = 0; a < allocations_.size(); ++a) {
    for (const std::vector<int>& group : distinct) configs_for(group, static_cast<int>(a));
    options_.clear();
  }

  Terms one;
  for (std::size_t p = 0; p < partitions_.size(); ++p) {
    const auto& partition = partitions_[p];
    // A partition with a group that has no configuration on any allocation (none fits, or
    // none can beat the incumbent) is left out.
    const bool possible = std::all_of(partition.begin(), partition.end(), [&](const std::vector<int>& tasks) {
      for (std::size_t a = 0; a < allocations_.size(); ++a) {
        if (!configs_for(tasks, static_cast<int>(a)).empty()) return true;
      }
      return false;
    });
    if (!possible) {
      y_.push_back(-1);
      groups_.emplace_back();
      continue;
    }
    y_.push_back(m.add_binary(fmt::format("y_p{}", p)));
    one.emplace_back(y_.back(), 1.0);
    std::vector<GroupVars>& gv = groups_.emplace_back(partition.size());
    std::vector<int> group_of(n, -1);
    for (std::size_t g = 0; g < partition.size(); ++g) {
      for (int t : partition[g]) group_of[t] = static_cast<int>(g);
    }
    for (std::size_t g = 0; g < partition.size(); ++g) {
      GroupVars& vars = gv[g];
      vars.tasks = partition[g];
      vars.duration.resize(vars.tasks.size());
      Terms choose_allocation{{y_.back(), -1.0}};
      for (std::size_t a = 0; a < allocations_.size(); ++a) {
        const std::vector<Config>& configs = configs_for(vars.tasks, static_cast<int>(a));
        if (configs.empty()) continue;
        const int column = m.add_binary(fmt::format("a_p{}_g{}_a{}", p, g, a));
        vars.allocations.push_back(static_cast<int>(a));
        vars.a.push_back(column);
        vars.configs.push_back(&configs);
        choose_allocation.emplace_back(column, 1.0);
        Terms choose_config{{column, -1.0}};
        std::vector<int>& xs = vars.x.emplace_back();
        for (std::size_t k = 0; k < configs.size(); ++k) {
          const int x = m.add_binary(fmt::format("x_p{}_g{}_a{}_k{}", p, g, a, k));
          xs.push_back(x);
          choose_config.emplace_back(x, 1.0);
          double busy = 0;
          for (std::size_t i = 0; i < vars.tasks.size(); ++i) {
            const int t = vars.tasks[i];
            duration[t].emplace_back(x, configs[k].seconds[i]);
            vars.duration[i].emplace_back(x, configs[k].seconds[i]);
            busy += configs[k].seconds[i];
            longest[t] = std::max(longest[t], configs[k].seconds[i]);
          }
          vars.busy.emplace_back(x, busy);
          if (sync_ >= 0 && group_of[sync_train_] == static_cast<int>(g) &&
              group_of[sync_generate_] == static_cast<int>(g)) {
            duration[sync_].emplace_back(x, configs[k].reshard);
            longest[sync_] = std::max(longest[sync_], configs[k].reshard);
          }
        }
        m.add_equal(fmt::format("config_p{}_g{}_a{}", p, g, a), choose_config, 0);
        check_size(m);
      }
      m.add_equal(fmt::format("allocation_p{}_g{}", p, g), choose_allocation, 0);
    }
    // Pair variables for groups that exchange data: each edge between them, and the weights.
    std::map<std::pair<int, int>, std::vector<std::pair<int, std::pair<int, int>>>> pairs;
    auto pair_columns = [&](int g, int h) -> const std::vector<std::pair<int, std::pair<int, int>>>& {
      const auto key = std::make_pair(std::min(g, h), std::max(g, h));
      auto it = pairs.find(key);
      if (it != pairs.end()) return it->second;
      auto& list = pairs[key];
      const GroupVars& a = gv[key.first];
      const GroupVars& b = gv[key.second];
      for (std::size_t i = 0; i < a.a.size(); ++i) {
        for (std::size_t j = 0; j < b.a.size(); ++j) {
          // Allocations that together need more nodes of a class than it has are never both
          // chosen.
          const std::vector<int>& ca = allocations_[a.allocations[i]].counts;
          const std::vector<int>& cb = allocations_[b.allocations[j]].counts;
          bool fit = true;
          for (std::size_t c = 0; c < classes_.size() && fit; ++c) {
            fit = ca[c] + cb[c] <= static_cast<int>(classes_[c].size());
          }
          if (!fit) continue;
          check_size(m);
          const int z = m.add_continuous(fmt::format("z_p{}_g{}_{}_a{}_{}", p, key.first, key.second,
                                                     a.allocations[i], b.allocations[j]), 0, 1);
          z_[{p, key.first, key.second, a.allocations[i], b.allocations[j]}] = z;
          m.add_greater_equal(fmt::format("both_p{}_g{}_{}_a{}_{}", p, key.first, key.second,
                                          a.allocations[i], b.allocations[j]),
                              {{z, 1}, {a.a[i], -1}, {b.a[j], -1}}, -1);
          list.push_back({z, {a.allocations[i], b.allocations[j]}});
        }
      }
      return list;
    };
    for (std::size_t e = 0; e < graph.edges.size(); ++e) {
      const workload::Edge& edge = graph.edges[e];
      if (!graph.moves_data(edge)) continue;
      const int gu = host_[edge.from] >= 0 ? group_of[host_[edge.from]] : -1;
      const int gt = host_[edge.to] >= 0 ? group_of[host_[edge.to]] : -1;
      if (gu < 0 || gt < 0 || gu == gt) continue;
      for (const auto& [z, allocations] : pair_columns(gu, gt)) {
        const int from = gu < gt ? allocations.first : allocations.second;
        const int to = gu < gt ? allocations.second : allocations.first;
        const double seconds = transfer(edge.bytes, from, to);
        edge_transfer[e].emplace_back(z, seconds);
        longest_transfer = std::max(longest_transfer, seconds);
      }
    }
    if (sync_ >= 0) {
      const int gt = group_of[sync_train_];
      const int gg = group_of[sync_generate_];
      if (gt != gg) {
        for (const auto& [z, allocations] : pair_columns(gt, gg)) {
          const int train = gt < gg ? allocations.first : allocations.second;
          const int generate = gt < gg ? allocations.second : allocations.first;
          const double seconds = weight_sync(train, generate);
          duration[sync_].emplace_back(z, seconds);
          longest[sync_] = std::max(longest[sync_], seconds);
        }
      }
    }
  }
  m.add_equal("one_partition", one, 1);

  // Node capacity per class.
  for (std::size_t c = 0; c < classes_.size(); ++c) {
    Terms used;
    for (const auto& gv : groups_) {
      for (const GroupVars& vars : gv) {
        for (std::size_t i = 0; i < vars.a.size(); ++i) {
          const int count = allocations_[vars.allocations[i]].counts[c];
          if (count > 0) used.emplace_back(vars.a[i], count);
        }
      }
    }
    m.add_less_equal(fmt::format("capacity_class{}", c), used, static_cast<double>(classes_[c].size()));
  }

  // The schedule.
  double big_m = longest_transfer * static_cast<double>(graph.edges.size());
  for (double d : longest) big_m += d;
  big_m = std::max(1.0, big_m * 1.01);
  std::vector<int>& start = start_;
  start.resize(n);
  for (int t = 0; t < n; ++t) start[t] = m.add_continuous(fmt::format("S_{}", graph.tasks[t].name), 0, big_m);
  auto finish_terms = [&](int t, double sign) {
    Terms terms{{start[t], sign}};
    for (const auto& [column, seconds] : duration[t]) terms.emplace_back(column, sign * seconds);
    return terms;
  };
  const bool cost_objective = params_.goal.objective == Objective::kCostPerSample;
  t_ = m.add_continuous("T", 0, big_m, cost_objective ? 0.0 : 1.0);
  if (cost_objective) {
    // Dollars per 1,000 samples = price per hour x T / 3600 / samples x 1000, with the price
    // the sum over chosen allocations: a product of T and binaries, linearised exactly by
    // w_{p,g,a} >= T - big_m (1 - a_{p,g,a}), w >= 0 (at the optimum w = T x a).
    const double per_dollar_second = 1000.0 / core::kHour / w.samples_per_iteration();
    for (std::size_t p = 0; p < groups_.size(); ++p) {
      for (std::size_t g = 0; g < groups_[p].size(); ++g) {
        GroupVars& vars = groups_[p][g];
        // The chosen partition's groups each carry T on one allocation: sum_a w >= T - M (1 -
        // y_p), and w <= T, w <= M a (valid for w = T a; they tighten the LP bound).
        Terms carried{{t_, -1.0}, {y_[p], -big_m}};
        for (std::size_t i = 0; i < vars.a.size(); ++i) {
          const Allocation& a = allocations_[vars.allocations[i]];
          const int column = m.add_continuous(fmt::format("w_p{}_g{}_a{}", p, g, vars.allocations[i]),
                                              0, big_m, a.price * per_dollar_second);
          vars.w.push_back(column);
          m.add_greater_equal(fmt::format("w_p{}_g{}_a{}_T", p, g, vars.allocations[i]),
                              {{column, 1.0}, {t_, -1.0}, {vars.a[i], -big_m}}, -big_m);
          m.add_less_equal(fmt::format("w_p{}_g{}_a{}_le_T", p, g, vars.allocations[i]),
                           {{column, 1.0}, {t_, -1.0}}, 0);
          m.add_less_equal(fmt::format("w_p{}_g{}_a{}_le_a", p, g, vars.allocations[i]),
                           {{column, 1.0}, {vars.a[i], -big_m}}, 0);
          carried.emplace_back(column, 1.0);
        }
        m.add_greater_equal(fmt::format("carries_T_p{}_g{}", p, g), carried, -big_m);
      }
    }
  }
  for (std::size_t e = 0; e < graph.edges.size(); ++e) {
    const workload::Edge& edge = graph.edges[e];
    // S_to + shift T - S_from - D_from - transfer >= const(D_from): the periodic schedule.
    Terms terms = finish_terms(edge.from, -1.0);
    terms.emplace_back(start[edge.to], 1.0);
    if (edge.previous_iteration()) {
      terms.emplace_back(t_, edge.lag);
    } else {
      for (const auto& [z, seconds] : edge_transfer[e]) terms.emplace_back(z, -seconds);
    }
    m.add_greater_equal(fmt::format("after_{}_{}", graph.tasks[edge.from].name, graph.tasks[edge.to].name),
                        terms, duration_constant[edge.from]);
  }
  for (std::size_t p = 0; p < partitions_.size(); ++p) {
    if (y_[p] < 0) continue;
    for (std::size_t g = 0; g < partitions_[p].size(); ++g) {
      const GroupVars& vars = groups_[p][g];
      // Only this partition's columns: the others are 0 when it is chosen, and the constraint
      // is relaxed when it is not.
      auto finish = [&](int t) {
        const std::size_t i = static_cast<std::size_t>(std::find(vars.tasks.begin(), vars.tasks.end(), t) - vars.tasks.begin());
        Terms terms{{start[t], -1.0}};
        for (const auto& [column, seconds] : vars.duration[i]) terms.emplace_back(column, -seconds);
        return terms;
      };
      int previous = -1;
      int first = -1;
      for (int t : order) {
        if (std::find(partitions_[p][g].begin(), partitions_[p][g].end(), t) == partitions_[p][g].end()) continue;
        if (previous >= 0) {
          Terms terms = finish(previous);
          terms.emplace_back(start[t], 1.0);
          terms.emplace_back(y_[p], -big_m);
          m.add_greater_equal(fmt::format("turn_p{}_g{}_{}", p, g, graph.tasks[t].name), terms, -big_m);
        } else {
          first = t;
        }
        previous = t;
      }
      // The group's first task of the next iteration waits for its last task of this one.
      Terms terms = finish(previous);
      terms.emplace_back(start[first], 1.0);
      terms.emplace_back(t_, 1.0);
      terms.emplace_back(y_[p], -big_m);
      m.add_greater_equal(fmt::format("loop_p{}_g{}", p, g), terms, -big_m);
      // Implied by the turns, but without big M: the period is at least the group's busy time
      // (a tighter relaxation).
      Terms busy{{t_, 1.0}};
      for (const auto& [column, seconds] : vars.busy) busy.emplace_back(column, -seconds);
      m.add_greater_equal(fmt::format("busy_p{}_g{}", p, g), busy, 0);
    }
  }
  if (params_.goal.min_throughput) {
    m.add_less_equal("min_throughput", {{t_, 1.0}}, w.samples_per_iteration() / *params_.goal.min_throughput);
  }
  if (params_.goal.budget_per_hour) {
    Terms cost;
    for (const auto& gv : groups_) {
      for (const GroupVars& vars : gv) {
        for (std::size_t i = 0; i < vars.a.size(); ++i) {
          const Allocation& a = allocations_[vars.allocations[i]];
          cost.emplace_back(vars.a[i], a.price);
        }
      }
    }
    m.add_less_equal("budget", cost, *params_.goal.budget_per_hour);
  }
  return m;
}

std::vector<double> Builder::warm_start(const ilp::Model& m) {
  const workload::TaskGraph& graph = model_.graph();
  // The configurations were priced as the space lays plans out: start from the warm plan so
  // laid out (its shares balanced as the space balances them).
  if (!incumbent_) return {};
  const plan::Plan& plan = *incumbent_;
  const plan::Prediction warm = evaluator_.evaluate(plan);
  if (!warm.feasible) return {};
  const int n = static_cast<int>(graph.tasks.size());
  // The partition: the plan's task sets, ordered as partitions() orders them.
  std::vector<std::vector<int>> sets;
  for (const plan::Group& g : plan.groups) {
    std::vector<int> tasks;
    for (const plan::TaskPlacement& t : g.tasks) tasks.push_back(t.task);
    std::sort(tasks.begin(), tasks.end());
    sets.push_back(tasks);
  }
  std::sort(sets.begin(), sets.end());
  const auto found = std::find(partitions_.begin(), partitions_.end(), sets);
  if (found == partitions_.end()) return {};
  const std::size_t p = static_cast<std::size_t>(found - partitions_.begin());
  std::vector<double> values(m.columns().size(), 0.0);
  if (y_[p] < 0) return {};
  values[y_[p]] = 1;
  const std::size_t k = partitions_[p].size();
  std::vector<int> allocation(k, -1);
  std::vector<const Config*> config(k, nullptr);
  std::vector<int> group_of(n, -1);
  for (std::size_t g = 0; g < k; ++g) {
    const GroupVars& vars = groups_[p][g];
    for (int t : vars.tasks) group_of[t] = static_cast<int>(g);
    const plan::Group* source = nullptr;
    for (const plan::Group& pg : plan.groups) {
      if (!pg.tasks.empty() && std::find(vars.tasks.begin(), vars.tasks.end(), pg.tasks.front().task) != vars.tasks.end()) {
        source = &pg;
      }
    }
    if (!source) return {};
    std::vector<int> counts(classes_.size(), 0);
    std::vector<int> nodes;
    for (const plan::Gpu& gpu : source->gpus) {
      if (std::find(nodes.begin(), nodes.end(), gpu.node) == nodes.end()) nodes.push_back(gpu.node);
    }
    for (int node : nodes) {
      for (std::size_t c = 0; c < classes_.size(); ++c) {
        if (std::find(classes_[c].begin(), classes_[c].end(), node) != classes_[c].end()) ++counts[c];
      }
    }
    int same_nodes = -1;  // the allocation of the plan's nodes
    for (std::size_t i = 0; i < vars.a.size(); ++i) {
      if (allocations_[vars.allocations[i]].counts != counts) continue;
      same_nodes = static_cast<int>(i);
      const std::vector<Config>& configs = *vars.configs[i];
      for (std::size_t x = 0; x < configs.size(); ++x) {
        bool same = true;
        for (std::size_t j = 0; j < vars.tasks.size() && same; ++j) {
          const TaskChoice& c = configs[x].choices[j];
          const auto placement = std::find_if(source->tasks.begin(), source->tasks.end(),
                                              [&](const plan::TaskPlacement& tp) { return tp.task == vars.tasks[j]; });
          const plan::Replica& r = placement->replicas.front();
          same = c.tp == static_cast<int>(r.stages.front().devices.size()) &&
                 c.pp == static_cast<int>(r.stages.size()) &&
                 (graph.tasks[vars.tasks[j]].kind != TaskKind::kTrain ||
                  (c.train.zero_stage == placement->train.zero_stage && c.train.recompute == placement->train.recompute));
        }
        if (same) {
          values[vars.a[i]] = 1;
          values[vars.x[i][x]] = 1;
          allocation[g] = vars.allocations[i];
          config[g] = &configs[x];
        }
      }
    }
    if (!config[g] && same_nodes >= 0) {
      // The plan's configuration was dropped for one at least as fast in every task: start
      // from that one.
      const std::size_t i = static_cast<std::size_t>(same_nodes);
      const std::vector<Config>& configs = *vars.configs[i];
      const bool reshard = sync_ >= 0 && std::find(vars.tasks.begin(), vars.tasks.end(), sync_train_) != vars.tasks.end() &&
                           std::find(vars.tasks.begin(), vars.tasks.end(), sync_generate_) != vars.tasks.end();
      for (std::size_t x = 0; x < configs.size() && !config[g]; ++x) {
        bool faster = !reshard || configs[x].reshard <= warm.tasks[sync_].seconds * (1 + 1e-9);
        for (std::size_t j = 0; j < vars.tasks.size() && faster; ++j) {
          faster = configs[x].seconds[j] <= warm.tasks[vars.tasks[j]].seconds * (1 + 1e-9);
        }
        if (!faster) continue;
        values[vars.a[i]] = 1;
        values[vars.x[i][x]] = 1;
        allocation[g] = vars.allocations[i];
        config[g] = &configs[x];
      }
    }
    if (!config[g]) return {};
  }
  auto z_of = [&](int g, int h) -> int {
    const int lo = std::min(g, h), hi = std::max(g, h);
    const auto it = z_.find({p, lo, hi, allocation[lo], allocation[hi]});
    return it == z_.end() ? -1 : it->second;
  };
  // Durations and the schedule, as the model prices them.
  std::vector<double> duration(n, 0.0);
  for (int t = 0; t < n; ++t) {
    if (graph.tasks[t].kind == TaskKind::kCpu) duration[t] = model_.cpu_seconds(t);
    if (group_of[t] >= 0) {
      const GroupVars& vars = groups_[p][group_of[t]];
      const std::size_t j = static_cast<std::size_t>(std::find(vars.tasks.begin(), vars.tasks.end(), t) - vars.tasks.begin());
      duration[t] = config[group_of[t]]->seconds[j];
    }
  }
  if (sync_ >= 0) {
    const int gt = group_of[sync_train_], gg = group_of[sync_generate_];
    duration[sync_] = gt == gg ? config[gg]->reshard : weight_sync(allocation[gt], allocation[gg]);
    if (gt != gg) {
      const int z = z_of(gt, gg);
      if (z < 0) return {};
      values[z] = 1;
    }
  }
  // The periodic schedule of these durations, as the evaluator builds it.
  std::vector<double> edge_transfer(graph.edges.size(), 0.0);
  for (std::size_t i = 0; i < graph.edges.size(); ++i) {
    const workload::Edge& e = graph.edges[i];
    const int gu = host_[e.from] >= 0 ? group_of[host_[e.from]] : -1;
    const int gt = host_[e.to] >= 0 ? group_of[host_[e.to]] : -1;
    if (graph.moves_data(e) && gu >= 0 && gt >= 0 && gu != gt) {
      const int z = z_of(gu, gt);
      if (z < 0) return {};
      values[z] = 1;
      edge_transfer[i] = transfer(e.bytes, allocation[gu], allocation[gt]);
    }
  }
  std::vector<int> gpu_group(n, -1);
  for (int t = 0; t < n; ++t) {
    if (host_[t] == t) gpu_group[t] = group_of[t];
  }
  const std::vector<int> order = graph.topological_order();
  std::vector<plan::CycleEdge> cycle;
  std::vector<int> first, last;
  plan::schedule_edges(graph, order, duration, edge_transfer, gpu_group, static_cast<int>(k), cycle,
                       first, last);
  plan::PeriodSolver solver;
  const double iteration = solver.period(n, cycle, order);
  const std::vector<double> starts = plan::periodic_starts(n, cycle, iteration);
  const double lowest = *std::min_element(starts.begin(), starts.end());
  for (int t = 0; t < n; ++t) values[start_[t]] = starts[t] - lowest;
  values[t_] = iteration;
  for (std::size_t g = 0; g < k; ++g) {
    const GroupVars& vars = groups_[p][g];
    for (std::size_t i = 0; i < vars.w.size(); ++i) {
      if (vars.allocations[i] == allocation[g]) values[vars.w[i]] = iteration;
    }
  }
  return values;
}

bool Builder::decode(const std::vector<double>& values, plan::Plan& out) {
  for (std::size_t p = 0; p < partitions_.size(); ++p) {
    if (y_[p] < 0 || values[y_[p]] < 0.5) continue;
    std::vector<GroupChoice> groups(partitions_[p].size());
    std::vector<int> offset(classes_.size(), 0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const GroupVars& vars = groups_[p][g];
      groups[g].tasks = vars.tasks;
      for (std::size_t i = 0; i < vars.a.size(); ++i) {
        if (values[vars.a[i]] < 0.5) continue;
        const Allocation& a = allocations_[vars.allocations[i]];
        // Concrete nodes: the next free ones of each class, by class then index, as priced.
        for (std::size_t c = 0; c < classes_.size(); ++c) {
          for (int j = 0; j < a.counts[c]; ++j) groups[g].nodes.push_back(classes_[c][offset[c] + j]);
          offset[c] += a.counts[c];
        }
        for (std::size_t k = 0; k < vars.x[i].size(); ++k) {
          if (values[vars.x[i][k]] > 0.5) groups[g].choices = (*vars.configs[i])[k].choices;
        }
      }
      if (groups[g].nodes.empty() || groups[g].choices.size() != groups[g].tasks.size()) return false;
    }
    if (!realize(model_, models_, groups, out)) return false;
    balance_shares(evaluator_, out, 1);
    return true;
  }
  return false;
}

}  // namespace

long long ilp_configuration_count(const cost::CostModel& model, const workload::ModelCatalog& models,
                                  const IlpParams& params) {
  return Builder(model, models, params).count_configs();
}

IlpOutcome plan_ilp(const cost::CostModel& model, const workload::ModelCatalog& models,
                    const IlpParams& params, const plan::Plan* warm) {
  require_prices(model.cluster(), params.goal);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(params.solve.time_limit));
  Builder builder(model, models, params, deadline);
  builder.bound_by(warm);
  const ilp::Model m = builder.build();
  IlpOutcome outcome;
  outcome.configs = builder.configs();
  outcome.kept_configs = builder.kept_configs();
  outcome.columns = static_cast<int>(m.columns().size());
  outcome.rows = static_cast<int>(m.rows().size());
  outcome.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!params.export_lp.empty()) ilp::write_lp(m, params.export_lp);
  if (!params.export_mps.empty()) ilp::write_mps(m, params.export_mps);
  // The solver gets what the build left of the time limit.
  ilp::SolveParams solve = params.solve;
  solve.time_limit = std::max(0.1, params.solve.time_limit - outcome.build_seconds);
  if (warm) {
    std::vector<double> values = builder.warm_start(m);
    if (!values.empty() && m.satisfied_by(values, 1e-6)) {
      solve.warm_start = std::move(values);
      outcome.warm_started = true;
    }
  }
  outcome.solve = ilp::solve(m, solve);
  PlannerResult& result = outcome.result;
  result.plan.planner.name = "ilp";
  const bool solved = outcome.solve.status == ilp::Status::kOptimal || outcome.solve.status == ilp::Status::kFeasible;
  if (solved) {
    outcome.ilp_iteration_seconds = outcome.solve.values[builder.t_column()];
    plan::Plan p;
    if (builder.decode(outcome.solve.values, p)) {
      plan::Evaluator evaluator(model);
      result.prediction = evaluator.evaluate(p);
      result.found = result.prediction.feasible;
      result.plan.groups = std::move(p.groups);
    }
  }
  if (!result.found) {
    result.why_not = outcome.solve.status == ilp::Status::kInfeasible
                         ? std::string("the ILP is infeasible: nothing fits in memory, or no plan meets the constraints")
                         : fmt::format("the ILP solver found no plan ({})", ilp::status_name(outcome.solve.status));
  }
  result.evaluations = outcome.configs;
  result.plan.planner.params = {{"time_limit", fmt::format("{}", params.solve.time_limit)},
                                {"gap", fmt::format("{}", params.solve.relative_gap)},
                                {"threads", fmt::format("{}", params.solve.threads)},
                                {"status", ilp::status_name(outcome.solve.status)}};
  result.plan.planner.stats = {{"ilp_iteration_seconds", outcome.ilp_iteration_seconds},
                               {"objective", outcome.solve.objective},
                               {"bound", outcome.solve.bound},
                               {"gap", outcome.solve.gap},
                               {"nodes", static_cast<double>(outcome.solve.nodes)},
                               {"configurations", static_cast<double>(outcome.configs)},
                               {"configurations_kept", static_cast<double>(outcome.kept_configs)},
                               {"columns", static_cast<double>(outcome.columns)},
                               {"rows", static_cast<double>(outcome.rows)},
                               {"build_seconds", outcome.build_seconds},
                               {"warm_started", outcome.warm_started ? 1.0 : 0.0},
                               {"solve_seconds", outcome.solve.seconds}};
  return outcome;
}

}  // namespace hetrl::planner
