#include "sim/simulator.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <memory>
#include <map>
#include <numeric>
#include <set>

#include "plan/evaluate.h"
#include "sim/event_queue.h"
#include "sim/generation.h"

namespace hetrl::sim {
namespace {

using workload::TaskKind;

class Run {
 public:
  Run(const cost::CostModel& model, const plan::Plan& plan, const SimParams& params,
      std::span<Listener* const> listeners)
      : model_(model), plan_(plan), params_(params), listeners_(listeners), evaluator_(model),
        graph_(model.graph()), n_(static_cast<int>(graph_.tasks.size())) {
    prediction_ = evaluator_.evaluate(plan, true);
    const workload::Workload& w = model.workload();
    expected_tokens_ = w.samples_per_iteration() * (w.prompt_length_tokens + w.response.mean());
    assert(prediction_.feasible);
    order_ = graph_.topological_order();
    rank_.assign(n_, 0);
    for (int r = 0; r < n_; ++r) rank_[order_[r]] = r;
    host_ = graph_.host_tasks();
    group_of_.assign(n_, -1);
    for (int t = 0; t < n_; ++t) {
      if (host_[t] >= 0) group_of_[t] = plan.group_of(host_[t]);
    }
    sets_.resize(plan.groups.size());
    for (std::size_t g = 0; g < plan.groups.size(); ++g) {
      std::vector<int> per_node(model.cluster().nodes.size(), 0);
      for (const plan::Gpu& gpu : plan.groups[g].gpus) ++per_node[gpu.node];
      model.describe_gpu_set(per_node, sets_[g]);
    }
    find_weight_sync();
    // The group whose GPUs each task occupies: a GPU task's own, and the weight sync's reader's
    // (it reshards or loads the new weights into generation). A group's order: iteration by
    // iteration, its tasks in topological order.
    runs_on_.assign(n_, -1);
    for (int t : order_) {
      const int g = graph_.tasks[t].on_gpu() ? plan.group_of(t) : t == sync_.task ? sync_to_ : -1;
      runs_on_[t] = g;
      if (g >= 0) group_tasks_[g].push_back(t);
    }
    network_ = std::make_unique<Network>(queue_, model, sets_, params.link_contention);
    network_->on_rate([this](int link, double time, double rate) {
      for (Listener* l : listeners_) l->link_rate(link, time, rate);
    });
    const int total = params.iterations * n_;
    pending_.assign(total, 0);
    ready_at_.assign(total, 0.0);
    started_.assign(total, 0);
    next_in_group_.assign(plan.groups.size(), 0);
    last_end_.assign(params.iterations, 0.0);
    done_.assign(params.iterations, 0);
    summary_.group_busy.assign(plan.groups.size(), 0.0);
    for (int i = 0; i < params.iterations; ++i) {
      for (const workload::Edge& e : graph_.edges) {
        if (i - e.lag >= 0) ++pending_[i * n_ + e.to];
      }
    }
  }

  SimSummary run() {
    for (int i = 0; i < params_.iterations; ++i) {
      for (int t = 0; t < n_; ++t) try_start(i, t);
    }
    summary_.events = queue_.run([this] {
      if (params_.progress) params_.progress(static_cast<int>(summary_.iteration_end.size()));
      summary_.stopped = params_.deadline.passed();
      return summary_.stopped;
    });
    summary_.links = network_->links();
    summary_.link_use = network_->use();
    finish_summary();
    return summary_;
  }

 private:
  int key(int iteration, int task) const { return iteration * n_ + task; }

  // Starts (iteration, task) if its inputs are in and, for a GPU task, it is its group's turn.
  void try_start(int iteration, int task) {
    const int k = key(iteration, task);
    if (pending_[k] != 0 || started_[k]) return;
    const double ready = std::max(ready_at_[k], queue_.now());
    if (runs_on_[task] >= 0) {
      const int g = runs_on_[task];
      const auto& tasks = group_tasks_[g];
      const std::size_t position = next_in_group_[g];
      if (position / tasks.size() != static_cast<std::size_t>(iteration) ||
          tasks[position % tasks.size()] != task) {
        return;
      }
      // Its turn comes when the group's previous instance has finished: the GPUs are free.
      started_[k] = 1;
      queue_.at(ready, [this, iteration, task, ready] { run_gpu_task(iteration, task, ready); });
    } else {
      started_[k] = 1;
      queue_.at(ready, [this, iteration, task, ready] {
        finish(iteration, task, ready, ready + scaled_seconds(iteration, task));
      });
    }
  }

  // The weight sync and the generation group it runs on.
  void find_weight_sync() {
    sync_ = graph_.weight_sync();
    if (sync_.exists()) sync_to_ = plan_.group_of(sync_.reader);
  }

  void transfer_done(int iteration, int from_task, int to_task, int from_group, int to_group,
                     double bytes, double start) {
    const TransferRun run{iteration, from_task, to_task, from_group, to_group,
                          bytes,     start,     queue_.now()};
    for (Listener* l : listeners_) l->transfer_done(run);
  }

  // Starts what an event may have made startable: the instances in `keys` (consumers whose
  // last input arrived) and each group's next instance, in iteration then topological order.
  // Nothing else can have become startable, so a simulation's work grows with its events, not
  // with events times iterations.
  void start_ready(std::vector<int>& keys) {
    for (std::size_t g = 0; g < next_in_group_.size(); ++g) {
      const auto& tasks = group_tasks_[static_cast<int>(g)];
      if (tasks.empty()) continue;
      const std::size_t position = next_in_group_[g];
      const int iteration = static_cast<int>(position / tasks.size());
      if (iteration < params_.iterations) keys.push_back(key(iteration, tasks[position % tasks.size()]));
    }
    std::sort(keys.begin(), keys.end(), [this](int a, int b) {
      return a / n_ != b / n_ ? a < b : rank_[a % n_] < rank_[b % n_];
    });
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (int k : keys) try_start(k / n_, k % n_);
  }

  // The cost model's time for a task, scaled by the tokens this iteration produced.
  double scaled_seconds(int iteration, int task) {
    const double actual = tokens_[iteration] > 0 ? tokens_[iteration] : expected_tokens_;
    const TaskKind kind = graph_.tasks[task].kind;
    const double scale = kind == TaskKind::kWeightSync ? 1.0 : actual / expected_tokens_;
    return prediction_.tasks[task].seconds * scale;
  }

  void run_gpu_task(int iteration, int task, double begin) {
    if (graph_.tasks[task].kind != TaskKind::kGenerate) {
      finish(iteration, task, begin, begin + scaled_seconds(iteration, task));
      return;
    }
    // Draw the iteration's lengths and split them by the replicas' shares.
    const workload::Workload& w = model_.workload();
    const int samples = w.samples_per_iteration();
    const std::vector<int> lengths = w.response.sample(samples, params_.seed * 7919 + static_cast<std::uint64_t>(iteration));
    tokens_[iteration] = static_cast<double>(samples) * w.prompt_length_tokens +
                         std::accumulate(lengths.begin(), lengths.end(), 0.0);
    const int g = plan_.group_of(task);
    const plan::TaskPlacement* placement = plan_.placement(task);
    const auto& replicas = placement->replicas;
    auto pending = std::make_shared<int>(static_cast<int>(replicas.size()));
    std::size_t next = 0;
    double share_sum = 0;
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      share_sum += replicas[r].share;
      const std::size_t until = r + 1 == replicas.size() ? lengths.size()
                                                        : static_cast<std::size_t>(std::llround(share_sum * samples));
      std::vector<int> mine(lengths.begin() + static_cast<long>(next), lengths.begin() + static_cast<long>(std::max(next, until)));
      next = std::max(next, until);
      std::vector<cost::Stage> stages;
      for (const plan::Stage& s : replicas[r].stages) {
        stages.push_back({s.node, static_cast<int>(s.devices.size()), s.layers});
      }
      const int sequences = static_cast<int>(mine.size());
      auto replica = std::make_shared<ReplicaGeneration>(model_, task, stages,
                                                         prediction_.tasks[task].kv_budget[r], std::move(mine));
      generations_.push_back(replica);
      ReplicaGeneration* raw = replica.get();
      const int replica_index = static_cast<int>(r);
      raw->start(queue_, [this, raw, pending, iteration, task, g, replica_index, begin, sequences] {
        ReplicaRun run{iteration, task, g, replica_index, raw->started_at(), raw->finished_at(),
                       raw->tail_seconds(), raw->steps(), sequences};
        summary_.tail_seconds += raw->tail_seconds();
        for (Listener* l : listeners_) l->replica_done(run);
        if (--*pending == 0) finish(iteration, task, begin, queue_.now());
      });
    }
  }

  void finish(int iteration, int task, double begin, double end) {
    if (end > queue_.now()) {
      queue_.at(end, [this, iteration, task, begin, end] { finish(iteration, task, begin, end); });
      return;
    }
    TaskRun run{iteration, task, runs_on_[task], begin, end};
    for (Listener* l : listeners_) l->task_done(run);
    if (runs_on_[task] >= 0) {
      const int g = runs_on_[task];
      summary_.group_busy[g] += end - begin;
      ++next_in_group_[g];
    }
    // An iteration ends with the last of its tasks.
    last_end_[iteration] = std::max(last_end_[iteration], end);
    if (++done_[iteration] == n_) summary_.iteration_end.push_back(last_end_[iteration]);
    // Release the task's consumers.
    std::vector<int> ready;
    for (const workload::Edge& e : graph_.edges) {
      if (e.from != task) continue;
      const int consumer_iteration = iteration + e.lag;
      if (consumer_iteration >= params_.iterations) continue;
      const int ck = key(consumer_iteration, e.to);
      // The trained actor's weights cross to the generation group's host memory on the edge
      // into the weight sync.
      const bool to_sync = e.to == sync_.task;
      const int gu = group_of_[task], gt = to_sync ? sync_to_ : group_of_[e.to];
      const bool weights = graph_.reads_weights(e) || to_sync;
      if ((graph_.moves_data(e) || weights) && gu >= 0 && gt >= 0 && gu != gt && e.bytes > 0) {
        const int to = e.to;
        const double bytes = e.bytes;
        // Weights reach every node of the reading group by a pipelined broadcast, no faster
        // than its slowest NIC.
        const double broadcast = weights && sets_[gt].nodes > 1 ? sets_[gt].slowest_nic
                                                                : std::numeric_limits<double>::infinity();
        network_->start(bytes, gu, gt, broadcast,
                        [this, ck, iteration, task, to, gu, gt, bytes, end] {
                          transfer_done(iteration, task, to, gu, gt, bytes, end);
                          ready_at_[ck] = std::max(ready_at_[ck], queue_.now());
                          std::vector<int> keys;
                          if (--pending_[ck] == 0) keys.push_back(ck);
                          start_ready(keys);
                        });
        continue;
      }
      ready_at_[ck] = std::max(ready_at_[ck], end);
      if (--pending_[ck] == 0) ready.push_back(ck);
    }
    // The consumers may now start, and the group's next task.
    start_ready(ready);
  }

  void finish_summary() {
    const workload::Workload& w = model_.workload();
    std::sort(summary_.iteration_end.begin(), summary_.iteration_end.end());
    summary_.end = summary_.iteration_end.empty() ? queue_.now() : summary_.iteration_end.back();
    const auto& ends = summary_.iteration_end;
    const double tokens_per_sample = w.prompt_length_tokens + w.response.mean();
    if (ends.size() >= 2) {
      summary_.iteration_seconds = (ends.back() - ends.front()) / static_cast<double>(ends.size() - 1);
    } else if (!ends.empty()) {
      summary_.iteration_seconds = ends.front();
    }
    if (summary_.iteration_seconds > 0) {
      summary_.samples_per_second = w.samples_per_iteration() / summary_.iteration_seconds;
      summary_.tokens_per_second = summary_.samples_per_second * tokens_per_sample;
    }
  }

  const cost::CostModel& model_;
  const plan::Plan& plan_;
  const SimParams& params_;
  std::span<Listener* const> listeners_;
  plan::Evaluator evaluator_;
  plan::Prediction prediction_;
  const workload::TaskGraph& graph_;
  int n_;
  std::vector<int> order_;
  std::vector<int> rank_;  // per task: its place in order_
  std::vector<int> host_;
  std::vector<int> group_of_;
  std::vector<cost::CostModel::GpuSet> sets_;
  std::map<int, std::vector<int>> group_tasks_;
  std::vector<int> pending_;
  std::vector<double> ready_at_;
  std::vector<char> started_;  // per instance: scheduled
  std::vector<std::size_t> next_in_group_;  // per group: its running or next instance; moves on
                                            // when that one finishes
  std::map<int, double> tokens_;
  double expected_tokens_ = 0;  // an iteration's tokens, as the cost model assumes
  std::vector<double> last_end_;  // per iteration: its latest task end so far
  std::vector<int> done_;         // per iteration: its tasks finished
  std::vector<std::shared_ptr<ReplicaGeneration>> generations_;
  EventQueue queue_;
  std::unique_ptr<Network> network_;
  workload::WeightSync sync_;
  int sync_to_ = -1;    // the generation group
  std::vector<int> runs_on_;  // per task: the group whose GPUs it occupies, or -1
  SimSummary summary_;
};

}  // namespace

SimSummary simulate(const cost::CostModel& model, const plan::Plan& plan, const SimParams& params,
                    std::span<Listener* const> listeners) {
  Run run(model, plan, params, listeners);
  return run.run();
}

}  // namespace hetrl::sim
