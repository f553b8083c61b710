#include "plan/periodic.h"

#include <algorithm>
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
  // The largest weight / shift over the simple cycles of the reduced graph (it has a node per
  // shifted edge: one per group and one for the weights, a handful).
  best_ = 0;
  on_stack_.assign(m, false);
  for (std::size_t start = 0; start < m; ++start) {
    on_stack_[start] = true;
    walk(edges, start, start, 0.0, 0);
    on_stack_[start] = false;
  }
  return best_;
}

void PeriodSolver::walk(std::span<const CycleEdge> edges, std::size_t start, std::size_t at,
                        double weight, int shift) {
  const std::size_t m = shifted_.size();
  const int total_shift = shift + edges[shifted_[at]].shift;
  // Cycles through nodes from `start` on only, so each is found once, from its smallest node.
  for (std::size_t next = start; next < m; ++next) {
    const double w = reduced_[at * m + next];
    if (w == kNone) continue;
    if (next == start) {
      best_ = std::max(best_, (weight + w) / total_shift);
    } else if (!on_stack_[next]) {
      on_stack_[next] = true;
      walk(edges, start, next, weight + w, total_shift);
      on_stack_[next] = false;
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
