#include "exec/run.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <deque>
#include <tuple>
#include <map>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "exec/generate.h"
#include "exec/transformer.h"
#include "exec/zero.h"
#include "plan/evaluate.h"

namespace hetrl::exec {
namespace {

// [first, last) of each of n samples by the cumulative shares, the last to the end.
std::vector<std::pair<std::size_t, std::size_t>> contiguous_split(std::size_t n, const std::vector<double>& shares) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  std::size_t next = 0;
  double share_sum = 0;
  for (std::size_t r = 0; r < shares.size(); ++r) {
    share_sum += shares[r];
    const std::size_t until =
        r + 1 == shares.size() ? n : std::min(n, static_cast<std::size_t>(std::llround(share_sum * static_cast<double>(n))));
    ranges.emplace_back(next, std::max(next, until));
    next = std::max(next, until);
  }
  return ranges;
}

using workload::Role;
using workload::TaskKind;
using device::Buffer;
using device::DType;

// Device time, measured: the product of hetrl-exec (its tests never read it).
class Stopwatch {
 public:
  explicit Stopwatch(device::Backend& b) : b_(b) {
    b_.synchronize();
    start_ = std::chrono::steady_clock::now();
  }
  double seconds() const {
    b_.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  // When it started, in seconds after `origin`.
  double started(std::chrono::steady_clock::time_point origin) const {
    return std::chrono::duration<double>(start_ - origin).count();
  }

 private:
  device::Backend& b_;
  std::chrono::steady_clock::time_point start_;
};

// A micro-batch: samples of alike lengths, handed to the model padded to the longest, which it
// runs packed (the padding is never computed).
struct MicroBatch {
  std::vector<std::size_t> samples;
  int length = 0;
};

// A stage's messages on its pipeline. While `hold` is on (the steady part of 1F1B's schedule,
// Runner::train), a send is held (a copy) until the stage's next message there: a receive from
// the same peer goes with it as one exchange, which the peer's mirror exchange matches (the
// rows of one micro-batch down and the gradients of an earlier one up), where two processes
// each sending first would wait for each other forever; any other message, or the hold's end,
// sends it alone first.
class PipeLink {
 public:
  PipeLink(device::Backend& b, device::Communicator& pipe) : b_(b), pipe_(pipe) {}

  void send(DType t, const void* data, std::size_t count, int peer) {
    flush();
    if (!holding_) {
      pipe_.send(t, data, count, peer);
      return;
    }
    const std::size_t bytes = count * device::dtype_bytes(t);
    if (held_.bytes() < bytes) held_ = device::Buffer(b_, bytes, device::Purpose::kCommunication);
    b_.copy(held_.data(), data, bytes);
    type_ = t;
    count_ = count;
    peer_ = peer;
    pending_ = true;
  }
  void recv(DType t, void* data, std::size_t count, int peer) {
    if (pending_ && peer == peer_ && t == type_) {
      pending_ = false;
      pipe_.exchange(t, held_.data(), count_, data, count, peer);
      return;
    }
    flush();
    pipe_.recv(t, data, count, peer);
  }
  void hold(bool on) {
    if (!on) flush();
    holding_ = on;
  }
  // The pipeline for any other message, the held send gone first.
  device::Communicator& comm() {
    flush();
    return pipe_;
  }

 private:
  void flush() {
    if (!pending_) return;
    pending_ = false;
    pipe_.send(type_, held_.data(), count_, peer_);
  }

  device::Backend& b_;
  device::Communicator& pipe_;
  device::Buffer held_;
  DType type_ = DType::kF32;
  std::size_t count_ = 0;
  int peer_ = -1;
  bool holding_ = false, pending_ = false;
};

class Runner {
 public:
  Runner(device::Backend& b, const cost::CostModel& model, const workload::ModelCatalog& models, const plan::Plan& plan,
         const RunSettings& settings)
      : b_(b), model_(model), plan_(plan), settings_(settings), graph_(model.graph()), w_(model.workload()),
        evaluator_(model) {
    check_placements();
    prediction_ = evaluator_.evaluate(plan_, true);
    for (const workload::Role role : workload::kRoles) {
      const workload::RoleModel& r = w_.role(role);
      if (r.kind == workload::RoleModel::Kind::kModel) archs_[role_index(role)] = &models.get(r.model, workload::role_name(role));
    }
    // The trained roles' layouts: their training task's TP.
    for (const int task : graph_.gpu_tasks()) {
      const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
      if (t.kind == TaskKind::kTrain) trainer_tp_[role_index(*t.role)] = tp_of(placement(task).replicas.front());
    }
    find_groups();
    if (settings_.comm && settings_.comm->size() > 1) place_on_ranks();
  }

  RunResult run(const std::function<void(int, int)>& progress) {
    if (multi()) world().barrier();  // every process's clock from one moment
    origin_ = std::chrono::steady_clock::now();
    // Every model exists from the start (and its weights with it), as on a cluster.
    for (const int task : graph_.gpu_tasks()) {
      const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
      for (std::size_t r = 0; r < placement(task).replicas.size(); ++r) {
        if (!mine(task, r)) continue;
        if (t.kind == TaskKind::kGenerate) {
          rollout(layout(task, r));
        } else {
          model_for(*t.role, layout(task, r));
        }
      }
      // Under mpirun the processes that need one hold a copy of a trained role's weights,
      // which the training's broadcasts or posts keep new.
      if (t.kind == TaskKind::kTrain && keeps_copy(*t.role)) model_for(*t.role, source_layout(*t.role));
    }
    // The initial weights' pieces for the first iteration's weight sync from another group.
    if (multi() && sync_apart_) post_sync_pieces(-1);
    for (const auto& [key, m] : models_) result_.parameter_bytes += m->parameter_bytes();
    for (const auto& [key, m] : rollouts_) result_.parameter_bytes += m->parameter_bytes();
    result_.collectives_timed = timed_collectives();
    // Each process runs its group's tasks, iteration by iteration in topological order, and
    // takes what it reads of other groups' work when it needs it: a group works on the next
    // iteration while the others finish this one, as far as the staleness bound lets
    // generation run ahead of training.
    for (int iteration = 0; iteration < settings_.iterations; ++iteration) {
      IterationMeasurement m;
      m.tasks.resize(graph_.tasks.size());
      draw_samples(iteration);
      received_.assign(graph_.tasks.size(), false);
      for (const int task : graph_.topological_order()) {
        if (!runs_here(task)) continue;
        if (progress) progress(iteration, task);
        take_inputs(iteration, task);
        TaskMeasurement& out = m.tasks[static_cast<std::size_t>(task)];
        b_.synchronize();
        out.start = now();
        run_task(iteration, task, m);
        b_.synchronize();
        out.end = now();
        // What the task's models worked in goes with it, as on a framework's GPU.
        for (auto* held : {&models_, &rollouts_}) {
          for (auto& [key, model] : *held) model->release_workspace();
        }
        hand_on(iteration, task);
      }
      if (score_task_ >= 0 && holds(score_task_)) {
        double score = 0;
        for (const Sample& s : samples_) score += s.score;
        m.mean_score = samples_.empty() ? 0 : score / static_cast<double>(samples_.size());
      }
      result_.iterations.push_back(std::move(m));
    }
    if (multi()) {
      world().finish_posted();
      gather_measurements();
    }
    gather_memory();
    // Each iteration as run: from its first task's start to its last's end, and its period
    // (from the previous one's end; the first's from its own start).
    for (std::size_t i = 0; i < result_.iterations.size(); ++i) {
      IterationMeasurement& it = result_.iterations[i];
      it.start = std::numeric_limits<double>::infinity();
      it.end = 0;
      for (const TaskMeasurement& t : it.tasks) {
        if (!t.ran) continue;
        it.start = std::min(it.start, t.start);
        it.end = std::max(it.end, t.end);
      }
      if (!std::isfinite(it.start)) it.start = 0;
      it.period = it.end - (i == 0 ? it.start : result_.iterations[i - 1].end);
    }
    return std::move(result_);
  }

 private:
  const plan::TaskPlacement& placement(int task) const {
    const plan::TaskPlacement* p = plan_.placement(task);
    if (p == nullptr) throw std::logic_error("run: a GPU task without a placement");
    return *p;
  }

  static int role_index(Role role) { return static_cast<int>(role); }
  bool multi() const { return comm_ != nullptr; }

  // Every process's device memory at its most, and under mpirun the cost model's need of each
  // process's plan GPU (processes are the plan's GPUs group by group, as place_on_ranks ranks
  // them).
  void gather_memory() {
    const device::MemoryByPurpose& mine = b_.memory_peak_by_purpose();
    if (!multi()) {
      result_.devices = {DeviceMemory{mine, std::nullopt}};
      return;
    }
    result_.devices.assign(static_cast<std::size_t>(comm_->size()), DeviceMemory{});
    for (int r = 0; r < comm_->size(); ++r) {
      device::MemoryByPurpose peak = r == rank_ ? mine : device::MemoryByPurpose{};
      world().broadcast_host(peak.data(), sizeof peak, r);
      result_.devices[static_cast<std::size_t>(r)].peak = peak;
    }
    if (!prediction_.feasible) return;
    std::size_t rank = 0;
    for (std::size_t g = 0; g < plan_.groups.size(); ++g) {
      for (const plan::MemoryUse& use : evaluator_.gpu_memory(static_cast<int>(g))) {
        if (rank < result_.devices.size()) result_.devices[rank++].predicted = use;
      }
    }
  }
  // Whether the tensor-parallel all-reduces are timed: on a transport whose collectives return
  // when done (MPI's; NCCL's return once queued on the stream).
  bool timed_collectives() const { return multi() && comm_->transport() == "mpi"; }
  device::Communicator& world() { return *comm_; }

  // The plan's groups as the run follows them: each task's group (a CPU task's is that of the
  // GPU task that first reads it, the weight sync's generation's); what each task reads of
  // this iteration's work, through any chain of tasks (in topological order), and which other
  // groups read what it writes; where the samples' scores come from.
  void find_groups() {
    const std::size_t n = graph_.tasks.size();
    if (n > kTaskTags) throw std::logic_error("run: more tasks than the message tags have room for");
    const std::vector<int> host = graph_.host_tasks();
    const std::vector<int> order = graph_.topological_order();
    task_group_.assign(n, 0);
    for (std::size_t t = 0; t < n; ++t) {
      const workload::Task& task = graph_.tasks[t];
      if (task.kind == TaskKind::kWeightSync) {
        task_group_[t] = plan_.group_of(graph_.weight_sync().reader);
      } else if (host[t] >= 0) {
        task_group_[t] = plan_.group_of(host[t]);
      } else if (!graph_.gpu_tasks().empty()) {
        task_group_[t] = plan_.group_of(graph_.gpu_tasks().front());
      }
    }
    upstream_.assign(n, {});
    for (const int t : order) {
      std::vector<bool> in(n, false);
      for (const workload::Edge& e : graph_.edges) {
        if (e.to != t || e.previous_iteration()) continue;
        in[static_cast<std::size_t>(e.from)] = true;
        for (const int u : upstream_[static_cast<std::size_t>(e.from)]) in[static_cast<std::size_t>(u)] = true;
      }
      for (const int u : order) {
        if (in[static_cast<std::size_t>(u)] && graph_.tasks[static_cast<std::size_t>(u)].kind != TaskKind::kWeightSync) {
          upstream_[static_cast<std::size_t>(t)].push_back(u);
        }
      }
    }
    readers_.assign(n, {});
    for (std::size_t t = 0; t < n; ++t) {
      for (const int u : upstream_[t]) {
        std::vector<int>& groups = readers_[static_cast<std::size_t>(u)];
        const int g = task_group_[t];
        if (g != task_group_[static_cast<std::size_t>(u)] && std::find(groups.begin(), groups.end(), g) == groups.end()) {
          groups.push_back(g);
        }
      }
    }
    for (std::size_t t = 0; t < n; ++t) {
      const workload::Task& task = graph_.tasks[t];
      if ((task.kind == TaskKind::kForward && task.role == Role::kReward) || (task.kind == TaskKind::kCpu && task.op == "rule")) {
        score_task_ = static_cast<int>(t);
      }
    }
    const workload::WeightSync sync = graph_.weight_sync();
    for (const int task : graph_.gpu_tasks()) {
      const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
      if (t.kind == TaskKind::kTrain) trainer_task_[role_index(*t.role)] = task;
    }
    if (sync.exists()) {
      sync_apart_ = task_group_[static_cast<std::size_t>(sync.trainer)] != task_group_[static_cast<std::size_t>(sync.task)];
      // Generation in a group of its own takes weights up to the staleness bound old; beside
      // its training, the newest.
      sync_lag_ = 1 + (sync_apart_ ? w_.staleness() : 0);
    }
  }
  // Whether this process runs `task`: every task in one process; under mpirun its group's.
  bool runs_here(int task) const { return !multi() || task_group_[static_cast<std::size_t>(task)] == group_; }
  // Whether this process holds what `task` wrote this iteration.
  bool holds(int task) const { return runs_here(task) || received_[static_cast<std::size_t>(task)]; }

  // Tags of posted messages: what they carry, of which task and iteration (the iteration
  // taken round, -1 (before the first) as 63: messages of one tag arrive in order).
  static constexpr std::size_t kTaskTags = 64;
  enum class Carries { kResults = 0, kWeights = 1, kSyncPieces = 2, kSyncReady = 3 };
  static int tag(int iteration, int task, Carries what) {
    return (((iteration % 64 + 64) % 64) * static_cast<int>(kTaskTags) + task) * 4 + static_cast<int>(what);
  }

  // Under mpirun: the plan's GPUs, group by group in the order the plan lists them, one a
  // process; each replica's processes, stage by stage; a communicator for each stage over
  // several of them (its tensor-parallel group), one for each shard's column of a replica's
  // stages (its pipeline), and one for each training task's processes holding one stage's
  // shard, one in each replica (its data-parallel group).
  void place_on_ranks() {
    comm_ = settings_.comm;
    rank_ = comm_->rank();
    std::map<plan::Gpu, int> rank_of;
    group_ranks_.assign(plan_.groups.size(), {});
    for (std::size_t g = 0; g < plan_.groups.size(); ++g) {
      for (const plan::Gpu& gpu : plan_.groups[g].gpus) {
        group_ranks_[g].push_back(static_cast<int>(rank_of.size()));
        if (group_ranks_[g].back() == rank_) group_ = static_cast<int>(g);
        rank_of.emplace(gpu, static_cast<int>(rank_of.size()));
      }
    }
    if (static_cast<int>(rank_of.size()) != comm_->size()) {
      throw core::JobError(fmt::format("the plan uses {} GPUs and the run has {} processes: start one process a GPU "
                                       "(mpirun -n {})",
                                       rank_of.size(), comm_->size(), rank_of.size()));
    }
    // The group's own communicator, ranked as group_ranks_ lists its processes.
    group_comm_ = comm_->split(group_, rank_);
    for (const int task : graph_.gpu_tasks()) {
      const plan::TaskPlacement& p = placement(task);
      const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
      std::vector<ReplicaRanks>& placed = ranks_[task];
      for (std::size_t r = 0; r < p.replicas.size(); ++r) {
        ReplicaRanks ranks;
        for (const plan::Stage& stage : p.replicas[r].stages) {
          std::vector<int>& column = ranks.emplace_back();
          for (const int device : stage.devices) column.push_back(rank_of.at(plan::Gpu{stage.node, device}));
        }
        const int tp = tp_of(p.replicas[r]);
        if (t.kind == TaskKind::kTrain && tp > 1) {
          const workload::ModelArch& arch = *archs_[role_index(*t.role)];
          if (arch.kv_heads % tp != 0) {
            throw core::JobError(fmt::format("task {}: training at TP {} over processes needs the kv heads ({}) split, "
                                             "not copied",
                                             t.name, tp, arch.kv_heads));
          }
        }
        if (t.kind == TaskKind::kTrain && stage_layers(task, r) != stage_layers(task, 0)) {
          const auto split = [&](std::size_t replica) {
            std::string out;
            for (const int layers : stage_layers(task, replica)) out += (out.empty() ? "" : "+") + std::to_string(layers);
            return out;
          };
          throw core::JobError(fmt::format("task {}: replicas of stages of {} and {} layers; hetrl-exec trains one "
                                           "layout of a model over processes",
                                           t.name, split(0), split(r)));
        }
        placed.push_back(std::move(ranks));
      }
    }
    // Which trained roles a forward pass in their training's group runs in another layout than
    // the training's (other processes, TP or stages), so that it reads the copy share_weights
    // keeps; where every one runs in a training replica's layout it reads the trained model.
    for (const int task : graph_.gpu_tasks()) {
      const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
      if (t.kind != TaskKind::kForward || !trainer_task_.contains(role_index(*t.role))) continue;
      const int trainer = trainer_task_.at(role_index(*t.role));
      if (task_group_[static_cast<std::size_t>(task)] != task_group_[static_cast<std::size_t>(trainer)]) continue;
      for (std::size_t r = 0; r < ranks_.at(task).size(); ++r) {
        bool alike = false;
        for (std::size_t k = 0; k < ranks_.at(trainer).size(); ++k) {
          alike = alike || (ranks_.at(trainer)[k] == ranks_.at(task)[r] && stage_layers(trainer, k) == stage_layers(task, r));
        }
        if (!alike) copied_[static_cast<std::size_t>(role_index(*t.role))] = true;
      }
    }
    // The communicators, made in the same order by every process (each split is collective).
    for (const int task : graph_.gpu_tasks()) {
      const std::vector<ReplicaRanks>& placed = ranks_[task];
      for (std::size_t r = 0; r < placed.size(); ++r) {
        const Where at = where(placed[r]);
        for (std::size_t g = 0; g < placed[r].size(); ++g) {
          if (placed[r][g].size() < 2) continue;
          const bool in = at.stage == static_cast<int>(g);
          auto part = comm_->split(in ? 1 : 0, in ? at.shard : rank_);
          if (in) tp_comms_[{task, r, static_cast<int>(g)}] = std::move(part);
        }
        if (placed[r].size() > 1) {
          // Each shard's pipeline: its process in every stage, ranked by stage.
          auto part = comm_->split(at.stage >= 0 ? 1 + at.shard : 0, at.stage >= 0 ? at.stage : rank_);
          if (at.stage >= 0) pipe_comms_[{task, r}] = std::move(part);
        }
      }
      if (graph_.tasks[static_cast<std::size_t>(task)].kind == TaskKind::kTrain) {
        // The data-parallel groups: the processes holding one stage's shard, one in each replica,
        // ranked by replica, so that a replica's stages hold the same stretch of what ZeRO-3
        // shards (a tied embedding's on the first and last stages sum stretch to stretch).
        int color = 0, key = rank_;
        for (std::size_t r = 0; r < placed.size(); ++r) {
          const Where at = where(placed[r]);
          if (at.stage < 0) continue;
          color = 1 + at.stage * static_cast<int>(placed[r].front().size()) + at.shard;
          key = static_cast<int>(r);
        }
        auto part = comm_->split(color, key);
        if (color > 0) dp_comms_[task] = std::move(part);
      }
    }
  }

  // A replica's processes: stage by stage, each stage's by shard.
  using ReplicaRanks = std::vector<std::vector<int>>;
  // Where a process is in a replica (stage -1: not in it); this process by default.
  struct Where {
    int stage = -1, shard = -1;
  };
  Where where(const ReplicaRanks& ranks) const { return where(ranks, rank_); }
  static Where where(const ReplicaRanks& ranks, int rank) {
    for (std::size_t g = 0; g < ranks.size(); ++g) {
      const auto at = std::find(ranks[g].begin(), ranks[g].end(), rank);
      if (at != ranks[g].end()) return {static_cast<int>(g), static_cast<int>(at - ranks[g].begin())};
    }
    return {};
  }
  // The layers of each of a replica's stages, as the plan splits them.
  std::vector<int> stage_layers(int task, std::size_t r) const {
    std::vector<int> out;
    for (const plan::Stage& s : placement(task).replicas[r].stages) out.push_back(s.layers);
    return out;
  }
  // Each of a replica's stages' layers, by their index in the whole model.
  std::vector<Transformer::Layers> layer_spans(int task, std::size_t r) const {
    std::vector<Transformer::Layers> out;
    int first = 0;
    for (const int layers : stage_layers(task, r)) {
      out.push_back({first, layers});
      first += layers;
    }
    return out;
  }
  // The process whose results of replica r stand for the replica's: its last stage's first.
  int result_lead(int task, std::size_t r) const { return ranks_.at(task)[r].back().front(); }

  bool mine(int task, std::size_t r) const { return !multi() || where(ranks_.at(task)[r]).stage >= 0; }

  // Where a replica's model lives: its TP layout, and under mpirun its processes stage by
  // stage (which name the layout's copy: another task's replica on the same processes in the
  // same layout shares it), this process's shard of it with the stage's communicator, and
  // where the replica's stages are over processes, this process's stage (its layers) with its
  // shard's pipeline. In one process a replica's stages run as one model.
  struct Layout {
    int tp = 1;
    std::vector<int> ranks;
    int shard = 0;
    device::Communicator* comm = nullptr;
    int stage = 0, stages = 1;
    int first_layer = 0, layers = 0;  // layers 0: every layer
    device::Communicator* pipe = nullptr;
  };
  Layout layout(int task, std::size_t r) const {
    Layout l;
    l.tp = tp_of(placement(task).replicas[r]);
    if (multi()) {
      const ReplicaRanks& ranks = ranks_.at(task)[r];
      const Where at = where(ranks);
      for (const std::vector<int>& column : ranks) l.ranks.insert(l.ranks.end(), column.begin(), column.end());
      l.shard = at.shard;
      l.stage = at.stage;
      l.stages = static_cast<int>(ranks.size());
      if (l.tp > 1) l.comm = tp_comms_.at({task, r, at.stage}).get();
      if (l.stages > 1) {
        const Transformer::Layers held = layer_spans(task, r)[static_cast<std::size_t>(at.stage)];
        l.first_layer = held.first;
        l.layers = held.count;
        l.pipe = pipe_comms_.at({task, r}).get();
      }
    }
    return l;
  }
  // A layout's model among a role's: by its TP, its layers and its processes.
  using ModelKey = std::tuple<int, int, int, int, std::vector<int>>;
  static ModelKey key(int role, const Layout& l) { return {role, l.tp, l.first_layer, l.layers, l.ranks}; }
  // The layout the trained role trains in here: its training's (under mpirun this process's
  // replica of it; processes {-2} where this process trains none).
  Layout trainer_layout(Role role) const {
    const int i = role_index(role);
    Layout l;
    l.tp = trainer_tp_[i];
    if (!multi()) return l;
    l.ranks = {-2};
    const auto task = trainer_task_.find(i);
    if (task == trainer_task_.end()) return l;
    for (std::size_t r = 0; r < ranks_.at(task->second).size(); ++r) {
      if (mine(task->second, r)) return layout(task->second, r);
    }
    return l;
  }
  // Where the other layouts of a trained role take its weights from: the training's own model
  // in one process; under mpirun every process's copy of the training's layout with all its
  // shards here (processes {-1}), which share_weights keeps new.
  Layout source_layout(Role role) const {
    if (!multi()) return trainer_layout(role);
    Layout l;
    l.tp = trainer_tp_[role_index(role)];
    l.ranks = {-1};
    return l;
  }

  // Whether this process keeps a copy of a trained role's weights in its training's layout
  // (source_layout), from which its models of the role in other layouts load: where a forward
  // pass in the training's group runs another layout than the training's (share_weights
  // broadcasts to every process of the group), and in each other group that scores with the
  // role (fresh_weights takes what the training posted). Elsewhere none is kept: a GPU holds
  // only the layouts its tasks run in, as the cost model counts it.
  bool keeps_copy(Role role) const {
    const int i = role_index(role);
    if (!multi() || !trainer_task_.contains(i)) return false;
    if (task_group_[static_cast<std::size_t>(trainer_task_.at(i))] == group_) return copied_[static_cast<std::size_t>(i)];
    const std::vector<int> readers = weight_readers(role);
    return std::find(readers.begin(), readers.end(), rank_) != readers.end();
  }
  // The process of the training's first replica that holds a trained role's tensor `name` (as
  // a model names it): a shard's tensor ("name/j") shard j's, a whole one shard 0's; a layer's
  // the stage's holding it, the embedding the first's, the final norm and the head the last's.
  // `spans`: the first replica's stages' layers (layer_spans(training, 0)), taken once by the
  // caller for all of a model's tensors.
  int owner_of(Role role, const std::string& name, const std::vector<Transformer::Layers>& spans) const {
    const ReplicaRanks& owners = ranks_.at(trainer_task_.at(role_index(role))).front();
    const std::size_t slash = name.rfind('/');
    const int shard = slash == std::string::npos ? 0 : std::stoi(name.substr(slash + 1));
    std::size_t stage = name == "embedding" ? 0 : owners.size() - 1;
    if (name.rfind("layer.", 0) == 0) {
      const int layer = std::stoi(name.substr(6));
      for (std::size_t g = 0; g < spans.size(); ++g) {
        if (layer >= spans[g].first && layer < spans[g].first + spans[g].count) stage = g;
      }
    }
    return owners.at(stage).at(static_cast<std::size_t>(shard));
  }
  // Each tensor of a trained role's copy here (keeps_copy: its training's layout, every shard)
  // with its owner.
  std::vector<std::pair<Transformer::Tensor, int>> owned_tensors(Role role) {
    if (!keeps_copy(role)) throw std::logic_error("run: no copy of a trained role's weights here");
    const std::vector<Transformer::Layers> spans = layer_spans(trainer_task_.at(role_index(role)), 0);
    std::vector<std::pair<Transformer::Tensor, int>> out;
    for (const Transformer::Tensor& p : model_for(role, source_layout(role)).parameters()) {
      out.emplace_back(p, owner_of(role, p.name, spans));
    }
    return out;
  }
  // This process's trained tensors of a role, by name (none where it trains none).
  std::map<std::string, Transformer::Tensor> trained_tensors(Role role) {
    std::map<std::string, Transformer::Tensor> out;
    if (where(ranks_.at(trainer_task_.at(role_index(role))).front()).stage < 0) return out;
    for (const Transformer::Tensor& p : model_for(role, trainer_layout(role)).parameters()) out[p.name] = p;
    return out;
  }
  // Under mpirun, in the training's group: the trained role's newest weights from the
  // training's first replica to every process's copy, once a step of training (every process
  // of the group calls it at the same task).
  void share_weights(Role role) {
    const int i = role_index(role);
    if (!multi() || !copied_[static_cast<std::size_t>(i)] || shared_[i] >= version_[i]) return;
    const std::map<std::string, Transformer::Tensor> trained = trained_tensors(role);
    for (const auto& [p, owner] : owned_tensors(role)) {
      if (owner == rank_) {
        const Transformer::Tensor& mine_tensor = trained.at(p.name);
        group_comm_->broadcast(settings_.dtype, mine_tensor.buffer->data(), p.count, group_rank(owner));
        b_.copy(p.buffer->data(), mine_tensor.buffer->data(), p.count * device::dtype_bytes(settings_.dtype));
      } else {
        group_comm_->broadcast(settings_.dtype, p.buffer->data(), p.count, group_rank(owner));
      }
    }
    b_.synchronize();
    shared_[i] = version_[i];
    held_[key(i, source_layout(role))] = version_[i];
  }
  // The groups other than its training's that score with a trained role, and their processes.
  std::vector<int> weight_readers(Role role) const {
    std::vector<int> out;
    const int trainer_group = task_group_[static_cast<std::size_t>(trainer_task_.at(role_index(role)))];
    for (std::size_t g = 0; g < group_ranks_.size(); ++g) {
      if (static_cast<int>(g) == trainer_group) continue;
      for (const int task : graph_.gpu_tasks()) {
        const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
        if (t.kind == TaskKind::kForward && t.role == role && task_group_[static_cast<std::size_t>(task)] == static_cast<int>(g)) {
          out.insert(out.end(), group_ranks_[g].begin(), group_ranks_[g].end());
          break;
        }
      }
    }
    return out;
  }
  // The weights a forward pass of `role` scores with in `iteration`: its training's newest,
  // those of the iteration before (in the training's group, the broadcast; in another, what
  // the training's processes posted when it ended).
  void fresh_weights(int iteration, Role role) {
    const int i = role_index(role);
    if (!multi() || !trainer_task_.contains(i)) return;
    if (task_group_[static_cast<std::size_t>(trainer_task_.at(i))] == group_) {
      share_weights(role);
      return;
    }
    if (iteration == 0 || taken_[static_cast<std::size_t>(i)] >= iteration - 1) return;
    for (const auto& [p, owner] : owned_tensors(role)) {
      take_to_device(p.buffer->data(), p.count * device::dtype_bytes(settings_.dtype), owner,
                     tag(iteration - 1, trainer_task_.at(i), Carries::kWeights));
    }
    b_.synchronize();
    taken_[static_cast<std::size_t>(i)] = iteration - 1;
    held_[key(i, source_layout(role))] = ++version_[i];
  }
  // After a role's training in `iteration`: its weights posted to the processes of the other
  // groups that score with it the iteration after, and the actor's to generation in a group of
  // its own for the weight sync sync_lag_ iterations on (in one process, a copy kept until
  // then).
  void hand_on_trained(int iteration, Role role) {
    const int i = role_index(role);
    const std::vector<int> readers = multi() ? weight_readers(role) : std::vector<int>{};
    // The tensors this process owns, from its training model in the copy's order (a shard's
    // tensors by layer as in the copy), which is how the readers take them.
    if (!readers.empty() && iteration + 1 < settings_.iterations &&
        where(ranks_.at(trainer_task_.at(i)).front()).stage >= 0) {
      const std::vector<Transformer::Layers> spans = layer_spans(trainer_task_.at(i), 0);
      for (const Transformer::Tensor& p : model_for(role, trainer_layout(role)).parameters()) {
        if (owner_of(role, p.name, spans) != rank_) continue;
        device::HostBytes bytes(p.count * device::dtype_bytes(settings_.dtype));
        b_.download(bytes.data(), p.buffer->data(), bytes.size());
        for (const int q : readers) world().post(bytes, q, tag(iteration, trainer_task_.at(i), Carries::kWeights));
      }
    }
    if (role != Role::kActor || !sync_apart_ || iteration + sync_lag_ >= settings_.iterations) return;
    if (multi()) {
      post_sync_pieces(iteration);
    } else if (sync_lag_ > 1) {
      std::unique_ptr<Transformer> copy;
      if (!spare_) {
        copy = make(Role::kActor, trainer_layout(Role::kActor));
      } else {
        copy = std::move(spare_);
      }
      copy->load(model_for(Role::kActor, trainer_layout(Role::kActor)));
      stale_.emplace_back(iteration, std::move(copy));
    }
  }

  // Under mpirun, for the weight sync of generation in a group of its own: the trained actor's
  // pieces this process holds, as they are after the training of iteration `trained` (-1: the
  // initial weights), posted to the processes that take them, then to each of these a word that
  // all are there.
  void post_sync_pieces(int trained) {
    const int sync = graph_.weight_sync().task;
    std::vector<int> takers;
    walk_sync([&](const SyncPiece& piece, Transformer* model, Transformer*) {
      if (piece.from != rank_) return;
      if (std::find(takers.begin(), takers.end(), piece.to) == takers.end()) takers.push_back(piece.to);
      model->send_shard(piece.from_shard, piece.to_tp, piece.to_shard, piece.whole, piece.to_layers,
                        [&](const void* data, std::size_t bytes) {
                          device::HostBytes host(bytes);
                          b_.download(host.data(), data, bytes);
                          world().post(std::move(host), piece.to, tag(trained, sync, Carries::kSyncPieces));
                        });
    });
    for (const int p : takers) world().post({}, p, tag(trained, sync, Carries::kSyncReady));
  }

  // One piece of the weight sync under mpirun: generation's shard `to_shard` of stage `stage` of
  // replica `replica` (on process `to`) takes training shard `from_shard` of training stage
  // `from_stage` (on process `from`), the tensors every shard holds whole with it where
  // `whole`.
  struct SyncPiece {
    std::size_t replica = 0, stage = 0, from_stage = 0;
    int to_shard = 0, to_tp = 1, from_shard = 0, from_tp = 1;
    int to = 0, from = 0;
    bool whole = false;
    Transformer::Layers to_layers{}, from_layers{};
  };
  // Each of generation's shards takes its part of the trained actor, piece by piece, from the
  // training replica its own process is part of where there is one, else from the replicas in
  // turn; each piece once, from the process holding it (a layer's from the training stage
  // holding it), straight into the engine's shard of its stage. Every process walks the same
  // list, so sends and receives pair in order. `visit` gets the piece, the trained actor here
  // and generation's engine here (null where this process holds none of the piece's).
  template <typename Visit>
  void walk_sync(const Visit& visit) {
    const int actor = role_index(Role::kActor);
    const int reader = graph_.weight_sync().reader;
    const int trainer = trainer_task_.at(actor);
    const std::vector<ReplicaRanks>& trainers = ranks_.at(trainer);
    const std::vector<ReplicaRanks>& readers = ranks_.at(reader);
    const int from_tp = trainer_tp_[actor];
    const std::vector<Transformer::Layers> from_layers = layer_spans(trainer, 0);
    std::size_t turn = 0;
    for (std::size_t r = 0; r < readers.size(); ++r) {
      const int to_tp = static_cast<int>(readers[r].front().size());
      const std::vector<Transformer::Layers> to_layers = layer_spans(reader, r);
      for (std::size_t g = 0; g < readers[r].size(); ++g) {
        for (int d = 0; d < to_tp; ++d) {
          const int p = readers[r][g][static_cast<std::size_t>(d)];
          std::size_t source = trainers.size();
          for (std::size_t k = 0; k < trainers.size() && source == trainers.size(); ++k) {
            if (where(trainers[k], p).stage >= 0) source = k;
          }
          if (source == trainers.size()) source = turn++ % trainers.size();
          const ReplicaRanks& owners = trainers[source];
          // The tensors every shard holds whole come from this process's own training shard,
          // else from the replica's first.
          const int whole_from = std::max(0, where(owners, p).shard);
          for (std::size_t h = 0; h < owners.size(); ++h) {
            for (int s = 0; s < from_tp; ++s) {
              const int q = owners[h][static_cast<std::size_t>(s)];
              if (rank_ != p && rank_ != q) continue;
              const SyncPiece piece{r, g, h, d, to_tp, s, from_tp, p, q, s == whole_from, to_layers[g], from_layers[h]};
              Transformer* trained = rank_ == q ? &model_for(Role::kActor, trainer_layout(Role::kActor)) : nullptr;
              Transformer* engine = rank_ == p ? &rollout(layout(reader, r)) : nullptr;
              visit(piece, trained, engine);
            }
          }
        }
      }
    }
  }

  // Under mpirun, the weight sync inside a group: every process of it at once.
  void sync_in_group() {
    walk_sync([&](const SyncPiece& piece, Transformer* trained, Transformer* engine) {
      if (piece.to == piece.from) {
        engine->load_shard(*trained, piece.from_shard, piece.to_shard, piece.whole);
      } else if (rank_ == piece.from) {
        trained->send_shard(piece.from_shard, piece.to_tp, piece.to_shard, piece.whole, piece.to_layers,
                           [&](const void* data, std::size_t bytes) {
                             world().send(settings_.dtype, data, bytes / device::dtype_bytes(settings_.dtype), piece.to);
                           });
      } else {
        engine->receive_shard(piece.from_tp, piece.from_shard, piece.from_layers, piece.to_shard, piece.whole,
                              [&](void* data, std::size_t bytes) {
                                world().recv(settings_.dtype, data, bytes / device::dtype_bytes(settings_.dtype), piece.from);
                              });
      }
    });
    b_.synchronize();
  }
  // Under mpirun, the weight sync of generation in a group of its own: the pieces the training's
  // processes posted after training in iteration `trained`, into the engines here. Timed from
  // when every sender has posted them all (the wait for the training, and its copies of the
  // pieces, are not the sync's): the pieces' way from host memory into the engines.
  double sync_from_posted(int trained) {
    const int sync = graph_.weight_sync().task;
    const int t = tag(trained, sync, Carries::kSyncPieces);
    std::vector<int> senders;
    walk_sync([&](const SyncPiece& piece, Transformer*, Transformer*) {
      if (piece.to == rank_ && std::find(senders.begin(), senders.end(), piece.from) == senders.end()) senders.push_back(piece.from);
    });
    for (const int q : senders) world().take(nullptr, 0, q, tag(trained, sync, Carries::kSyncReady));
    const Stopwatch watch(b_);
    walk_sync([&](const SyncPiece& piece, Transformer*, Transformer* engine) {
      if (piece.to != rank_) return;
      engine->receive_shard(piece.from_tp, piece.from_shard, piece.from_layers, piece.to_shard, piece.whole,
                            [&](void* data, std::size_t bytes) { take_to_device(data, bytes, piece.from, t); });
    });
    return watch.seconds();
  }

  // A posted message taken into device memory: straight there where the device's memory is the
  // host's (the cpu backend), else through host memory.
  void take_to_device(void* data, std::size_t bytes, int peer, int t) {
    if (b_.info().backend == "cpu") {
      world().take(data, bytes, peer, t);
      return;
    }
    device::HostBytes host(bytes);
    world().take(host.data(), bytes, peer, t);
    b_.upload(data, host.data(), bytes);
  }

  // The sample fields a task writes.
  enum class Field { kResponse, kOldLogp, kRefLogp, kValues, kScore, kAdvantages, kReturns };
  std::vector<Field> writes(int task) const {
    const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
    switch (t.kind) {
      case TaskKind::kGenerate:
        return {Field::kResponse};
      case TaskKind::kForward:
        switch (*t.role) {
          case Role::kActor: return {Field::kOldLogp};
          case Role::kReference: return {Field::kRefLogp};
          case Role::kCritic: return {Field::kValues};
          case Role::kReward: return {Field::kScore};
        }
        break;
      case TaskKind::kCpu:
        if (t.op == "gae") return {Field::kAdvantages, Field::kReturns};
        if (t.op == "group_norm") return {Field::kAdvantages};
        if (t.op == "rule") return {Field::kScore};
        break;
      default:
        break;
    }
    return {};
  }
  static std::vector<float>* values_of(Sample& s, Field f) {
    switch (f) {
      case Field::kOldLogp: return &s.old_logp;
      case Field::kRefLogp: return &s.ref_logp;
      case Field::kValues: return &s.values;
      case Field::kAdvantages: return &s.advantages;
      case Field::kReturns: return &s.returns;
      default: return nullptr;
    }
  }
  // Bytes of what `task` writes of samples `which` (a response as long as drawn, the others'
  // per-token values as long as the response).
  std::size_t packed_bytes(int task, const std::vector<std::size_t>& which) const {
    std::size_t bytes = 0;
    for (const Field f : writes(task)) {
      for (const std::size_t i : which) {
        bytes += f == Field::kResponse ? static_cast<std::size_t>(response_lengths_[i]) * sizeof(int)
                 : f == Field::kScore  ? sizeof(float)
                                       : static_cast<std::size_t>(samples_[i].response_length()) * sizeof(float);
      }
    }
    return bytes;
  }
  device::HostBytes pack(int task, const std::vector<std::size_t>& which) {
    device::HostBytes out;
    out.reserve(packed_bytes(task, which));
    const auto put = [&](const void* data, std::size_t bytes) {
      const std::byte* b = static_cast<const std::byte*>(data);
      out.insert(out.end(), b, b + bytes);
    };
    for (const Field f : writes(task)) {
      for (const std::size_t i : which) {
        Sample& s = samples_[i];
        if (f == Field::kResponse) {
          put(s.tokens.data() + s.prompt_length, static_cast<std::size_t>(response_lengths_[i]) * sizeof(int));
        } else if (f == Field::kScore) {
          put(&s.score, sizeof(float));
        } else {
          const std::vector<float>& v = *values_of(s, f);
          put(v.data(), v.size() * sizeof(float));
        }
      }
    }
    return out;
  }
  void unpack(int task, const std::vector<std::size_t>& which, const device::HostBytes& bytes) {
    std::size_t at = 0;
    const auto get = [&](void* data, std::size_t n) {
      std::memcpy(data, bytes.data() + at, n);
      at += n;
    };
    for (const Field f : writes(task)) {
      for (const std::size_t i : which) {
        Sample& s = samples_[i];
        if (f == Field::kResponse) {
          s.tokens.resize(static_cast<std::size_t>(s.prompt_length + response_lengths_[i]));
          get(s.tokens.data() + s.prompt_length, static_cast<std::size_t>(response_lengths_[i]) * sizeof(int));
        } else if (f == Field::kScore) {
          get(&s.score, sizeof(float));
        } else {
          std::vector<float>& v = *values_of(s, f);
          v.resize(static_cast<std::size_t>(s.response_length()));
          get(v.data(), v.size() * sizeof(float));
        }
      }
    }
  }

  // Who holds what a task wrote: each replica's last stage's first process with the replica's
  // samples; a CPU task's group's first process with every sample; none for training and the
  // weight sync (its weights go apart).
  struct Piece {
    int lead = 0;
    std::vector<std::size_t> samples;
  };
  std::vector<Piece> pieces(int task) const {
    const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
    std::vector<Piece> out;
    if (t.kind == TaskKind::kCpu) {
      out.push_back({lead_of(task), range(0, samples_.size())});
    } else if (t.kind == TaskKind::kGenerate || t.kind == TaskKind::kForward) {
      const std::vector<std::vector<std::size_t>> shares = replica_samples(task);
      for (std::size_t r = 0; r < shares.size(); ++r) out.push_back({result_lead(task, r), shares[r]});
    }
    return out;
  }
  // Each replica's samples: generation's contiguous runs; a forward pass's dealt by their
  // tokens (training deals each mini-batch).
  std::vector<std::vector<std::size_t>> replica_samples(int task) const {
    const plan::TaskPlacement& p = placement(task);
    std::vector<std::vector<std::size_t>> shares;
    if (graph_.tasks[static_cast<std::size_t>(task)].kind == TaskKind::kGenerate) {
      for (const auto& [first, last] : split(p)) shares.push_back(range(first, last));
    } else {
      shares = deal(range(0, samples_.size()), sample_tokens(), replica_shares(p));
    }
    return shares;
  }
  // Whose results stand for a task's: its first replica's lead; a CPU task's group's first process.
  int lead_of(int task) const {
    if (graph_.tasks[static_cast<std::size_t>(task)].kind == TaskKind::kCpu) {
      return group_ranks_[static_cast<std::size_t>(task_group_[static_cast<std::size_t>(task)])].front();
    }
    return result_lead(task, 0);
  }
  int group_rank(int rank) const {
    for (const std::vector<int>& ranks : group_ranks_) {
      const auto at = std::find(ranks.begin(), ranks.end(), rank);
      if (at != ranks.end()) return static_cast<int>(at - ranks.begin());
    }
    throw std::logic_error("run: a process in no group");
  }

  // Under mpirun, after a GPU task: each replica's results from its lead to the rest of the
  // group, so that every process of it holds the iteration's samples.
  void share_results(int task) {
    if (!multi()) return;
    for (const Piece& piece : pieces(task)) {
      const bool from_me = piece.lead == rank_;
      device::HostBytes bytes =
          from_me ? pack(task, piece.samples) : device::HostBytes(packed_bytes(task, piece.samples));
      if (!bytes.empty()) group_comm_->broadcast_host(bytes.data(), bytes.size(), group_rank(piece.lead));
      if (!from_me) unpack(task, piece.samples, bytes);
    }
  }
  // Under mpirun, before a task: what it reads of this iteration's work in other groups, as
  // their leads posted it (in topological order, so that the responses come first).
  void take_inputs(int iteration, int task) {
    if (!multi()) return;
    for (const int u : upstream_[static_cast<std::size_t>(task)]) {
      if (holds(u)) continue;
      for (const Piece& piece : pieces(u)) {
        device::HostBytes bytes(packed_bytes(u, piece.samples));
        world().take(bytes.data(), bytes.size(), piece.lead, tag(iteration, u, Carries::kResults));
        unpack(u, piece.samples, bytes);
      }
      received_[static_cast<std::size_t>(u)] = true;
    }
  }
  // After a task: what it wrote posted to the other groups that read it (under mpirun), and a
  // training's weights handed on.
  void hand_on(int iteration, int task) {
    const std::vector<int>& groups = readers_[static_cast<std::size_t>(task)];
    if (multi() && !groups.empty()) {
      for (const Piece& piece : pieces(task)) {
        if (piece.lead != rank_) continue;
        const device::HostBytes bytes = pack(task, piece.samples);
        for (const int g : groups) {
          for (const int q : group_ranks_[static_cast<std::size_t>(g)]) world().post(bytes, q, tag(iteration, task, Carries::kResults));
        }
      }
    }
    const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
    if (t.kind == TaskKind::kTrain) hand_on_trained(iteration, *t.role);
  }

  // Under mpirun, after the run: what each process measured, to all (every process reaches
  // it): each replica's from its lead, a CPU task's from its group's first process, the
  // weight sync's slowest, each task's first start and last end; training's losses and
  // gradient norms from its lead; the mean score from whoever computed it.
  void gather_measurements() {
    for (std::size_t i = 0; i < result_.iterations.size(); ++i) {
      IterationMeasurement& m = result_.iterations[i];
      for (std::size_t task = 0; task < graph_.tasks.size(); ++task) {
        const workload::Task& t = graph_.tasks[task];
        TaskMeasurement& out = m.tasks[task];
        const bool here = out.ran;
        const double first = -world().max(here ? -out.start : -std::numeric_limits<double>::infinity());
        out.end = world().max(here ? out.end : -std::numeric_limits<double>::infinity());
        out.start = first;
        out.ran = std::isfinite(first);
        if (!out.ran) continue;
        if (t.kind == TaskKind::kWeightSync) {
          out.seconds = world().max(here ? out.seconds : 0.0);
          continue;
        }
        if (t.kind == TaskKind::kCpu) {
          world().broadcast_host(&out.seconds, sizeof(double), lead_of(static_cast<int>(task)));
          continue;
        }
        const std::size_t replicas = placement(static_cast<int>(task)).replicas.size();
        out.replica_seconds.resize(replicas, 0.0);
        if (t.kind == TaskKind::kGenerate) {
          out.replica_decode_steps.resize(replicas, 0);
          out.replica_prefill_passes.resize(replicas, 0);
          out.replica_prefill_seconds.resize(replicas, 0.0);
        }
        if (timed_collectives()) {
          out.replica_tp_collective_seconds.resize(replicas, 0.0);
          out.replica_tp_collective_calls.resize(replicas, 0);
        }
        if (t.kind == TaskKind::kTrain) out.replica_parts.resize(replicas);
        std::vector<ReplicaSpan> spans;
        for (std::size_t r = 0; r < replicas; ++r) {
          const int lead = result_lead(static_cast<int>(task), r);
          world().broadcast_host(&out.replica_seconds[r], sizeof(double), lead);
          if (t.kind == TaskKind::kGenerate) {
            world().broadcast_host(&out.replica_decode_steps[r], sizeof(long long), lead);
            world().broadcast_host(&out.replica_prefill_passes[r], sizeof(long long), lead);
            world().broadcast_host(&out.replica_prefill_seconds[r], sizeof(double), lead);
          }
          if (timed_collectives()) {
            world().broadcast_host(&out.replica_tp_collective_seconds[r], sizeof(double), lead);
            world().broadcast_host(&out.replica_tp_collective_calls[r], sizeof(long long), lead);
          }
          if (t.kind == TaskKind::kTrain) world().broadcast_host(&out.replica_parts[r], sizeof(TrainParts), lead);
          std::vector<ReplicaSpan> of_r;
          for (const ReplicaSpan& s : out.spans) {
            if (s.replica == static_cast<int>(r)) of_r.push_back(s);
          }
          long long count = static_cast<long long>(of_r.size());
          world().broadcast_host(&count, sizeof count, lead);
          of_r.resize(static_cast<std::size_t>(count));
          if (count > 0) world().broadcast_host(of_r.data(), of_r.size() * sizeof(ReplicaSpan), lead);
          spans.insert(spans.end(), of_r.begin(), of_r.end());
        }
        out.spans = std::move(spans);
        world().broadcast_host(&out.tokens, sizeof(long long), result_lead(static_cast<int>(task), 0));
        out.seconds = out.replica_seconds.empty() ? 0 : *std::max_element(out.replica_seconds.begin(), out.replica_seconds.end());
        if (t.kind == TaskKind::kTrain) {
          double pair[2];
          pair[0] = t.role == Role::kCritic ? m.value_loss : m.policy_loss;
          pair[1] = t.role == Role::kCritic ? m.value_grad_norm : m.policy_grad_norm;
          world().broadcast_host(pair, sizeof pair, result_lead(static_cast<int>(task), 0));
          (t.role == Role::kCritic ? m.value_loss : m.policy_loss) = pair[0];
          (t.role == Role::kCritic ? m.value_grad_norm : m.policy_grad_norm) = pair[1];
        }
        if (t.kind == TaskKind::kGenerate) {
          m.decode_steps = 0;
          for (const long long steps : out.replica_decode_steps) m.decode_steps += steps;
          m.prefill_passes = 0;
          for (const long long passes : out.replica_prefill_passes) m.prefill_passes += passes;
        }
      }
      if (score_task_ >= 0) {
        world().broadcast_host(&m.mean_score, sizeof(double), lead_of(score_task_));
      }
    }
  }
  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count(); }
  // Records replica r's stretch that `watch` timed (`seconds` long).
  void span(TaskMeasurement& out, std::size_t r, const Stopwatch& watch, double seconds, int samples, long long steps = 0) {
    const double start = watch.started(origin_);
    out.spans.push_back({static_cast<int>(r), start, start + seconds, samples, steps});
  }
  static int tp_of(const plan::Replica& r) { return static_cast<int>(r.stages.front().devices.size()); }

  // On one device a replica's tensor-parallel shards run one after another and its pipeline
  // stages as one model; every stage of a replica has one TP, and a trained model's replicas
  // one layout (they hold one set of weights; under mpirun its stages too, place_on_ranks).
  void check_placements() const {
    for (const int task : graph_.gpu_tasks()) {
      const plan::TaskPlacement& p = placement(task);
      const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
      for (std::size_t r = 0; r < p.replicas.size(); ++r) {
        for (const plan::Stage& s : p.replicas[r].stages) {
          if (static_cast<int>(s.devices.size()) != tp_of(p.replicas[r])) {
            throw core::JobError(fmt::format("task {} replica {}: stages of different TP; hetrl-exec runs one TP a replica",
                                             t.name, r));
          }
        }
        if (t.kind == TaskKind::kTrain && tp_of(p.replicas[r]) != tp_of(p.replicas.front())) {
          throw core::JobError(fmt::format("task {}: replicas of TP {} and {}; hetrl-exec trains one layout of a model",
                                           t.name, tp_of(p.replicas.front()), tp_of(p.replicas[r])));
        }
      }
    }
  }

  // The role's model in a TP layout: made on first use (every layout of a role starts from the
  // same weights), and a trained role's copy brought up to its training's latest weights first
  // (the reshard, untimed: the schedule prices the weights' transfer apart from the task).
  Transformer& model_for(Role role, const Layout& l) {
    const int i = role_index(role);
    // A replica on this process alone in the training's TP, other than a training replica, is
    // the copy's layout: it reads the copy itself rather than a second one.
    const bool as_copy = keeps_copy(role) && l.comm == nullptr && l.pipe == nullptr && l.tp == trainer_tp_[i] &&
                         key(i, l) != key(i, trainer_layout(role));
    const ModelKey k = key(i, as_copy ? source_layout(role) : l);
    std::unique_ptr<Transformer>& m = models_[k];
    if (!m) m = make(role, l);
    int& held = held_[k];
    const bool trains = key(i, trainer_layout(role)) == k, is_source = key(i, source_layout(role)) == k;
    if (held < version_[i] && !trains && !is_source) {
      m->load(model_for(role, source_layout(role)));
      held = version_[i];
    }
    return *m;
  }

  // Generation's own copy of the actor in a TP layout, as a serving engine holds one; the weight
  // sync brings it the trained weights.
  Transformer& rollout(const Layout& l) {
    std::unique_ptr<Transformer>& m = rollouts_[key(role_index(Role::kActor), l)];
    if (!m) m = make(Role::kActor, l);
    return *m;
  }

  std::unique_ptr<Transformer> make(Role role, const Layout& l) {
    const int i = role_index(role);
    if (!archs_[i]) throw std::logic_error("run: a task of a role without a model");
    const int tp = l.tp;
    TransformerOptions o;
    o.dtype = settings_.dtype;
    o.seed = settings_.seed * 131 + static_cast<std::uint64_t>(i) + 1;
    o.tp.size = tp;
    if (l.comm) {
      o.tp.local = {l.shard};
      device::Communicator* comm = l.comm;
      o.tp.all_reduce = [comm](DType t, void* data, std::size_t count) { comm->all_reduce(t, data, data, count); };
      o.tp.timed = timed_collectives();
    }
    std::unique_ptr<PipeLink> link;
    if (l.pipe) {
      link = std::make_unique<PipeLink>(b_, *l.pipe);
      o.pp = pipeline(l, link.get());
    }
    const Head head = workload::head_of(role);
    try {
      std::unique_ptr<Transformer> model = std::make_unique<Transformer>(b_, *archs_[i], head, o);
      if (link) links_[model.get()] = std::move(link);
      return model;
    } catch (const core::InputError& e) {
      throw core::JobError(fmt::format("the plan's TP {} cannot split the model: {}", tp, e.what()));
    }
  }

  // A stage's hooks over its shard's pipeline (ranked by stage): the rows on to the next stage
  // and their gradients back, the sampled tokens from the last stage to all, the tied
  // embedding's gradient summed between the first and the last (the last adds the first's and
  // sends the sum back, so both hold the same bits), the norm's squares over the stages.
  PipelineParallel pipeline(const Layout& l, PipeLink* link) {
    PipelineParallel pp;
    pp.first_layer = l.first_layer;
    pp.layers = l.layers;
    const int stage = l.stage, last = l.stages - 1;
    const DType t = settings_.dtype;
    const std::size_t e = device::dtype_bytes(t);
    pp.receive_activations = [=](void* data, std::size_t bytes) { link->recv(t, data, bytes / e, stage - 1); };
    pp.send_activations = [=](const void* data, std::size_t bytes) { link->send(t, data, bytes / e, stage + 1); };
    pp.receive_gradients = [=](void* data, std::size_t bytes) { link->recv(t, data, bytes / e, stage + 1); };
    pp.send_gradients = [=](const void* data, std::size_t bytes) { link->send(t, data, bytes / e, stage - 1); };
    pp.share_tokens = [=](int* tokens, std::size_t count) {
      link->comm().broadcast_host(tokens, count * sizeof(int), last);
    };
    device::Backend* b = &b_;
    pp.sum_tied_embedding = [=](float* gradient, std::size_t count) {
      device::Communicator* pipe = &link->comm();
      if (stage == 0) {
        pipe->send(DType::kF32, gradient, count, last);
        pipe->recv(DType::kF32, gradient, count, last);
      } else {
        device::Buffer first(*b, count * sizeof(float), device::Purpose::kCommunication);
        pipe->recv(DType::kF32, first.data(), count, 0);
        b->add(DType::kF32, gradient, first.data(), count);
        pipe->send(DType::kF32, gradient, count, 0);
      }
    };
    pp.sum_over_stages = [=](double* values, int count) {
      for (int i = 0; i < count; ++i) values[i] = sum_over(link->comm(), values[i]);
    };
    return pp;
  }

  // The iteration's samples: prompts of seeded tokens (GRPO's samples of one prompt share
  // it), response lengths from the workload's sampler as hetrl-sim draws them, and for a graph
  // without generation (SFT) seeded response tokens.
  void draw_samples(int iteration) {
    const int count = w_.samples_per_iteration();
    const int vocab = archs_[role_index(Role::kActor)]->vocab;
    const std::vector<int> lengths =
        w_.response.sample(count, settings_.seed * 7919 + static_cast<std::uint64_t>(iteration));
    samples_.assign(static_cast<std::size_t>(count), Sample{});
    const auto token = [&](std::uint64_t a, std::uint64_t b) {
      return static_cast<int>(device::mix64(settings_.seed ^ device::mix64(a * 1000003 + b)) % static_cast<std::uint64_t>(vocab));
    };
    const bool generates = graph_.find("generate") >= 0;
    for (int i = 0; i < count; ++i) {
      Sample& s = samples_[static_cast<std::size_t>(i)];
      s.prompt = i / std::max(1, w_.samples_per_prompt);
      s.prompt_length = w_.prompt_length_tokens;
      const std::uint64_t prompt_key = static_cast<std::uint64_t>(iteration) * 1000000 + static_cast<std::uint64_t>(s.prompt);
      for (int p = 0; p < s.prompt_length; ++p) s.tokens.push_back(token(prompt_key, static_cast<std::uint64_t>(p)));
      response_lengths_.resize(samples_.size());
      response_lengths_[static_cast<std::size_t>(i)] = lengths[static_cast<std::size_t>(i)];
      if (!generates) {
        const std::uint64_t key = (static_cast<std::uint64_t>(iteration) << 32) + static_cast<std::uint64_t>(i);
        for (int p = 0; p < lengths[static_cast<std::size_t>(i)]; ++p) {
          s.tokens.push_back(token(key, 1000000 + static_cast<std::uint64_t>(p)));
        }
      }
    }
  }

  // Replica r's samples for generation: contiguous runs by the cumulative shares, as hetrl-sim
  // splits them (and as a rollout's batch is chunked over its engines).
  std::vector<std::pair<std::size_t, std::size_t>> split(const plan::TaskPlacement& p) const {
    return contiguous_split(samples_.size(), replica_shares(p));
  }

  // A replica's micro-batches: by length, each at most the cost model's micro-batch tokens
  // (the samples' own, as the model runs them packed; at least one sample), and at least
  // `least` of them where there are as many samples (a replica of that many pipeline stages:
  // a pipeline runs no fewer micro-batches than stages, as the cost model prices it and
  // Megatron asks), cut where the tokens pass each even share.
  std::vector<MicroBatch> micro_batches(std::vector<std::size_t> members, std::size_t least) const {
    std::stable_sort(members.begin(), members.end(),
                     [&](std::size_t a, std::size_t b) { return samples_[a].tokens.size() < samples_[b].tokens.size(); });
    const double budget = model_.params().micro_batch_tokens;
    double total = 0;
    for (const std::size_t i : members) total += static_cast<double>(samples_[i].tokens.size());
    const bool even = members.size() >= least && std::ceil(total / budget) < static_cast<double>(least);
    std::vector<MicroBatch> out;
    double tokens = 0, seen = 0;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::size_t i = members[k];
      const int length = static_cast<int>(samples_[i].tokens.size());
      const bool full = even ? out.size() < least && (seen >= total * static_cast<double>(out.size()) / static_cast<double>(least) ||
                                                      members.size() - k == least - out.size())
                             : tokens + length > budget;
      if (out.empty() || full) {
        out.emplace_back();
        tokens = 0;
      }
      out.back().samples.push_back(i);
      out.back().length = std::max(out.back().length, length);
      tokens += length;
      seen += length;
    }
    return out;
  }
  std::vector<MicroBatch> micro_batches(const std::vector<std::size_t>& members, const plan::Replica& replica) const {
    return micro_batches(members, replica.stages.size());
  }

  std::vector<int> padded(const MicroBatch& mb) const {
    std::vector<int> tokens;
    for (const std::size_t i : mb.samples) {
      const std::vector<int>& t = samples_[i].tokens;
      tokens.insert(tokens.end(), t.begin(), t.end());
      tokens.insert(tokens.end(), static_cast<std::size_t>(mb.length) - t.size(), 0);
    }
    return tokens;
  }

  // A scoring pass over a micro-batch, each sample's per-response-token outputs handed to
  // `take`: the log-probability of response token i is output P + i - 1 of a language head,
  // its value output P + i - 1 of a scalar head (the state before the token), the score the
  // scalar at the last token.
  void score(Transformer& m, const MicroBatch& mb, bool train,
             const std::function<void(Sample&, const float* per_token, float last)>& take) {
    const std::vector<int> tokens = padded(mb);
    const int batch = static_cast<int>(mb.samples.size());
    // The language head scores the responses only: from the position before the first
    // response token to each sample's end, not its padding.
    int first = mb.length;
    std::vector<int> ends;
    for (const std::size_t i : mb.samples) {
      first = std::min(first, samples_[i].prompt_length - 1);
      ends.push_back(static_cast<int>(samples_[i].tokens.size()));
    }
    first = std::max(first, 0);
    const std::vector<float> out =
        train ? m.forward(tokens, batch, mb.length, first, ends) : m.score(tokens, batch, mb.length, first, ends);
    if (!m.last_stage()) return;  // a stage that hands its rows on has no outputs
    const std::size_t row = m.head() == Head::kScalar ? static_cast<std::size_t>(mb.length)
                                                       : static_cast<std::size_t>(mb.length - 1);
    for (std::size_t j = 0; j < mb.samples.size(); ++j) {
      Sample& s = samples_[mb.samples[j]];
      const float* base = out.data() + j * row + static_cast<std::size_t>(s.prompt_length - 1);
      const float last = m.head() == Head::kScalar ? out[j * row + s.tokens.size() - 1] : 0.0f;
      take(s, base, last);
    }
  }

  std::vector<std::size_t> range(std::size_t first, std::size_t last) const {
    std::vector<std::size_t> v(last - first);
    std::iota(v.begin(), v.end(), first);
    return v;
  }

  static long long tokens_of(const std::vector<Sample>& samples, std::size_t first, std::size_t last) {
    long long n = 0;
    for (std::size_t i = first; i < last; ++i) n += static_cast<long long>(samples[i].tokens.size());
    return n;
  }

  void run_task(int iteration, int task, IterationMeasurement& m) {
    const workload::Task& t = graph_.tasks[static_cast<std::size_t>(task)];
    TaskMeasurement& out = m.tasks[static_cast<std::size_t>(task)];
    out.ran = true;
    if (t.kind == TaskKind::kWeightSync) {
      // The trained actor's weights into each of generation's layouts: those of the iteration
      // sync_lag_ back; in the first iteration the initial weights, as a framework loads its
      // engines from the trainer before the first rollout (the same weights: every copy
      // starts from them), so that the sync's first run, and what it sets up, falls in the
      // warm-up as every other task's does; none in the iterations between (generation runs
      // ahead on them). Under mpirun, inside a group its processes start it together and it
      // lasts as long as the slowest; from another group, generation's processes take what the
      // training's posted.
      const int trained = iteration == 0 ? -1 : iteration - sync_lag_;
      if (iteration > 0 && trained < 0) return;
      if (multi()) {
        double seconds = 0;
        if (sync_apart_) {
          seconds = sync_from_posted(trained);
        } else {
          group_comm_->barrier();
          const Stopwatch watch(b_);
          sync_in_group();
          seconds = watch.seconds();
        }
        out.seconds = group_comm_->max(seconds);
        return;
      }
      const Transformer* from = &model_for(Role::kActor, trainer_layout(Role::kActor));
      if (sync_lag_ > 1 && trained >= 0) {
        while (!stale_.empty() && stale_.front().first < trained) {
          spare_ = std::move(stale_.front().second);
          stale_.pop_front();
        }
        if (stale_.empty() || stale_.front().first != trained) throw std::logic_error("run: no weights kept for the sync");
        from = stale_.front().second.get();
      }
      const Stopwatch watch(b_);
      for (auto& [layout_key, engine] : rollouts_) engine->load(*from);
      out.seconds = watch.seconds();
      return;
    }
    if (t.kind == TaskKind::kCpu) {
      const Stopwatch watch(b_);
      if (t.op == "gae") {
        gae_advantages(samples_, settings_.rl);
      } else if (t.op == "group_norm") {
        group_advantages(samples_, settings_.rl);
      } else if (t.op == "rule") {
        // A rule reward stands in for a verifier: the share of response tokens that are even.
        for (Sample& s : samples_) {
          int even = 0;
          for (std::size_t i = static_cast<std::size_t>(s.prompt_length); i < s.tokens.size(); ++i) even += s.tokens[i] % 2 == 0;
          s.score = static_cast<float>(even) / static_cast<float>(std::max(1, s.response_length()));
        }
      }
      out.seconds = watch.seconds();
      return;
    }
    const plan::TaskPlacement& p = placement(task);
    const auto ranges = split(p);
    const std::vector<std::vector<std::size_t>> shares = replica_samples(task);
    out.replica_seconds.assign(ranges.size(), 0.0);
    if (t.kind == TaskKind::kGenerate) {
      out.replica_decode_steps.assign(ranges.size(), 0);
      out.replica_prefill_passes.assign(ranges.size(), 0);
      out.replica_prefill_seconds.assign(ranges.size(), 0.0);
    }
    if (timed_collectives()) {
      out.replica_tp_collective_seconds.assign(ranges.size(), 0.0);
      out.replica_tp_collective_calls.assign(ranges.size(), 0);
    }
    if (t.kind == TaskKind::kTrain) out.replica_parts.assign(ranges.size(), {});
    if (t.kind == TaskKind::kForward) fresh_weights(iteration, *t.role);
    if (t.kind == TaskKind::kGenerate) {
      for (std::size_t r = 0; r < ranges.size(); ++r) {
        const auto [first, last] = ranges[r];
        if (first == last || !mine(task, r)) continue;
        GenerationRequest request;
        for (std::size_t i = first; i < last; ++i) {
          request.prompts.push_back(samples_[i].tokens);
          request.response_lengths.push_back(response_lengths_[i]);
        }
        std::vector<cost::Stage> stages;
        for (const plan::Stage& s : p.replicas[r].stages) stages.push_back({s.node, static_cast<int>(s.devices.size()), s.layers});
        request.concurrency = std::max(
            1, static_cast<int>(model_.concurrent_sequences(task, stages, prediction_.tasks[static_cast<std::size_t>(task)].kv_budget[r])));
        request.temperature = settings_.temperature;
        request.prefill_chunk_tokens = static_cast<int>(model_.params().prefill_chunk_tokens);
        request.seed = settings_.seed * 1000003 + static_cast<std::uint64_t>(iteration);
        request.first_sequence = static_cast<int>(first);
        const Layout where_here = layout(task, r);
        Transformer& engine = rollout(where_here);
        if (where_here.pipe) where_here.pipe->barrier();  // the stages start together
        const Stopwatch watch(b_);
        const GenerationResult g_out = generate(engine, request);
        out.replica_seconds[r] = over_stages(where_here, watch.seconds());
        span(out, r, watch, out.replica_seconds[r], static_cast<int>(last - first), g_out.decode_steps);
        out.replica_decode_steps[r] = g_out.decode_steps;
        out.replica_prefill_passes[r] = g_out.prefill_passes;
        out.replica_prefill_seconds[r] = g_out.prefill_seconds;
        if (timed_collectives()) record_tp_collectives(out, r, where_here, g_out.decode_collectives);
        for (std::size_t i = first; i < last; ++i) {
          const std::vector<int>& response = g_out.responses[i - first];
          samples_[i].tokens.insert(samples_[i].tokens.end(), response.begin(), response.end());
        }
      }
    } else if (t.kind == TaskKind::kForward) {
      for (std::size_t r = 0; r < shares.size(); ++r) {
        if (!mine(task, r)) continue;
        const Layout where_here = layout(task, r);
        Transformer& m_r = model_for(*t.role, where_here);
        if (where_here.pipe) where_here.pipe->barrier();
        const CollectiveTime collectives = tp_collectives(m_r);
        const Stopwatch watch(b_);
        for (const MicroBatch& mb : micro_batches(shares[r], placement(task).replicas[r])) {
          switch (*t.role) {
            case Role::kActor:
              score(m_r, mb, false, [](Sample& s, const float* v, float) {
                s.old_logp.assign(v, v + s.response_length());
              });
              break;
            case Role::kReference:
              score(m_r, mb, false, [](Sample& s, const float* v, float) {
                s.ref_logp.assign(v, v + s.response_length());
              });
              break;
            case Role::kCritic:
              score(m_r, mb, false, [](Sample& s, const float* v, float) {
                s.values.assign(v, v + s.response_length());
              });
              break;
            case Role::kReward:
              score(m_r, mb, false, [](Sample& s, const float*, float last) { s.score = last; });
              break;
          }
        }
        out.replica_seconds[r] = over_stages(where_here, watch.seconds());
        span(out, r, watch, out.replica_seconds[r], static_cast<int>(shares[r].size()));
        if (timed_collectives()) record_tp_collectives(out, r, where_here, since(collectives, m_r));
      }
      out.tokens = tokens_of(samples_, 0, samples_.size());
    } else if (t.kind == TaskKind::kTrain) {
      train(iteration, task, *t.role, out, m);
      out.tokens = tokens_of(samples_, 0, samples_.size()) * w_.epochs;
    }
    if (t.kind != TaskKind::kTrain) share_results(task);
    if (t.kind == TaskKind::kGenerate) {
      // Every replica's decode steps, and the tokens its responses hold.
      for (const long long steps : out.replica_decode_steps) m.decode_steps += steps;
      for (const long long passes : out.replica_prefill_passes) m.prefill_passes += passes;
      for (const auto& [first, last] : ranges) {
        for (std::size_t i = first; i < last; ++i) out.tokens += response_lengths_[i];
      }
    }
    out.seconds = out.replica_seconds.empty() ? 0 : *std::max_element(out.replica_seconds.begin(), out.replica_seconds.end());
  }

  // A replica's seconds over its stages' processes: the slowest stage's (the last ends a
  // forward pass, the first a backward one).
  static double over_stages(const Layout& l, double seconds) { return l.pipe ? l.pipe->max(seconds) : seconds; }

  // A model's tensor-parallel all-reduces so far (none where they are not timed), and since.
  static CollectiveTime tp_collectives(const Transformer& m) {
    const CollectiveTime* time = m.collective_time();
    return time ? *time : CollectiveTime{};
  }
  static CollectiveTime since(const CollectiveTime& before, const Transformer& m) {
    const CollectiveTime now = tp_collectives(m);
    return {now.seconds - before.seconds, now.calls - before.calls};
  }
  // Replica r's seconds in its tensor-parallel all-reduces and their count, `spent` on this
  // process: its stage's processes' mean (what they lose to the slowest beside the
  // collective's own time), the slowest stage's.
  static void record_tp_collectives(TaskMeasurement& out, std::size_t r, const Layout& where, const CollectiveTime& spent) {
    const double seconds = where.comm ? sum_over(*where.comm, spent.seconds) / where.tp : spent.seconds;
    out.replica_tp_collective_seconds[r] = over_stages(where, seconds);
    out.replica_tp_collective_calls[r] = static_cast<long long>(over_stages(where, static_cast<double>(spent.calls)));
  }

  // Every sample's tokens (prompt and response), what dealing balances.
  std::vector<long long> sample_tokens() const {
    std::vector<long long> out;
    for (const Sample& s : samples_) out.push_back(static_cast<long long>(s.tokens.size()));
    return out;
  }
  static std::vector<double> replica_shares(const plan::TaskPlacement& p) {
    std::vector<double> out;
    for (const plan::Replica& r : p.replicas) out.push_back(r.share);
    return out;
  }

  // Epochs of mini-batches; each mini-batch a slice of the samples in a seeded order, dealt to
  // the replicas by their shares and tokens (data parallel), its micro-batches' gradients
  // summed over the replicas as their all-reduce would, and one optimiser step. Each replica's
  // time is its micro-batches' plus the step.
  void train(int iteration, int task, Role role, TaskMeasurement& out, IterationMeasurement& m) {
    const std::vector<double> weights = replica_shares(placement(task));
    const std::size_t replicas = weights.size();
    const std::vector<long long> lengths = sample_tokens();
    const int role_at = role_index(role);
    // Under mpirun a process trains its replica's part, and the replicas' gradients are summed
    // over the data-parallel group before each step; a process outside it has no part.
    device::Communicator* dp = nullptr;
    if (multi()) {
      const auto found = dp_comms_.find(task);
      if (found == dp_comms_.end()) {
        version_[role_at] += std::max(1, w_.epochs) * std::max(1, w_.mini_batches);
        return;
      }
      dp = found->second.get();
    }
    Transformer& model = model_for(role, trainer_layout(role));
    const bool supervised = graph_.find("generate") < 0;
    std::vector<double> seconds(replicas, 0.0);
    std::vector<TrainParts> parts_of(replicas);
    std::vector<CollectiveTime> tp_spent(replicas);  // this process's, in the passes
    const int minis = std::max(1, w_.mini_batches);
    device::AdamW adam;
    adam.lr = settings_.learning_rate;
    const bool data_parallel = dp && dp->size() > 1;
    // ZeRO from stage 1 on shards the optimiser over the replicas; stage 3 under mpirun the
    // weights and the gradients' sums too, layer by layer (Transformer::shard_weights): the
    // passes gather each layer's weights and reduce-scatter its gradients, and the step updates
    // each process's stretches alone. In one process the replicas share one model, which keeps
    // its weights whole.
    const int zero_stage = placement(task).train.zero_stage;
    const bool sharded = zero_stage >= 1 && replicas > 1;
    const bool fully_sharded = zero_stage >= 3 && data_parallel;
    std::unique_ptr<ShardedOptimizer> zero;
    // The gradients cross in the precision the workload names (the cost model prices the same).
    const DType reduce_type = w_.gradient_reduce == workload::GradientReduce::kBf16 ? DType::kBf16 : DType::kF32;
    if (sharded && data_parallel && !fully_sharded) zero = std::make_unique<ShardedOptimizer>(b_, model, *dp, reduce_type);
    if (fully_sharded) {
      Transformer::WeightSharding sharding;
      sharding.rank = dp->rank();
      sharding.size = dp->size();
      sharding.reduce = reduce_type;
      sharding.timed = timed_collectives();
      sharding.all_gather = [dp](DType t, const void* send, void* recv, std::size_t count) { dp->all_gather(t, send, recv, count); };
      sharding.reduce_scatter = [dp](DType t, const void* send, void* recv, std::size_t count) {
        dp->reduce_scatter(t, send, recv, count);
      };
      sharding.sum = [dp](double* values, int count) {
        for (int i = 0; i < count; ++i) values[i] = sum_over(*dp, values[i]);
      };
      model.shard_weights(sharding);
    }
    device::Buffer scratch;  // the gradients in the reduce type, where it is not fp32
    device::Buffer meeting;
    if (data_parallel) {
      meeting = device::Buffer(b_, sizeof(float), device::Purpose::kCommunication);
      const float nothing = 0;
      b_.upload(meeting.data(), &nothing, sizeof nothing);
    }
    for (int epoch = 0; epoch < std::max(1, w_.epochs); ++epoch) {
      // The samples in a seeded order, cut into the mini-batches, each dealt to the replicas.
      std::vector<std::size_t> order = range(0, samples_.size());
      for (std::size_t i = order.size(); i > 1; --i) {
        const std::uint64_t key = device::mix64(settings_.seed * 31 + static_cast<std::uint64_t>(iteration) * 7 +
                                                static_cast<std::uint64_t>(epoch) * 1009 + i);
        std::swap(order[i - 1], order[key % i]);
      }
      for (int mini = 0; mini < minis; ++mini) {
        const std::size_t n = order.size();
        const std::size_t from = n * static_cast<std::size_t>(mini) / static_cast<std::size_t>(minis);
        const std::size_t to = n * static_cast<std::size_t>(mini + 1) / static_cast<std::size_t>(minis);
        const std::vector<std::size_t> slice(order.begin() + static_cast<long>(from), order.begin() + static_cast<long>(to));
        const std::vector<std::vector<std::size_t>> parts = deal(slice, lengths, weights);
        double tokens = 0;
        for (const std::size_t i : slice) tokens += samples_[i].response_length();
        if (tokens == 0) continue;
        double loss = 0;
        for (std::size_t r = 0; r < parts.size(); ++r) {
          if (!mine(task, r) || (parts[r].empty() && !fully_sharded)) continue;
          const Layout here = layout(task, r);
          std::vector<MicroBatch> batches;
          if (!parts[r].empty()) batches = micro_batches(parts[r], placement(task).replicas[r]);
          // Under ZeRO-3 every replica runs the passes of the one with the most micro-batches
          // (their gathers and reduce-scatters are collectives over the replicas): its own
          // samples over as many as it has samples for (never fewer micro-batches than its own
          // split), and idle passes for the rest.
          std::size_t passes = batches.size();
          if (fully_sharded) {
            passes = static_cast<std::size_t>(dp->max(static_cast<double>(batches.size())));
            if (batches.size() < passes && !parts[r].empty()) {
              batches = micro_batches(parts[r], std::min(passes, parts[r].size()));
            }
          }
          if (here.pipe) here.pipe->barrier();  // the stages start together
          const double gathered = model.sharding_time().seconds;
          const CollectiveTime collectives = tp_collectives(model);
          const Stopwatch watch(b_);
          // A micro-batch's forward pass and, on the last stage, its loss: the gradients of
          // its outputs (none on a stage that hands its rows on).
          const auto forward = [&](const MicroBatch& mb) {
            const std::size_t row = model.head() == Head::kScalar ? static_cast<std::size_t>(mb.length)
                                                                   : static_cast<std::size_t>(mb.length - 1);
            std::vector<float> dout(model.last_stage() ? row * mb.samples.size() : 0, 0.0f);
            std::size_t j = 0;
            score(model, mb, true, [&](Sample& s, const float* v, float) {
              const std::vector<float> now(v, v + s.response_length());
              std::vector<float> grad;
              if (role == Role::kCritic) {
                loss += value_loss(now, s.values, s.returns, tokens, settings_.rl, grad);
              } else if (supervised) {
                grad.assign(now.size(), static_cast<float>(-1.0 / tokens));
                for (const float x : now) loss -= x / tokens;
              } else {
                loss += policy_loss(now, s.old_logp, s.advantages, w_.algorithm == "grpo" && !s.ref_logp.empty() ? &s.ref_logp : nullptr,
                                    tokens, settings_.rl, grad);
              }
              std::copy(grad.begin(), grad.end(), dout.begin() + static_cast<long>(j * row + static_cast<std::size_t>(s.prompt_length - 1)));
              ++j;
            });
            return dout;
          };
          const auto real = [&](int micro_batch) { return static_cast<std::size_t>(micro_batch) < batches.size(); };
          if (here.pipe) {
            // Stages over processes run 1F1B's schedule (Megatron's): stage s of S runs the
            // forwards of S - s - 1 micro-batches first, then one forward and one backward (the
            // oldest waiting) in turn, then the backwards left; at most S - s micro-batches'
            // activations are held at once, and the stages work on different micro-batches
            // together (GPipe's bubble, which the cost model prices, with less memory). In
            // the steady part each stage's send waits for its next receive from the same
            // peer, to go as one exchange (PipeLink).
            PipeLink& link = *links_.at(&model);
            std::deque<std::vector<float>> douts;  // the forwards waiting for their backward, oldest first
            for (const PipelineStep& step : one_f_one_b(here.stages, here.stage, static_cast<int>(passes))) {
              // An idle pass sends nothing first: a send held for the exchange goes now, or the
              // peer waiting for it would wait through the idle passes' collectives.
              link.hold(step.steady && real(step.micro_batch));
              if (!real(step.micro_batch)) {
                // An idle pass: no rows on the pipeline, the stage's collectives only.
                if (step.forward) {
                  model.idle_forward();
                } else {
                  model.idle_backward();
                }
              } else if (step.forward) {
                douts.push_back(forward(batches[static_cast<std::size_t>(step.micro_batch)]));
              } else {
                model.backward(douts.front());
                douts.pop_front();
              }
            }
            link.hold(false);
            // The passes end for every stage when the first stage's last backward does (the
            // pipeline's flush, which the cost model's bubble prices).
            here.pipe->barrier();
          } else {
            for (std::size_t i = 0; i < passes; ++i) {
              if (real(static_cast<int>(i))) {
                model.backward(forward(batches[i]));
              } else {
                model.idle_forward();
                model.idle_backward();
              }
            }
          }
          const double spent = watch.seconds();
          seconds[r] += spent;
          parts_of[r].passes += spent;
          parts_of[r].weight_gathers += model.sharding_time().seconds - gathered;
          const CollectiveTime reduced = since(collectives, model);
          tp_spent[r].seconds += reduced.seconds;
          tp_spent[r].calls += reduced.calls;
          span(out, r, watch, spent, static_cast<int>(parts[r].size()));
        }
        // The sums a tensor-parallel split's shards share and a tied embedding's two stages
        // (timed with the gradients' sync), before the replicas' sum (sums commute), so that a
        // sharded optimiser's stretch holds every part of its gradients.
        const Stopwatch shared_sums(b_);
        model.begin_step();
        double wait_seconds = 0, reduce_seconds = multi() ? shared_sums.seconds() : 0.0;
        // Data parallel: the replicas meet first (a one-number all-reduce), so that the
        // gradients' sync is timed apart from the wait for the slowest replica's passes.
        if (data_parallel) {
          const Stopwatch wait(b_);
          dp->all_reduce(DType::kF32, meeting.data(), meeting.data(), 1);
          wait_seconds = wait.seconds();
          const Stopwatch reduce(b_);
          if (fully_sharded) {
            // reduce-scattered layer by layer in the passes
          } else if (zero) {
            zero->reduce_scatter_gradients();
          } else {
            model.reduce_gradients([&](float* data, std::size_t count) {
              all_reduce_gradients(b_, *dp, reduce_type, data, count,
                                   device::kGradientBucketBytes / device::dtype_bytes(reduce_type), scratch);
            });
          }
          loss = sum_over(*dp, loss);
          reduce_seconds += reduce.seconds();
        }
        // The optimiser step, as Megatron's runs it: the gradients' norm (read for clipping),
        // the update, and the gradients zeroed for the next step. The norm and the zeroing go
        // over the whole model in this process; alone, where the replicas share one model,
        // each replica's GPU would do its own share of them.
        const Stopwatch norm_watch(b_);
        (role == Role::kCritic ? m.value_grad_norm : m.policy_grad_norm) =
            zero ? zero->gradient_norm() : model.gradient_norm();
        double around_step = norm_watch.seconds();
        // The update: each process its own stretch under ZeRO, then the replicas' updated
        // weights gathered (timed with the gradients' sync, as the cost model prices them
        // together). Alone, each replica's stretch is updated and timed in turn, as its GPU
        // would.
        std::vector<double> step_seconds(parts.size(), 0.0);
        if (sharded && !data_parallel) {
          for (std::size_t r = 0; r < parts.size(); ++r) {
            const Stopwatch step(b_);
            model.update(adam, model.partition(static_cast<int>(r), static_cast<int>(parts.size())));
            step_seconds[r] = step.seconds();
          }
        } else {
          const Stopwatch step(b_);
          if (zero) {
            zero->update(adam);
          } else if (fully_sharded) {
            model.update_shards(adam);
          } else {
            model.update(adam, model.partition(0, 1));
          }
          std::fill(step_seconds.begin(), step_seconds.end(), step.seconds());
          if (zero) {
            const Stopwatch gather(b_);
            zero->gather_weights();
            reduce_seconds += gather.seconds();
          }
        }
        const Stopwatch zeroing(b_);
        model.end_step();
        around_step += zeroing.seconds();
        if (sharded && !data_parallel) around_step /= static_cast<double>(parts.size());
        for (double& step : step_seconds) step += around_step;
        // The other layouts of this role are behind now.
        ++version_[role_at];
        held_[key(role_at, trainer_layout(role))] = version_[role_at];
        for (std::size_t r = 0; r < parts.size(); ++r) {
          if (!mine(task, r)) continue;
          seconds[r] += wait_seconds + reduce_seconds + step_seconds[r];
          parts_of[r].replica_wait += wait_seconds;
          parts_of[r].gradient_reduce += reduce_seconds;
          parts_of[r].optimizer_step += step_seconds[r];
        }
        (role == Role::kCritic ? m.value_loss : m.policy_loss) = loss;
      }
    }
    // ZeRO-3: the weights whole again for the other tasks that read them (the weight sync,
    // the copies of other layouts), one gather of every layer, timed with the gradients' sync.
    if (fully_sharded) {
      const Stopwatch gather(b_);
      model.gather_weights();
      const double spent = gather.seconds();
      for (std::size_t r = 0; r < replicas; ++r) {
        if (!mine(task, r)) continue;
        seconds[r] += spent;
        parts_of[r].gradient_reduce += spent;
      }
    }
    // A replica over stages: the slowest stage's seconds, and of each part.
    for (std::size_t r = 0; r < replicas; ++r) {
      if (!multi() || !mine(task, r)) continue;
      const Layout here = layout(task, r);
      seconds[r] = over_stages(here, seconds[r]);
      TrainParts& q = parts_of[r];
      for (double* x : {&q.passes, &q.replica_wait, &q.gradient_reduce, &q.optimizer_step, &q.weight_gathers}) {
        *x = over_stages(here, *x);
      }
    }
    out.replica_seconds = seconds;
    out.replica_parts = parts_of;
    if (timed_collectives()) {
      out.replica_tp_collective_seconds.assign(replicas, 0.0);
      out.replica_tp_collective_calls.assign(replicas, 0);
      for (std::size_t r = 0; r < replicas; ++r) {
        if (mine(task, r)) record_tp_collectives(out, r, layout(task, r), tp_spent[r]);
      }
    }
  }

  device::Backend& b_;
  const cost::CostModel& model_;
  const plan::Plan& plan_;
  RunSettings settings_;
  const workload::TaskGraph& graph_;
  const workload::Workload& w_;
  plan::Evaluator evaluator_;
  plan::Prediction prediction_;
  std::array<const workload::ModelArch*, 4> archs_{};  // per role, where it has a model
  std::array<int, 4> trainer_tp_{1, 1, 1, 1};          // per role: its training's TP
  std::array<int, 4> version_{};                       // per role: optimiser steps taken
  // By ModelKey (role, TP, layers, processes): every layout of every role here, and the
  // version of the role's weights it holds.
  std::map<ModelKey, std::unique_ptr<Transformer>> models_;
  std::map<ModelKey, int> held_;
  std::map<ModelKey, std::unique_ptr<Transformer>> rollouts_;  // generation's (the actor's keys)
  // Each stage over processes' messages on its pipeline, by the model whose hooks use them.
  std::map<const Transformer*, std::unique_ptr<PipeLink>> links_;
  // Under mpirun.
  device::Communicator* comm_ = nullptr;
  int rank_ = 0;
  std::map<int, std::vector<ReplicaRanks>> ranks_;        // per GPU task: each replica's, by stage and shard
  std::map<std::tuple<int, std::size_t, int>, std::unique_ptr<device::Communicator>> tp_comms_;  // (task, replica, stage)
  std::map<std::pair<int, std::size_t>, std::unique_ptr<device::Communicator>> pipe_comms_;  // (task, replica): this shard's
  std::map<int, std::unique_ptr<device::Communicator>> dp_comms_;  // per training task
  std::map<int, int> trainer_task_;    // per trained role: its training task
  std::array<int, 4> shared_{};        // per role: the version last broadcast
  std::array<bool, 4> copied_{};       // per role: a forward pass in its training's group reads the copy
  std::array<int, 4> taken_{-1, -1, -1, -1};  // per role: the iteration whose weights were last taken from another group
  std::vector<std::vector<int>> group_ranks_;  // per plan group: its processes, ascending
  int group_ = 0;                                // this process's
  std::unique_ptr<device::Communicator> group_comm_;
  // The groups as the run follows them (find_groups).
  std::vector<int> task_group_;
  std::vector<std::vector<int>> upstream_, readers_;
  int score_task_ = -1;
  bool sync_apart_ = false;  // generation in a group other than its training's
  int sync_lag_ = 1;         // iterations between the training and the weight sync that takes its weights
  std::vector<bool> received_;  // per task, this iteration: its results taken from another group
  // In one process, the trained actor's weights kept for a weight sync sync_lag_ iterations on,
  // by the iteration that trained them (and one copy spare).
  std::deque<std::pair<int, std::unique_ptr<Transformer>>> stale_;
  std::unique_ptr<Transformer> spare_;

  std::vector<Sample> samples_;
  std::vector<int> response_lengths_;
  std::chrono::steady_clock::time_point origin_;
  RunResult result_;
};

}  // namespace

std::vector<std::vector<std::size_t>> deal(const std::vector<std::size_t>& samples, const std::vector<long long>& tokens,
                                           const std::vector<double>& shares) {
  // Each replica's count, as the contiguous split gives it.
  std::vector<std::size_t> room;
  for (const auto& [first, last] : contiguous_split(samples.size(), shares)) room.push_back(last - first);
  std::vector<std::size_t> longest_first = samples;
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [&](std::size_t a, std::size_t b) { return tokens[a] > tokens[b]; });
  std::vector<std::vector<std::size_t>> out(shares.size());
  std::vector<double> load(shares.size(), 0.0);
  for (const std::size_t i : longest_first) {
    std::size_t best = shares.size();
    for (std::size_t r = 0; r < shares.size(); ++r) {
      if (room[r] == 0) continue;
      if (best == shares.size() || load[r] * shares[best] < load[best] * shares[r]) best = r;
    }
    out[best].push_back(i);
    load[best] += static_cast<double>(tokens[i]);
    --room[best];
  }
  for (std::vector<std::size_t>& share : out) std::sort(share.begin(), share.end());
  return out;
}

std::vector<PipelineStep> one_f_one_b(int stages, int stage, int micro_batches) {
  const int warmup = std::clamp(stages - stage - 1, 0, micro_batches);
  std::vector<PipelineStep> out;
  int backward = 0;
  for (int k = 0; k < warmup; ++k) out.push_back({true, k, false});
  for (int k = warmup; k < micro_batches; ++k) {
    out.push_back({true, k, true});
    out.push_back({false, backward++, true});
  }
  while (backward < micro_batches) out.push_back({false, backward++, false});
  return out;
}

double DeviceMemory::peak_bytes() const {
  return static_cast<double>(std::accumulate(peak.begin(), peak.end(), std::size_t{0}));
}

cost::CostParams executor_cost_params() {
  cost::CostParams params;
  params.vocab_parallel = false;
  params.sequence_parallel = false;  // a shard's norms and residual adds run over every token
  params.head_recompute = true;  // Transformer's backward computes the logits again, chunk by chunk
  params.zero3_prefetch = false;  // a unit's gathers run in line before its compute
  params.gradient_bytes_held = 4;  // fp32 gradients beside the weights and the fp32 master copy
  // Generation holds its weights, its KV cache and its step's activations, no engine's reserve
  // (CUDA graphs, NCCL's and a sampler's buffers).
  params.engine_reserve = 0;
  return params;
}

RunResult run_plan(device::Backend& backend, const cost::CostModel& model, const workload::ModelCatalog& models,
                   const plan::Plan& plan, const RunSettings& settings, const std::function<void(int, int)>& progress) {
  Runner runner(backend, model, models, plan, settings);
  return runner.run(progress);
}

}  // namespace hetrl::exec
