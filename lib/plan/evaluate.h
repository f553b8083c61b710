#pragma once
// Predicting a plan with the cost model: memory on every GPU, the time of every task, the
// iteration as a schedule of the task graph over the groups, and the throughput.
//
// Schedule: tasks run in topological order; a GPU task starts when its inputs have arrived
// (transfers between groups over the bottleneck path) and its group is free (colocated tasks
// take turns); a CPU task runs on the host of the group that consumes its output; the weight
// sync moves the trained actor to the generation group (a reshard when they are the same
// group). Iterations repeat: the next generation waits only for the new weights (of the
// previous iteration, or k + 1 iterations back with an async staleness bound k), a forward pass
// of a trained role for the weights its training wrote the iteration before (sent over the
// links between the groups when they differ), and a group runs its tasks in turn iteration
// after iteration; an iteration takes the period of that
// steady-state schedule (plan/periodic.h), what a long simulated run converges to.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/units.h"
#include "cost/cost_model.h"
#include "plan/periodic.h"
#include "plan/plan.h"

namespace hetrl::plan {

struct MemoryUse {
  Gpu gpu;
  double capacity = 0;  // usable bytes (the reserve taken off)
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;  // the largest transient need of the tasks that take turns
  double kv_cache = 0;     // the least the generation cache needs
  double resident() const { return weights + gradients + optimizer; }
  double used() const { return weights + gradients + optimizer + activations + kv_cache; }
};

struct TaskPrediction {
  int group = -1;  // -1 for CPU tasks and the weight sync
  double start = 0;
  double seconds = 0;
  std::vector<double> replica_seconds;
  std::vector<cost::Breakdown::Term> terms;  // with explain: the slowest replica's, and more
  // With explain, for generation: the memory per GPU left for the KV cache, per replica and
  // stage (what the simulator runs each replica with).
  std::vector<std::vector<double>> kv_budget;
  // The weight sync: the trained weights' transfer from the training's group when that is
  // another, before it. The schedule overlaps it with the generation group's earlier work; a
  // run whose tasks follow one another pays it in the sync.
  double weights_in = 0;
  // The task with nothing overlapped: what a run whose tasks follow one another measures.
  double alone() const { return seconds + weights_in; }
};

struct GroupPrediction {
  double busy_seconds = 0;
  MemoryUse tightest;  // the GPU with the least headroom; over its memory, the furthest over
};

struct Prediction {
  bool feasible = false;
  std::string infeasible;  // why not, when not: the GPU furthest over its capacity
  double overflow = 0;     // when not: how far over, as a fraction of that GPU's usable memory
  double iteration_seconds = 0;   // the period of the steady-state schedule
  double makespan_seconds = 0;    // one iteration alone, from generation to the new weights
  double samples_per_second = 0;
  double tokens_per_second = 0;
  std::optional<double> price_per_hour;  // of the GPUs the plan uses
  std::vector<TaskPrediction> tasks;     // indexed like the task graph
  std::vector<GroupPrediction> groups;

  // USD per sample: what the plan's GPUs cost while it makes one; nullopt when some GPU has no
  // price.
  std::optional<double> dollars_per_sample() const {
    if (!price_per_hour) return std::nullopt;
    return *price_per_hour / core::kHour / samples_per_second;
  }
};

// Reusable evaluator: keeps its buffers between calls so a search pays no allocations.
class Evaluator {
 public:
  explicit Evaluator(const cost::CostModel& model);

  // Requires a plan that passed Plan::validate, or a part of one (some GPU tasks unplaced:
  // they take no time), as planners price groups on their own. With explain, tasks carry
  // their terms.
  const Prediction& evaluate(const Plan& plan, bool explain = false);

  // What a plan's evaluation found for one of its groups that does not depend on the plan's
  // other groups: its tasks' times (their replicas', as runs of equal values: replicas alike
  // cost alike) and its tightest GPU. The memory and the time of a group's tasks depend only on
  // its GPUs, its tasks and their layouts and shares.
  struct GroupPart {
    struct Task {
      double seconds = 0;
      std::vector<std::pair<double, int>> replica_seconds;  // (seconds, how many replicas)
    };
    std::vector<Task> tasks;  // in the group's order
    MemoryUse tightest;
  };
  // The group's part of the last evaluation, which fit.
  void part_of(const Plan& plan, int group, GroupPart& out) const;
  // The prediction of a plan whose groups were each priced before, in this plan or another
  // (each fit): what evaluate(plan) gives, the transfers, the weight sync and the schedule
  // priced here. gpu_memory is not available after it.
  const Prediction& compose(const Plan& plan, std::span<const GroupPart* const> parts);

  // The plan last evaluated, which fit, after only its replicas' batch shares changed: the
  // same prediction as evaluate(plan) gives, without pricing its memory again (shares do not
  // change what a GPU holds).
  const Prediction& reprice(const Plan& plan);

  // The memory of every GPU of a group (in the order of its gpus) as of the last evaluation,
  // whose plan must still live; complete when that plan fit, up to the first GPU over its
  // capacity otherwise. Valid until the next call.
  std::span<const MemoryUse> gpu_memory(int group);

  // The seconds of each task graph edge's transfer in the last evaluation (0 inside a group):
  // a data edge's, or the trained weights' into the weight sync or into another task that reads
  // them, in the steady state. Valid until the next call.
  std::span<const double> edge_transfers() const { return edge_transfer_; }

 private:
  // Fills the memory of every GPU and, for each placement, the slots of its GPUs in the
  // order of its replicas, stages and devices (what task_seconds reads).
  bool check_memory(const Plan& plan);
  // False, saying why, when a GPU of the plan cannot compute in the workload's precision.
  bool runs_precision(const Plan& plan);
  // What a GPU of a group needs (slot: its index in the group), from what the memory pass
  // put on it.
  MemoryUse memory_of(const Group& group, std::size_t first, int slot);  // first: the group's first slot
  // Says which GPU is furthest over its capacity, and by how much: the tightest of `group`,
  // the group that holds it.
  [[gnu::cold]] void report_overflow(int group);
  // The signature of a GPU that holds `parent`'s stages and then `item`'s.
  int extend_signature(int parent, int item);
  // What a GPU of each signature needs, computed the first time it is asked for.
  struct GpuNeed {
    double weights = -1;  // -1: not computed yet
    double gradients = 0, optimizer = 0, activations = 0, kv_cache = 0;
    double resident = 0;  // offloading groups: the most state one task keeps there
    double state = 0;     // MemoryUse::resident()
    double used = 0;      // MemoryUse::used()
  };
  const GpuNeed& need_of(int signature, bool offload);
  // `placement_index` counts the placements of the plan in order, over all groups.
  double task_seconds(int group, int placement_index, const TaskPlacement& placement,
                      bool explain);
  // Whether two replicas of the task being priced (first stages at these offsets in
  // all_stages_) cost the same.
  bool same_replica(const Replica& a, int a_first, const Replica& b, int b_first) const;

  struct Transient {  // one GPU: the largest need of the tasks that take turns on it
    double activations = 0;
    double kv_cache = 0;
    double alone = 0;     // the most one task needs there, its state and transient together
    double resident = 0;  // the most state one task keeps there
  };
  double weight_sync_seconds(const Plan& plan, bool explain);
  // Resets the prediction for the plan and describes its groups.
  void start(const Plan& plan);
  // Once every GPU task is priced: CPU tasks, the weight sync and the schedule.
  void finish(const Plan& plan, bool explain);
  // The GPUs of each group per node, as transfers see them, and the plan's price.
  void describe_groups(const Plan& plan);
  // The iteration once every task is priced: one iteration alone, then the steady state.
  void schedule(const Plan& plan, bool explain);

  const cost::CostModel& model_;
  Prediction prediction_;
  std::vector<int> role_of_task_;      // index of the task's role among the graph's roles
  int role_count_ = 0;
  workload::WeightSync sync_;
  std::vector<int> location_;          // the GPU task whose group hosts each task
  std::vector<int> order_;             // topological order
  std::vector<std::vector<int>> edges_into_;  // per task, the graph's edges that end at it
  std::vector<int> node_class_;        // nodes alike for the cost model share a class
  std::vector<std::vector<int>> group_gpus_per_node_;
  std::vector<cost::CostModel::GpuSet> group_sets_;
  std::vector<int> slot_of_gpu_;       // node * max_gpus + device -> slot in the group
  int max_gpus_per_node_ = 0;
  std::vector<double> gpu_price_;      // per node: USD per GPU-hour, -1 when unknown
  std::vector<double> usable_;         // per node: usable memory per GPU
  bool every_node_runs_precision_ = true;
  // Scratch buffers, kept between calls.
  std::vector<cost::Stage> stages_;
  std::vector<cost::Stage> all_stages_;
  std::vector<int> stage_offsets_;
  std::vector<std::span<const cost::Stage>> spans_;
  std::vector<double> all_budgets_;  // per stage in all_stages_: memory left for a KV cache
  std::vector<cost::WeightSlice> held_;  // like slot_of_gpu_: the trained actor's slice there
  std::vector<std::size_t> held_slots_;  // the entries of held_ the last weight sync set
  std::vector<cost::CostModel::ReshardGpu> reshard_gpus_;
  std::vector<double> budgets_all_;  // per group and GPU: memory left for a KV cache
  std::vector<int> budget_offset_;   // per group: its first entry in budgets_all_
  std::vector<MemoryUse> gpu_memory_;  // what gpu_memory returned last
  const Plan* evaluated_ = nullptr;     // the plan of the last evaluation
  // GPUs of a group that hold the same stages in the same order need the same memory: each
  // GPU has a signature, the chain of stage memories (items) added to it, and each distinct
  // signature is priced once. Per plan; signature 0 holds nothing.
  struct MemoryItem {
    workload::TaskKind kind;
    int role;
    cost::StageMemory mem;
  };
  struct Signature {
    int parent = -1;
    int item = -1;
    int first_child = -1;  // signatures extending this one, through next_sibling
    int next_sibling = -1;
  };
  std::vector<MemoryItem> items_;
  std::vector<Signature> signatures_;
  std::vector<GpuNeed> needs_;          // per signature
  std::vector<int> slot_signature_;     // per group and GPU, like budgets_all_
  std::vector<int> chain_;              // scratch: a signature's items, last first
  struct StageShape {  // what a stage's memory depends on besides its task: TP, layers, index, stages
    int tp, layers, index, stages;
    bool operator==(const StageShape&) const = default;
  };
  std::vector<std::pair<StageShape, int>> shape_items_;  // the placement's items by shape
  std::vector<cost::RoleMemory> cells_;  // scratch: per role, while pricing a signature
  std::vector<int> device_slots_;     // every placement's GPUs as slots of their group
  std::vector<int> placement_slots_;  // per placement: its first entry in device_slots_
  std::vector<double> placement_resident_;  // per placement: its largest state on one GPU
  bool group_offload_ = false;              // the group of the task being priced offloads
  std::vector<int> priced_;           // replicas of the task being priced that were priced
  std::vector<int> task_group_;
  std::vector<double> finish_;
  std::vector<double> group_free_;
  std::vector<double> edge_transfer_;
  std::vector<CycleEdge> cycle_edges_;
  std::vector<double> task_seconds_;
  std::vector<int> gpu_group_;
  std::vector<int> first_in_group_;
  std::vector<int> last_in_group_;
  PeriodSolver period_solver_;
};

}  // namespace hetrl::plan
