#include "workload/rl_graph.h"

#include <algorithm>
#include <cassert>

namespace hetrl::workload {

int TaskGraph::find(std::string_view name) const {
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> TaskGraph::topological_order() const {
  const std::size_t n = tasks.size();
  std::vector<int> pending(n, 0);
  for (const Edge& edge : edges) {
    if (!edge.previous_iteration()) ++pending[edge.to];
  }
  std::vector<int> order;
  std::vector<bool> placed(n, false);
  while (order.size() < n) {
    bool progressed = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (placed[i] || pending[i] != 0) continue;
      placed[i] = true;
      order.push_back(static_cast<int>(i));
      for (const Edge& edge : edges) {
        if (!edge.previous_iteration() && edge.from == static_cast<int>(i)) --pending[edge.to];
      }
      progressed = true;
      break;
    }
    assert(progressed && "algorithm catalogues are checked for cycles");
    if (!progressed) break;
  }
  return order;
}

std::vector<int> TaskGraph::gpu_tasks() const {
  std::vector<int> out;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    if (tasks[t].on_gpu()) out.push_back(static_cast<int>(t));
  }
  return out;
}

std::vector<int> TaskGraph::host_tasks() const {
  const int n = static_cast<int>(tasks.size());
  const std::vector<int> order = topological_order();
  std::vector<int> host(n, -1);
  for (int t = 0; t < n; ++t) {
    if (tasks[t].on_gpu()) host[t] = t;
  }
  // Consumers come later in topological order: walk it backwards so theirs are known.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int t = *it;
    if (tasks[t].kind != TaskKind::kCpu) continue;
    int best = -1;
    for (const Edge& e : edges) {
      if (e.previous_iteration() || e.from != t || host[e.to] < 0) continue;
      const int position = static_cast<int>(std::find(order.begin(), order.end(), e.to) - order.begin());
      if (best < 0 || position < best) {
        best = position;
        host[t] = host[e.to];
      }
    }
  }
  return host;
}

WeightSync TaskGraph::weight_sync() const {
  WeightSync sync;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    if (tasks[t].kind == TaskKind::kWeightSync) sync.task = static_cast<int>(t);
  }
  if (sync.task < 0) return sync;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (e.to == sync.task) {
      sync.trainer = e.from;
      sync.edge = static_cast<int>(i);
      sync.bytes = e.bytes;
      sync.lag = e.lag;
    }
    if (e.from == sync.task) sync.reader = e.to;
  }
  return sync;
}

TaskGraph build_task_graph(const Workload& workload, const AlgorithmCatalog& algorithms,
                           const ModelCatalog& models) {
  const AlgorithmSpec& spec = algorithms.get(workload.algorithm, "/algorithm");
  TaskGraph graph;
  graph.algorithm = spec.name;
  for (const TaskTemplate& t : spec.tasks) {
    Task task;
    task.name = t.name;
    task.role = t.role;
    task.kind = t.kind;
    task.op = t.op;
    if (t.role) {
      const RoleModel& given = workload.role(*t.role);
      if (given.kind == RoleModel::Kind::kNone) continue;  // an absent optional role
      if (given.kind == RoleModel::Kind::kRule) {
        assert(t.kind_with_rule);
        task.kind = *t.kind_with_rule;
        task.op = "rule";
      } else {
        task.model = given.model;
      }
    }
    graph.tasks.push_back(std::move(task));
  }

  const double samples = workload.samples_per_iteration();
  const double response_tokens = samples * workload.response.mean();
  const double all_tokens = samples * workload.prompt_length_tokens + response_tokens;
  for (const TaskTemplate& t : spec.tasks) {
    const int to = graph.find(t.name);
    if (to < 0) continue;
    for (const TaskInput& input : t.inputs) {
      const int from = graph.find(input.from);
      if (from < 0) continue;  // its task was dropped
      const PayloadSpec& payload = algorithms.payload(input.payload);
      Edge edge;
      edge.from = from;
      edge.to = to;
      edge.payload = payload.name;
      if (input.previous_iteration) {
        edge.lag = 1 + (graph.tasks[to].kind == TaskKind::kWeightSync ? workload.staleness() : 0);
      }
      const double tokens = payload.tokens == TokenSpan::kResponse           ? response_tokens
                            : payload.tokens == TokenSpan::kPromptAndResponse ? all_tokens
                                                                             : 0.0;
      edge.bytes = payload.bytes_per_token * tokens + payload.bytes_per_sample * samples;
      if (payload.bytes_per_parameter > 0) {
        const Task& source = graph.tasks[from];
        assert(!source.model.empty() && source.role);
        edge.bytes += payload.bytes_per_parameter *
                      static_cast<double>(models.get(source.model, "").parameter_count(head_of(*source.role)));
      }
      graph.edges.push_back(std::move(edge));
    }
  }
  return graph;
}

}  // namespace hetrl::workload
