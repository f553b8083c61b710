#include "planner/baselines.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "plan/export.h"
#include "planner/layout.h"

namespace hetrl::planner {
namespace {

using workload::TaskKind;

// Each baseline keeps its fastest plan.
const Goal kFastest{};

// Rounds of choosing each pool's layout for the other's in the disaggregated baselines (12
// rounds give the same plans as 4 on the 48 paper scenarios).
constexpr int kLayoutRounds = 4;

std::vector<TaskChoice> strategies(std::span<const int> tps, bool training) {
  return planner::strategies(kBaselineSpace, tps, training);
}

std::vector<const workload::ModelArch*> archs_of(const workload::TaskGraph& graph,
                                                 const workload::ModelCatalog& models,
                                                 const std::vector<int>& tasks) {
  std::vector<const workload::ModelArch*> out;
  for (int t : tasks) out.push_back(&models.get(graph.tasks[t].model, ""));
  return out;
}

// The training and scoring strategies verl's trainers run for models `archs` (FSDP: ZeRO-3
// alone; Megatron: TP and PP with ZeRO-1, each stage holding as many layers as the others), as
// hetrl-plan export writes them.
std::vector<TaskChoice> verl_strategies(std::span<const int> tps,
                                        const std::vector<const workload::ModelArch*>& archs) {
  std::vector<TaskChoice> out = strategies(tps, true);
  std::erase_if(out, [&](const TaskChoice& s) {
    const auto uneven = [&](const workload::ModelArch* a) { return a->layers % s.pp != 0; };
    return std::any_of(archs.begin(), archs.end(), uneven) ||
           plan::verl_trainer_refusal(s.tp, s.pp, s.train).has_value();
  });
  return out;
}

// A group running `tasks` on all GPUs of `nodes`, generation with `rollout` and the other
// tasks with `strategy`; false if it cannot be laid out.
bool make_group(const cost::CostModel& model, const workload::ModelCatalog& models,
                const std::vector<int>& nodes, const std::vector<int>& tasks,
                const TaskChoice& strategy, const TaskChoice& rollout, plan::Group& group) {
  const hw::Cluster& cluster = model.cluster();
  group.gpus = gpus_of(cluster, nodes);
  group.tasks.clear();
  for (int t : tasks) {
    const TaskChoice& own = model.graph().tasks[t].kind == TaskKind::kGenerate ? rollout : strategy;
    plan::TaskPlacement placement;
    placement.task = t;
    placement.train = own.train;
    const workload::ModelArch& arch = models.get(model.graph().tasks[t].model, "");
    if (!uniform_replicas(cluster, nodes, own.tp, own.pp, arch.layers, placement.replicas)) {
      return false;
    }
    group.tasks.push_back(std::move(placement));
  }
  return true;
}

// The same with one strategy for every task.
bool make_group(const cost::CostModel& model, const workload::ModelCatalog& models,
                const std::vector<int>& nodes, const std::vector<int>& tasks,
                const TaskChoice& strategy, plan::Group& group) {
  return make_group(model, models, nodes, tasks, strategy, strategy, group);
}

void consider(PlannerResult& result, Rejections& rejected, const plan::Plan& candidate,
              const plan::Prediction& prediction) {
  ++result.evaluations;
  if (!prediction.feasible) {
    rejected.see(prediction);
    return;
  }
  if (!result.found || kFastest.better(prediction, result.prediction)) {
    result.found = true;
    result.plan = candidate;
    result.prediction = prediction;
  }
}

// The GPU tasks that generate, or the others.
std::vector<int> gpu_tasks(const workload::TaskGraph& graph, bool generation) {
  std::vector<int> out = graph.gpu_tasks();
  std::erase_if(out, [&](int t) { return (graph.tasks[t].kind == TaskKind::kGenerate) != generation; });
  return out;
}

constexpr const char* kLateWhyNot = "the time limit passed before a plan was found";

// True once the deadline has passed, and then the result says it stopped there.
bool late(const Deadline& deadline, PlannerResult& result) {
  if (result.stop != Stop::kTimeLimit && deadline.passed()) result.stop = Stop::kTimeLimit;
  return result.stop == Stop::kTimeLimit;
}

std::string strategy_text(const TaskChoice& s) {
  return fmt::format("TP{} PP{} ZeRO-{}{}", s.tp, s.pp, s.train.zero_stage,
                     s.train.recompute == cost::Recompute::kNone
                         ? ""
                         : fmt::format(" {} recompute", cost::recompute_name(s.train.recompute)));
}

}  // namespace

PlannerResult plan_verl(const cost::CostModel& model, const workload::ModelCatalog& models,
                        const std::vector<int>& nodes, const Deadline& deadline) {
  const workload::TaskGraph& graph = model.graph();
  std::vector<int> tasks = gpu_tasks(graph, true);
  for (int t : gpu_tasks(graph, false)) tasks.push_back(t);
  PlannerResult result;
  Rejections rejected;
  plan::Evaluator evaluator(model);
  const std::vector<int> tps = tp_choices(model.cluster(), nodes, archs_of(graph, models, tasks));
  // verl sets the rollout's parallelism apart from the trainer's
  // (actor_rollout_ref.rollout.tensor_model_parallel_size, and pipeline stages where the
  // engine runs them).
  const bool generates = !gpu_tasks(graph, true).empty();
  const std::vector<TaskChoice> rollouts = generates ? strategies(tps, false) : std::vector<TaskChoice>(1);
  for (const TaskChoice& strategy : verl_strategies(tps, archs_of(graph, models, gpu_tasks(graph, false)))) {
    for (const TaskChoice& rollout : rollouts) {
      if (late(deadline, result)) break;
      plan::Plan candidate;
      candidate.groups.emplace_back();
      if (!make_group(model, models, nodes, tasks, strategy, rollout, candidate.groups[0])) continue;
      candidate.planner.name = "verl";
      candidate.planner.params = {{"strategy", strategy_text(strategy)}};
      if (generates) candidate.planner.params.emplace_back("rollout", fmt::format("TP{} PP{}", rollout.tp, rollout.pp));
      consider(result, rejected, candidate, evaluator.evaluate(candidate));
    }
  }
  if (!result.found) result.why_not = late(deadline, result) ? kLateWhyNot : rejected.why_not(kFastest);
  result.plan.planner.stats = {{"evaluations", static_cast<double>(result.evaluations)}};
  return result;
}

namespace {

// What the two disaggregated baselines do differently with the same two pools.
struct Disaggregated {
  const char* name;
  bool balance;  // batch shares by replica speed (StreamRL), or even (verl)
};

// Generation on one pool of nodes, every other GPU task on the rest, a strategy per pool; the
// best split of the nodes (over node classes) under the policy.
PlannerResult plan_disaggregated(const cost::CostModel& model, const workload::ModelCatalog& models,
                                 const std::vector<int>& nodes, const Disaggregated& policy,
                                 const Deadline& deadline) {
  const hw::Cluster& cluster = model.cluster();
  const workload::TaskGraph& graph = model.graph();
  const std::vector<int> gen_tasks = gpu_tasks(graph, true);
  const std::vector<int> train_tasks = gpu_tasks(graph, false);
  PlannerResult result;
  if (gen_tasks.empty()) {
    result.why_not = fmt::format("the workload has no generation to set apart from training ({} splits the two)",
                                 policy.name);
    return result;
  }
  Rejections rejected;
  plan::Evaluator evaluator(model);

  // The node classes, restricted to the nodes given.
  std::vector<std::vector<int>> classes;
  for (const std::vector<int>& members : cluster.node_classes().members) {
    std::vector<int> given;
    for (int n : members) {
      if (std::find(nodes.begin(), nodes.end(), n) != nodes.end()) given.push_back(n);
    }
    if (!given.empty()) classes.push_back(std::move(given));
  }
  // Each split is priced over all the GPUs given: on a large cluster there are fewer.
  int gpus = 0;
  for (int n : nodes) gpus += cluster.nodes[n].gpu_count;
  const long long max_splits = std::clamp<long long>(kSplitGpus / std::max(1, gpus), 16, kMaxSplits);
  double combos = 1;
  for (const auto& c : classes) combos *= static_cast<double>(c.size() + 1);
  const bool whole_classes = combos > static_cast<double>(max_splits);
  if (whole_classes) {
    // Whole classes go to one pool or the other; past 2^classes splits, whole units of them
    // (the classes of a GPU type in a region, or of a GPU type).
    std::vector<std::vector<int>> merged;
    const auto few = [max_splits](std::size_t units) { return units < 62 && (1LL << units) <= max_splits; };
    for (const std::vector<int>& unit : class_units(cluster, classes, few)) {
      std::vector<int>& members = merged.emplace_back();
      for (int c : unit) members.insert(members.end(), classes[c].begin(), classes[c].end());
    }
    classes = std::move(merged);
  }

  std::vector<int> take(classes.size(), 0);
  long long splits = 0;
  while (splits < max_splits && !late(deadline, result)) {
    std::vector<int> gen_nodes, train_nodes;
    for (std::size_t c = 0; c < classes.size(); ++c) {
      for (std::size_t i = 0; i < classes[c].size(); ++i) {
        (static_cast<int>(i) < take[c] ? gen_nodes : train_nodes).push_back(classes[c][i]);
      }
    }
    if (!gen_nodes.empty() && !train_nodes.empty()) {
      ++splits;
      const auto gen_strategies =
          strategies(tp_choices(cluster, gen_nodes, archs_of(graph, models, gen_tasks)), false);
      const std::vector<int> train_tps = tp_choices(cluster, train_nodes, archs_of(graph, models, train_tasks));
      const auto train_strategies = policy.balance ? strategies(train_tps, true)
                                                     : verl_strategies(train_tps, archs_of(graph, models, train_tasks));
      plan::Plan candidate;
      candidate.groups.resize(2);
      candidate.planner.name = policy.name;
      // Generation first, with the leanest training layout; then training with the best
      // generation layout.
      TaskChoice best_gen{}, best_train{};
      double best = -1;
      for (const TaskChoice& gen : gen_strategies) {
        if (late(deadline, result)) break;
        if (!make_group(model, models, gen_nodes, gen_tasks, gen, candidate.groups[0])) continue;
        for (auto it = train_strategies.rbegin(); it != train_strategies.rend(); ++it) {
          if (!make_group(model, models, train_nodes, train_tasks, *it, candidate.groups[1])) continue;
          const plan::Prediction& p = evaluator.evaluate(candidate);
          ++result.evaluations;
          if (kFastest.score(p) > best) {
            best = kFastest.score(p);
            best_gen = gen;
            best_train = *it;
          } else if (!p.feasible) {
            rejected.see(p);
          }
          break;  // the leanest layout that could be laid out
        }
      }
      if (best > 0) {
        // Then each pool's best layout for the other's, in turn, until neither changes: a
        // generation layout chosen against the leanest training layout is chosen blind when
        // training is the slower pool.
        const auto improve = [&](int group, const std::vector<int>& pool, const std::vector<int>& tasks,
                                 const std::vector<TaskChoice>& choices, TaskChoice& chosen) {
          bool improved = false;
          for (const TaskChoice& choice : choices) {
            if (late(deadline, result)) break;
            if (!make_group(model, models, pool, tasks, choice, candidate.groups[group])) continue;
            const plan::Prediction& p = evaluator.evaluate(candidate);
            ++result.evaluations;
            if (kFastest.score(p) > best) {
              best = kFastest.score(p);
              chosen = choice;
              improved = true;
            }
          }
          make_group(model, models, pool, tasks, chosen, candidate.groups[group]);
          return improved;
        };
        make_group(model, models, gen_nodes, gen_tasks, best_gen, candidate.groups[0]);
        for (int round = 0; round < kLayoutRounds; ++round) {
          const bool train_moved = improve(1, train_nodes, train_tasks, train_strategies, best_train);
          const bool gen_moved = improve(0, gen_nodes, gen_tasks, gen_strategies, best_gen);
          if (!train_moved && !gen_moved) break;
        }
        if (policy.balance) balance_shares(evaluator, candidate);
        candidate.planner.params = {
            {"generation_gpus", std::to_string(candidate.groups[0].gpus.size())},
            {"generation_strategy", strategy_text(best_gen)},
            {"training_gpus", std::to_string(candidate.groups[1].gpus.size())},
            {"training_strategy", strategy_text(best_train)}};
        consider(result, rejected, candidate, evaluator.evaluate(candidate));
      }
    }
    // Next split: an odometer over the classes.
    std::size_t c = 0;
    for (; c < classes.size(); ++c) {
      const int limit = static_cast<int>(classes[c].size());
      if (whole_classes) {
        if (take[c] == 0) {
          take[c] = limit;
          break;
        }
      } else if (take[c] < limit) {
        ++take[c];
        break;
      }
      take[c] = 0;
    }
    if (c == classes.size()) break;
  }
  if (result.found) {
    result.plan.planner.stats = {{"evaluations", static_cast<double>(result.evaluations)},
                                 {"splits", static_cast<double>(splits)}};
  }
  if (!result.found && late(deadline, result)) result.why_not = kLateWhyNot;
  if (!result.found && splits > 0 && result.why_not.empty()) result.why_not = rejected.why_not(kFastest);
  if (!result.found && result.why_not.empty()) {
    result.why_not = "the cluster has a single node class and no split into a generation and a "
                     "training pool left both with GPUs";
  }
  return result;
}

}  // namespace

PlannerResult plan_streamrl(const cost::CostModel& model, const workload::ModelCatalog& models,
                            const std::vector<int>& nodes, const Deadline& deadline) {
  return plan_disaggregated(model, models, nodes, {"streamrl", true}, deadline);
}

PlannerResult plan_verl_async(const cost::CostModel& model, const workload::ModelCatalog& models,
                              const std::vector<int>& nodes, const Deadline& deadline) {
  if (model.workload().staleness() < 1) {
    throw core::InputError(
        "--planner verl-async: verl's one-step off-policy trainer generates with the weights of the iteration "
        "before; the workload must say \"mode\": \"async\" and \"max_staleness\": 1 or more");
  }
  return plan_disaggregated(model, models, nodes, {"verl-async", false}, deadline);
}

PlannerResult plan_homogeneous(const cost::CostModel& model, const workload::ModelCatalog& models,
                               const Deadline& deadline) {
  const hw::Cluster& cluster = model.cluster();
  PlannerResult best;
  long long evaluations = 0;
  bool stopped = false;
  for (std::size_t type = 0; type < cluster.gpu_types.size(); ++type) {
    std::vector<int> nodes;
    for (std::size_t n = 0; n < cluster.nodes.size(); ++n) {
      if (cluster.nodes[n].gpu_type == static_cast<int>(type)) nodes.push_back(static_cast<int>(n));
    }
    if (nodes.empty()) continue;
    for (PlannerResult candidate : {plan_verl(model, models, nodes, deadline), plan_streamrl(model, models, nodes, deadline)}) {
      evaluations += candidate.evaluations;
      if (candidate.stop == Stop::kTimeLimit) stopped = true;
      if (candidate.found && (!best.found || kFastest.better(candidate.prediction, best.prediction))) {
        const std::string policy = candidate.plan.planner.name;
        best = std::move(candidate);
        best.plan.planner.params.insert(best.plan.planner.params.begin(),
                                        {{"gpu_type", cluster.gpu_types[type].name}, {"policy", policy}});
      } else if (!best.found && best.why_not.empty()) {
        best.why_not = candidate.why_not;
      }
    }
  }
  best.evaluations = evaluations;
  if (stopped) best.stop = Stop::kTimeLimit;
  best.plan.planner.name = "homogeneous";
  best.plan.planner.stats = {{"evaluations", static_cast<double>(evaluations)}};
  return best;
}

}  // namespace hetrl::planner
