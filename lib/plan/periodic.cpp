#include "plan/periodic.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hetrl::plan {
namespace {

constexpr double kNone = -std::numeric_limits<double>::infinity();

}  // namespace

double PeriodSolver::period(int nodes, std::span<const CycleEdge> edges, std::span<const int> order) {
  shifted_.clear();
  for (std::size_t e = 0; e < edges.size(); ++e) {
    if (edges[e].shift > 0) shifted_.push_back(static_cast<int>(e));
  }
  const std::size_t m = shifted_.size();
  if (m == 0) return 0;
  // Longest paths over the shift-0 edges from the head of each shifted edge to the tail of
  // every other: the reduced graph over the shifted edges.
  reduced_.assign(m * m, kNone);
  distance_.resize(nodes);
  // The shift-0 edges leaving each node, in compressed rows.
  first_out_.assign(nodes + 1, 0);
  for (const CycleEdge& e : edges) {
    if (e.shift == 0) ++first_out_[e.from + 1];
  }
  for (int v = 0; v < nodes; ++v) first_out_[v + 1] += first_out_[v];
  out_.resize(first_out_[nodes]);
  fill_.assign(first_out_.begin(), first_out_.end() - 1);
  for (std::size_t e = 0; e < edges.size(); ++e) {
    if (edges[e].shift == 0) out_[fill_[edges[e].from]++] = static_cast<int>(e);
  }
  for (std::size_t i = 0; i < m; ++i) {
    const CycleEdge& from = edges[shifted_[i]];
    std::fill(distance_.begin(), distance_.end(), kNone);
    distance_[from.to] = 0;
    for (int u : order) {
      if (distance_[u] == kNone) continue;
      for (int k = first_out_[u]; k < first_out_[u + 1]; ++k) {
        const CycleEdge& e = edges[out_[k]];
        distance_[e.to] = std::max(distance_[e.to], distance_[u] + e.weight);
      }
    }
    for (std::size_t j = 0; j < m; ++j) {
      const double path = distance_[edges[shifted_[j]].from];
      if (path != kNone) reduced_[i * m + j] = from.weight + path;
    }
  }
  return max_cycle_ratio(edges);
}

// Howard's policy iteration for the largest cycle ratio (Cochet-Terrasson, Cohen, Gaubert,
// McGettrick and Quadrat, 1998): each node of the reduced graph follows one edge (its policy);
// the policy's graph is a set of cycles with paths into them, each node valued by the ratio of
// the cycle it reaches and its weight to that cycle less ratio x shift; a node switches to an
// edge that reaches a larger ratio, or else to one that raises its value, until none does.
// In practice a few rounds, where enumerating the simple cycles of a dense reduced graph grows
// factorially with the groups.
double PeriodSolver::max_cycle_ratio(std::span<const CycleEdge> edges) {
  const std::size_t m = shifted_.size();
  const auto weight = [&](std::size_t i, std::size_t j) { return reduced_[i * m + j]; };
  // A time too large to price (a rate of zero in all but name) on a cycle makes the period
  // infinite; off every cycle it bounds nothing and is dropped, so the values stay finite.
  double scale = 0;
  bool infinite = false;
  for (std::size_t i = 0; i < m * m; ++i) {
    if (reduced_[i] == kNone) continue;
    if (std::isfinite(reduced_[i])) {
      scale = std::max(scale, std::abs(reduced_[i]));
    } else {
      infinite = true;
    }
  }
  if (infinite) {
    // Which node reaches which: a transitive closure, as rare as such rates are.
    reach_.assign(m * m, 0);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < m; ++j) reach_[i * m + j] = weight(i, j) != kNone;
    }
    for (std::size_t k = 0; k < m; ++k) {
      for (std::size_t i = 0; i < m; ++i) {
        if (!reach_[i * m + k]) continue;
        for (std::size_t j = 0; j < m; ++j) reach_[i * m + j] |= reach_[k * m + j];
      }
    }
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < m; ++j) {
        if (weight(i, j) == kNone || std::isfinite(weight(i, j))) continue;
        if (reach_[j * m + i]) return std::numeric_limits<double>::infinity();
        reduced_[i * m + j] = kNone;
      }
    }
  }
  // Nodes that lead to no cycle: those without an edge to a node kept, dropped until none is
  // left; every node kept reaches a cycle whatever edges it follows.
  alive_.assign(m, 1);
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (std::size_t i = 0; i < m; ++i) {
      if (!alive_[i]) continue;
      bool out = false;
      for (std::size_t j = 0; j < m && !out; ++j) out = alive_[j] && weight(i, j) != kNone;
      if (!out) {
        alive_[i] = 0;
        dropped = true;
      }
    }
  }
  // The tolerance for "larger": far below any time the model prices, far above rounding.
  const double tolerance = 1e-12 * std::max(scale, 1.0) * static_cast<double>(m);
  policy_.assign(m, -1);
  for (std::size_t i = 0; i < m; ++i) {
    if (!alive_[i]) continue;
    for (std::size_t j = 0; j < m; ++j) {
      if (alive_[j] && weight(i, j) != kNone && (policy_[i] < 0 || weight(i, j) > weight(i, policy_[i]))) {
        policy_[i] = static_cast<int>(j);
      }
    }
  }
  ratio_.assign(m, 0.0);
  value_.assign(m, 0.0);
  // Howard converges in a number of rounds that is small in practice; the cap only guards
  // against rounding cycling between equal policies.
  const int max_rounds = 100 + static_cast<int>(m * m);
  for (int round = 0; round < max_rounds; ++round) {
    evaluate_policy(edges);
    bool changed = false;
    // A node that can reach a cycle of larger ratio goes there.
    for (std::size_t i = 0; i < m; ++i) {
      if (!alive_[i]) continue;
      int to = -1;
      double reach = ratio_[i] + tolerance;
      for (std::size_t j = 0; j < m; ++j) {
        if (alive_[j] && weight(i, j) != kNone && ratio_[j] > reach) {
          reach = ratio_[j];
          to = static_cast<int>(j);
        }
      }
      if (to >= 0) {
        policy_[i] = to;
        changed = true;
      }
    }
    if (!changed) {
      // Else a node whose value another edge to the same ratio raises takes it.
      for (std::size_t i = 0; i < m; ++i) {
        if (!alive_[i]) continue;
        const double shift = edges[shifted_[i]].shift;
        int to = -1;
        double reach = value_[i] + tolerance;
        for (std::size_t j = 0; j < m; ++j) {
          if (!alive_[j] || weight(i, j) == kNone || std::abs(ratio_[j] - ratio_[i]) > tolerance) continue;
          const double value = weight(i, j) - ratio_[i] * shift + value_[j];
          if (value > reach) {
            reach = value;
            to = static_cast<int>(j);
          }
        }
        if (to >= 0) {
          policy_[i] = to;
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  double best = 0;
  for (std::size_t i = 0; i < m; ++i) {
    if (alive_[i]) best = std::max(best, ratio_[i]);
  }
  return best;
}

void PeriodSolver::evaluate_policy(std::span<const CycleEdge> edges) {
  const std::size_t m = shifted_.size();
  const auto weight = [&](std::size_t i, std::size_t j) { return reduced_[i * m + j]; };
  const auto shift = [&](std::size_t i) { return edges[shifted_[i]].shift; };
  constexpr unsigned char kNew = 0, kOnPath = 1, kDone = 2;
  state_.assign(m, kNew);
  for (std::size_t i = 0; i < m; ++i) {
    if (!alive_[i] || state_[i] != kNew) continue;
    path_.clear();
    int at = static_cast<int>(i);
    while (state_[at] == kNew) {
      state_[at] = kOnPath;
      path_.push_back(at);
      at = policy_[at];
    }
    if (state_[at] == kOnPath) {
      // A new cycle: its ratio summed from its smallest node on, as the cycle is walked.
      int head = at;
      for (int v = policy_[at]; v != at; v = policy_[v]) head = std::min(head, v);
      double sum = 0;
      int shifts = 0;
      cycle_.clear();
      int v = head;
      do {
        cycle_.push_back(v);
        sum += weight(v, policy_[v]);
        shifts += shift(v);
        v = policy_[v];
      } while (v != head);
      const double ratio = sum / shifts;
      // Values relative to the head, from the head's predecessor backwards.
      ratio_[head] = ratio;
      value_[head] = 0;
      state_[head] = kDone;
      for (std::size_t k = cycle_.size(); k-- > 1;) {
        const int u = cycle_[k];
        ratio_[u] = ratio;
        value_[u] = weight(u, policy_[u]) - ratio * shift(u) + value_[policy_[u]];
        state_[u] = kDone;
      }
    }
    // The path into the cycle (or into a node valued before), from its end backwards.
    for (std::size_t k = path_.size(); k-- > 0;) {
      const int u = path_[k];
      if (state_[u] == kDone) continue;
      ratio_[u] = ratio_[policy_[u]];
      value_[u] = weight(u, policy_[u]) - ratio_[u] * shift(u) + value_[policy_[u]];
      state_[u] = kDone;
    }
  }
}

void schedule_edges(const workload::TaskGraph& graph, std::span<const int> order,
                    std::span<const double> seconds, std::span<const double> edge_transfer,
                    std::span<const int> group, int groups, std::vector<CycleEdge>& out,
                    std::vector<int>& first, std::vector<int>& last) {
  out.clear();
  for (std::size_t i = 0; i < graph.edges.size(); ++i) {
    const workload::Edge& e = graph.edges[i];
    out.push_back({e.from, e.to, seconds[e.from] + edge_transfer[i], e.lag});
  }
  first.assign(groups, -1);
  last.assign(groups, -1);
  for (int t : order) {
    const int g = group[t];
    if (g < 0) continue;
    if (last[g] >= 0) {
      out.push_back({last[g], t, seconds[last[g]], 0});
    } else {
      first[g] = t;
    }
    last[g] = t;
  }
  for (int g = 0; g < groups; ++g) {
    if (last[g] >= 0) out.push_back({last[g], first[g], seconds[last[g]], 1});
  }
}

std::vector<double> periodic_starts(int nodes, std::span<const CycleEdge> edges, double period) {
  // Bellman-Ford for longest paths from a virtual source joined to every node with weight 0.
  std::vector<double> start(nodes, 0.0);
  for (int round = 0; round < nodes + 1; ++round) {
    bool changed = false;
    for (const CycleEdge& e : edges) {
      const double candidate = start[e.from] + e.weight - e.shift * period;
      if (candidate > start[e.to] + 1e-12) {
        start[e.to] = candidate;
        changed = true;
      }
    }
    if (!changed) break;
  }
  return start;
}

}  // namespace hetrl::plan
