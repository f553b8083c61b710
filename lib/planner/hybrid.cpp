#include "planner/hybrid.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

#include "core/error.h"
#include "core/units.h"
#include "planner/layout.h"
#include "planner/pricer.h"

namespace hetrl::planner {
namespace {

constexpr double kWorst = -std::numeric_limits<double>::infinity();

// Whether a plan scoring `s` on GPUs of `price` $/h beats the best one: a higher score, or one
// as good (to rounding) on cheaper GPUs. Where the slowest group sets the pace, GPUs that a
// faster group does not need add their price and nothing else (on the paper's country network,
// PPO-14B sync, 17.47 samples/s on 48 GPUs or, with the reference's forward pass on L4 nodes of
// its own, on 64).
bool beats(double s, double price, double best, double best_price) {
  if (s == kWorst) return false;
  if (best == kWorst) return true;
  const double rounding = 1e-12 * std::abs(best);
  if (s > best + rounding) return true;
  return s >= best - rounding && price < best_price;
}

// One step of the local search.
struct Move {
  enum class Kind {
    kStrategy,  // the task takes `choice`
    // A training strategy whose forward passes of the same role in the same group take its TP
    // and PP too, so they read the trained weights instead of holding a copy: a joint move, as
    // neither half alone may fit.
    kAligned,
    // Every task of group `to` takes the choice's TP and PP, keeping its training options:
    // colocated tasks share each GPU's memory, so a plan over it may fit only when all of them
    // spread thinner at once (and one layout for all is how colocating systems run).
    kUniform,
    // Every forward pass of group `to` takes the choice's TP and PP, its training as it is: two
    // forward passes' layouts changed at once, where either alone is slower or over a GPU's
    // memory (on the paper's region network, GRPO-4B async within half the price: the optimum
    // runs the actor's and the reward's forward passes at TP1 PP2 beside the training; hybrid
    // had them at TP1 PP1 and TP2 PP2, the actor's alone at PP2 slower, the reward's alone at
    // TP1 PP2 over an A100-40G's memory). Tried once converged, with the exchanges: in every
    // sweep it led region PPO-14B sync from the ILP's optimum to 16% under it.
    kForwardsAlike,
    kRegroup,  // the task moves to group `to`, keeping its strategy where the nodes take it
    // The task and task `other` (a position in Candidate::tasks, in group `to`) change groups,
    // each keeping its strategy where the nodes take it: two regroupings at once, as either
    // alone leaves one group with a task more to run (on the paper's multi-continent network,
    // PPO-4B async within half the price: the optimum runs the reference's forward pass beside
    // generation on A100s and the reward's on L4s; hybrid had them the other way round).
    kExchange,
    // Three tasks of three groups go round: the task to task `other`'s group (`to`), `other`
    // to task `third`'s, `third` to the task's, each keeping its strategy where the nodes take
    // it: on the paper's country network, PPO-14B async, hybrid ran the actor's forward pass
    // beside generation, the reference's beside the actor's training and the reward's with the
    // critic's tasks; the optimum runs the reward's beside generation, the actor's beside its
    // training and the reference's with the critic's, on the same nodes. Either exchange on
    // the way there is worse. Tried once converged, with the exchanges.
    kRotate,
    // The task (a forward pass) moves to group `to` spread over more GPUs a replica, alone or
    // with one forward pass there spread too: forward passes hold their own copies of the
    // weights, so the move that fits may be the slower one (on the paper's region network,
    // PPO-4B async: the ILP's optimum runs the reward's and the critic's forward passes at TP1
    // PP2 beside the actor's and critic's training; the reward's forward pass moved there alone
    // at TP1 fits, slower). Tried once converged, with the exchanges.
    kSpreadInto,
    kNodes,    // `nodes` nodes of class `cls` move from group `from` to group `to` (-1: unused)
    // Group `from` gives `nodes` nodes of class `cls` to `to` (a group, or -1: the unused pool)
    // and takes as many of class `other` from it: a GPU type traded for another at once, which
    // two node moves cannot do when the group is worse off in between (too few GPUs to hold its
    // models, or slower), the paper's GPU swaps.
    kSwap,
  };
  Kind kind = Kind::kStrategy;
  int task = 0;  // position in Candidate::tasks
  TaskChoice choice;
  int cls = 0;
  int other = 0;  // kSwap: the class that comes back; kExchange, kRotate: the other task
  int third = 0;  // kRotate: the third task
  int from = 0;
  int to = 0;
  int nodes = 1;  // how many move

  // Whether the groups' nodes or tasks change, so that the strategy moves listed no longer hold.
  bool regroups() const {
    return kind == Kind::kRegroup || kind == Kind::kExchange || kind == Kind::kRotate || kind == Kind::kSpreadInto ||
           kind == Kind::kNodes ||
           kind == Kind::kSwap;
  }
};

// Successive halving keeps beside the better half the best candidates of at most this many
// other kinds of start (the node classes a start took): on four GPU types there are fifteen
// kinds, and keeping them all to the end tripled the planning time.
constexpr std::size_t kMostKinds = 5;
// The first halving also searches on the starts of this many highest bounds (Search::bound_starts)
// beside the halving, while their bound is above the best plan found (riders, Search::halve).
constexpr std::size_t kMostBounded = 2;

// The second search (bottleneck first, Search::run) takes the first this many level-1 starts
// (the colocated ones, then by their bound) and a quarter of the evaluation budget.
constexpr std::size_t kBottleneckStarts = 512;
constexpr long long kBottleneckBudgetShare = 4;

// A regroup restart (Search::try_regroupings) searches its best few plans, each but the best
// (which the candidate goes on from) for this share of the evaluation budget.
constexpr std::size_t kRegroupsSearched = 3;
constexpr long long kRunnerUpShare = 8;
// The finalists' polish (Search::polish): the best this many candidates of different plans,
// each for at most this share of the evaluation budget.
constexpr std::size_t kPolished = 3;
constexpr long long kPolishBudgetShare = 8;

// The regroupings take at most this share of the evaluation budget, and so does the search from
// the best of them.
constexpr long long kRegroupBudgetShare = 32;

// Level 1 gives each class (or each unit of classes, class_units) an owner: a group or none.
// It enumerates at most this many owner assignments per grouping.
constexpr double kMaxOwnerings = 4096;

// Classes of more nodes than this also move in steps of several nodes (half the class, a
// quarter, ... down to 2, then 1), so a search over thousands of GPUs does not crawl one node
// at a time.
constexpr int kSingleStepNodes = 16;

// A level-1 start before it becomes a candidate: level 1 makes tens of thousands and keeps a
// few thousand.
struct Start {
  const std::vector<std::vector<int>>* partition = nullptr;
  std::vector<std::vector<int>> counts;  // [class][group]: nodes taken
  bool shed = false;                     // it gave up nodes (to a budget, or lean)
  double bound = 0;                      // the best score it can reach (Search::bound_starts)
};

// What a candidate's plan is made of: its groups, their nodes and its tasks' strategies.
struct Shape {
  std::vector<std::vector<int>> partition, counts;
  std::vector<TaskChoice> choices;
  std::vector<int> task_group;
};

struct Candidate {
  int id = 0;
  std::vector<std::vector<int>> partition;  // the grouping level 1 started from
  std::vector<int> tasks;            // the partition's tasks, group by group
  std::vector<int> task_group;       // group of each position in `tasks` now (tasks may move)
  std::vector<std::vector<int>> counts;  // [class][group]: nodes taken
  std::vector<TaskChoice> choices;   // per position in `tasks`
  double current = kWorst;
  double best = kWorst;
  double best_price = std::numeric_limits<double>::infinity();  // of best_shape's GPUs, $/h
  // Its best plan, by its shape only: a plan lists every GPU, and thousands of candidates
  // holding one each took gigabytes on a cluster of 100,000 GPUs. Search::run prices the
  // winner's shape again.
  Shape best_shape;
  long long evaluations = 0;
  std::vector<Move> moves;
  std::size_t next_move = 0;
  bool started = false;
  bool improved = false;
  bool done = false;
  int restarts = 0;
  int sweeps = 0;
  long long start_evaluations = 0;  // spent laying out and pricing its start
  // Searched bottleneck first: the first sweep tries each task's strategies fastest alone
  // first, and after every better strategy the moves are listed again with the busiest group's
  // longest tasks first; its budget counts from the end of its start.
  bool bottleneck_first = false;
  bool exchanges_listed = false;  // since its last better plan
  bool regrouped = false;         // its regrouping restart (Search::try_regroupings) is done
  bool polishing = false;         // the winner searched once more (Search::polish)
  bool rider = false;             // searched beside the halving for its bound (Search::halve)
  double start_overflow = 0;  // how far its start was over a GPU's memory (0: it fit)
  double bound = 0;           // level 1's bound on its score (Start::bound; 0 where unbounded)
  std::vector<bool> start_classes;  // the node classes its start took
  Shape shape() const { return {partition, counts, choices, task_group}; }
  void set_shape(const Shape& s) {
    partition = s.partition;
    counts = s.counts;
    choices = s.choices;
    task_group = s.task_group;
  }
  bool shed = false;          // its start gave up nodes (to a budget, or lean)
  // How far the current plan is over a GPU's memory (0: it fits): while it does not fit, the
  // search takes the moves that bring it closer.
  double overflow = std::numeric_limits<double>::infinity();
  // Held apart: level 1 makes and moves many candidates before it keeps a few and seeds them,
  // and the generator's state is 2.5 KB.
  class Rng {
   public:
    Rng() = default;
    Rng(const Rng& other) : engine_(other.engine_ ? std::make_unique<std::mt19937_64>(*other.engine_) : nullptr) {}
    Rng(Rng&&) noexcept = default;
    Rng& operator=(const Rng& other) { return *this = Rng(other); }
    Rng& operator=(Rng&&) noexcept = default;
    ~Rng() = default;
    void seed(std::uint64_t seed) { engine_ = std::make_unique<std::mt19937_64>(seed); }
    std::uint64_t operator()() { return (*engine_)(); }

   private:
    std::unique_ptr<std::mt19937_64> engine_;
  } rng;
};

class Search {
 public:
  Search(const cost::CostModel& model, const workload::ModelCatalog& models, const HybridParams& params,
         const core::Clock& clock)
      : model_(model), models_(models), params_(params), clock_(clock), pricer_(model, models),
        start_(clock.seconds()), classes_(model.cluster().node_classes().members) {
    const hw::Cluster& cluster = model.cluster();
    for (const std::vector<int>& members : classes_) {
      class_price_.push_back(cluster.node_price_per_hour(cluster.nodes[members.front()]).value_or(0.0));
    }
  }

  PlannerResult run(const std::function<void(const SearchProgress&)>& progress);

 private:
  // Past the time limit (and then the search says it stopped there).
  bool out_of_time() {
    if (!timed_out_ && clock_.seconds() - start_ > params_.time_limit) timed_out_ = true;
    return timed_out_;
  }
  std::vector<int> group_nodes(const std::vector<std::vector<int>>& counts, int group) const;
  std::vector<int> group_nodes(const Candidate& c, int group) const { return group_nodes(c.counts, group); }
  // The same into `nodes`, reusing its capacity.
  void group_nodes(const std::vector<std::vector<int>>& counts, int group, std::vector<int>& nodes) const;
  std::vector<Candidate> level_one();
  bool holds_models(const std::vector<int>& tasks, const std::vector<int>& nodes) const;
  enum class ShareRule { kHalf, kOne, kAllButOne };
  bool share_classes(Start& c, ShareRule rule) const;
  // Which node a start gives up next: the dearest, or one from the group's largest holding.
  enum class Shed { kDearestFirst, kLargestFirst, kCheapestFirst };
  // Gives up nodes one at a time, each group keeping one: while the start is over the budget,
  // and then, when `lean`, while its groups still hold their models. False when it cannot get
  // within the budget. Not lean, `given_back` (if given) gets the start with the nodes it gave
  // up taken back, the last first, while they fit within the budget: one node at a time
  // overshoots where the last node given up was dearer than what was over.
  bool shed_nodes(Start& c, Shed order, bool lean, Start* given_back = nullptr) const;
  void add_start(Start c, std::set<std::vector<std::vector<int>>>& tried, std::vector<Start>& out);
  // The least time a task takes on `nodes` with each of `choices` priced alone on them;
  // infinite when none fits alone. Orders `choices` by those times, fastest first (those that
  // do not fit alone last).
  double floor_seconds(int task, const std::vector<int>& nodes, std::vector<TaskChoice>& choices);
  std::vector<int> mix_nodes(std::uint64_t mix) const;  // the first nodes of each class
  // Bounds each start's score from above. A group runs its tasks in turn, and no strategy of a
  // task is faster than its fastest priced alone (a task beside others has less memory), so no
  // plan on the start's nodes makes more samples per second than the start's samples over its
  // busiest group's floors summed. False, bounding none, when that would price more strategies
  // than a quarter of the evaluation budget (a pricing of one task costs about an
  // evaluation): on the paper's region network with PPO-14B it prices 3,163 in 0.02 s, on
  // 4,096 GPUs with GRPO 70B 8,724 in 0.57 s.
  bool bound_starts(std::vector<Start>& starts);
  TaskChoice start_choice(int task, const std::vector<int>& nodes) const;
  bool repair(Candidate& c) const;
  void align_forward_passes(Candidate& c, std::size_t i) const;
  // Every task of the group (every forward pass, with `forwards`) takes this TP and PP, keeping
  // its training options.
  void lay_out_alike(Candidate& c, int group, int tp, int pp, bool forwards = false) const;
  // These joint moves, and those after a move (chain_exchange, settle, spread_into), stop when
  // the candidate has spent `budget` evaluations.
  double make_room(Candidate& c, std::size_t i, long long budget);
  // Task j (a position in Candidate::tasks) at each of its strategies on `nodes` that `takes`
  // accepts, the other tasks as they are: where one scores above `best`, it becomes `best` and
  // the choices `best_choices`. Task j's strategy is left as it was.
  template <typename Takes>
  void try_choices(Candidate& c, std::size_t j, const std::vector<int>& nodes, long long budget, Takes takes,
                   double& best, std::vector<TaskChoice>& best_choices);
  // After the group's tasks were laid out alike: each training task of the group one step
  // leaner or one step less lean in its options (ZeRO stage, recompute) on its new layout,
  // whose memory differs from the old one's; keeps the best if it beats `score` and returns
  // its score.
  double retrain_options(Candidate& c, int group, double score, long long budget);
  // The winner searched once more from its best plan, for at most `budget` evaluations, with
  // joint moves that every candidate's search leaves out: each group laid out alike (all its
  // tasks, or its forward passes) with its training's options a step either way, and a
  // training task spread to make room for a forward pass with its options a step either way
  // (make_room). Made in every candidate's search, joint moves of this kind led elsewhere (with
  // every forward pass of a group spread beside a training task's new options, 11 of the
  // planner benchmark's 222 rows came out 0.7-9.4% worse). Here the winner keeps its best plan,
  // so they only add.
  void polish(Candidate& c, long long budget);
  // The group's tasks laid out alike, each layout they all take tried; keeps the best if it
  // beats `score` (or, when nothing fits, `overflow`), and returns it with its overflow.
  std::pair<double, double> relayout(Candidate& c, int group, double score, double overflow, long long budget);
  // The TP and PP that every task of the group (every forward pass, with `forwards`) can take
  // with its training options, other than the one they all have now; `valid` holds the
  // strategies of each of the group's tasks (by position in Candidate::tasks).
  std::vector<std::pair<int, int>> uniform_layouts(const Candidate& c, int group,
                                                   const std::vector<std::vector<TaskChoice>>& valid,
                                                   bool forwards = false) const;
  bool is_forward(const Candidate& c, std::size_t i) const {
    return model_.graph().tasks[c.tasks[i]].kind == workload::TaskKind::kForward;
  }
  bool move_node(Candidate& c, const Move& m) const;
  bool swap_nodes(Candidate& c, const Move& m) const;
  bool within_budget(const Candidate& c) const;  // the price of its nodes
  double evaluate(Candidate& c);
  void start(Candidate& c);
  // Makes a start that is over a GPU's memory fit (fit_leaner), keeping what it reaches.
  void fit_start(Candidate& c);
  // Greedily, the one task's leaner layout (twice the stages, or twice the TP) that brings the
  // plan closest to fitting, until it fits (the first step that does, or with `first_fit`
  // false the best-scoring of them) or no step helps; returns the score and overflow it
  // reaches, with the choices left there.
  std::pair<double, double> fit_leaner(Candidate& c, double overflow, bool first_fit);
  // Successive halving over `alive` from the given evaluation budget, keeping beside the better
  // half the best of at most `other_kinds` other kinds of start each round, and with `riders`
  // the starts of the highest bounds beside it; returns the survivors.
  // Its first round adds to `unfit` the starts that did not fit; `round` counts on across calls.
  std::vector<Candidate> halve(std::vector<Candidate> alive, long long evaluation_budget, std::size_t other_kinds, bool riders,
                               std::vector<int>& unfit, int& round,
                               const std::function<void(const SearchProgress&)>& progress);
  // Candidates whose start did not fit and that successive halving dropped: the closest to
  // fitting, repaired, and the best of those searched to the end. The halving's own result is
  // untouched: this only adds plans.
  void second_chance(const std::vector<Candidate>& starts, const std::vector<int>& unfit,
                     std::vector<Candidate>& out);
  std::vector<GroupChoice> groups_of(const Candidate& c) const;
  void groups_of(const Candidate& c, std::vector<GroupChoice>& groups) const;  // reusing `groups`
  // The positions of the candidate's tasks in the order its first sweep tries their
  // strategies: the busiest group's first, and in a group the longest task first, as the
  // period (or the chain of tasks that sets a synchronous iteration) shortens only where the
  // time is. Successive halving judges a start by its first few dozen evaluations; a start
  // whose slow group's tasks came last in task order looked hopeless then (on the paper's
  // networks, PPO-14B within half the cluster's price: the ILP's optimum's start showed 2.84
  // samples/s for its first 270 evaluations, 6.92 after 57 in this order). Later sweeps go in
  // task order, as do starts that do not fit.
  // `busiest` asks for that order in any sweep.
  std::vector<std::size_t> sweep_order(const Candidate& c, bool busiest);
  void next_sweep(Candidate& c, bool busiest = false);
  // The moves that exchange two tasks of different groups, tried once a candidate has
  // converged (before a perturbation, or before it is done).
  void list_exchanges(Candidate& c) const;
  // After exchange `m` led to a plan scoring `tied`, as good as before it: each other exchange
  // from there, keeping the first that scores better and returning its score; `tied`, with the
  // plan as it was, when none does. PPO-8B async on the paper's region network: hybrid held the
  // reference's forward pass beside generation, the reward's alone on the L4 nodes and the
  // actor's with the training (38.68 samples/s); the ILP's optimum (38.98) has the actor's
  // beside generation, whose weights it receives anyway, the reference's alone and the
  // reward's with the training: the actor's and the reference's exchanged first (as good), and
  // then the reference's and the reward's.
  double chain_exchange(Candidate& c, const Move& m, double tied, long long budget);
  // Tasks just moved, each in turn at its best strategy in its new group, the others as they
  // are (their strategies came from their old groups' nodes and neighbours); keeps the best
  // and returns its score (`score`: c's as it is).
  double settle(Candidate& c, std::initializer_list<int> moved, double score, long long budget);
  // Appends a move of `kind` to each other group for each task not alone in its group (each
  // forward pass, when `forward_passes`).
  void list_task_moves(Candidate& c, Move::Kind kind, bool forward_passes) const;
  // A restart, once a candidate has converged: a task on its own in a new group of unused nodes
  // (one node of a class, or all of them; over the budget, with another group's nodes of a
  // class traded for cheaper unused ones until within it); one group's tasks moved into
  // another, its nodes given to that group or back to the pool, and then each task of the
  // merged group tried in each other group or on its own in a new one. The search goes on
  // from the best of these plans that fits (then true), as from a perturbation: the candidate
  // keeps its best plan.
  bool try_regroupings(Candidate& c, long long budget);
  double spread_into(Candidate& c, std::size_t i, double score, long long budget);
  void search(Candidate& c, long long budget);

  const cost::CostModel& model_;
  const workload::ModelCatalog& models_;
  const HybridParams& params_;
  const core::Clock& clock_;
  PlanPricer pricer_;  // each distinct group priced once
  double start_;
  std::vector<std::vector<int>> classes_;  // node indices per class
  // The candidates of the kMostBounded highest bounds (bound_starts); none where unbounded.
  std::vector<int> top_bounded_;
  std::vector<double> class_price_;        // USD per hour of one node of each class
  long long evaluations_ = 0;
  long long pruned_ = 0;
  // How far the last plan evaluate() priced was over a GPU's memory (Prediction::overflow): 0
  // when it fit, infinity when it could not be laid out or priced.
  double last_overflow_ = 0;
  bool timed_out_ = false;
  Rejections rejections_;
  // Where bound_starts priced them: a task's strategies on a group's nodes (given by the
  // group's count of each class), fastest alone first; null for a mix it did not price.
  std::function<const std::vector<TaskChoice>*(const std::vector<std::vector<int>>&, int, int)> by_speed_;
  // Scratch kept with its capacity, so that a search of a hundred thousand evaluations does
  // not allocate for each: the groups evaluate() prices, and what a move of search() may change.
  std::vector<GroupChoice> groups_;
  std::vector<std::vector<int>> saved_counts_;
  std::vector<TaskChoice> saved_choices_;
  std::vector<int> saved_task_group_;
  std::vector<TaskChoice> exchanged_choices_;  // an exchange's own strategies (search())
};

std::vector<int> Search::group_nodes(const std::vector<std::vector<int>>& counts, int group) const {
  std::vector<int> nodes;
  group_nodes(counts, group, nodes);
  return nodes;
}

void Search::group_nodes(const std::vector<std::vector<int>>& counts, int group, std::vector<int>& nodes) const {
  nodes.clear();
  for (std::size_t k = 0; k < classes_.size(); ++k) {
    int offset = 0;
    for (int g = 0; g < group; ++g) offset += counts[k][g];
    for (int i = 0; i < counts[k][group]; ++i) nodes.push_back(classes_[k][offset + i]);
  }
  std::sort(nodes.begin(), nodes.end());
}

// Can the group's GPUs hold its models' state at all, spread as thin as ZeRO-3 over all of
// them? A cheap bound that prunes hopeless candidates before any evaluation.
bool Search::holds_models(const std::vector<int>& tasks, const std::vector<int>& nodes) const {
  double capacity = 0;
  for (int n : nodes) capacity += model_.usable_memory(n) * model_.cluster().nodes[n].gpu_count;
  return model_.least_resident_bytes(tasks) <= capacity;
}

// Groups given no class take a share of the largest class another group owns (keeping it at
// least one node), so groupings with more groups than classes are searched too: generation on
// some nodes of a type and training on the others is often the best split. Three shares start
// three candidates: half, one node (a task of little work beside the rest, such as a critic's
// update on one node of eight), and all but one. False when some group gets no node.
bool Search::share_classes(Start& c, ShareRule rule) const {
  const int k = static_cast<int>(c.partition->size());
  const int classes = static_cast<int>(classes_.size());
  std::vector<int> owner(classes, -1);
  for (int cls = 0; cls < classes; ++cls) {
    for (int g = 0; g < k; ++g) {
      if (c.counts[cls][g] > 0) owner[cls] = g;
    }
  }
  for (int g = 0; g < k; ++g) {
    if (std::find(owner.begin(), owner.end(), g) != owner.end()) continue;
    int best = -1;
    for (int cls = 0; cls < classes; ++cls) {
      if (owner[cls] < 0) continue;
      const int have = c.counts[cls][owner[cls]];
      if (have >= 2 && (best < 0 || have > c.counts[best][owner[best]])) best = cls;
    }
    if (best < 0) return false;
    const int have = c.counts[best][owner[best]];
    const int moved = rule == ShareRule::kHalf ? have / 2 : rule == ShareRule::kOne ? 1 : have - 1;
    c.counts[best][owner[best]] -= moved;
    c.counts[best][g] += moved;
  }
  return true;
}

// Under a budget a candidate starts within it, so that the search has a plan to improve on.
// Under the cost objective a start also comes lean: the fewest nodes that hold its models, as
// idle or thinly used GPUs cost as much as busy ones and the search adds back what pays.
bool Search::shed_nodes(Start& c, Shed order, bool lean, Start* given_back) const {
  const hw::Cluster& cluster = model_.cluster();
  const std::vector<std::vector<int>>& partition = *c.partition;
  const int k = static_cast<int>(partition.size());
  const int classes = static_cast<int>(classes_.size());
  const std::vector<double>& price = class_price_;
  std::vector<double> capacity(classes);  // of one node; a class's nodes are alike
  std::vector<int> held(k, 0);
  std::vector<double> room(k, 0);  // each group's memory beyond its models' least state
  double total = 0;
  for (int cls = 0; cls < classes; ++cls) {
    const int node = classes_[cls].front();
    capacity[cls] = model_.usable_memory(node) * cluster.nodes[node].gpu_count;
    for (int g = 0; g < k; ++g) {
      total += price[cls] * c.counts[cls][g];
      held[g] += c.counts[cls][g];
      room[g] += capacity[cls] * c.counts[cls][g];
    }
  }
  for (int g = 0; g < k; ++g) room[g] -= model_.least_resident_bytes(partition[g]);
  std::vector<std::pair<int, int>> given_up;  // (class, group), in turn
  while (true) {
    const bool over = !params_.goal.within_budget(total);
    if (!over && !lean) {
      if (given_back) {
        // The same start with the nodes it gave up taken back, the last first, while they fit.
        *given_back = c;
        for (auto it = given_up.rbegin(); it != given_up.rend(); ++it) {
          const auto [cls, g] = *it;
          if (!params_.goal.within_budget(total + price[cls])) continue;
          ++given_back->counts[cls][g];
          total += price[cls];
        }
      }
      return true;
    }
    int best_cls = -1, best_g = -1;
    for (int cls = 0; cls < classes; ++cls) {
      for (int g = 0; g < k; ++g) {
        if (c.counts[cls][g] == 0 || held[g] <= 1 || (!over && room[g] < capacity[cls])) continue;
        if (best_cls < 0) {
          best_cls = cls;
          best_g = g;
          continue;
        }
        const bool dearer = price[cls] > price[best_cls];
        const bool cheaper = price[cls] < price[best_cls];
        const bool larger = c.counts[cls][g] > c.counts[best_cls][best_g];
        const bool same_price = price[cls] == price[best_cls];
        const bool same_size = c.counts[cls][g] == c.counts[best_cls][best_g];
        const bool first = order == Shed::kDearestFirst    ? dearer || (same_price && larger)
                           : order == Shed::kCheapestFirst ? cheaper || (same_price && larger)
                                                           : larger || (same_size && dearer);
        if (first) {
          best_cls = cls;
          best_g = g;
        }
      }
    }
    if (best_cls < 0) return !over;
    --c.counts[best_cls][best_g];
    given_up.emplace_back(best_cls, best_g);
    --held[best_g];
    room[best_g] -= capacity[best_cls];
    total -= price[best_cls];
  }
}

// A level-1 start, once, and only if its groups can hold their models. Under a budget it comes
// within it three ways: nodes given up the dearest first, from the largest holding first (which
// keeps a lone dear node that may be the one worth its price), or the cheapest first (which
// keeps the dear, fast nodes for the group that gets them: on the paper's networks the optimum
// of GRPO-14B sync within half the cluster's price is the three A100 nodes alone). Under the
// cost objective it comes whole and lean both ways.
void Search::add_start(Start c, std::set<std::vector<std::vector<int>>>& tried, std::vector<Start>& out) {
  struct Rule {
    Shed order;
    bool lean;
  };
  std::vector<Rule> rules{{Shed::kDearestFirst, false}};  // whole, or within the budget
  if (params_.goal.budget_per_hour) {
    rules.push_back({Shed::kLargestFirst, false});
    rules.push_back({Shed::kCheapestFirst, false});
  }
  if (params_.goal.objective == Objective::kCostPerSample) {
    rules.push_back({Shed::kDearestFirst, true});
    rules.push_back({Shed::kLargestFirst, true});
  }
  const std::vector<std::vector<int>> whole = c.counts;
  // A start once, where its groups hold their models.
  const auto admit = [&](Start d) {
    d.shed = d.counts != whole;
    if (!tried.insert(d.counts).second) return;
    const int k = static_cast<int>(d.partition->size());
    bool holds = true;
    for (int g = 0; g < k && holds; ++g) holds = holds_models((*d.partition)[g], group_nodes(d.counts, g));
    if (!holds) {
      ++pruned_;
      return;
    }
    out.push_back(std::move(d));
  };
  for (std::size_t r = 0; r < rules.size(); ++r) {
    Start d = r + 1 < rules.size() ? c : std::move(c);  // the last rule takes c itself
    // Within a budget, also with the nodes given up taken back where they fit (on the paper's
    // region network, PPO-14B async within half the price, the ILP's optimum of one A100, one
    // L4 and two L40S nodes is the cheapest-first start that gave up its second L40S node
    // before two A100 nodes). Both start.
    Start back;  // admit drops it where nothing came back (its counts tried already)
    const bool give_back = params_.goal.budget_per_hour && !rules[r].lean;
    if (!shed_nodes(d, rules[r].order, rules[r].lean, give_back ? &back : nullptr)) {
      ++pruned_;
      continue;
    }
    admit(std::move(d));
    if (give_back) admit(std::move(back));
  }
}

std::vector<int> Search::mix_nodes(std::uint64_t mix) const {
  std::vector<int> nodes;
  for (const std::vector<int>& members : classes_) {
    const auto count = static_cast<std::ptrdiff_t>(mix % (members.size() + 1));
    mix /= members.size() + 1;
    nodes.insert(nodes.end(), members.begin(), members.begin() + count);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

double Search::floor_seconds(int task, const std::vector<int>& nodes, std::vector<TaskChoice>& choices) {
  std::vector<GroupChoice> group(1);
  group[0].nodes = nodes;
  group[0].tasks = {task};
  std::vector<std::pair<double, std::size_t>> seconds(choices.size());
  for (std::size_t i = 0; i < choices.size(); ++i) {
    group[0].choices = {choices[i]};
    const bool fits = pricer_.price(group, [](double) { return false; }) == PlanPricer::Outcome::kFit;
    seconds[i] = {fits ? pricer_.prediction().tasks[task].seconds : std::numeric_limits<double>::infinity(), i};
  }
  std::sort(seconds.begin(), seconds.end());
  std::vector<TaskChoice> fastest_first;
  for (const auto& [time, i] : seconds) fastest_first.push_back(choices[i]);
  choices = std::move(fastest_first);
  return seconds.empty() ? std::numeric_limits<double>::infinity() : seconds.front().first;
}

bool Search::bound_starts(std::vector<Start>& starts) {
  // A group's nodes as one number (a mix): its count of each class, in mixed radix.
  std::vector<std::uint64_t> radix(classes_.size());
  std::uint64_t mixes = 1;
  for (std::size_t k = 0; k < classes_.size(); ++k) {
    radix[k] = mixes;
    const std::uint64_t base = classes_[k].size() + 1;
    if (mixes > (std::uint64_t{1} << 62) / base) return false;
    mixes *= base;
  }
  const auto mix_of = [radix, this](const std::vector<std::vector<int>>& counts, std::size_t g) {
    std::uint64_t mix = 0;
    for (std::size_t k = 0; k < classes_.size(); ++k) mix += static_cast<std::uint64_t>(counts[k][g]) * radix[k];
    return mix;
  };
  std::vector<std::pair<std::uint64_t, int>> keys;  // (mix, task) of every group of every start
  for (const Start& c : starts) {
    for (std::size_t g = 0; g < c.partition->size(); ++g) {
      const std::uint64_t mix = mix_of(c.counts, g);
      for (int t : (*c.partition)[g]) keys.emplace_back(mix, t);
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  // Every strategy of every key is counted before any is priced; floor_seconds then orders
  // them fastest first, for the search bottleneck first.
  std::vector<std::vector<int>> nodes(keys.size());
  std::vector<std::vector<TaskChoice>> choices(keys.size());
  long long pricings = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    nodes[i] = mix_nodes(keys[i].first);
    choices[i] = task_choices(model_, models_, params_.space, keys[i].second, nodes[i]);
    pricings += static_cast<long long>(choices[i].size());
    if (pricings > params_.evaluation_budget / 4) return false;
  }
  std::vector<double> floors(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) floors[i] = floor_seconds(keys[i].second, nodes[i], choices[i]);
  const double samples = model_.workload().samples_per_iteration();
  for (Start& c : starts) {
    double busiest = 0, price = 0;
    for (std::size_t g = 0; g < c.partition->size(); ++g) {
      double busy = 0;
      for (std::size_t k = 0; k < classes_.size(); ++k) price += class_price_[k] * c.counts[k][g];
      const std::uint64_t mix = mix_of(c.counts, g);
      for (int t : (*c.partition)[g]) {
        busy += floors[std::lower_bound(keys.begin(), keys.end(), std::make_pair(mix, t)) - keys.begin()];
      }
      busiest = std::max(busiest, busy);
    }
    const double most = busiest > 0 ? samples / busiest : 0;  // samples per second
    c.bound = params_.goal.objective != Objective::kCostPerSample ? most
              : most > 0                                           ? -price / core::kHour / most
                                                                   : kWorst;
  }
  by_speed_ = [keys = std::move(keys), choices = std::move(choices), mix_of](
                  const std::vector<std::vector<int>>& counts, int group, int task) -> const std::vector<TaskChoice>* {
    const std::pair<std::uint64_t, int> key{mix_of(counts, static_cast<std::size_t>(group)), task};
    const auto at = std::lower_bound(keys.begin(), keys.end(), key);
    return at != keys.end() && *at == key ? &choices[static_cast<std::size_t>(at - keys.begin())] : nullptr;
  };
  return true;
}

std::vector<Candidate> Search::level_one() {
  const std::vector<int> tasks = model_.graph().gpu_tasks();
  const int classes = static_cast<int>(classes_.size());
  const std::vector<std::vector<std::vector<int>>> groupings = partitions(tasks, params_.space.max_groups);
  std::vector<Start> out;
  for (const auto& partition : groupings) {
    const int k = static_cast<int>(partition.size());
    // Classes take an owner together where (k + 1)^classes owners would be too many; the search
    // after level one moves each class's nodes alone.
    const std::vector<std::vector<int>> units = class_units(model_.cluster(), classes_, [k](std::size_t count) {
      return std::pow(static_cast<double>(k + 1), static_cast<double>(count)) <= kMaxOwnerings;
    });
    const int unit_count = static_cast<int>(units.size());
    std::vector<int> owner(unit_count, 0);  // 0..k-1 a group, k unused
    std::set<std::vector<std::vector<int>>> tried;  // the partition's starts so far, by counts
    while (true) {
      if (out_of_time()) break;
      Start base;
      base.partition = &partition;
      base.counts.assign(classes, std::vector<int>(k, 0));
      for (int u = 0; u < unit_count; ++u) {
        if (owner[u] == k) continue;
        for (int cls : units[u]) base.counts[cls][owner[u]] = static_cast<int>(classes_[cls].size());
      }
      for (ShareRule rule : {ShareRule::kHalf, ShareRule::kOne, ShareRule::kAllButOne}) {
        Start c = base;
        if (!share_classes(c, rule)) break;
        const bool shared = c.counts != base.counts;
        add_start(std::move(c), tried, out);
        if (!shared) break;  // every group owns a class: the rules start alike
      }
      int i = 0;
      for (; i < unit_count; ++i) {
        if (++owner[i] <= k) break;
        owner[i] = 0;
      }
      if (i == unit_count) break;
    }
  }
  // Beyond the limit: the all-colocated candidates, then the rest by their bound where they
  // can be bounded (in a seeded order among equals), else a seeded sample of the rest. On the
  // paper's networks a sample of a quarter of the starts left out the start of the ILP's
  // optimum for PPO-14B within half the cluster's price; the bound ranks it 47th of 8,488.
  if (static_cast<int>(out.size()) > params_.max_candidates) {
    const auto colocated = std::stable_partition(out.begin(), out.end(),
                                                 [](const Start& c) { return c.partition->size() == 1; });
    std::mt19937_64 rng(params_.seed);
    std::shuffle(colocated, out.end(), rng);
    if (bound_starts(out)) {
      std::stable_sort(colocated, out.end(), [](const Start& a, const Start& b) { return a.bound > b.bound; });
      // The kMostBounded highest bounds (the colocated starts' are not priced), as candidate ids.
      const std::size_t first = static_cast<std::size_t>(colocated - out.begin());
      for (std::size_t i = first; i < std::min(out.size(), first + kMostBounded); ++i) {
        top_bounded_.push_back(static_cast<int>(i));
      }
    }
    pruned_ += static_cast<long long>(out.size()) - params_.max_candidates;
    out.resize(params_.max_candidates);
  }
  std::vector<Candidate> candidates(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    Candidate& c = candidates[i];
    c.id = static_cast<int>(i);
    c.partition = *out[i].partition;
    c.counts = std::move(out[i].counts);
    c.shed = out[i].shed;
    c.bound = out[i].bound;
    for (const std::vector<int>& per_group : c.counts) {
      c.start_classes.push_back(std::any_of(per_group.begin(), per_group.end(), [](int n) { return n > 0; }));
    }
    for (std::size_t g = 0; g < c.partition.size(); ++g) {
      for (int t : c.partition[g]) {
        c.tasks.push_back(t);
        c.task_group.push_back(static_cast<int>(g));
      }
    }
    c.rng.seed(params_.seed * 1000003ULL + i);
  }
  return candidates;
}

// The leanest strategy that leaves room: the smallest TP whose state takes at most half of the
// smallest GPU, PP 1, ZeRO-3 for training; else the largest TP and PP.
TaskChoice Search::start_choice(int task, const std::vector<int>& nodes) const {
  const std::vector<TaskChoice> choices = task_choices(model_, models_, params_.space, task, nodes);
  if (choices.empty()) return {};
  double smallest = std::numeric_limits<double>::infinity();
  int gpus = 0;
  for (int n : nodes) {
    smallest = std::min(smallest, model_.usable_memory(n));
    gpus += model_.cluster().nodes[n].gpu_count;
  }
  const int layers = model_.shape(task).layers;
  const int zero = params_.space.zero_stages.back();
  for (const TaskChoice& c : choices) {
    if (c.pp != 1 || (c.train.zero_stage != zero && model_.graph().tasks[task].kind == workload::TaskKind::kTrain) ||
        c.train.recompute != cost::Recompute::kNone || c.train.optimizer_offload) {
      continue;
    }
    const std::vector<cost::Stage> stage{{nodes.front(), c.tp, layers}};
    const cost::StageMemory m = model_.stage_memory(task, stage, 0, std::max(1, gpus / c.tp), c.train);
    if (m.resident() + m.activations + m.kv_cache_min <= 0.5 * smallest) return c;
  }
  return choices.back();
}

// After nodes moved, keep each task's strategy if it still lays out, else the nearest one
// that does (same PP and training options, the largest TP not above the old one). False when
// a group has no nodes or a task no strategy.
bool Search::repair(Candidate& c) const {
  const int k = static_cast<int>(c.partition.size());
  std::vector<std::vector<int>> nodes(k);
  for (int g = 0; g < k; ++g) {
    nodes[g] = group_nodes(c, g);
    if (nodes[g].empty()) return false;
  }
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    const std::vector<TaskChoice> valid =
        task_choices(model_, models_, params_.space, c.tasks[i], nodes[c.task_group[i]]);
    if (valid.empty()) return false;
    const TaskChoice old = c.choices[i];
    const TaskChoice* pick = nullptr;
    for (const TaskChoice& v : valid) {
      if (v.tp == old.tp && v.pp == old.pp && v.train == old.train) {
        pick = &v;
        break;
      }
      if (v.pp == old.pp && v.train == old.train && v.tp <= old.tp) {
        pick = &v;  // keeps the largest such TP: choices come in increasing TP
      }
    }
    c.choices[i] = pick ? *pick : valid.front();
  }
  return true;
}

// Whether `a` keeps one thing less than `b` on the GPU: the next ZeRO stage, or the next
// recompute level, all else the same.
bool one_step_leaner(const cost::TrainOptions& a, const cost::TrainOptions& b) {
  if (a.optimizer_offload != b.optimizer_offload) return false;
  const int zero = a.zero_stage - b.zero_stage;
  const int recompute = static_cast<int>(a.recompute) - static_cast<int>(b.recompute);
  return (zero == 1 && recompute == 0) || (zero == 0 && recompute == 1);
}

// Whether `a` and `b` are one step apart either way (one_step_leaner).
bool one_step_apart(const cost::TrainOptions& a, const cost::TrainOptions& b) {
  return one_step_leaner(a, b) || one_step_leaner(b, a);
}

// A strategy for task i that does not fit may fit with a partner in its group made leaner: for
// a training task, a forward pass spread thinner (more GPUs a replica); for a forward pass, a
// training task's other options on its layout (a higher ZeRO stage, recompute). Tries each
// such partner move with it and keeps the best (a joint move, as the partner's move alone is
// slower). Returns its score; c.choices holds it, or task i's move alone when none fits.
double Search::make_room(Candidate& c, std::size_t i, long long budget) {
  const workload::TaskGraph& graph = model_.graph();
  const std::vector<int> nodes = group_nodes(c, c.task_group[i]);
  const bool training = graph.tasks[c.tasks[i]].kind == workload::TaskKind::kTrain;
  const workload::TaskKind partner = training ? workload::TaskKind::kForward : workload::TaskKind::kTrain;
  double best = kWorst;
  std::vector<TaskChoice> best_choices;
  for (std::size_t j = 0; j < c.tasks.size(); ++j) {
    if (j == i || c.task_group[j] != c.task_group[i] || graph.tasks[c.tasks[j]].kind != partner) continue;
    const TaskChoice was = c.choices[j];
    try_choices(c, j, nodes, budget, [&](const TaskChoice& choice) {
      if (training) return choice.tp * choice.pp > was.tp * was.pp;
      // A forward pass that does not fit: a training task of its group one step leaner in
      // place, or spread over twice the GPUs (twice the TP or the stages) with its options (and
      // while polishing, with its options a step either way: the spread one holds less).
      const bool leaner = choice.tp == was.tp && choice.pp == was.pp && one_step_leaner(choice.train, was.train);
      const bool options = choice.train == was.train || (c.polishing && one_step_apart(choice.train, was.train));
      const bool spread = options && choice.tp * choice.pp == 2 * was.tp * was.pp &&
                          (choice.tp == was.tp || choice.pp == was.pp);
      return leaner || spread;
    }, best, best_choices);
  }
  if (best != kWorst) c.choices = best_choices;
  return best;
}

template <typename Takes>
void Search::try_choices(Candidate& c, std::size_t j, const std::vector<int>& nodes, long long budget, Takes takes,
                         double& best, std::vector<TaskChoice>& best_choices) {
  const TaskChoice was = c.choices[j];
  for (const TaskChoice& choice : task_choices(model_, models_, params_.space, c.tasks[j], nodes)) {
    if (c.evaluations >= budget) break;
    if (!takes(choice)) continue;
    c.choices[j] = choice;
    const double s = evaluate(c);
    if (s > best) {
      best = s;
      best_choices = c.choices;
    }
  }
  c.choices[j] = was;
}

double Search::retrain_options(Candidate& c, int group, double score, long long budget) {
  const workload::TaskGraph& graph = model_.graph();
  const std::vector<int> nodes = group_nodes(c, group);
  double best = score;
  std::vector<TaskChoice> best_choices = c.choices;
  for (std::size_t j = 0; j < c.tasks.size(); ++j) {
    if (c.task_group[j] != group || graph.tasks[c.tasks[j]].kind != workload::TaskKind::kTrain) continue;
    const TaskChoice was = c.choices[j];
    try_choices(c, j, nodes, budget, [&](const TaskChoice& choice) {
      return choice.tp == was.tp && choice.pp == was.pp && one_step_apart(choice.train, was.train);
    }, best, best_choices);
  }
  c.choices = best_choices;
  return best;
}

// The forward passes of task i's role in its group take task i's TP and PP.
void Search::align_forward_passes(Candidate& c, std::size_t i) const {
  const workload::TaskGraph& graph = model_.graph();
  for (std::size_t j = 0; j < c.tasks.size(); ++j) {
    const workload::Task& t = graph.tasks[c.tasks[j]];
    if (j == i || c.task_group[j] != c.task_group[i] || t.kind != workload::TaskKind::kForward ||
        t.role != graph.tasks[c.tasks[i]].role) {
      continue;
    }
    c.choices[j].tp = c.choices[i].tp;
    c.choices[j].pp = c.choices[i].pp;
  }
}

bool Search::within_budget(const Candidate& c) const {
  if (!params_.goal.budget_per_hour) return true;
  double total = 0;
  for (std::size_t cls = 0; cls < classes_.size(); ++cls) {
    for (int n : c.counts[cls]) total += class_price_[cls] * n;
  }
  return params_.goal.within_budget(total);
}

// A swap is two node moves at once: `other` comes to group m.from from m.to, `cls` goes back.
// False, changing nothing, when either side lacks the nodes.
bool Search::swap_nodes(Candidate& c, const Move& m) const {
  if (c.counts[m.cls][m.from] < m.nodes) return false;
  Move back = m;
  back.cls = m.other;
  back.from = m.to;
  back.to = m.from;
  return move_node(c, back) && move_node(c, m);
}

// Moves one node of a class between groups (or the unused pool); false, changing nothing,
// when the source has no node of that class left.
bool Search::move_node(Candidate& c, const Move& m) const {
  int taken = 0;
  for (int n : c.counts[m.cls]) taken += n;
  const int have = m.from >= 0 ? c.counts[m.cls][m.from] : static_cast<int>(classes_[m.cls].size()) - taken;
  if (have < m.nodes) return false;
  if (m.from >= 0) c.counts[m.cls][m.from] -= m.nodes;
  if (m.to >= 0) c.counts[m.cls][m.to] += m.nodes;
  return true;
}

std::vector<GroupChoice> Search::groups_of(const Candidate& c) const {
  std::vector<GroupChoice> groups;
  groups_of(c, groups);
  return groups;
}

void Search::groups_of(const Candidate& c, std::vector<GroupChoice>& groups) const {
  const int k = static_cast<int>(c.partition.size());
  groups.resize(k);
  for (int g = 0; g < k; ++g) {
    groups[g].tasks.clear();
    groups[g].choices.clear();
    group_nodes(c.counts, g, groups[g].nodes);
  }
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    groups[c.task_group[i]].tasks.push_back(c.tasks[i]);
    groups[c.task_group[i]].choices.push_back(c.choices[i]);
  }
}

double Search::evaluate(Candidate& c) {
  groups_of(c, groups_);
  ++c.evaluations;
  ++evaluations_;
  last_overflow_ = std::numeric_limits<double>::infinity();
  // An unfit plan is explained only when the rejections keep it as the closest to fitting.
  const PlanPricer::Outcome outcome =
      pricer_.price(groups_, [this](double overflow) { return rejections_.keeps(overflow); });
  if (outcome == PlanPricer::Outcome::kNotLaidOut) {
    ++pruned_;
    return kWorst;
  }
  const plan::Prediction& p = pricer_.prediction();
  last_overflow_ = p.feasible ? 0.0 : p.overflow;
  const double s = params_.goal.score(p);
  if (s == kWorst) rejections_.see(p);
  const double price = p.price_per_hour.value_or(std::numeric_limits<double>::infinity());
  if (beats(s, price, c.best, c.best_price)) {
    c.best = s;
    c.best_price = price;
    c.best_shape = c.shape();
  }
  return s;
}

std::vector<std::size_t> Search::sweep_order(const Candidate& c, bool busiest) {
  std::vector<std::size_t> order(c.tasks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if ((c.sweeps > 1 && !busiest) || c.current == kWorst || pricer_.price(groups_of(c)) != PlanPricer::Outcome::kFit) return order;
  const plan::Prediction& p = pricer_.prediction();
  std::vector<std::pair<double, double>> weight(order.size());  // (its group's busy seconds, its own)
  for (std::size_t i = 0; i < order.size(); ++i) {
    weight[i] = {p.groups[c.task_group[i]].busy_seconds, p.tasks[c.tasks[i]].seconds};
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return weight[a] > weight[b]; });
  return order;
}

void Search::list_exchanges(Candidate& c) const {
  c.moves.clear();
  c.next_move = 0;
  c.exchanges_listed = true;
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    for (std::size_t j = i + 1; j < c.tasks.size(); ++j) {
      if (c.task_group[i] == c.task_group[j]) continue;
      Move m;
      m.kind = Move::Kind::kExchange;
      m.task = static_cast<int>(i);
      m.other = static_cast<int>(j);
      m.to = c.task_group[j];
      c.moves.push_back(m);
    }
  }
  // Three tasks of three groups, round one way and the other (each triple once: i first).
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    for (std::size_t j = i + 1; j < c.tasks.size(); ++j) {
      for (std::size_t l = j + 1; l < c.tasks.size(); ++l) {
        const int gi = c.task_group[i], gj = c.task_group[j], gl = c.task_group[l];
        if (gi == gj || gj == gl || gi == gl) continue;
        for (const auto& [other, third] : {std::pair{j, l}, std::pair{l, j}}) {
          Move m;
          m.kind = Move::Kind::kRotate;
          m.task = static_cast<int>(i);
          m.other = static_cast<int>(other);
          m.third = static_cast<int>(third);
          m.to = c.task_group[other];
          c.moves.push_back(m);
        }
      }
    }
  }
  list_task_moves(c, Move::Kind::kSpreadInto, true);
  // A group's forward passes laid out alike, where the group also trains (else the sweep's
  // uniform layouts are these).
  const int k = static_cast<int>(c.partition.size());
  std::vector<std::vector<TaskChoice>> valid(c.tasks.size());
  for (int g = 0; g < k; ++g) {
    std::size_t forwards = 0, members = 0;
    for (std::size_t i = 0; i < c.tasks.size(); ++i) {
      if (c.task_group[i] != g) continue;
      ++members;
      if (is_forward(c, i)) ++forwards;
    }
    if (forwards < 2 || forwards == members) continue;
    const std::vector<int> nodes = group_nodes(c, g);
    for (std::size_t i = 0; i < c.tasks.size(); ++i) {
      if (c.task_group[i] == g && is_forward(c, i)) {
        valid[i] = task_choices(model_, models_, params_.space, c.tasks[i], nodes);
      }
    }
    for (const auto& [tp, pp] : uniform_layouts(c, g, valid, true)) {
      Move m;
      m.kind = Move::Kind::kForwardsAlike;
      m.to = g;
      m.choice = TaskChoice{tp, pp, {}};
      c.moves.push_back(m);
    }
  }
}

double Search::chain_exchange(Candidate& c, const Move& m, double tied, long long budget) {
  const std::vector<TaskChoice> choices = c.choices;
  const std::vector<int> task_group = c.task_group;
  for (std::size_t i = 0; i < c.tasks.size() && c.evaluations < budget; ++i) {
    for (std::size_t j = i + 1; j < c.tasks.size() && c.evaluations < budget; ++j) {
      if (task_group[i] == task_group[j] || (static_cast<int>(i) == m.task && static_cast<int>(j) == m.other)) continue;
      std::swap(c.task_group[i], c.task_group[j]);
      if (repair(c)) {
        const double s = evaluate(c);
        if (s > tied && s - tied > 1e-12 * std::abs(tied)) return s;
      }
      c.choices = choices;
      c.task_group = task_group;
    }
  }
  return tied;
}

double Search::settle(Candidate& c, std::initializer_list<int> moved, double score, long long budget) {
  for (const int i : moved) {
    if (c.evaluations >= budget) break;
    const std::size_t task = static_cast<std::size_t>(i);
    TaskChoice best = c.choices[task];
    for (const TaskChoice& choice :
         task_choices(model_, models_, params_.space, c.tasks[task], group_nodes(c, c.task_group[task]))) {
      if (c.evaluations >= budget) break;
      c.choices[task] = choice;
      const double s = evaluate(c);
      if (s > score) {
        score = s;
        best = choice;
      }
    }
    c.choices[task] = best;
  }
  return score;
}

void Search::list_task_moves(Candidate& c, Move::Kind kind, bool forward_passes) const {
  const int k = static_cast<int>(c.partition.size());
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    if ((forward_passes && model_.graph().tasks[c.tasks[i]].kind != workload::TaskKind::kForward) ||
        std::count(c.task_group.begin(), c.task_group.end(), c.task_group[i]) < 2) {
      continue;
    }
    for (int g = 0; g < k; ++g) {
      if (g == c.task_group[i]) continue;
      Move m;
      m.kind = kind;
      m.task = static_cast<int>(i);
      m.to = g;
      c.moves.push_back(m);
    }
  }
}

// Forward pass i, just moved to its group, where c.choices score `score`: spread over more GPUs
// a replica, alone or with one other forward pass of the group spread too. Keeps the best of
// these and c.choices as they were, and returns its score.
double Search::spread_into(Candidate& c, std::size_t i, double score, long long budget) {
  const std::vector<int> nodes = group_nodes(c, c.task_group[i]);
  const std::vector<TaskChoice> was = c.choices;
  std::vector<TaskChoice> best_choices = was;
  double best = score;
  const auto spread = [&](std::size_t task) {
    std::vector<TaskChoice> out;
    for (const TaskChoice& choice : task_choices(model_, models_, params_.space, c.tasks[task], nodes)) {
      if (choice.tp * choice.pp > was[task].tp * was[task].pp) out.push_back(choice);
    }
    return out;
  };
  const auto consider = [&] {
    const double s = evaluate(c);
    if (s > best) {
      best = s;
      best_choices = c.choices;
    }
  };
  const std::vector<TaskChoice> own = spread(i);
  for (const TaskChoice& choice : own) {
    if (c.evaluations >= budget) break;
    c.choices[i] = choice;
    consider();
  }
  for (std::size_t j = 0; j < c.tasks.size() && c.evaluations < budget; ++j) {
    if (j == i || c.task_group[j] != c.task_group[i] ||
        model_.graph().tasks[c.tasks[j]].kind != workload::TaskKind::kForward) {
      continue;
    }
    for (const TaskChoice& other : spread(j)) {
      for (const TaskChoice& choice : own) {
        if (c.evaluations >= budget) break;
        c.choices[i] = choice;
        c.choices[j] = other;
        consider();
      }
    }
    c.choices = was;
  }
  c.choices = best_choices;
  return best;
}

// Group `from`'s tasks join group `to`; its nodes go with them, or back to the pool. The group
// is gone: the groups after it move down one.
void merge_groups(Candidate& c, int from, int to, bool take_nodes) {
  for (int& g : c.task_group) {
    if (g == from) g = to;
    if (g > from) --g;
  }
  for (std::vector<int>& per_group : c.counts) {
    if (take_nodes) per_group[to] += per_group[from];
    per_group.erase(per_group.begin() + from);
  }
  std::vector<int>& into = c.partition[to];
  into.insert(into.end(), c.partition[from].begin(), c.partition[from].end());
  c.partition.erase(c.partition.begin() + from);
}

// Task i leaves its group for a new one of `nodes` nodes of class `cls` (the caller's, unused).
// False when its group would be left without tasks.
bool split_task(Candidate& c, std::size_t i, std::size_t cls, int nodes) {
  const int from = c.task_group[i];
  if (std::count(c.task_group.begin(), c.task_group.end(), from) < 2) return false;
  const int group = static_cast<int>(c.partition.size());
  c.partition.push_back({c.tasks[i]});
  for (std::size_t k = 0; k < c.counts.size(); ++k) c.counts[k].push_back(k == cls ? nodes : 0);
  c.task_group[i] = group;
  return true;
}

bool Search::try_regroupings(Candidate& c, long long budget) {
  if (c.best == kWorst) return false;
  // From its best plan, not from where its last perturbation led.
  const Shape now = c.shape();
  const Shape was = c.best_shape;
  const int k = static_cast<int>(was.partition.size());
  std::vector<std::pair<double, Shape>> found;  // the regrouped plans that fit
  std::vector<std::pair<double, Shape>>* into = &found;  // where settle adds them
  // Prices the shape c has now, laid out anew where it does not fit (each task one step leaner
  // at a time, then the changed groups' tasks alike), and adds it to `found` if it fits; false
  // when the shape is over the budget or cannot be laid out.
  const auto settle = [&](std::initializer_list<int> changed) {
    if (!within_budget(c) || !repair(c)) return false;
    double s = evaluate(c);
    double overflow = last_overflow_;
    if (s == kWorst) std::tie(s, overflow) = fit_leaner(c, overflow, false);
    for (const int g : changed) {
      if (s == kWorst) std::tie(s, overflow) = relayout(c, g, s, overflow, budget);
    }
    if (s != kWorst) into->emplace_back(s, c.shape());
    return true;
  };
  // A shape over the budget since group `added` took unused nodes, paid for by trading another
  // group's nodes of a class for as few unused nodes of a cheaper class as bring it within.
  const auto settle_by_trading = [&](int added) {
    const Shape over = c.shape();
    for (int h = 0; h < added; ++h) {
      for (std::size_t a = 0; a < classes_.size(); ++a) {
        for (std::size_t b = 0; b < classes_.size(); ++b) {
          if (over.counts[a][h] == 0 || class_price_[b] >= class_price_[a]) continue;
          c.set_shape(over);
          Move trade;  // one node of class a to the unused pool, one of class b back
          trade.kind = Move::Kind::kSwap;
          trade.cls = static_cast<int>(a);
          trade.other = static_cast<int>(b);
          trade.from = h;
          trade.to = -1;
          while (swap_nodes(c, trade)) {
            if (within_budget(c)) {
              settle({h, added});
              break;
            }
          }
        }
      }
    }
  };
  // Each task of group g on its own in a new group, on one unused node of a class or on all of
  // them (while the groups are fewer than allowed; over the budget, paid for by trading).
  const auto splits = [&](int g) {
    const Shape from = c.shape();
    if (static_cast<int>(from.partition.size()) >= params_.space.max_groups) return;
    for (std::size_t i = 0; i < c.tasks.size() && c.evaluations < budget; ++i) {
      if (from.task_group[i] != g) continue;
      for (std::size_t cls = 0; cls < classes_.size(); ++cls) {
        int taken = 0;
        for (int n : from.counts[cls]) taken += n;
        const int unused = static_cast<int>(classes_[cls].size()) - taken;
        if (unused < 1) continue;
        const int sizes[] = {1, unused};  // one node, and every unused one
        for (int j = 0; j < (unused > 1 ? 2 : 1); ++j) {
          c.set_shape(from);
          if (!split_task(c, i, cls, sizes[j])) continue;
          const int added = static_cast<int>(c.partition.size()) - 1;
          if (within_budget(c)) {
            settle({g, added});
          } else {
            settle_by_trading(added);
          }
        }
      }
    }
    c.set_shape(from);
  };
  for (int g = 0; g < k; ++g) {
    c.set_shape(was);
    splits(g);
  }
  for (int from = 0; from < k && c.evaluations < budget; ++from) {
    for (int to = 0; to < k && c.evaluations < budget; ++to) {
      if (to == from) continue;
      for (const bool take_nodes : {false, true}) {
        c.set_shape(was);
        merge_groups(c, from, to, take_nodes);
        const int merged = to > from ? to - 1 : to;
        if (!settle({merged})) continue;
        const Shape after = c.shape();
        for (std::size_t i = 0; i < c.tasks.size() && c.evaluations < budget; ++i) {
          if (after.task_group[i] != merged) continue;
          for (int h = 0; h < k - 1; ++h) {
            if (h == merged) continue;
            c.set_shape(after);
            c.task_group[i] = h;
            settle({h, merged});
          }
        }
        c.set_shape(after);
        splits(merged);
      }
    }
  }
  // Two tasks regrouped along a chain: one into a second group, one of that group's on into a
  // third (an exchange's two regroupings, the second ending elsewhere). On the paper's region
  // network, GRPO-14B async with fp32 gradients, hybrid ran the reference's forward pass beside
  // generation and the reward's alone on the L4s; the optimum runs the reward's beside the
  // actor's training and the reference's on the L4s, with an A100 node moved from generation
  // to training and an L40S node from training to the L4s: neither regrouping alone is better.
  std::vector<std::pair<double, Shape>> chains;
  into = &chains;
  for (std::size_t i = 0; i < c.tasks.size() && c.evaluations < budget; ++i) {
    const int a = was.task_group[i];
    if (std::count(was.task_group.begin(), was.task_group.end(), a) < 2) continue;
    for (std::size_t j = 0; j < c.tasks.size() && c.evaluations < budget; ++j) {
      const int b = was.task_group[j];
      if (b == a) continue;
      for (int third = 0; third < k && c.evaluations < budget; ++third) {
        if (third == a || third == b) continue;
        c.set_shape(was);
        c.task_group[i] = b;
        c.task_group[j] = third;
        settle({a, b, third});
      }
    }
  }
  if (found.empty()) {
    c.set_shape(now);
    return false;
  }
  // A regrouped plan is judged before its strategies are tuned to its new groups: the best
  // few, each of another score, are searched a little (the candidate keeps the best plan found),
  // and the candidate goes on from the best.
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  found.erase(std::unique(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
              found.end());
  // The best few, and the best chain beside them (a chain is judged before its groups' nodes
  // follow their tasks, which a search from it moves: on the region network above it ranked
  // fifth of the regroupings, and led to the optimum).
  std::vector<const std::pair<double, Shape>*> searched;
  for (std::size_t j = 1; j < std::min(found.size(), kRegroupsSearched); ++j) searched.push_back(&found[j]);
  const auto best_chain = std::max_element(chains.begin(), chains.end(),
                                           [](const auto& a, const auto& b) { return a.first < b.first; });
  if (best_chain != chains.end()) searched.push_back(&*best_chain);
  for (const std::pair<double, Shape>* start : searched) {
    if (out_of_time()) break;
    Candidate d = c;
    d.set_shape(start->second);
    d.current = start->first;
    d.overflow = 0;
    d.restarts = params_.restarts;
    d.done = false;
    d.exchanges_listed = false;
    // Busiest group first, with evaluations of its own: the regroupings before may have spent
    // `budget` to the end, leaving these plans untuned (on the paper's networks, PPO-8B async,
    // the ILP's optima on the region and multi-continent networks were 0.76% and 0.42% away),
    // and enough of them to converge and try the exchanges (on the region network, PPO-4B
    // async, the runner-up that leads to the ILP's optimum converges after about 3,000).
    next_sweep(d, true);
    search(d, d.evaluations + params_.evaluation_budget / kRunnerUpShare);
    if (d.best > c.best) {
      c.best = d.best;
      c.best_shape = std::move(d.best_shape);
    }
  }
  c.set_shape(found.front().second);
  c.current = found.front().first;
  c.overflow = 0;
  c.exchanges_listed = false;
  next_sweep(c);
  return true;
}

void Search::next_sweep(Candidate& c, bool busiest) {
  ++c.sweeps;
  c.moves.clear();
  c.next_move = 0;
  c.improved = false;
  const int k = static_cast<int>(c.partition.size());
  std::vector<std::vector<int>> nodes(k);
  for (int g = 0; g < k; ++g) nodes[g] = group_nodes(c, g);
  std::vector<std::vector<TaskChoice>> valid(c.tasks.size());
  for (std::size_t i : sweep_order(c, busiest)) {
    const std::vector<TaskChoice>* fastest_first =
        c.bottleneck_first && (c.sweeps == 1 || busiest) && by_speed_ ? by_speed_(c.counts, c.task_group[i], c.tasks[i])
                                                                      : nullptr;
    valid[i] = fastest_first ? *fastest_first
                             : task_choices(model_, models_, params_.space, c.tasks[i], nodes[c.task_group[i]]);
    for (const TaskChoice& choice : valid[i]) {
      const TaskChoice& now = c.choices[i];
      if (choice == now) continue;
      Move m;
      m.task = static_cast<int>(i);
      m.choice = choice;
      c.moves.push_back(m);
      if (model_.graph().tasks[c.tasks[i]].kind == workload::TaskKind::kTrain && choice.train.zero_stage < 3) {
        m.kind = Move::Kind::kAligned;
        c.moves.push_back(m);
      }
    }
  }
  for (int g = 0; g < k; ++g) {
    if (std::count(c.task_group.begin(), c.task_group.end(), g) < 2) continue;
    for (const auto& [tp, pp] : uniform_layouts(c, g, valid)) {
      Move m;
      m.kind = Move::Kind::kUniform;
      m.to = g;
      m.choice = TaskChoice{tp, pp, {}};
      c.moves.push_back(m);
    }
  }
  list_task_moves(c, Move::Kind::kRegroup, false);
  for (std::size_t cls = 0; cls < classes_.size(); ++cls) {
    int taken = 0;
    for (int g = 0; g < k; ++g) taken += c.counts[cls][g];
    const bool spare = taken < static_cast<int>(classes_[cls].size());
    for (int from = -1; from < k; ++from) {
      if (from == -1 ? !spare : c.counts[cls][from] == 0) continue;
      for (int to = -1; to < k; ++to) {
        if (to == from) continue;
        Move m;
        m.kind = Move::Kind::kNodes;
        m.cls = static_cast<int>(cls);
        m.from = from;
        m.to = to;
        const int size = static_cast<int>(classes_[cls].size());
        for (int step = size > kSingleStepNodes ? size / 2 : 1; step >= 1; step = step > 2 ? step / 2 : step - 1) {
          m.nodes = step;
          c.moves.push_back(m);
        }
      }
    }
  }
  for (int g = 0; g < k; ++g) {
    for (std::size_t cls = 0; cls < classes_.size(); ++cls) {
      if (c.counts[cls][g] == 0) continue;
      for (std::size_t other = 0; other < classes_.size(); ++other) {
        if (other == cls) continue;
        int taken = 0;
        for (int h = 0; h < k; ++h) taken += c.counts[other][h];
        for (int to = -1; to < k; ++to) {
          const bool has = to == -1 ? taken < static_cast<int>(classes_[other].size()) : c.counts[other][to] > 0;
          if (to == g || !has) continue;
          Move m;
          m.kind = Move::Kind::kSwap;
          m.cls = static_cast<int>(cls);
          m.other = static_cast<int>(other);
          m.from = g;
          m.to = to;
          c.moves.push_back(m);
        }
      }
    }
  }
  // While nothing fits, the big steps first: nodes from the pool, then whole groups laid out anew.
  if (c.current == kWorst) {
    const auto rank = [](const Move& m) {
      return m.kind == Move::Kind::kNodes && m.from < 0 ? 0 : m.kind == Move::Kind::kUniform ? 1 : 2;
    };
    std::stable_sort(c.moves.begin(), c.moves.end(), [&](const Move& a, const Move& b) { return rank(a) < rank(b); });
  }
}

std::vector<std::pair<int, int>> Search::uniform_layouts(const Candidate& c, int group,
                                                         const std::vector<std::vector<TaskChoice>>& valid,
                                                         bool forwards) const {
  std::vector<std::pair<int, int>> layouts;
  std::vector<std::size_t> members;
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    if (c.task_group[i] == group && (!forwards || is_forward(c, i))) members.push_back(i);
  }
  if (members.empty()) return layouts;
  for (const TaskChoice& v : valid[members.front()]) {
    const std::pair<int, int> layout{v.tp, v.pp};
    if (std::find(layouts.begin(), layouts.end(), layout) != layouts.end()) continue;
    bool takes = true, same = true;
    for (std::size_t j = 0; j < members.size() && takes; ++j) {
      const TaskChoice& now = c.choices[members[j]];
      const std::vector<TaskChoice>& options = valid[members[j]];
      same = same && now.tp == v.tp && now.pp == v.pp;
      takes = std::find(options.begin(), options.end(), TaskChoice{v.tp, v.pp, now.train}) != options.end();
    }
    if (takes && !same) layouts.push_back(layout);
  }
  return layouts;
}

void Search::lay_out_alike(Candidate& c, int group, int tp, int pp, bool forwards) const {
  for (std::size_t j = 0; j < c.tasks.size(); ++j) {
    if (c.task_group[j] != group || (forwards && !is_forward(c, j))) continue;
    c.choices[j].tp = tp;
    c.choices[j].pp = pp;
  }
}

std::pair<double, double> Search::relayout(Candidate& c, int group, double score, double overflow,
                                           long long budget) {
  const std::vector<TaskChoice> was = c.choices;
  std::vector<TaskChoice> best = was;
  const std::vector<int> nodes = group_nodes(c, group);
  std::vector<std::vector<TaskChoice>> valid(c.tasks.size());
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    if (c.task_group[i] == group) valid[i] = task_choices(model_, models_, params_.space, c.tasks[i], nodes);
  }
  for (const auto& [tp, pp] : uniform_layouts(c, group, valid)) {
    if (c.evaluations >= budget) break;
    lay_out_alike(c, group, tp, pp);
    const double s = evaluate(c);
    if (s > score || (s == kWorst && score == kWorst && last_overflow_ < overflow)) {
      score = s;
      overflow = s == kWorst ? last_overflow_ : 0;
      best = c.choices;
    }
    c.choices = was;
  }
  c.choices = best;
  return {score, overflow};
}

// Lays out a candidate's start (each task's start_choice) and prices it.
void Search::start(Candidate& c) {
  c.started = true;
  for (std::size_t i = 0; i < c.tasks.size(); ++i) {
    c.choices.push_back(start_choice(c.tasks[i], group_nodes(c, c.task_group[i])));
  }
  c.current = evaluate(c);
  c.start_overflow = c.overflow = last_overflow_;
  // A start that gave up nodes is often too tight for its tasks laid out one by one, as they
  // share each GPU: each group's tasks laid out alike, spread thin.
  for (int g = 0; c.shed && g < static_cast<int>(c.partition.size()) && c.current == kWorst; ++g) {
    std::tie(c.current, c.overflow) = relayout(c, g, c.current, c.overflow, std::numeric_limits<long long>::max());
  }
  c.start_evaluations = c.evaluations;
}

std::pair<double, double> Search::fit_leaner(Candidate& c, double overflow, bool first_fit) {
  const int k = static_cast<int>(c.partition.size());
  std::vector<std::vector<int>> nodes(k);
  for (int g = 0; g < k; ++g) nodes[g] = group_nodes(c, g);
  while (std::isfinite(overflow)) {
    int best_task = -1;
    TaskChoice best_choice;
    double best_overflow = overflow;
    double best_score = kWorst;
    for (std::size_t i = 0; i < c.tasks.size(); ++i) {
      const TaskChoice now = c.choices[i];
      const std::vector<TaskChoice> valid = task_choices(model_, models_, params_.space, c.tasks[i], nodes[c.task_group[i]]);
      for (const TaskChoice& lean : {TaskChoice{now.tp, now.pp * 2, now.train}, TaskChoice{now.tp * 2, now.pp, now.train}}) {
        if (std::find(valid.begin(), valid.end(), lean) == valid.end()) continue;
        c.choices[i] = lean;
        const double s = evaluate(c);
        if (first_fit && s != kWorst) return {s, 0.0};
        if (s > best_score || (best_score == kWorst && s == kWorst && last_overflow_ < best_overflow)) {
          best_score = s;
          best_overflow = s == kWorst ? last_overflow_ : 0;
          best_task = static_cast<int>(i);
          best_choice = lean;
        }
        c.choices[i] = now;
      }
    }
    if (best_task < 0) break;
    c.choices[best_task] = best_choice;
    overflow = best_overflow;
    if (best_score != kWorst) return {best_score, 0.0};
  }
  return {kWorst, overflow};
}

void Search::fit_start(Candidate& c) {
  const auto [score, overflow] = fit_leaner(c, last_overflow_, true);
  if (score != kWorst) c.current = score;
  c.overflow = overflow;
}

void Search::second_chance(const std::vector<Candidate>& starts, const std::vector<int>& unfit,
                           std::vector<Candidate>& out) {
  // An eighth of what the halving spent at most: half to repair, the rest to search.
  constexpr std::size_t kSearched = 4;
  const long long cap = evaluations_ / 8;
  const long long first = evaluations_;
  std::vector<Candidate> repaired;
  for (std::size_t j = 0; j < unfit.size() && evaluations_ - first < cap / 2 && !out_of_time(); ++j) {
    Candidate c = starts[unfit[j]];
    start(c);
    if (c.current == kWorst) fit_start(c);
    if (c.current == kWorst) continue;
    next_sweep(c);
    repaired.push_back(std::move(c));
  }
  std::stable_sort(repaired.begin(), repaired.end(),
                   [](const Candidate& a, const Candidate& b) { return a.current > b.current; });
  if (repaired.size() > kSearched) repaired.resize(kSearched);
  for (std::size_t j = 0; j < repaired.size(); ++j) {
    Candidate& c = repaired[j];
    const long long left = cap - (evaluations_ - first);
    if (left <= 0) break;
    search(c, c.evaluations + left / static_cast<long long>(repaired.size() - j));
    out.push_back(std::move(c));
    if (timed_out_) break;
  }
}

void Search::search(Candidate& c, long long budget) {
  if (!c.started && !out_of_time()) {
    start(c);
    next_sweep(c);
  }
  if (c.bottleneck_first && budget != std::numeric_limits<long long>::max()) budget += c.start_evaluations;
  while (!c.done && c.evaluations < budget) {
    if (out_of_time()) return;
    if (c.next_move == c.moves.size()) {
      if (c.improved) {
        next_sweep(c);
        continue;
      }
      // Converged: two tasks of different groups exchanged (in task order only: bottleneck
      // first, the paper's suite had three plans worse with them instead of one).
      if (!c.exchanges_listed && (!c.bottleneck_first || c.regrouped)) {
        list_exchanges(c);
        continue;
      }
      if (c.restarts >= params_.restarts) {
        // Converged after its perturbations, searching to the end: once more from its best plan
        // regrouped (on the paper's region network, GRPO-14B async: hybrid ran the reward's
        // forward pass alone on the L4 nodes, the reference's beside generation; the optimum
        // runs the reward's beside generation, the reference's beside the actor's training,
        // and leaves the L4s idle). Last, so that the search before it is as it was.
        if (!c.regrouped && budget == std::numeric_limits<long long>::max()) {
          c.regrouped = true;
          // Bounded: the regroupings and the searches from them take at most a share of the
          // evaluation budget each (at 4,096 GPUs an unbounded restart took half as long again
          // as the whole search before it).
          const long long share = params_.evaluation_budget / kRegroupBudgetShare;
          const long long cap = c.evaluations + share;
          if (try_regroupings(c, cap)) {
            budget = c.evaluations + share;
            continue;
          }
        }
        c.done = true;
        return;
      }
      // The perturbation below draws node moves from a full sweep's list.
      if (c.moves.empty() || c.moves.front().kind == Move::Kind::kExchange ||
          c.moves.front().kind == Move::Kind::kRotate || c.moves.front().kind == Move::Kind::kForwardsAlike) {
        next_sweep(c);
      }
      // Converged: perturb (a random strategy for every task, a few random node moves) and
      // search again from there.
      ++c.restarts;
      const std::vector<std::vector<int>> saved_counts = c.counts;
      const std::vector<TaskChoice> saved_choices = c.choices;
      for (int step = 0; step < 3 && !c.moves.empty(); ++step) {
        const Move& m = c.moves[c.rng() % c.moves.size()];
        if (m.kind == Move::Kind::kNodes) move_node(c, m);
      }
      if (!repair(c)) {
        c.counts = saved_counts;
        c.choices = saved_choices;
        repair(c);
      }
      const int k = static_cast<int>(c.partition.size());
      std::vector<std::vector<int>> nodes(k);
      for (int g = 0; g < k; ++g) nodes[g] = group_nodes(c, g);
      for (std::size_t i = 0; i < c.tasks.size(); ++i) {
        const auto valid = task_choices(model_, models_, params_.space, c.tasks[i], nodes[c.task_group[i]]);
        if (!valid.empty()) c.choices[i] = valid[c.rng() % valid.size()];
      }
      c.current = evaluate(c);
      c.overflow = last_overflow_;
      next_sweep(c);
      continue;
    }
    const Move m = c.moves[c.next_move++];
    // What the move may change, to restore when it is not better: copied into buffers kept
    // from move to move (nothing between here and the restore searches again).
    std::vector<std::vector<int>>& counts = saved_counts_;
    std::vector<TaskChoice>& choices = saved_choices_;
    std::vector<int>& task_group = saved_task_group_;
    counts = c.counts;
    choices = c.choices;
    task_group = c.task_group;
    bool laid_out = true;
    switch (m.kind) {
      case Move::Kind::kStrategy:
      case Move::Kind::kAligned:
        c.choices[m.task] = m.choice;
        if (m.kind == Move::Kind::kAligned) align_forward_passes(c, m.task);
        break;
      case Move::Kind::kUniform:
      case Move::Kind::kForwardsAlike:
        lay_out_alike(c, m.to, m.choice.tp, m.choice.pp, m.kind == Move::Kind::kForwardsAlike);
        break;
      case Move::Kind::kRegroup:
        c.task_group[m.task] = m.to;
        laid_out = repair(c);
        break;
      case Move::Kind::kExchange:
        std::swap(c.task_group[m.task], c.task_group[m.other]);
        laid_out = repair(c);
        break;
      case Move::Kind::kRotate:
        c.task_group[m.task] = task_group[m.other];
        c.task_group[m.other] = task_group[m.third];
        c.task_group[m.third] = task_group[m.task];
        laid_out = repair(c);
        break;
      case Move::Kind::kSpreadInto:
        c.task_group[m.task] = m.to;
        laid_out = repair(c);
        break;
      // Nodes that take the plan over the budget are not tried: no plan of them is acceptable,
      // however close to fitting (a start short of memory would otherwise take every node).
      case Move::Kind::kNodes:
        laid_out = move_node(c, m) && within_budget(c) && repair(c);
        break;
      case Move::Kind::kSwap:
        laid_out = swap_nodes(c, m) && within_budget(c) && repair(c);
        break;
    }
    if (!laid_out) {
      c.counts = counts;
      c.choices = choices;
      c.task_group = task_group;
      ++pruned_;
      continue;
    }
    double s = evaluate(c);
    double overflow = last_overflow_;
    // A task that does not fit where the move put it: a partner in its group made leaner
    // (make_room). After a strategy move of a pass (where the plan fitted before), and after a
    // forward pass regrouped or spread into another group (on the paper's region network,
    // PPO-14B async: 17.47 samples/s without the latter, the ILP's optimum of 18.60 with it).
    if (s == kWorst) {
      const workload::TaskKind kind = model_.graph().tasks[c.tasks[m.task]].kind;
      const bool forward = kind == workload::TaskKind::kForward;
      const bool strategy_room = m.kind == Move::Kind::kStrategy && c.current != kWorst &&
                                 (forward || kind == workload::TaskKind::kTrain);
      const bool regroup_room = (m.kind == Move::Kind::kRegroup || m.kind == Move::Kind::kSpreadInto) && forward;
      if (strategy_room || regroup_room) s = make_room(c, m.task, budget);
    }
    // A group laid out anew keeps its training options, chosen for the old layout's memory (on
    // the paper's region network, PPO-8B async, the actor's group as 24 replicas of TP 1 with
    // full recompute, where the ILP's optimum has 12 of two stages with selective recompute, and
    // the critic's forward passes at TP 1 beside its update with full recompute, where the
    // optimum has them at TP 2 PP 2 and the update with selective recompute).
    // Polishing (Search::polish): such a layout no better alone, with the group's training
    // tasks' options a step either way too.
    const bool laid_out_alike = m.kind == Move::Kind::kUniform || m.kind == Move::Kind::kForwardsAlike;
    if (c.polishing && laid_out_alike && s <= c.current) s = retrain_options(c, m.to, s, budget);
    // Two tasks exchanged that do not fit with their own strategies, or are no better: each
    // takes the other's TP and PP too (its place as it was laid out), the better of the two
    // kept. On the paper's region network, GRPO-14B async in two groups: hybrid had the
    // reference's forward pass beside generation (TP1 PP2) and the reward's with the actor's
    // tasks (TP2 PP2), the optimum the other way round; the reference at TP1 PP2 did not fit
    // beside the actor's tasks. On the continent network, PPO-14B async (with the critic's and
    // the reward's value heads priced): the reference's pass beside generation (TP2 PP2), the
    // reward's beside the critic's tasks (TP1 PP2) fit exchanged at their own layouts but
    // slower; at each other's they are the optimum (18.27 -> 18.60 samples/s).
    if (m.kind == Move::Kind::kExchange && s <= c.current &&
        (c.choices[m.task].tp != c.choices[m.other].tp || c.choices[m.task].pp != c.choices[m.other].pp)) {
      exchanged_choices_ = c.choices;
      TaskChoice& a = c.choices[m.task];
      TaskChoice& b = c.choices[m.other];
      std::swap(a.tp, b.tp);
      std::swap(a.pp, b.pp);
      const double own = s, own_overflow = overflow;
      if (repair(c)) {
        s = evaluate(c);
        overflow = last_overflow_;
      } else {
        s = kWorst;
        overflow = std::numeric_limits<double>::infinity();
      }
      // The better of the two; while neither fits, the closer to fitting.
      if (s == kWorst ? own != kWorst || overflow >= own_overflow : own > s) {
        c.choices = exchanged_choices_;
        s = own;
        overflow = own_overflow;
      }
    }
    // Two tasks exchanged to a plan exactly as good (two forward passes of one model, say):
    // a second exchange from there, the first that is better kept (see chain_exchange).
    if (m.kind == Move::Kind::kExchange && s != kWorst && c.current != kWorst &&
        std::abs(s - c.current) <= 1e-12 * std::abs(c.current)) {
      s = chain_exchange(c, m, s, budget);
    }
    if (m.kind == Move::Kind::kRotate) {
      s = settle(c, {m.task, m.other, m.third}, s, budget);
      overflow = s == kWorst ? overflow : 0;
    }
    if (m.kind == Move::Kind::kSpreadInto) {
      const double moved = s;
      s = spread_into(c, m.task, s, budget);
      if (s > moved) overflow = 0;
    }
    // Nodes that left a group, or came to one, whose tasks no longer fit as they were laid
    // out: its tasks laid out anew, alike (the layout that fitted the old nodes may not fit
    // the new ones, nor a mix of GPU types).
    if (s == kWorst && m.regroups()) {
      const bool tasks_moved = m.kind == Move::Kind::kRegroup || m.kind == Move::Kind::kExchange ||
                               m.kind == Move::Kind::kRotate || m.kind == Move::Kind::kSpreadInto;
      for (const int g : {m.to, tasks_moved ? task_group[m.task] : m.from, m.kind == Move::Kind::kRotate ? task_group[m.third] : -1}) {
        if (g >= 0 && s == kWorst) std::tie(s, overflow) = relayout(c, g, s, overflow, budget);
      }
    }
    // Better: a higher score, or, while nothing fits, closer to fitting.
    const bool better = s > c.current ? c.current == kWorst || s - c.current > 1e-12 * std::abs(c.current)
                                      : s == kWorst && c.current == kWorst && overflow < c.overflow;
    if (better) {
      c.current = s;
      c.overflow = s == kWorst ? overflow : 0;
      c.improved = true;
      c.exchanges_listed = false;
      // Strategy moves listed for the old groups no longer hold; bottleneck first, every better
      // strategy lists them again, busiest group first.
      if (m.regroups() || c.bottleneck_first) {
        next_sweep(c, !m.regroups());
        c.improved = true;
      }
    } else {
      c.counts = counts;
      c.choices = choices;
      c.task_group = task_group;
    }
  }
}

std::vector<Candidate> Search::halve(std::vector<Candidate> alive, long long evaluation_budget, std::size_t other_kinds, bool riders,
                                     std::vector<int>& unfit, int& round,
                                     const std::function<void(const SearchProgress&)>& progress) {
  const long long candidates = static_cast<long long>(alive.size());
  const double rounds = std::max(1.0, std::ceil(std::log2(std::max<double>(2, static_cast<double>(candidates)))));
  long long budget = std::max<long long>(
      2, static_cast<long long>(static_cast<double>(evaluation_budget) /
                                (std::max<double>(1, static_cast<double>(candidates)) * rounds)));
  const int first_round = round;
  bool last = false;  // the round in which the survivors search to the end
  while (!alive.empty() && !timed_out_) {
    last = last || alive.size() == 1;
    for (Candidate& c : alive) {
      // In the last round the leader searches to the end; the best of the other kinds go on
      // with the round's budget.
      search(c, last && &c == &alive.front() ? std::numeric_limits<long long>::max() : budget);
      if (timed_out_) break;
    }
    ++round;
    if (round == first_round + 1) {
      // The starts that did not fit and found nothing that fits: the highest bound first (where
      // level 1 bounded them), then the closest to fitting. How far a start is over says little
      // of where it leads: on the paper's region network, PPO-8B async, the ILP's optimum's
      // start is the 6th by its bound (level 1's 13th, after the 7 colocated ones) and the
      // 1,115th of 1,754 unfit ones by its overflow.
      std::vector<std::tuple<double, double, int>> over;
      for (const Candidate& c : alive) {
        if (c.best == kWorst && c.start_overflow > 0 && std::isfinite(c.start_overflow)) {
          over.emplace_back(-c.bound, c.start_overflow, c.id);  // the highest bound first
        }
      }
      std::stable_sort(over.begin(), over.end());
      for (const auto& [negated_bound, overflow, id] : over) unfit.push_back(id);
    }
    if (progress) progress({round, static_cast<int>(alive.size()), evaluations_, clock_.seconds() - start_});
    if (last) break;
    // The better half goes on with twice the budget, and so does the best candidate of each
    // kind of start (the node classes it took; the closest to fitting where none of a kind has
    // a plan yet): a start on other GPU types may lead only after the budget of several rounds
    // (on the paper's region network, GRPO-14B async, the ILP's optimum of 30.8 samples/s has
    // A100 generation beside A100 and L40S training and the L4s idle; hybrid found 22.0
    // before, 30.8 with this). When the halving is down to one, it searches to the end and the
    // kinds kept beside it once more with the round's budget.
    // Riders (below) ride beside the halving, which sorts and halves the others.
    const auto riding = std::stable_partition(alive.begin(), alive.end(), [](const Candidate& c) { return !c.rider; });
    const std::size_t racing = static_cast<std::size_t>(riding - alive.begin());
    std::stable_sort(alive.begin(), riding, [](const Candidate& a, const Candidate& b) {
      return a.best > b.best || (a.best == b.best && a.id < b.id);
    });
    std::size_t keep = (racing + 1) / 2;
    while (keep > 1 && alive[keep - 1].best == kWorst) --keep;
    std::vector<Candidate> next(std::make_move_iterator(alive.begin()),
                                std::make_move_iterator(alive.begin() + static_cast<std::ptrdiff_t>(keep)));
    std::set<std::vector<bool>> kinds;
    for (const Candidate& c : next) kinds.insert(c.start_classes);
    // Of those left out, per kind: the best plan, else the closest to fitting.
    std::vector<std::size_t> order;
    for (std::size_t i = keep; i < racing; ++i) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const Candidate &x = alive[a], &y = alive[b];
      return x.best != y.best ? x.best > y.best : x.overflow < y.overflow;
    });
    std::size_t kept_kinds = 0;
    std::vector<bool> kept(racing, false);
    for (std::size_t i : order) {
      if (kept_kinds == other_kinds) break;
      if (kinds.insert(alive[i].start_classes).second) {
        next.push_back(std::move(alive[i]));
        kept[i] = true;
        ++kept_kinds;
      }
    }
    // The budget above is the evaluation budget spread over `rounds` rounds: one more at most
    // (the kinds kept beside the better half can stop it shrinking, and each round doubles).
    last = keep == 1 || next.size() == racing || round - first_round >= rounds;
    // Riders: the starts of the highest bounds of all (top_bounded_) that the halving left out,
    // searched on with the round's budget while their bound is above the best plan found, but
    // taking no place of the halving's. A start whose tasks at their fastest strategies alone
    // would beat every plan found may need more moves than a round's budget to show it: on the
    // paper's region network, GRPO-4B async with bf16 gradients, the ILP's optimum's start has
    // the second highest bound of 2,502 and had climbed from 53.7 to 58.8 samples/s in 64
    // evaluations when the sixth round cut it; riding on, it reaches the optimum (74.22).
    const double leader = next.empty() ? kWorst : next.front().best;
    for (std::size_t i = keep; i < alive.size(); ++i) {
      if (i < racing && kept[i]) continue;
      Candidate& c = alive[i];
      if (riders && c.bound > leader &&
          std::find(top_bounded_.begin(), top_bounded_.end(), c.id) != top_bounded_.end()) {
        c.rider = true;
        next.push_back(std::move(c));
      }
    }
    alive = std::move(next);
    budget *= 2;
  }
  return alive;
}

void Search::polish(Candidate& c, long long budget) {
  c.set_shape(c.best_shape);
  c.polishing = true;
  c.bottleneck_first = false;
  c.regrouped = true;
  c.restarts = params_.restarts;
  c.done = false;
  c.improved = false;
  c.current = evaluate(c);
  c.overflow = last_overflow_;
  next_sweep(c);
  search(c, c.evaluations + budget);
}

PlannerResult Search::run(const std::function<void(const SearchProgress&)>& progress) {
  const std::vector<Candidate> starts = level_one();
  std::vector<int> unfit;  // ids of the starts that did not fit
  int round = 0;
  std::vector<Candidate> alive = halve(starts, params_.evaluation_budget, kMostKinds, true, unfit, round, progress);
  if (!timed_out_) second_chance(starts, unfit, alive);
  // A second, smaller search bottleneck first, where the starts' strategies were priced alone
  // (bound_starts): the halving judges a start by its first few evaluations, and the two orders
  // of moves lead different starts early. On the paper's multi-continent network, PPO-14B async
  // within half the cluster's price: the ILP's optimum's start (the actor's tasks on two A100
  // nodes, the critic's on one L40S node) has spent its first budgets on its start (9
  // evaluations) when the third round cuts it at 2.84 samples/s; bottleneck first it shows 6.92
  // after 11 evaluations and 9.92 after 17, and reaches the optimum (10.03).
  if (!timed_out_ && by_speed_) {
    std::vector<Candidate> again(starts.begin(),
                                 starts.begin() + static_cast<std::ptrdiff_t>(std::min(starts.size(), kBottleneckStarts)));
    for (Candidate& c : again) c.bottleneck_first = true;
    std::vector<int> unfit_too;  // second_chance has run
    std::vector<Candidate> more =
        halve(std::move(again), params_.evaluation_budget / kBottleneckBudgetShare, 0, false, unfit_too, round, progress);
    std::move(more.begin(), more.end(), std::back_inserter(alive));
  }
  PlannerResult result;
  // The candidate of the best plan, of plans as good the cheapest; null where none fits.
  const auto best_of = [](const std::vector<Candidate>& candidates) {
    const Candidate* best = nullptr;
    for (const Candidate& c : candidates) {
      if (c.best > kWorst && (!best || beats(c.best, c.best_price, best->best, best->best_price))) best = &c;
    }
    return best;
  };
  const Candidate* best = best_of(alive);
  // The finalists' polish: the best few candidates of different plans, each searched once more
  // from its best plan; the best of all wins.
  if (best && !timed_out_) {
    std::vector<const Candidate*> finalists;
    for (const Candidate& c : alive) {
      if (c.best > kWorst) finalists.push_back(&c);
    }
    std::stable_sort(finalists.begin(), finalists.end(),
                     [](const Candidate* a, const Candidate* b) { return a->best > b->best; });
    std::vector<const Candidate*> taken;
    std::vector<Candidate> polished;
    for (const Candidate* f : finalists) {
      if (taken.size() == kPolished || out_of_time()) break;
      // The same plan reached twice (by the halving and the bottleneck-first search) once.
      const bool seen = std::any_of(taken.begin(), taken.end(), [&](const Candidate* t) {
        return t->best_shape.partition == f->best_shape.partition && t->best_shape.task_group == f->best_shape.task_group &&
               t->best_shape.counts == f->best_shape.counts &&
               t->best_shape.choices == f->best_shape.choices;
      });
      if (seen) continue;
      taken.push_back(f);
      polished.push_back(*f);
      polish(polished.back(), params_.evaluation_budget / kPolishBudgetShare);
    }
    std::move(polished.begin(), polished.end(), std::back_inserter(alive));
    best = best_of(alive);
  }
  result.evaluations = evaluations_;
  if (best) {
    Candidate winner = *best;
    winner.set_shape(best->best_shape);
    const PlanPricer::Outcome outcome = pricer_.price(groups_of(winner));
    if (outcome != PlanPricer::Outcome::kFit) throw std::logic_error("hybrid: the best plan no longer prices the same");
    result.found = true;
    result.plan = pricer_.plan();
    result.prediction = pricer_.prediction();
  } else if (timed_out_) {
    result.why_not = late_why_not(params_.time_limit);
  } else {
    result.why_not = rejections_.why_not(params_.goal);
  }
  if (timed_out_) result.stop = Stop::kTimeLimit;
  result.plan.planner.name = "hybrid";
  result.plan.planner.params = {
      {"seed", std::to_string(params_.seed)},
      {"max_groups", std::to_string(params_.space.max_groups)},
      {"objective", std::string(objective_name(params_.goal.objective))}};
  if (params_.goal.budget_per_hour) {
    result.plan.planner.params.emplace_back("budget_per_hour_usd", fmt::format("{}", *params_.goal.budget_per_hour));
  }
  if (params_.goal.min_throughput) {
    result.plan.planner.params.emplace_back("min_samples_per_second", fmt::format("{}", *params_.goal.min_throughput));
  }
  result.plan.planner.stats = {{"candidates", static_cast<double>(starts.size())},
                               {"evaluations", static_cast<double>(evaluations_)},
                               {"pruned", static_cast<double>(pruned_)},
                               {"rounds", static_cast<double>(round)},
                               {"timed_out", timed_out_ ? 1.0 : 0.0}};
  return result;
}

}  // namespace

PlannerResult plan_hybrid(const cost::CostModel& model, const workload::ModelCatalog& models,
                          const HybridParams& params, const core::Clock& clock,
                          const std::function<void(const SearchProgress&)>& progress) {
  require_prices(model.cluster(), params.goal);
  if (const std::optional<std::string> why = params.goal.unreachable(model.cluster())) {
    PlannerResult result;
    result.why_not = *why;
    result.plan.planner.name = "hybrid";
    return result;
  }
  Search search(model, models, params, clock);
  return search.run(progress);
}

}  // namespace hetrl::planner
