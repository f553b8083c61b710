#include <doctest/doctest.h>

#include "approx.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "io/catalog_io.h"
#include "io/workload_io.h"
#include "workload/rl_graph.h"

using namespace hetrl;
using workload::Role;
using workload::TaskKind;

namespace {

const io::Catalogs& catalogs() { return io::builtin_catalogs(); }

workload::TaskGraph graph_for(const std::string& algorithm, const std::string& models,
                              int samples_per_prompt = 1) {
  const std::string text = R"({"schema": "hetrl.workload/v1", "algorithm": ")" + algorithm +
                           R"(", "models": )" + models +
                           R"(, "prompts_per_iteration": 100, "samples_per_prompt": )" +
                           std::to_string(samples_per_prompt) +
                           R"(, "prompt_length_tokens": 200,
      "response_length": {"distribution": "fixed", "tokens": 300}})";
  const workload::Workload w =
      io::parse_workload(text, "w.json", "", catalogs().algorithms, catalogs().models).workload;
  return workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
}

std::vector<std::string> names(const workload::TaskGraph& g) {
  std::vector<std::string> out;
  for (const workload::Task& t : g.tasks) out.push_back(t.name);
  return out;
}

const workload::Edge& edge(const workload::TaskGraph& g, const std::string& from,
                           const std::string& to) {
  const auto it = std::find_if(g.edges.begin(), g.edges.end(), [&](const workload::Edge& e) {
    return g.tasks[e.from].name == from && g.tasks[e.to].name == to;
  });
  REQUIRE(it != g.edges.end());
  return *it;
}

bool has_edge(const workload::TaskGraph& g, const std::string& from, const std::string& to) {
  return std::any_of(g.edges.begin(), g.edges.end(), [&](const workload::Edge& e) {
    return g.tasks[e.from].name == from && g.tasks[e.to].name == to;
  });
}

}  // namespace

TEST_CASE("PPO: generation, four scorers, GAE, two trainers and the weight sync") {
  const workload::TaskGraph g = graph_for(
      "ppo", R"({"actor": "Qwen2.5-7B", "critic": "Qwen2.5-1.5B", "reference": "Qwen2.5-7B",
                 "reward": "Qwen2.5-1.5B"})");
  CHECK(names(g) == std::vector<std::string>{"generate", "actor_logprob", "ref_logprob",
                                             "critic_value", "reward", "advantage", "actor_train",
                                             "critic_train", "weight_sync"});
  CHECK(g.tasks[g.find("critic_value")].model == "Qwen2.5-1.5B");
  CHECK(g.tasks[g.find("reward")].kind == TaskKind::kForward);
  CHECK(g.tasks[g.find("advantage")].op == "gae");
  // 100 samples x (200 + 300) tokens of int32 ids.
  CHECK(edge(g, "generate", "critic_value").bytes == hetrl::testing::approx(100 * 500 * 4));
  // fp32 per response token.
  CHECK(edge(g, "critic_value", "advantage").bytes == hetrl::testing::approx(100 * 300 * 4));
  CHECK(edge(g, "reward", "advantage").bytes == hetrl::testing::approx(100 * 4));
  // The actor's bf16 weights reach the next iteration's weight sync, which loads them before
  // its generation.
  const double weights = 2.0 * static_cast<double>(catalogs().models.get("Qwen2.5-7B", "").parameter_count());
  CHECK(edge(g, "actor_train", "weight_sync").bytes == hetrl::testing::approx(weights));
  CHECK(edge(g, "actor_train", "weight_sync").lag == 1);
  CHECK_FALSE(edge(g, "weight_sync", "generate").previous_iteration());
  const workload::WeightSync sync = g.weight_sync();
  CHECK(sync.trainer == g.find("actor_train"));
  CHECK(sync.reader == g.find("generate"));
  CHECK(g.edges[sync.edge].to == sync.task);
  CHECK(sync.bytes == hetrl::testing::approx(weights));
  // Every same-iteration input comes before its task.
  const std::vector<int> order = g.topological_order();
  REQUIRE(order.size() == g.tasks.size());
  for (const workload::Edge& e : g.edges) {
    if (e.previous_iteration()) continue;
    const auto at = [&](int t) { return std::find(order.begin(), order.end(), t) - order.begin(); };
    CHECK(at(e.from) < at(e.to));
  }
}

TEST_CASE("GRPO: no critic, group-normalised advantages, a rule reward on the CPU") {
  const workload::TaskGraph g =
      graph_for("grpo", R"({"actor": "Qwen2.5-7B", "reference": "Qwen2.5-7B", "reward": "rule"})", 8);
  CHECK(g.find("critic_value") < 0);
  CHECK(g.find("critic_train") < 0);
  const workload::Task& reward = g.tasks[g.find("reward")];
  CHECK(reward.kind == TaskKind::kCpu);
  CHECK(reward.op == "rule");
  CHECK(reward.model.empty());
  CHECK(g.tasks[g.find("advantage")].op == "group_norm");
  CHECK(has_edge(g, "ref_logprob", "actor_train"));  // the KL term is in GRPO's loss
  // 100 prompts x 8 samples.
  CHECK(edge(g, "generate", "actor_logprob").bytes == hetrl::testing::approx(800 * 500 * 4));
}

TEST_CASE("an absent optional reference drops its task and edges") {
  const workload::TaskGraph g =
      graph_for("grpo", R"({"actor": "Qwen2.5-7B", "reward": "rule"})", 4);
  CHECK(g.find("ref_logprob") < 0);
  CHECK_FALSE(has_edge(g, "ref_logprob", "actor_train"));
  CHECK(has_edge(g, "actor_logprob", "actor_train"));
}

TEST_CASE("task kinds and roles read back from their names") {
  for (TaskKind kind : {TaskKind::kGenerate, TaskKind::kForward, TaskKind::kTrain, TaskKind::kCpu,
                        TaskKind::kWeightSync}) {
    CHECK(workload::task_kind_from_name(workload::task_kind_name(kind)) == kind);
  }
  for (Role role : workload::kRoles) {
    CHECK(workload::role_from_name(workload::role_name(role)) == role);
  }
  CHECK_FALSE(workload::task_kind_from_name("decode").has_value());
  CHECK(workload::task_kind_name(TaskKind::kWeightSync) == "weight_sync");
}

TEST_CASE("algorithm catalogues with a cycle or a dangling input are rejected") {
  const std::string head = R"({"schema": "hetrl.algorithms/v1",
    "payloads": {"x": {"bytes_per_sample": 4, "source": "s"}},
    "algorithms": {"a": {"description": "d", "source": "s",
      "roles": {"actor": "required", "critic": "unused", "reference": "optional",
                "reward": "required_or_rule"}, "tasks": [)";
  const std::string cycle = head + R"(
      {"name": "t1", "role": "actor", "kind": "forward", "inputs": [{"from": "t2", "payload": "x"}]},
      {"name": "t2", "role": "actor", "kind": "forward", "inputs": [{"from": "t1", "payload": "x"}]}]}}})";
  CHECK_THROWS_WITH_AS(io::parse_algorithm_catalog(cycle, "alg.json"),
                       "alg.json: algorithm \"a\": the task graph has a cycle", core::InputError);
  const std::string dangling = head + R"(
      {"name": "t1", "role": "actor", "kind": "forward", "inputs": [{"from": "t0", "payload": "x"}]}]}}})";
  CHECK_THROWS_WITH_AS(io::parse_algorithm_catalog(dangling, "alg.json"),
                       "alg.json: algorithm \"a\": task t1 takes input from unknown task \"t0\" "
                       "(did you mean \"t1\"?)",
                       core::InputError);
}

TEST_CASE("the graph says which tasks run on GPUs, where CPU tasks run and how weights reach generation") {
  const workload::TaskGraph g = graph_for(
      "ppo", R"({"actor": "Qwen2.5-7B", "critic": "Qwen2.5-1.5B", "reference": "Qwen2.5-7B", "reward": "rule"})");
  std::vector<std::string> gpu;
  for (int t : g.gpu_tasks()) gpu.push_back(g.tasks[t].name);
  CHECK(gpu == std::vector<std::string>{"generate", "actor_logprob", "ref_logprob", "critic_value", "actor_train",
                                        "critic_train"});
  const std::vector<int> host = g.host_tasks();
  // The rule reward feeds the advantage, which feeds both trainers: both run where the first
  // trainer in topological order runs.
  CHECK(host[g.find("advantage")] == g.find("actor_train"));
  CHECK(host[g.find("reward")] == g.find("actor_train"));
  CHECK(host[g.find("generate")] == g.find("generate"));
  CHECK(host[g.find("weight_sync")] == -1);
  const workload::WeightSync sync = g.weight_sync();
  REQUIRE(sync.exists());
  CHECK(sync.task == g.find("weight_sync"));
  CHECK(sync.trainer == g.find("actor_train"));
  CHECK(sync.reader == g.find("generate"));
  CHECK(sync.bytes == edge(g, "actor_train", "weight_sync").bytes);
  CHECK(sync.lag == 1);
  // Data moves along same-iteration edges, not into the weight sync nor back to generation.
  CHECK(g.moves_data(edge(g, "generate", "critic_value")));
  CHECK_FALSE(g.moves_data(edge(g, "actor_train", "weight_sync")));
  CHECK_FALSE(g.moves_data(edge(g, "weight_sync", "generate")));
}

TEST_CASE("an async staleness bound k makes the weights reach generation 1 + k iterations later") {
  const std::string text = R"({"schema": "hetrl.workload/v1", "algorithm": "grpo",
      "models": {"actor": "Qwen2.5-1.5B", "reward": "rule"}, "prompts_per_iteration": 16,
      "samples_per_prompt": 4, "prompt_length_tokens": 200, "mode": "async", "max_staleness": 2,
      "response_length": {"distribution": "fixed", "tokens": 300}})";
  const workload::Workload w = io::parse_workload(text, "w.json", "", catalogs().algorithms, catalogs().models).workload;
  CHECK(w.staleness() == 2);
  const workload::TaskGraph g = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
  CHECK(edge(g, "actor_train", "weight_sync").lag == 3);
  CHECK(edge(g, "weight_sync", "generate").lag == 0);
  CHECK(g.weight_sync().lag == 3);
  CHECK(edge(g, "generate", "actor_train").lag == 0);
  // A forward pass scores with the weights its role was last trained to, whatever the bound.
  CHECK(edge(g, "actor_train", "actor_logprob").lag == 1);
}

TEST_CASE("SFT: one training task over the batch's sequences, nothing else") {
  const workload::TaskGraph g = graph_for("sft", R"({"actor": "Qwen2.5-1.5B"})");
  CHECK(names(g) == std::vector<std::string>{"train"});
  CHECK(g.tasks[0].kind == TaskKind::kTrain);
  CHECK(g.edges.empty());
  CHECK_FALSE(g.weight_sync().exists());
  CHECK(g.gpu_tasks() == std::vector<int>{0});
}

TEST_CASE("forward passes of trained roles read the weights their training wrote the iteration before") {
  const workload::TaskGraph g = graph_for(
      "ppo", R"({"actor": "Qwen2.5-7B", "critic": "Qwen2.5-1.5B", "reference": "Qwen2.5-7B", "reward": "rule"})");
  const workload::Edge& critic = edge(g, "critic_train", "critic_value");
  const workload::Edge& actor = edge(g, "actor_train", "actor_logprob");
  CHECK(critic.lag == 1);
  CHECK(actor.lag == 1);
  CHECK(g.reads_weights(critic));
  CHECK(g.reads_weights(actor));
  // The critic's bf16 weights end in a value head (hidden -> 1) where the language model's tied
  // embedding served as its head: one vector more than the language model's count.
  const workload::ModelArch& critic_model = catalogs().models.get("Qwen2.5-1.5B", "");
  REQUIRE(critic_model.tied_embeddings);
  CHECK(critic.bytes ==
        hetrl::testing::approx(2.0 * static_cast<double>(critic_model.parameter_count() + critic_model.hidden)));
  // The actor's weights reach generation through the weight sync; data edges read no weights.
  CHECK_FALSE(g.reads_weights(edge(g, "weight_sync", "generate")));
  CHECK_FALSE(g.reads_weights(edge(g, "actor_train", "weight_sync")));
  CHECK_FALSE(g.reads_weights(edge(g, "generate", "critic_value")));
  CHECK_FALSE(g.moves_data(critic));
  // The reference is never trained: nothing feeds it weights.
  CHECK_FALSE(has_edge(g, "actor_train", "ref_logprob"));
}
