#include "planner/ilp_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <set>
#include <tuple>

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

struct Allocation {
  std::vector<int> counts;  // nodes per class
  std::vector<int> nodes;   // representative nodes, by class then index
  cost::CostModel::GpuSet set;
  std::vector<int> gpus_per_node;
  double price = 0;  // USD per hour
  double slowest_nic = 0;
  int node_count = 0;
};

struct GroupVars {
  std::vector<int> tasks;
  std::vector<int> allocations;             // indices into Builder::allocations_
  std::vector<int> a;                       // column per allocation
  std::vector<int> w;                       // cost objective: T when the allocation is chosen
  std::vector<std::vector<int>> x;          // columns per allocation and configuration
  std::vector<const std::vector<Config>*> configs;  // per allocation
};

class Builder {
 public:
  Builder(const cost::CostModel& model, const workload::ModelCatalog& models, const IlpParams& params,
          std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max())
      : model_(model), models_(models), params_(params), evaluator_(model),
        classes_(node_classes(model.cluster())), host_(plan::host_tasks(model.graph())),
        deadline_(deadline) {
    enumerate_allocations();
    const workload::TaskGraph& graph = model.graph();
    partitions_ = partitions(gpu_task_list(graph));
    for (std::size_t t = 0; t < graph.tasks.size(); ++t) {
      if (graph.tasks[t].kind == TaskKind::kWeightSync) sync_ = static_cast<int>(t);
    }
    for (const workload::Edge& e : graph.edges) {
      if (e.to == sync_ && !e.previous_iteration) {
        sync_train_ = e.from;
        sync_bytes_ = e.bytes;
      }
      if (e.from == sync_ && e.previous_iteration) sync_generate_ = e.to;
    }
  }

  ilp::Model build();
  // The plan of a solution; false when the solution is not a whole plan.
  bool decode(const std::vector<double>& values, plan::Plan& out);

  long long configs() const { return priced_configs_; }
  long long kept_configs() const {
    long long kept = 0;
    for (const auto& [key, configs] : cache_) kept += static_cast<long long>(configs.size());
    return kept;
  }
  int t_column() const { return t_; }
  // The values of every column for `plan` (a plan of the same space, e.g. hybrid's), or empty
  // when the plan is not one of the model's.
  std::vector<double> warm_start(const ilp::Model& m, const plan::Plan& plan) const;

 private:
  void enumerate_allocations();
  // The configurations of a group's tasks on an allocation that fit, but only those that no
  // other is at least as fast as in every task (and the reshard).
  const std::vector<Config>& configs_for(const std::vector<int>& tasks, int allocation);
  const std::vector<TaskChoice>& choices_for(int task, int allocation);
  // Configurations the enumeration would price: for every distinct group of the partitions and
  // every allocation, the product of its tasks' strategy counts.

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
  long long priced_configs_ = 0;
  long long to_price_ = 0;
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
    double slowest = std::numeric_limits<double>::infinity();
    for (std::size_t cls = 0; cls < k; ++cls) {
      for (int i = 0; i < counts[cls]; ++i) {
        const int node = classes_[cls][i];
        a.nodes.push_back(node);
        a.gpus_per_node[node] = cluster.nodes[node].gpu_count;
        // Unpriced nodes count 0: the cost objective and a budget require every price.
        a.price += cluster.node_price_per_hour(cluster.nodes[node]).value_or(0.0);
        slowest = std::min(slowest, cluster.nodes[node].nic_bandwidth);
      }
    }
    a.node_count = static_cast<int>(a.nodes.size());
    a.slowest_nic = slowest;
    model_.describe_gpu_set(a.gpus_per_node, a.set);
    allocations_.push_back(std::move(a));
  }
}

const std::vector<Config>& Builder::configs_for(const std::vector<int>& tasks, int allocation) {
  const auto key = std::make_pair(tasks, allocation);
  const auto found = cache_.find(key);
  if (found != cache_.end()) return found->second;
  std::vector<Config>& out = cache_[key];
  const Allocation& a = allocations_[allocation];
  std::vector<const std::vector<TaskChoice>*> choices;
  for (int t : tasks) {
    choices.push_back(&choices_for(t, allocation));
    if (choices.back()->empty()) return out;
  }
  std::vector<std::size_t> pick(tasks.size(), 0);
  std::vector<GroupChoice> group(1);
  group[0].tasks = tasks;
  group[0].nodes = a.nodes;
  plan::Plan p;
  while (true) {
    if (++priced_configs_ % 4096 == 0 && std::chrono::steady_clock::now() > deadline_) {
      throw core::JobError(fmt::format(
          "the ILP's build passed the time limit of {} s after pricing {} of {} group "
          "configurations; give it more time, or use the hybrid planner",
          params_.solve.time_limit, priced_configs_, to_price_));
    }
    group[0].choices.clear();
    for (std::size_t i = 0; i < tasks.size(); ++i) group[0].choices.push_back((*choices[i])[pick[i]]);
    if (realize(model_, models_, group, p) && balance_shares(evaluator_, p, 1) > 0) {
      const plan::Prediction& prediction = evaluator_.evaluate(p);
      Config c;
      c.choices = group[0].choices;
      for (int t : tasks) c.seconds.push_back(prediction.tasks[t].seconds);
      if (sync_ >= 0) c.reshard = prediction.tasks[sync_].seconds;
      keep_if_not_dominated(out, std::move(c));
    }
    std::size_t i = 0;
    for (; i < pick.size(); ++i) {
      if (++pick[i] < choices[i]->size()) break;
      pick[i] = 0;
    }
    if (i == pick.size()) break;
  }
  return out;
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
  // As the evaluator prices it between two groups: the transfer, or a pipelined broadcast
  // inside the generation group, whichever takes longer.
  const Allocation& g = allocations_[generate_allocation];
  const double across = transfer(sync_bytes_, train_allocation, generate_allocation);
  const double broadcast = g.node_count > 1 ? sync_bytes_ / g.slowest_nic : 0.0;
  return std::max(across, broadcast);
}

ilp::Model Builder::build() {
  const workload::TaskGraph& graph = model_.graph();
  const workload::Workload& w = model_.workload();
  const int n = static_cast<int>(graph.tasks.size());
  ilp::Model m;
  const std::vector<int> order = graph.topological_order();
  // Refuse before pricing anything when the enumeration would take too long.
  to_price_ = count_configs();
  if (to_price_ > params_.max_configs) {
    throw core::JobError(fmt::format(
        "the ILP would price {} group configurations, past its limit of {}; use it on fewer "
        "node types or tasks, or the hybrid planner", to_price_, params_.max_configs));
  }

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

  Terms one;
  for (std::size_t p = 0; p < partitions_.size(); ++p) {
    const auto& partition = partitions_[p];
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
          for (std::size_t i = 0; i < vars.tasks.size(); ++i) {
            const int t = vars.tasks[i];
            duration[t].emplace_back(x, configs[k].seconds[i]);
            longest[t] = std::max(longest[t], configs[k].seconds[i]);
          }
          if (sync_ >= 0 && group_of[sync_train_] == static_cast<int>(g) &&
              group_of[sync_generate_] == static_cast<int>(g)) {
            duration[sync_].emplace_back(x, configs[k].reshard);
            longest[sync_] = std::max(longest[sync_], configs[k].reshard);
          }
        }
        m.add_equal(fmt::format("config_p{}_g{}_a{}", p, g, a), choose_config, 0);
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
      if (edge.previous_iteration || edge.to == sync_) continue;
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
  const bool cost_objective = params_.objective == Objective::kCostPerSample;
  t_ = m.add_continuous("T", 0, big_m, cost_objective ? 0.0 : 1.0);
  if (cost_objective) {
    // Dollars per 1,000 samples = price per hour x T / 3600 / samples x 1000, with the price
    // the sum over chosen allocations: a product of T and binaries, linearised exactly by
    // w_{p,g,a} >= T - big_m (1 - a_{p,g,a}), w >= 0 (at the optimum w = T x a).
    const double per_dollar_second = 1000.0 / 3600.0 / w.samples_per_iteration();
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
  const bool async = w.mode == workload::Mode::kAsync;
  const double staleness = async ? w.max_staleness : 0;
  for (std::size_t e = 0; e < graph.edges.size(); ++e) {
    const workload::Edge& edge = graph.edges[e];
    // S_to + shift T - S_from - D_from - transfer >= const(D_from): the periodic schedule.
    Terms terms = finish_terms(edge.from, -1.0);
    terms.emplace_back(start[edge.to], 1.0);
    if (edge.previous_iteration) {
      terms.emplace_back(t_, 1.0 + staleness);
    } else {
      for (const auto& [z, seconds] : edge_transfer[e]) terms.emplace_back(z, -seconds);
    }
    m.add_greater_equal(fmt::format("after_{}_{}", graph.tasks[edge.from].name, graph.tasks[edge.to].name),
                        terms, duration_constant[edge.from]);
  }
  for (std::size_t p = 0; p < partitions_.size(); ++p) {
    for (std::size_t g = 0; g < partitions_[p].size(); ++g) {
      int previous = -1;
      int first = -1;
      for (int t : order) {
        if (std::find(partitions_[p][g].begin(), partitions_[p][g].end(), t) == partitions_[p][g].end()) continue;
        if (previous >= 0) {
          Terms terms = finish_terms(previous, -1.0);
          terms.emplace_back(start[t], 1.0);
          terms.emplace_back(y_[p], -big_m);
          m.add_greater_equal(fmt::format("turn_p{}_g{}_{}", p, g, graph.tasks[t].name), terms, -big_m);
        } else {
          first = t;
        }
        previous = t;
      }
      // The group's first task of the next iteration waits for its last task of this one.
      Terms terms = finish_terms(previous, -1.0);
      terms.emplace_back(start[first], 1.0);
      terms.emplace_back(t_, 1.0);
      terms.emplace_back(y_[p], -big_m);
      m.add_greater_equal(fmt::format("loop_p{}_g{}", p, g), terms, -big_m);
    }
  }
  if (params_.min_throughput) {
    m.add_less_equal("min_throughput", {{t_, 1.0}}, w.samples_per_iteration() / *params_.min_throughput);
  }
  if (params_.budget_per_hour) {
    Terms cost;
    for (const auto& gv : groups_) {
      for (const GroupVars& vars : gv) {
        for (std::size_t i = 0; i < vars.a.size(); ++i) {
          const Allocation& a = allocations_[vars.allocations[i]];
          cost.emplace_back(vars.a[i], a.price);
        }
      }
    }
    m.add_less_equal("budget", cost, *params_.budget_per_hour);
  }
  return m;
}

std::vector<double> Builder::warm_start(const ilp::Model& m, const plan::Plan& plan) const {
  const workload::TaskGraph& graph = model_.graph();
  plan::Evaluator evaluator(model_);
  const plan::Prediction warm = evaluator.evaluate(plan);
  if (!warm.feasible) return {};
  const workload::Workload& w = model_.workload();
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
    if (!e.previous_iteration && e.to != sync_ && gu >= 0 && gt >= 0 && gu != gt) {
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
  plan::schedule_edges(graph, order, duration, edge_transfer, gpu_group, static_cast<int>(k),
                       w.mode == workload::Mode::kAsync ? w.max_staleness : 0, cycle, first, last);
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
    if (values[y_[p]] < 0.5) continue;
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
  require_prices(model.cluster(), params.objective, params.budget_per_hour.has_value());
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(params.solve.time_limit));
  Builder builder(model, models, params, deadline);
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
    std::vector<double> values = builder.warm_start(m, *warm);
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
