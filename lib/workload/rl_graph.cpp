#include "workload/rl_graph.h"

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
    if (!edge.previous_iteration) ++pending[edge.to];
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
        if (!edge.previous_iteration && edge.from == static_cast<int>(i)) --pending[edge.to];
      }
      progressed = true;
      break;
    }
    assert(progressed && "algorithm catalogues are checked for cycles");
    if (!progressed) break;
  }
  return order;
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
      edge.previous_iteration = input.previous_iteration;
      const double tokens = payload.tokens == TokenSpan::kResponse           ? response_tokens
                            : payload.tokens == TokenSpan::kPromptAndResponse ? all_tokens
                                                                             : 0.0;
      edge.bytes = payload.bytes_per_token * tokens + payload.bytes_per_sample * samples;
      if (payload.bytes_per_parameter > 0) {
        const std::string& model = graph.tasks[from].model;
        assert(!model.empty());
        edge.bytes += payload.bytes_per_parameter *
                      static_cast<double>(models.get(model, "").parameter_count());
      }
      graph.edges.push_back(std::move(edge));
    }
  }
  return graph;
}

}  // namespace hetrl::workload
