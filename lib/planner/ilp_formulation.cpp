#include "planner/ilp_formulation.h"

#include <fmt/format.h>

#include <algorithm>

#include "plan/periodic.h"
#include "planner/layout.h"

namespace hetrl::planner::ilp_detail {

using workload::TaskKind;

Instance::Instance(const cost::CostModel& m, const workload::ModelCatalog& catalog, const IlpParams& p)
    : model(m), models(catalog), params(p), classes(m.cluster().node_classes().members),
      allocations(enumerate_allocations(m, classes)), partitions(planner::partitions(m.graph().gpu_tasks(), p.space.max_groups)),
      host(m.graph().host_tasks()), sync(m.graph().weight_sync()) {}

std::set<std::vector<int>> Instance::groups() const {
  std::set<std::vector<int>> out;
  for (const auto& partition : partitions) out.insert(partition.begin(), partition.end());
  return out;
}

double Instance::weight_transfer(double bytes, int trainer, int reader) const {
  cost::Breakdown unused;
  return model.weight_transfer_seconds(bytes, allocations[trainer].set, allocations[reader].set, unused);
}

namespace {

// Builds a Formulation. Durations are linear expressions over the columns of every partition
// (only the chosen partition's are non-zero); the big M bounds every start and T.
class Builder {
 public:
  Builder(const Instance& instance, const Composer& composer, Formulation& out)
      : x_(instance), composer_(composer), f_(out), graph_(instance.model.graph()),
        n_(static_cast<int>(graph_.tasks.size())), order_(graph_.topological_order()), duration_(n_),
        duration_constant_(n_, 0.0), longest_(n_, 0.0), edge_transfer_(graph_.edges.size()) {
    for (int t = 0; t < n_; ++t) {
      if (graph_.tasks[t].kind == TaskKind::kCpu) duration_constant_[t] = longest_[t] = x_.model.cpu_seconds(t);
    }
  }

  bool build() {
    for (std::size_t p = 0; p < x_.partitions.size(); ++p) {
      if (!add_partition(p)) return false;
    }
    f_.model.add_equal("one_partition", one_, 1);
    add_capacity();
    add_schedule();
    add_constraints();
    return true;
  }

 private:
  bool too_big() const { return static_cast<long long>(f_.model.columns().size()) > x_.params.max_columns; }
  // A partition's columns: which of its groups' allocations and configurations are chosen, and
  // the pairs of allocations of groups that exchange data. False when the model grew too big.
  bool add_partition(std::size_t p);
  bool add_group(std::size_t p, std::size_t g, const std::vector<int>& group_of);
  bool add_pairs(std::size_t p, const std::vector<int>& group_of);
  // The pair columns of groups g and h of partition p: (column, (allocation of the lower
  // group, of the higher)).
  using Pairs = std::vector<std::pair<int, std::pair<int, int>>>;
  const Pairs* pair_columns(std::size_t p, int g, int h);
  void add_capacity();
  void add_cost_objective(double big_m);
  void add_schedule();
  void add_turns(std::size_t p, std::size_t g, double big_m);
  void add_constraints();

  const Instance& x_;
  const Composer& composer_;
  Formulation& f_;
  const workload::TaskGraph& graph_;
  int n_;
  std::vector<int> order_;  // topological
  std::vector<Terms> duration_;
  std::vector<double> duration_constant_;
  std::vector<double> longest_;  // per task: its longest duration, for the big M
  std::vector<Terms> edge_transfer_;  // per edge: transfers over pair columns
  double longest_transfer_ = 0;
  Terms one_;
  std::map<std::pair<int, int>, Pairs> pairs_;  // of the partition being built
};

bool Builder::add_partition(std::size_t p) {
  const auto& partition = x_.partitions[p];
  // A partition with a group that has no configuration on any allocation (none fits, or none
  // can beat the incumbent) is left out.
  bool possible = true;
  for (std::size_t g = 0; g < partition.size() && possible; ++g) {
    possible = false;
    for (std::size_t a = 0; a < x_.allocations.size() && !possible; ++a) {
      possible = x_.may_take(p, g, a) && !composer_.configs(partition[g], static_cast<int>(a)).empty();
    }
  }
  if (!possible) {
    f_.y.push_back(-1);
    f_.groups.emplace_back();
    return true;
  }
  f_.y.push_back(f_.model.add_binary(fmt::format("y_p{}", p)));
  one_.emplace_back(f_.y.back(), 1.0);
  f_.groups.emplace_back(partition.size());
  std::vector<int> group_of(n_, -1);
  for (std::size_t g = 0; g < partition.size(); ++g) {
    for (int t : partition[g]) group_of[t] = static_cast<int>(g);
  }
  for (std::size_t g = 0; g < partition.size(); ++g) {
    if (!add_group(p, g, group_of)) return false;
  }
  return add_pairs(p, group_of);
}

bool Builder::add_group(std::size_t p, std::size_t g, const std::vector<int>& group_of) {
  ilp::Model& m = f_.model;
  GroupVars& vars = f_.groups[p][g];
  vars.tasks = x_.partitions[p][g];
  vars.duration.resize(vars.tasks.size());
  // The weight sync runs on generation's GPUs, in turn with the group's tasks.
  const bool sync = x_.sync.exists() && group_of[x_.sync.reader] == static_cast<int>(g);
  Terms choose_allocation{{f_.y[p], -1.0}};
  for (std::size_t a = 0; a < x_.allocations.size(); ++a) {
    if (!x_.may_take(p, g, a)) continue;
    const std::vector<Config>& configs = composer_.configs(vars.tasks, static_cast<int>(a));
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
        duration_[t].emplace_back(x, configs[k].seconds[i]);
        vars.duration[i].emplace_back(x, configs[k].seconds[i]);
        busy += configs[k].seconds[i];
        longest_[t] = std::max(longest_[t], configs[k].seconds[i]);
      }
      if (sync) {
        duration_[x_.sync.task].emplace_back(x, configs[k].sync);
        vars.sync.emplace_back(x, configs[k].sync);
        busy += configs[k].sync;
        longest_[x_.sync.task] = std::max(longest_[x_.sync.task], configs[k].sync);
      }
      vars.busy.emplace_back(x, busy);
    }
    m.add_equal(fmt::format("config_p{}_g{}_a{}", p, g, a), choose_config, 0);
    if (too_big()) return false;
  }
  m.add_equal(fmt::format("allocation_p{}_g{}", p, g), choose_allocation, 0);
  return true;
}

const Builder::Pairs* Builder::pair_columns(std::size_t p, int g, int h) {
  const auto key = std::make_pair(std::min(g, h), std::max(g, h));
  auto it = pairs_.find(key);
  if (it != pairs_.end()) return &it->second;
  Pairs& list = pairs_[key];
  const GroupVars& a = f_.groups[p][key.first];
  const GroupVars& b = f_.groups[p][key.second];
  for (std::size_t i = 0; i < a.a.size(); ++i) {
    for (std::size_t j = 0; j < b.a.size(); ++j) {
      // Allocations that together need more nodes of a class than it has are never both chosen.
      const std::vector<int>& ca = x_.allocations[a.allocations[i]].counts;
      const std::vector<int>& cb = x_.allocations[b.allocations[j]].counts;
      bool fit = true;
      for (std::size_t c = 0; c < x_.classes.size() && fit; ++c) {
        fit = ca[c] + cb[c] <= static_cast<int>(x_.classes[c].size());
      }
      if (!fit) continue;
      if (too_big()) return nullptr;
      const int z = f_.model.add_continuous(
          fmt::format("z_p{}_g{}_{}_a{}_{}", p, key.first, key.second, a.allocations[i], b.allocations[j]), 0, 1);
      f_.z[{p, key.first, key.second, a.allocations[i], b.allocations[j]}] = z;
      f_.model.add_greater_equal(
          fmt::format("both_p{}_g{}_{}_a{}_{}", p, key.first, key.second, a.allocations[i], b.allocations[j]),
          {{z, 1}, {a.a[i], -1}, {b.a[j], -1}}, -1);
      list.push_back({z, {a.allocations[i], b.allocations[j]}});
    }
  }
  return &list;
}

bool Builder::add_pairs(std::size_t p, const std::vector<int>& group_of) {
  pairs_.clear();
  for (std::size_t e = 0; e < graph_.edges.size(); ++e) {
    const workload::Edge& edge = graph_.edges[e];
    const bool weights = graph_.reads_weights(edge);
    if (!graph_.moves_data(edge) && !weights) continue;
    const int gu = x_.host[edge.from] >= 0 ? group_of[x_.host[edge.from]] : -1;
    const int gt = x_.host[edge.to] >= 0 ? group_of[x_.host[edge.to]] : -1;
    if (gu < 0 || gt < 0 || gu == gt) continue;
    const Pairs* pairs = pair_columns(p, gu, gt);
    if (!pairs) return false;
    for (const auto& [z, allocations] : *pairs) {
      const int from = gu < gt ? allocations.first : allocations.second;
      const int to = gu < gt ? allocations.second : allocations.first;
      const double seconds = weights ? x_.weight_transfer(edge.bytes, from, to) : x_.transfer(edge.bytes, from, to);
      edge_transfer_[e].emplace_back(z, seconds);
      longest_transfer_ = std::max(longest_transfer_, seconds);
    }
  }
  if (!x_.sync.exists()) return true;
  // The trained actor's weights cross to generation's group on the edge into the weight sync.
  const int gt = group_of[x_.sync.trainer];
  const int gg = group_of[x_.sync.reader];
  if (gt == gg) return true;
  const Pairs* pairs = pair_columns(p, gt, gg);
  if (!pairs) return false;
  for (const auto& [z, allocations] : *pairs) {
    const int trainer = gt < gg ? allocations.first : allocations.second;
    const int reader = gt < gg ? allocations.second : allocations.first;
    const double seconds = x_.weight_transfer(trainer, reader);
    edge_transfer_[x_.sync.edge].emplace_back(z, seconds);
    longest_transfer_ = std::max(longest_transfer_, seconds);
  }
  return true;
}

void Builder::add_capacity() {
  for (std::size_t c = 0; c < x_.classes.size(); ++c) {
    Terms used;
    for (const auto& gv : f_.groups) {
      for (const GroupVars& vars : gv) {
        for (std::size_t i = 0; i < vars.a.size(); ++i) {
          const int count = x_.allocations[vars.allocations[i]].counts[c];
          if (count > 0) used.emplace_back(vars.a[i], count);
        }
      }
    }
    f_.model.add_less_equal(fmt::format("capacity_class{}", c), used, static_cast<double>(x_.classes[c].size()));
  }
}

void Builder::add_cost_objective(double big_m) {
  // Dollars per 1,000 samples = price per hour x T / 3600 / samples x 1000, with the price the
  // sum over chosen allocations: a product of T and binaries, linearised exactly by
  // w_{p,g,a} >= T - big_m (1 - a_{p,g,a}), w >= 0 (at the optimum w = T x a).
  ilp::Model& m = f_.model;
  const double per_dollar_second = 1000.0 / core::kHour / x_.model.workload().samples_per_iteration();
  for (std::size_t p = 0; p < f_.groups.size(); ++p) {
    for (std::size_t g = 0; g < f_.groups[p].size(); ++g) {
      GroupVars& vars = f_.groups[p][g];
      // The chosen partition's groups each carry T on one allocation: sum_a w >= T - M (1 -
      // y_p), and w <= T, w <= M a (valid for w = T a; they tighten the LP bound).
      Terms carried{{f_.t, -1.0}, {f_.y[p], -big_m}};
      for (std::size_t i = 0; i < vars.a.size(); ++i) {
        const int a = vars.allocations[i];
        const int column = m.add_continuous(fmt::format("w_p{}_g{}_a{}", p, g, a), 0, big_m,
                                            x_.allocations[a].price * per_dollar_second);
        vars.w.push_back(column);
        m.add_greater_equal(fmt::format("w_p{}_g{}_a{}_T", p, g, a),
                            {{column, 1.0}, {f_.t, -1.0}, {vars.a[i], -big_m}}, -big_m);
        m.add_less_equal(fmt::format("w_p{}_g{}_a{}_le_T", p, g, a), {{column, 1.0}, {f_.t, -1.0}}, 0);
        m.add_less_equal(fmt::format("w_p{}_g{}_a{}_le_a", p, g, a), {{column, 1.0}, {vars.a[i], -big_m}}, 0);
        carried.emplace_back(column, 1.0);
      }
      m.add_greater_equal(fmt::format("carries_T_p{}_g{}", p, g), carried, -big_m);
    }
  }
}

void Builder::add_schedule() {
  ilp::Model& m = f_.model;
  double big_m = longest_transfer_ * static_cast<double>(graph_.edges.size());
  for (double d : longest_) big_m += d;
  big_m = std::max(1.0, big_m * 1.01);
  f_.start.resize(n_);
  for (int t = 0; t < n_; ++t) f_.start[t] = m.add_continuous(fmt::format("S_{}", graph_.tasks[t].name), 0, big_m);
  const bool cost = x_.params.goal.objective == Objective::kCostPerSample;
  f_.t = m.add_continuous("T", 0, big_m, cost ? 0.0 : 1.0);
  if (cost) add_cost_objective(big_m);
  for (std::size_t e = 0; e < graph_.edges.size(); ++e) {
    const workload::Edge& edge = graph_.edges[e];
    // S_to + lag T - S_from - D_from - transfer >= const(D_from): the periodic schedule.
    Terms terms{{f_.start[edge.from], -1.0}};
    for (const auto& [column, seconds] : duration_[edge.from]) terms.emplace_back(column, -seconds);
    terms.emplace_back(f_.start[edge.to], 1.0);
    if (edge.previous_iteration()) terms.emplace_back(f_.t, edge.lag);
    for (const auto& [z, seconds] : edge_transfer_[e]) terms.emplace_back(z, -seconds);
    m.add_greater_equal(fmt::format("after_{}_{}", graph_.tasks[edge.from].name, graph_.tasks[edge.to].name),
                        terms, duration_constant_[edge.from]);
  }
  for (std::size_t p = 0; p < x_.partitions.size(); ++p) {
    if (f_.y[p] < 0) continue;
    for (std::size_t g = 0; g < x_.partitions[p].size(); ++g) add_turns(p, g, big_m);
  }
}

void Builder::add_turns(std::size_t p, std::size_t g, double big_m) {
  ilp::Model& m = f_.model;
  const GroupVars& vars = f_.groups[p][g];
  // Only this partition's columns: the others are 0 when it is chosen, and the constraint is
  // relaxed when it is not.
  const std::vector<int>& tasks = x_.partitions[p][g];
  auto finish = [&](int t) {
    const std::size_t i = static_cast<std::size_t>(std::find(tasks.begin(), tasks.end(), t) - tasks.begin());
    Terms terms{{f_.start[t], -1.0}};
    for (const auto& [column, seconds] : i < tasks.size() ? vars.duration[i] : vars.sync) {
      terms.emplace_back(column, -seconds);
    }
    return terms;
  };
  // The weight sync takes its turn on generation's group.
  const bool sync = x_.sync.exists() && std::find(tasks.begin(), tasks.end(), x_.sync.reader) != tasks.end();
  int previous = -1;
  int first = -1;
  for (int t : order_) {
    if (std::find(tasks.begin(), tasks.end(), t) == tasks.end() && !(sync && t == x_.sync.task)) continue;
    if (previous >= 0) {
      Terms terms = finish(previous);
      terms.emplace_back(f_.start[t], 1.0);
      terms.emplace_back(f_.y[p], -big_m);
      m.add_greater_equal(fmt::format("turn_p{}_g{}_{}", p, g, graph_.tasks[t].name), terms, -big_m);
    } else {
      first = t;
    }
    previous = t;
  }
  // The group's first task of the next iteration waits for its last task of this one.
  Terms terms = finish(previous);
  terms.emplace_back(f_.start[first], 1.0);
  terms.emplace_back(f_.t, 1.0);
  terms.emplace_back(f_.y[p], -big_m);
  m.add_greater_equal(fmt::format("loop_p{}_g{}", p, g), terms, -big_m);
  // Implied by the turns, but without big M: the period is at least the group's busy time (a
  // tighter relaxation).
  Terms busy{{f_.t, 1.0}};
  for (const auto& [column, seconds] : vars.busy) busy.emplace_back(column, -seconds);
  m.add_greater_equal(fmt::format("busy_p{}_g{}", p, g), busy, 0);
}

void Builder::add_constraints() {
  const Goal& goal = x_.params.goal;
  if (goal.min_throughput) {
    f_.model.add_less_equal("min_throughput", {{f_.t, 1.0}},
                            x_.model.workload().samples_per_iteration() / *goal.min_throughput);
  }
  if (goal.budget_per_hour) {
    Terms cost;
    for (const auto& gv : f_.groups) {
      for (const GroupVars& vars : gv) {
        for (std::size_t i = 0; i < vars.a.size(); ++i) {
          cost.emplace_back(vars.a[i], x_.allocations[vars.allocations[i]].price);
        }
      }
    }
    f_.model.add_less_equal("budget", cost, *goal.budget_per_hour);
  }
}

}  // namespace

bool formulate(const Instance& instance, const Composer& composer, Formulation& out) {
  return Builder(instance, composer, out).build();
}

namespace {

// The warm start's choice for one group of its partition.
struct GroupStart {
  int allocation = -1;  // index into Instance::allocations
  const Config* config = nullptr;
};

// The index of the configuration of `vars` on its i-th allocation that lays the plan's group
// out with the same strategies, or -1.
int same_config(const Instance& x, const GroupVars& vars, std::size_t i, const plan::Group& source) {
  const workload::TaskGraph& graph = x.model.graph();
  const std::vector<Config>& configs = *vars.configs[i];
  int found = -1;
  for (std::size_t k = 0; k < configs.size(); ++k) {
    bool same = true;
    for (std::size_t j = 0; j < vars.tasks.size() && same; ++j) {
      const TaskChoice& c = configs[k].choices[j];
      const auto placement = std::find_if(source.tasks.begin(), source.tasks.end(),
                                          [&](const plan::TaskPlacement& tp) { return tp.task == vars.tasks[j]; });
      const plan::Replica& r = placement->replicas.front();
      same = c.tp == static_cast<int>(r.stages.front().devices.size()) && c.pp == static_cast<int>(r.stages.size()) &&
             (graph.tasks[vars.tasks[j]].kind != TaskKind::kTrain || c.train == placement->train);
    }
    if (same) found = static_cast<int>(k);  // the last, as configurations are unique
  }
  return found;
}

// The index of a configuration at least as fast as the warm plan in every task of the group
// (and the weight sync), or -1: the plan's own may have been dropped for one that dominates it.
int dominating_config(const Instance& x, const GroupVars& vars, std::size_t i, const plan::Prediction& warm) {
  const std::vector<Config>& configs = *vars.configs[i];
  const auto has = [&](int t) { return std::find(vars.tasks.begin(), vars.tasks.end(), t) != vars.tasks.end(); };
  const bool sync = x.sync.exists() && has(x.sync.reader);
  for (std::size_t k = 0; k < configs.size(); ++k) {
    bool faster = !sync || configs[k].sync <= warm.tasks[x.sync.task].seconds * (1 + 1e-9);
    for (std::size_t j = 0; j < vars.tasks.size() && faster; ++j) {
      faster = configs[k].seconds[j] <= warm.tasks[vars.tasks[j]].seconds * (1 + 1e-9);
    }
    if (faster) return static_cast<int>(k);
  }
  return -1;
}

// Sets the group's allocation and configuration columns to the plan's; false when the program
// has neither its allocation nor a configuration as good as its own.
bool start_group(const Instance& x, const GroupVars& vars, const plan::Group& source,
                 const plan::Prediction& warm, std::vector<double>& values, GroupStart& out) {
  std::vector<int> counts(x.classes.size(), 0);
  std::vector<int> nodes;
  for (const plan::Gpu& gpu : source.gpus) {
    if (std::find(nodes.begin(), nodes.end(), gpu.node) == nodes.end()) nodes.push_back(gpu.node);
  }
  for (int node : nodes) {
    for (std::size_t c = 0; c < x.classes.size(); ++c) {
      if (std::find(x.classes[c].begin(), x.classes[c].end(), node) != x.classes[c].end()) ++counts[c];
    }
  }
  for (std::size_t i = 0; i < vars.a.size(); ++i) {
    if (x.allocations[vars.allocations[i]].counts != counts) continue;
    int k = same_config(x, vars, i, source);
    if (k < 0) k = dominating_config(x, vars, i, warm);
    if (k < 0) return false;
    values[vars.a[i]] = 1;
    values[vars.x[i][k]] = 1;
    out.allocation = vars.allocations[i];
    out.config = &(*vars.configs[i])[k];
    return true;
  }
  return false;
}

}  // namespace

std::vector<double> warm_start(const Instance& x, const Formulation& f, plan::Evaluator& evaluator,
                               const plan::Plan& incumbent) {
  const workload::TaskGraph& graph = x.model.graph();
  const plan::Prediction warm = evaluator.evaluate(incumbent);
  if (!warm.feasible) return {};
  const int n = static_cast<int>(graph.tasks.size());
  // The partition: the plan's task sets, ordered as partitions() orders them.
  std::vector<std::vector<int>> sets;
  for (const plan::Group& g : incumbent.groups) {
    std::vector<int> tasks;
    for (const plan::TaskPlacement& t : g.tasks) tasks.push_back(t.task);
    std::sort(tasks.begin(), tasks.end());
    sets.push_back(tasks);
  }
  std::sort(sets.begin(), sets.end());
  const auto found = std::find(x.partitions.begin(), x.partitions.end(), sets);
  if (found == x.partitions.end()) return {};
  const std::size_t p = static_cast<std::size_t>(found - x.partitions.begin());
  if (f.y[p] < 0) return {};
  std::vector<double> values(f.model.columns().size(), 0.0);
  values[f.y[p]] = 1;
  const std::size_t k = x.partitions[p].size();
  std::vector<GroupStart> chosen(k);
  std::vector<int> group_of(n, -1);
  for (std::size_t g = 0; g < k; ++g) {
    const GroupVars& vars = f.groups[p][g];
    for (int t : vars.tasks) group_of[t] = static_cast<int>(g);
    const auto source = std::find_if(incumbent.groups.begin(), incumbent.groups.end(), [&](const plan::Group& pg) {
      return !pg.tasks.empty() && std::find(vars.tasks.begin(), vars.tasks.end(), pg.tasks.front().task) != vars.tasks.end();
    });
    if (source == incumbent.groups.end() || !start_group(x, vars, *source, warm, values, chosen[g])) return {};
  }
  auto z_of = [&](int g, int h) -> int {
    const int lo = std::min(g, h), hi = std::max(g, h);
    const auto it = f.z.find({p, lo, hi, chosen[lo].allocation, chosen[hi].allocation});
    return it == f.z.end() ? -1 : it->second;
  };
  // Durations and the schedule, as the program prices them.
  std::vector<double> duration(n, 0.0);
  for (int t = 0; t < n; ++t) {
    if (graph.tasks[t].kind == TaskKind::kCpu) duration[t] = x.model.cpu_seconds(t);
    if (group_of[t] >= 0) {
      const GroupVars& vars = f.groups[p][group_of[t]];
      const std::size_t j = static_cast<std::size_t>(std::find(vars.tasks.begin(), vars.tasks.end(), t) - vars.tasks.begin());
      duration[t] = chosen[group_of[t]].config->seconds[j];
    }
  }
  std::vector<double> edge_transfer(graph.edges.size(), 0.0);
  if (x.sync.exists()) {
    const int gt = group_of[x.sync.trainer], gg = group_of[x.sync.reader];
    duration[x.sync.task] = chosen[gg].config->sync;
    if (gt != gg) {
      const int z = z_of(gt, gg);
      if (z < 0) return {};
      values[z] = 1;
      edge_transfer[x.sync.edge] = x.weight_transfer(chosen[gt].allocation, chosen[gg].allocation);
    }
  }
  for (std::size_t i = 0; i < graph.edges.size(); ++i) {
    const workload::Edge& e = graph.edges[i];
    const int gu = x.host[e.from] >= 0 ? group_of[x.host[e.from]] : -1;
    const int gt = x.host[e.to] >= 0 ? group_of[x.host[e.to]] : -1;
    const bool weights = graph.reads_weights(e);
    if ((graph.moves_data(e) || weights) && gu >= 0 && gt >= 0 && gu != gt) {
      const int z = z_of(gu, gt);
      if (z < 0) return {};
      values[z] = 1;
      edge_transfer[i] = weights ? x.weight_transfer(e.bytes, chosen[gu].allocation, chosen[gt].allocation)
                                 : x.transfer(e.bytes, chosen[gu].allocation, chosen[gt].allocation);
    }
  }
  // The periodic schedule of these durations, as the evaluator builds it.
  std::vector<int> gpu_group(n, -1);
  for (int t = 0; t < n; ++t) {
    if (x.host[t] == t) gpu_group[t] = group_of[t];
  }
  if (x.sync.exists()) gpu_group[x.sync.task] = group_of[x.sync.reader];
  const std::vector<int> order = graph.topological_order();
  std::vector<plan::CycleEdge> cycle;
  std::vector<int> first, last;
  plan::schedule_edges(graph, order, duration, edge_transfer, gpu_group, static_cast<int>(k), cycle, first, last);
  plan::PeriodSolver solver;
  const double iteration = solver.period(n, cycle, order);
  const std::vector<double> starts = plan::periodic_starts(n, cycle, iteration);
  const double lowest = *std::min_element(starts.begin(), starts.end());
  for (int t = 0; t < n; ++t) values[f.start[t]] = starts[t] - lowest;
  values[f.t] = iteration;
  for (std::size_t g = 0; g < k; ++g) {
    const GroupVars& vars = f.groups[p][g];
    for (std::size_t i = 0; i < vars.w.size(); ++i) {
      if (vars.allocations[i] == chosen[g].allocation) values[vars.w[i]] = iteration;
    }
  }
  return values;
}

bool decode(const Instance& x, const Formulation& f, plan::Evaluator& evaluator,
            const std::vector<double>& values, plan::Plan& out) {
  for (std::size_t p = 0; p < x.partitions.size(); ++p) {
    if (f.y[p] < 0 || values[f.y[p]] < 0.5) continue;
    std::vector<GroupChoice> groups(x.partitions[p].size());
    std::vector<int> offset(x.classes.size(), 0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const GroupVars& vars = f.groups[p][g];
      groups[g].tasks = vars.tasks;
      for (std::size_t i = 0; i < vars.a.size(); ++i) {
        if (values[vars.a[i]] < 0.5) continue;
        const Allocation& a = x.allocations[vars.allocations[i]];
        // Concrete nodes: the next free ones of each class, by class then index, as priced.
        for (std::size_t c = 0; c < x.classes.size(); ++c) {
          for (int j = 0; j < a.counts[c]; ++j) groups[g].nodes.push_back(x.classes[c][offset[c] + j]);
          offset[c] += a.counts[c];
        }
        for (std::size_t k = 0; k < vars.x[i].size(); ++k) {
          if (values[vars.x[i][k]] > 0.5) groups[g].choices = (*vars.configs[i])[k].choices;
        }
      }
      if (groups[g].nodes.empty() || groups[g].choices.size() != groups[g].tasks.size()) return false;
    }
    if (!realize(x.model, x.models, groups, out)) return false;
    balance_shares(evaluator, out, 1);
    return true;
  }
  return false;
}

}  // namespace hetrl::planner::ilp_detail
