#include "planner/pricer.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "planner/layout.h"

namespace hetrl::planner {
namespace {

// Values the cache may hold (node and task indices, shares, replica seconds) before it starts
// afresh: about 100 MB at most, far more than a search over thousands of GPUs revisits.
constexpr std::size_t kMaxCachedValues = std::size_t{1} << 23;

void mix(std::size_t& h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

}  // namespace

std::size_t PlanPricer::GroupHash::operator()(const GroupChoice& g) const {
  std::size_t h = g.nodes.size();
  for (int n : g.nodes) mix(h, static_cast<std::uint64_t>(n));
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const TaskChoice& c = g.choices[i];
    mix(h, static_cast<std::uint64_t>(g.tasks[i]));
    mix(h, static_cast<std::uint64_t>(c.tp) << 32 | static_cast<std::uint64_t>(c.pp));
    mix(h, static_cast<std::uint64_t>(c.train.zero_stage) << 8 | static_cast<std::uint64_t>(c.train.recompute) << 1 |
               (c.train.optimizer_offload ? 1U : 0U));
  }
  return h;
}

std::size_t PlanPricer::Entry::size() const {
  std::size_t n = 1;
  for (const auto& runs : shares) n += runs.size();
  for (const auto& task : part.tasks) n += 1 + task.replica_seconds.size();
  return n;
}

PlanPricer::PlanPricer(const cost::CostModel& model, const workload::ModelCatalog& models)
    : model_(model), models_(models), evaluator_(model) {}

const PlanPricer::Entry& PlanPricer::entry(const GroupChoice& choice, int slot) {
  if (auto it = cache_.find(choice); it != cache_.end()) return it->second;
  Entry e;
  plan::Group& group = plan_.groups[slot];
  e.laid_out = realize(model_, models_, choice, group);
  state_[slot] = e.laid_out ? State::kUniform : State::kNone;
  if (e.laid_out) {
    slot_[slot] = choice;
    // Priced on its own: a plan of this group alone, its other tasks unplaced.
    alone_.groups.resize(1);
    std::swap(alone_.groups[0], group);
    const plan::Prediction& p = balance_shares(evaluator_, alone_, 1);
    if (p.feasible) {
      e.fits = true;
      evaluator_.part_of(alone_, 0, e.part);
      for (const plan::TaskPlacement& placement : alone_.groups[0].tasks) {
        auto& runs = e.shares.emplace_back();
        for (const plan::Replica& replica : placement.replicas) {
          if (runs.empty() || runs.back().first != replica.share) runs.emplace_back(replica.share, 0);
          ++runs.back().second;
        }
      }
      state_[slot] = State::kBalanced;
    } else {
      e.overflow = p.overflow;
    }
    std::swap(alone_.groups[0], group);
  }
  cached_values_ += e.size() + choice.nodes.size() + choice.tasks.size();
  return cache_.emplace(choice, std::move(e)).first->second;
}

void PlanPricer::fill(const GroupChoice& choice, const Entry& e, int slot) {
  if (state_[slot] != State::kNone && slot_[slot] == choice && (!e.fits || state_[slot] == State::kBalanced)) {
    return;
  }
  plan::Group& group = plan_.groups[slot];
  const bool laid_out = realize(model_, models_, choice, group);
  assert(laid_out);
  (void)laid_out;
  slot_[slot] = choice;
  state_[slot] = State::kUniform;
  if (!e.fits) return;
  for (std::size_t j = 0; j < group.tasks.size(); ++j) {
    std::vector<plan::Replica>& replicas = group.tasks[j].replicas;
    std::size_t r = 0;
    for (const auto& [share, count] : e.shares[j]) {
      for (int i = 0; i < count; ++i) replicas[r++].share = share;
    }
    assert(r == replicas.size());
  }
  state_[slot] = State::kBalanced;
}

PlanPricer::Outcome PlanPricer::price(const std::vector<GroupChoice>& groups,
                                      const std::function<bool(double)>& explain) {
  if (cached_values_ > kMaxCachedValues) {
    cache_.clear();
    cached_values_ = 0;
  }
  const std::size_t k = groups.size();
  if (plan_.groups.size() != k) {
    plan_.groups.resize(k);
    slot_.resize(k);
    state_.resize(k, State::kNone);
  }
  entries_.clear();
  prediction_ = &empty_;
  for (std::size_t g = 0; g < k; ++g) {
    const Entry& e = entry(groups[g], static_cast<int>(g));
    if (!e.laid_out) return Outcome::kNotLaidOut;
    entries_.push_back(&e);
  }
  // As the evaluator finds it: a GPU that cannot compute in the precision (infinitely far), else
  // the GPU furthest over its memory in any group.
  double overflow = 0;
  for (const Entry* e : entries_) {
    if (!e->fits) overflow = std::max(overflow, e->overflow);
  }
  const bool fits = std::all_of(entries_.begin(), entries_.end(), [](const Entry* e) { return e->fits; });
  if (!fits) {
    if (!explain || explain(overflow)) {
      for (std::size_t g = 0; g < k; ++g) fill(groups[g], *entries_[g], static_cast<int>(g));
      prediction_ = &evaluator_.evaluate(plan_);
      assert(!prediction_->feasible && prediction_->overflow == overflow);
    } else {
      unfit_.feasible = false;
      unfit_.overflow = overflow;
      prediction_ = &unfit_;
    }
    return Outcome::kUnfit;
  }
  parts_.clear();
  for (std::size_t g = 0; g < k; ++g) {
    fill(groups[g], *entries_[g], static_cast<int>(g));
    parts_.push_back(&entries_[g]->part);
  }
  prediction_ = &evaluator_.compose(plan_, parts_);
  return Outcome::kFit;
}

}  // namespace hetrl::planner
