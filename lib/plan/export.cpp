#include "plan/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"

namespace hetrl::plan {

using workload::Role;
using workload::TaskKind;

std::string_view runtime_name(Runtime runtime) { return runtime == Runtime::kVerl ? "verl" : "openrlhf"; }

std::optional<Runtime> runtime_from_name(std::string_view name) {
  if (name == "verl") return Runtime::kVerl;
  if (name == "openrlhf") return Runtime::kOpenRlhf;
  return std::nullopt;
}

const RuntimeDocs& runtime_docs(Runtime runtime) {
  static const RuntimeDocs verl{"verl", "0.8.0.dev",
                                "the reference configurations ppo_trainer.yaml and ppo_megatron_trainer.yaml "
                                "(docs/examples/config.rst) and the one-step-off-policy recipe "
                                "(docs/advance/one_step_off.md)"};
  static const RuntimeDocs openrlhf{"OpenRLHF", "0.11.0",
                                    "the flags of openrlhf.cli.train_ppo_ray (its --help and README)"};
  return runtime == Runtime::kVerl ? verl : openrlhf;
}

std::optional<std::string> verl_trainer_refusal(int tp, int pp, const cost::TrainOptions& train) {
  if (train.optimizer_offload) {
    return std::string("the optimizer steps on the CPU (ZeRO-Offload), which neither of verl's trainers does");
  }
  if (tp == 1 && pp == 1 && train.zero_stage == 3) {
    if (train.recompute == cost::Recompute::kSelective) {
      return std::string("its FSDP workers recompute whole layers (gradient checkpointing), not selectively");
    }
    return std::nullopt;
  }
  if (train.zero_stage == 3) {
    return fmt::format("ZeRO-3 with TP{} PP{}: verl's FSDP workers have no tensor or pipeline parallelism and its "
                       "Megatron workers shard the optimizer state only",
                       tp, pp);
  }
  if (train.zero_stage == 2) {
    return std::string("ZeRO-2: verl's FSDP workers shard everything (ZeRO-3), its Megatron workers the optimizer "
                       "state only (ZeRO-1)");
  }
  return std::nullopt;
}

namespace {

// Above this gap between a replica's share and an even split the runtime's split differs.
constexpr double kEvenShare = 1e-6;

// What the exporters read of the task graph: the GPU task of each role and kind.
struct Tasks {
  int generate = -1;
  int actor_train = -1, actor_logprob = -1;
  int ref = -1;
  int critic_train = -1, critic_value = -1;
  int reward = -1;  // the reward model's forward pass; -1 for a rule
};

Tasks find_tasks(const workload::TaskGraph& graph) {
  Tasks t;
  for (int i : graph.gpu_tasks()) {
    const workload::Task& task = graph.tasks[i];
    const Role role = task.role.value_or(Role::kActor);
    const bool train = task.kind == TaskKind::kTrain;
    switch (role) {
      case Role::kActor:
        if (task.kind == TaskKind::kGenerate) {
          t.generate = i;
        } else {
          (train ? t.actor_train : t.actor_logprob) = i;
        }
        break;
      case Role::kCritic: (train ? t.critic_train : t.critic_value) = i; break;
      case Role::kReference: t.ref = i; break;
      case Role::kReward: t.reward = i; break;
    }
  }
  return t;
}

// One task's layout when every replica has the same one.
struct Layout {
  int tp = 1;
  int pp = 1;
  int replicas = 0;
  cost::TrainOptions train;
  int gpus() const { return tp * pp * replicas; }
};

// A resource pool: a group's GPUs as the runtime asks for them.
struct Pool {
  int nnodes = 0;
  int gpus_per_node = 0;
  std::set<std::string> gpu_types;
  std::vector<std::string> nodes;
};

// Reads a plan against what a runtime can run, collecting each reason it cannot.
class Reader {
 public:
  Reader(const ExportInputs& in, Runtime runtime)
      : in_(in), runtime_(runtime), name_(runtime_docs(runtime).runtime), tasks_(find_tasks(in.graph)) {}

  const Tasks& tasks() const { return tasks_; }
  const ExportInputs& in() const { return in_; }
  void refuse(std::string why) {
    if (std::find(refusals_.begin(), refusals_.end(), why) == refusals_.end()) refusals_.push_back(std::move(why));
  }
  // Throws core::JobError with every reason found, if any.
  void finish() const {
    if (refusals_.empty()) return;
    const RuntimeDocs& docs = runtime_docs(runtime_);
    throw core::JobError(fmt::format("{} {} cannot run this plan as planned: {}", docs.runtime, docs.version,
                                     fmt::join(refusals_, "; ")));
  }

  const std::string& name(int task) const { return in_.graph.tasks[task].name; }
  int group(int task) const { return task < 0 ? -1 : in_.plan.group_of(task); }

  // The task's layout, read once: replicas of different layouts, uneven shares, pipeline
  // stages of different lengths or GPU types and a task that leaves some of its group's GPUs to
  // others are refused.
  const Layout& layout(int task) {
    const auto [at, fresh] = layouts_.try_emplace(task);
    if (fresh) at->second = read_layout(task);
    return at->second;
  }

  // The group's GPUs as a pool of nodes with the same number of GPUs each.
  Pool pool(int g, std::string_view what) {
    Pool out;
    std::map<int, int> per_node;
    for (const Gpu& gpu : in_.plan.groups[g].gpus) ++per_node[gpu.node];
    std::set<int> counts;
    for (const auto& [node, count] : per_node) {
      counts.insert(count);
      const hw::Node& n = in_.cluster.nodes[node];
      out.nodes.push_back(n.name);
      out.gpu_types.insert(in_.cluster.gpu_types[n.gpu_type].name);
    }
    out.nnodes = static_cast<int>(per_node.size());
    out.gpus_per_node = counts.empty() ? 0 : *counts.begin();
    if (counts.size() > 1) {
      refuse(fmt::format("{} uses {} GPUs on some nodes and {} on others: a pool takes the same number on every node",
                         what, *counts.begin(), *counts.rbegin()));
    }
    return out;
  }

  // Pools on different GPU types cannot be told where to go: a runtime asks Ray for GPU counts.
  void one_type_across(const std::vector<const Pool*>& pools) {
    std::set<std::string> types;
    for (const Pool* p : pools) types.insert(p->gpu_types.begin(), p->gpu_types.end());
    if (pools.size() > 1 && types.size() > 1) {
      refuse(fmt::format("its pools are on different GPU types ({}): {} asks Ray for GPU counts, not for GPU types",
                         fmt::join(types, ", "), name_));
    }
  }

  void bf16_only() {
    if (in_.workload.precision == workload::Precision::kFp16) {
      refuse(fmt::format("the workload computes in FP16: the export is for {}'s BF16 training", name_));
      return;
    }
    for (const Group& g : in_.plan.groups) {
      for (const Gpu& gpu : g.gpus) {
        const hw::GpuSpec& spec = in_.cluster.gpu_types[in_.cluster.nodes[gpu.node].gpu_type];
        if (spec.bf16_flops <= 0) {
          refuse(fmt::format("{} has no BF16, which {}'s training uses", spec.name, name_));
          return;
        }
      }
    }
  }

  // The model's path: its published repository, or its name with a note to set it.
  std::string model_path(const std::string& model, std::vector<std::string>& notes) const {
    const workload::ModelArch* arch = in_.models.find(model);
    if (arch != nullptr && !arch->repository.empty()) return arch->repository;
    notes.push_back(fmt::format("{} has no published repository in the model catalogue: set its path", model));
    return model;
  }

  // The rollout's share of each GPU's memory: its weights and the KV cache the cost model
  // gave it (what its group's other roles leave), of the GPU's whole memory, rounded down.
  double rollout_memory_share() const {
    const int t = tasks_.generate;
    const TaskPlacement* placement = in_.plan.placement(t);
    const TaskPrediction& predicted = in_.prediction.tasks[t];
    double share = 1;
    std::vector<cost::Stage> stages;
    for (std::size_t r = 0; r < placement->replicas.size() && r < predicted.kv_budget.size(); ++r) {
      const Replica& replica = placement->replicas[r];
      stages.clear();
      for (const Stage& s : replica.stages) stages.push_back({s.node, static_cast<int>(s.devices.size()), s.layers});
      for (std::size_t s = 0; s < stages.size(); ++s) {
        const cost::StageMemory memory = in_.model.stage_memory(
            t, stages, static_cast<int>(s), static_cast<int>(placement->replicas.size()), placement->train);
        const hw::Node& node = in_.cluster.nodes[stages[s].node];
        const double total = in_.cluster.gpu_types[node.gpu_type].memory;
        share = std::min(share, (memory.weights + predicted.kv_budget[r][s]) / total);
      }
    }
    return std::floor(share * 100) / 100;
  }

  int micro_batch_tokens() const {
    return in_.workload.micro_batch_tokens > 0 ? in_.workload.micro_batch_tokens
                                               : static_cast<int>(in_.model.params().micro_batch_tokens);
  }

 private:
  Layout read_layout(int task) {
    Layout out;
    const TaskPlacement* placement = in_.plan.placement(task);
    if (placement == nullptr || placement->replicas.empty()) return out;
    const Replica& first = placement->replicas.front();
    out.tp = static_cast<int>(first.stages.front().devices.size());
    out.pp = static_cast<int>(first.stages.size());
    out.replicas = static_cast<int>(placement->replicas.size());
    out.train = placement->train;
    std::set<std::pair<int, int>> shapes;
    double low = 1, high = 0;
    // Stages hold equal runs of layers (Megatron); an inference engine's take the remainder one
    // layer at a time.
    const int spread = in_.graph.tasks[task].kind == TaskKind::kGenerate ? 1 : 0;
    for (const Replica& r : placement->replicas) {
      int fewest = r.stages.front().layers, most = fewest;
      for (const Stage& s : r.stages) {
        shapes.emplace(static_cast<int>(s.devices.size()), static_cast<int>(r.stages.size()));
        fewest = std::min(fewest, s.layers);
        most = std::max(most, s.layers);
      }
      std::set<std::string> types;
      for (const Stage& s : r.stages) types.insert(in_.cluster.gpu_types[in_.cluster.nodes[s.node].gpu_type].name);
      if (types.size() > 1) {
        refuse(fmt::format("{}'s pipeline stages are on different GPU types ({}): {} places pipeline ranks in rank "
                           "order, not by GPU type",
                           name(task), fmt::join(types, ", "), name_));
      }
      if (most - fewest > spread) {
        refuse(fmt::format("{}'s pipeline stages hold {} to {} layers: {} splits them evenly", name(task), fewest, most,
                           name_));
      }
      low = std::min(low, r.share);
      high = std::max(high, r.share);
    }
    if (shapes.size() > 1) {
      std::vector<std::string> texts;
      for (const auto& [tp, pp] : shapes) texts.push_back(pp > 1 ? fmt::format("TP{} PP{}", tp, pp) : fmt::format("TP{}", tp));
      refuse(fmt::format("{}'s replicas have different layouts ({}): {} gives a role one layout", name(task),
                         fmt::join(texts, ", "), name_));
    }
    if (high - low > kEvenShare) {
      refuse(fmt::format("{}'s replicas carry uneven batch shares ({:.3f} to {:.3f}): {} splits a batch evenly over "
                         "its data-parallel ranks",
                         name(task), low, high, name_));
    }
    const int group_gpus = static_cast<int>(in_.plan.groups[group(task)].gpus.size());
    if (out.gpus() != group_gpus) {
      refuse(fmt::format("{} runs on {} of its group's {} GPUs: {} runs a role on every GPU of its pool", name(task),
                         out.gpus(), group_gpus, name_));
    }
    return out;
  }


  const ExportInputs& in_;
  Runtime runtime_;
  std::string_view name_;  // as people write it, for the reasons: "verl", "OpenRLHF"
  Tasks tasks_;
  std::map<int, Layout> layouts_;  // by task, as read
  std::vector<std::string> refusals_;
};

// The Ray cluster the runtime needs: the pools' nodes, each once.
std::string ray_cluster_note(const std::vector<const Pool*>& pools) {
  std::vector<std::string> nodes;
  for (const Pool* p : pools) nodes.insert(nodes.end(), p->nodes.begin(), p->nodes.end());
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return fmt::format("run it on a Ray cluster of the plan's {} nodes: {}", nodes.size(), fmt::join(nodes, ", "));
}

std::string flag(bool on) { return on ? "True" : "False"; }

class Settings {
 public:
  void set(std::string key, std::string value) { out_.push_back({std::move(key), std::move(value)}); }
  void set(std::string key, const char* value) { set(std::move(key), std::string(value)); }
  void set(std::string key, int value) { set(std::move(key), std::to_string(value)); }
  void set(std::string key, bool value) = delete;
  void set_flag(std::string key, bool value) { set(std::move(key), flag(value)); }
  void set_switch(std::string key) { out_.push_back({std::move(key), ""}); }
  std::vector<ExportSetting> take() { return std::move(out_); }

 private:
  std::vector<ExportSetting> out_;
};

// ---- verl ----

// verl's keys for one role's trainer or forward worker, under `prefix` (actor_rollout_ref.actor,
// critic, ...): its Megatron parallelism, its offload and recompute.
void verl_worker(Settings& s, const std::string& prefix, bool megatron, const Layout& layout, bool trains,
                 bool offload, const std::string& fsdp_config, const std::string& checkpointing_key) {
  if (megatron) {
    s.set(prefix + ".megatron.tensor_model_parallel_size", layout.tp);
    s.set(prefix + ".megatron.pipeline_model_parallel_size", layout.pp);
    s.set_flag(prefix + ".megatron.param_offload", offload);
    if (!trains) return;
    s.set_flag(prefix + ".megatron.use_distributed_optimizer", layout.train.zero_stage == 1);
    s.set_flag(prefix + ".megatron.grad_offload", offload);
    s.set_flag(prefix + ".megatron.optimizer_offload", offload);
    const cost::Recompute r = layout.train.recompute;
    if (r != cost::Recompute::kNone) {
      const std::string c = prefix + ".megatron.override_transformer_config.";
      s.set(c + "recompute_granularity", r == cost::Recompute::kFull ? "full" : "selective");
      if (r == cost::Recompute::kFull) {
        s.set(c + "recompute_method", "uniform");
        s.set(c + "recompute_num_layers", 1);
      }
    }
    return;
  }
  s.set_flag(fsdp_config + ".param_offload", offload);
  if (!trains) return;
  s.set_flag(fsdp_config + ".optimizer_offload", offload);
  s.set_flag(checkpointing_key, layout.train.recompute == cost::Recompute::kFull);
}

Export export_verl(Reader& reader) {
  const ExportInputs& in = reader.in();
  const Tasks& t = reader.tasks();
  const workload::Workload& w = in.workload;
  Export out;
  reader.bf16_only();
  if (t.generate < 0 || t.actor_train < 0) {
    reader.refuse("verl's PPO trainer generates and trains an actor; this workload does not");
    reader.finish();
  }
  const int trainer_group = reader.group(t.actor_train);
  const int rollout_group = reader.group(t.generate);
  // Every task but generation (and a reward model with a pool of its own) on the trainer's pool.
  std::vector<int> trainer_tasks = {t.actor_train, t.actor_logprob, t.ref, t.critic_train, t.critic_value};
  std::erase(trainer_tasks, -1);
  for (int task : trainer_tasks) {
    if (reader.group(task) != trainer_group) {
      reader.refuse(fmt::format("{} runs apart from actor_train: verl runs the actor, reference and critic on one "
                                "resource pool",
                                reader.name(task)));
    }
  }
  const bool reward_pool = t.reward >= 0 && reader.group(t.reward) != trainer_group;
  if (reward_pool && reader.group(t.reward) == rollout_group && rollout_group != trainer_group) {
    reader.refuse("the reward model shares generation's GPUs: verl gives it the trainer's pool or one of its own");
  }
  const bool split = rollout_group != trainer_group;
  // Generation on the trainer's GPUs waits for training whatever the workload allows: the plan
  // runs on policy, verl's synchronous trainer.
  const bool async = w.mode == workload::Mode::kAsync && split;
  if (split && !async) {
    reader.refuse("generation runs apart from training synchronously: verl runs the rollout on a pool of its own only "
                  "one step off policy (its one_step_off_policy recipe)");
  }
  if (async && w.max_staleness != 1) {
    reader.refuse(fmt::format("the workload lets generation run {} iterations ahead: verl's one-step-off-policy "
                              "trainer runs one",
                              w.max_staleness));
  }
  if (w.role(Role::kReference).kind == workload::RoleModel::Kind::kModel &&
      w.role(Role::kReference).model != w.role(Role::kActor).model) {
    reader.refuse(fmt::format("the reference model ({}) is not the actor's ({}): verl's reference is the actor's "
                              "initial weights",
                              w.role(Role::kReference).model, w.role(Role::kActor).model));
  }
  if (w.prompts_per_iteration % w.mini_batches != 0) {
    reader.refuse(fmt::format("{} prompts do not split into {} mini-batches: verl's ppo_mini_batch_size counts "
                              "whole prompts",
                              w.prompts_per_iteration, w.mini_batches));
  }

  const Layout& rollout = reader.layout(t.generate);
  const Layout& actor = reader.layout(t.actor_train);
  // Training and scoring: one strategy for every worker, Megatron where one trains below
  // ZeRO-3 or a forward pass runs TP or PP, FSDP otherwise.
  std::vector<int> workers = {t.actor_train, t.actor_logprob, t.ref, t.critic_train, t.critic_value, t.reward};
  std::erase(workers, -1);
  const auto trains = [&](int task) { return in.graph.tasks[task].kind == TaskKind::kTrain; };
  for (int task : workers) reader.layout(task);  // the layouts' reasons first, then the strategy's
  bool megatron = false;
  for (int task : workers) {
    const Layout& l = reader.layout(task);
    if (!trains(task)) {
      megatron = megatron || l.tp > 1 || l.pp > 1;
      continue;
    }
    if (const auto why = verl_trainer_refusal(l.tp, l.pp, l.train)) {
      reader.refuse(fmt::format("{} trains with {}", reader.name(task), *why));
    }
    megatron = megatron || l.train.zero_stage < 3;
  }
  for (int task : workers) {
    const Layout& l = reader.layout(task);
    if (megatron && trains(task) && l.train.zero_stage == 3 && l.tp == 1 && l.pp == 1) {
      reader.refuse(fmt::format("{} trains with ZeRO-3 (verl's FSDP workers) while another worker needs its Megatron "
                                "workers: verl runs one strategy",
                                reader.name(task)));
    }
    if (!megatron && !trains(task) && (l.tp > 1 || l.pp > 1)) {
      reader.refuse(fmt::format("{} runs TP{} PP{} while the trainers are verl's FSDP workers, which have neither",
                                reader.name(task), l.tp, l.pp));
    }
  }
  // What shares a worker in verl shares a layout: the actor's scoring pass, and the critic's.
  const auto same_layout = [&](int a, int b, std::string_view why) {
    if (a < 0 || b < 0) return;
    const Layout &la = reader.layout(a), &lb = reader.layout(b);
    if (la.tp != lb.tp || la.pp != lb.pp) {
      reader.refuse(fmt::format("{} runs TP{} PP{} and {} TP{} PP{}: {}", reader.name(a), la.tp, la.pp, reader.name(b),
                                lb.tp, lb.pp, why));
    }
  };
  same_layout(t.actor_train, t.actor_logprob, "verl scores with the actor's own workers");
  same_layout(t.critic_train, t.critic_value, "verl computes values with the critic's own workers");

  Pool trainer_pool = reader.pool(trainer_group, "the trainer's pool");
  std::optional<Pool> rollout_pool, reward_resource;
  std::vector<const Pool*> pools = {&trainer_pool};
  if (split) {
    rollout_pool = reader.pool(rollout_group, "the rollout's pool");
    pools.push_back(&*rollout_pool);
  }
  if (reward_pool) {
    reward_resource = reader.pool(reader.group(t.reward), "the reward model's pool");
    pools.push_back(&*reward_resource);
  }
  reader.one_type_across(pools);
  reader.finish();

  // The settings.
  Settings s;
  const bool offload = in.plan.groups[trainer_group].offload;
  const std::string entry = async ? "python3 -m verl.experimental.one_step_off_policy.async_main_ppo --config-path=config"
                                  : "python3 -m verl.trainer.main_ppo";
  const std::string config = std::string(async ? "one_step_off_" : "") + (megatron ? "ppo_megatron_trainer" : "ppo_trainer");
  out.command = fmt::format("{} --config-name={}", entry, config);
  const bool ppo = t.critic_train >= 0;
  s.set("algorithm.adv_estimator", ppo ? "gae" : "grpo");
  s.set("data.train_batch_size", w.prompts_per_iteration);
  s.set("data.max_prompt_length", w.prompt_length_tokens);
  s.set("data.max_response_length", w.response.max());
  s.set("actor_rollout_ref.model.path", reader.model_path(w.role(Role::kActor).model, out.notes));
  s.set_flag("actor_rollout_ref.hybrid_engine", !split);
  s.set("actor_rollout_ref.actor.strategy", megatron ? "megatron" : "fsdp");
  s.set("actor_rollout_ref.actor.ppo_mini_batch_size", w.prompts_per_iteration / std::max(1, w.mini_batches));
  s.set("actor_rollout_ref.actor.ppo_epochs", w.epochs);
  const int tokens = reader.micro_batch_tokens();
  s.set_flag("actor_rollout_ref.actor.use_dynamic_bsz", true);
  s.set("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", tokens);
  verl_worker(s, "actor_rollout_ref.actor", megatron, actor, true, offload, "actor_rollout_ref.actor.fsdp_config",
              "actor_rollout_ref.model.enable_gradient_checkpointing");
  s.set("actor_rollout_ref.rollout.name", "vllm");
  s.set("actor_rollout_ref.rollout.n", w.samples_per_prompt);
  s.set("actor_rollout_ref.rollout.tensor_model_parallel_size", rollout.tp);
  if (rollout.pp > 1) s.set("actor_rollout_ref.rollout.pipeline_model_parallel_size", rollout.pp);
  s.set("actor_rollout_ref.rollout.gpu_memory_utilization", fmt::format("{:.2f}", reader.rollout_memory_share()));
  s.set_flag("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", true);
  s.set("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", tokens);
  if (t.ref >= 0) {
    s.set("actor_rollout_ref.ref.strategy", megatron ? "megatron" : "fsdp");
    s.set_flag("actor_rollout_ref.ref.log_prob_use_dynamic_bsz", true);
    s.set("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", tokens);
    verl_worker(s, "actor_rollout_ref.ref", megatron, reader.layout(t.ref), false, offload,
                "actor_rollout_ref.ref.fsdp_config", "");
  }
  if (ppo) {
    const Layout& critic = reader.layout(t.critic_train);
    s.set("critic.strategy", megatron ? "megatron" : "fsdp");
    s.set("critic.model.path", reader.model_path(w.role(Role::kCritic).model, out.notes));
    s.set("critic.ppo_epochs", w.epochs);
    s.set_flag("critic.use_dynamic_bsz", true);
    s.set("critic.ppo_max_token_len_per_gpu", tokens);
    s.set("critic.forward_max_token_len_per_gpu", tokens);
    verl_worker(s, "critic", megatron, critic, true, offload, "critic.model.fsdp_config",
                "critic.model.enable_gradient_checkpointing");
  }
  s.set_flag("reward_model.enable", t.reward >= 0);
  if (t.reward >= 0) {
    s.set("reward_model.strategy", megatron ? "megatron" : "fsdp");
    s.set("reward_model.model.path", reader.model_path(w.role(Role::kReward).model, out.notes));
    s.set_flag("reward_model.use_dynamic_bsz", true);
    s.set("reward_model.forward_max_token_len_per_gpu", tokens);
    verl_worker(s, "reward_model", megatron, reader.layout(t.reward), false,
                in.plan.groups[reader.group(t.reward)].offload, "reward_model.model.fsdp_config", "");
    if (reward_pool) {
      s.set_flag("reward_model.enable_resource_pool", true);
      s.set("reward_model.nnodes", reward_resource->nnodes);
      s.set("reward_model.n_gpus_per_node", reward_resource->gpus_per_node);
    }
  } else {
    out.notes.push_back("the reward is a rule: give it as custom_reward_function.path and .name");
  }
  s.set("trainer.nnodes", trainer_pool.nnodes);
  s.set("trainer.n_gpus_per_node", trainer_pool.gpus_per_node);
  if (split) {
    s.set("rollout.nnodes", rollout_pool->nnodes);
    s.set("rollout.n_gpus_per_node", rollout_pool->gpus_per_node);
  }
  out.settings = s.take();
  out.notes.push_back("give the data as data.train_files and data.val_files");
  out.notes.push_back(ray_cluster_note(pools));
  return out;
}

// ---- OpenRLHF ----

Export export_openrlhf(Reader& reader) {
  const ExportInputs& in = reader.in();
  const Tasks& t = reader.tasks();
  const workload::Workload& w = in.workload;
  Export out;
  reader.bf16_only();
  if (t.generate < 0 || t.actor_train < 0) {
    reader.refuse("OpenRLHF's PPO trainer generates and trains an actor; this workload does not");
    reader.finish();
  }
  const int actor_group = reader.group(t.actor_train);
  // Which groups the plan has: all in one (colocate_all), or OpenRLHF's pools: vLLM engines,
  // actor (with the reference when colocate_actor_ref), critic (with the reward model when
  // colocate_critic_reward), reference, reward model.
  std::vector<int> all = {t.generate, t.actor_train, t.actor_logprob, t.ref, t.critic_train, t.critic_value, t.reward};
  std::erase(all, -1);
  const bool colocate_all =
      std::all_of(all.begin(), all.end(), [&](int task) { return reader.group(task) == actor_group; });
  // Generation on the actor's GPUs waits for training whatever the workload allows: on policy.
  const bool async = w.mode == workload::Mode::kAsync && !colocate_all;
  if (reader.group(t.actor_logprob) != actor_group) {
    reader.refuse("actor_logprob runs apart from actor_train: OpenRLHF scores with the actor's own workers");
  }
  if (t.critic_value >= 0 && reader.group(t.critic_value) != reader.group(t.critic_train)) {
    reader.refuse("critic_value runs apart from critic_train: OpenRLHF computes values with the critic's own workers");
  }
  const bool colocate_actor_ref = !colocate_all && t.ref >= 0 && reader.group(t.ref) == actor_group;
  const bool colocate_critic_reward = !colocate_all && t.reward >= 0 && t.critic_train >= 0 &&
                                      reader.group(t.reward) == reader.group(t.critic_train);
  if (!colocate_all) {
    // Which group holds which pools: only the pairs OpenRLHF colocates may share one.
    std::map<int, std::vector<std::string>> pools_in;
    pools_in[reader.group(t.generate)].push_back("vLLM");
    pools_in[actor_group].push_back("actor");
    if (t.ref >= 0 && !colocate_actor_ref) pools_in[reader.group(t.ref)].push_back("reference");
    if (t.critic_train >= 0) pools_in[reader.group(t.critic_train)].push_back("critic");
    if (t.reward >= 0 && !colocate_critic_reward) pools_in[reader.group(t.reward)].push_back("reward");
    for (const auto& [group, names] : pools_in) {
      if (names.size() > 1) {
        reader.refuse(fmt::format("{} share GPUs: OpenRLHF colocates all its models, the actor with the reference, or "
                                  "the critic with the reward model",
                                  fmt::join(names, " and ")));
      }
    }
  }
  if (w.role(Role::kReference).kind == workload::RoleModel::Kind::kModel &&
      w.role(Role::kReference).model != w.role(Role::kActor).model) {
    reader.refuse(fmt::format("the reference model ({}) is not the actor's ({}): OpenRLHF's reference is the actor's "
                              "initial weights",
                              w.role(Role::kReference).model, w.role(Role::kActor).model));
  }
  if (w.samples_per_iteration() % w.mini_batches != 0) {
    reader.refuse(fmt::format("{} samples do not split into {} mini-batches", w.samples_per_iteration(), w.mini_batches));
  }
  const Layout& rollout = reader.layout(t.generate);
  if (rollout.pp > 1) reader.refuse("generation runs pipeline stages: OpenRLHF's vLLM engines take a TP size only");
  // DeepSpeed: one TP size and one ZeRO stage for every model, no pipeline stages.
  std::set<int> tps, zeros;
  std::set<cost::Recompute> recomputes;
  std::set<bool> adam_offloads;
  for (int task : {t.actor_train, t.actor_logprob, t.ref, t.critic_train, t.critic_value, t.reward}) {
    if (task < 0) continue;
    const Layout& l = reader.layout(task);
    tps.insert(l.tp);
    if (l.pp > 1) {
      reader.refuse(fmt::format("{} runs {} pipeline stages: OpenRLHF's DeepSpeed workers have none", reader.name(task),
                                l.pp));
    }
    if (in.graph.tasks[task].kind == TaskKind::kTrain) {
      zeros.insert(l.train.zero_stage);
      recomputes.insert(l.train.recompute);
      adam_offloads.insert(l.train.optimizer_offload);
    }
  }
  if (tps.size() > 1) {
    reader.refuse(fmt::format("its models run TP sizes {}: OpenRLHF gives DeepSpeed one (--ds.tensor_parallel_size)",
                              fmt::join(tps, " and ")));
  }
  if (zeros.size() > 1) reader.refuse("actor and critic train with different ZeRO stages: OpenRLHF gives DeepSpeed one");
  if (recomputes.count(cost::Recompute::kSelective) > 0) {
    reader.refuse("a trainer recomputes selectively: OpenRLHF checkpoints whole layers");
  }
  if (recomputes.size() > 1) reader.refuse("actor and critic differ in recompute: OpenRLHF sets it for both");
  if (adam_offloads.size() > 1) reader.refuse("actor and critic differ in optimizer offload: OpenRLHF sets it for both");
  const int tp = tps.empty() ? 1 : *tps.begin();
  const int zero = zeros.empty() ? 3 : *zeros.begin();
  if (tp > 1 && zero == 3) {
    reader.refuse(fmt::format("TP{} with ZeRO-3: DeepSpeed's tensor-parallel training (AutoTP) runs with ZeRO 0 to 2", tp));
  }
  std::map<int, Pool> pools;  // by group
  for (int task : all) {
    const int g = reader.group(task);
    if (!pools.contains(g)) pools.emplace(g, reader.pool(g, fmt::format("group {}", g)));
  }
  std::vector<const Pool*> pool_list;
  for (const auto& [g, p] : pools) pool_list.push_back(&p);
  reader.one_type_across(pool_list);
  reader.finish();

  Settings s;
  out.command = "python3 -m openrlhf.cli.train_ppo_ray";
  const auto resources = [&](const std::string& role, int task) {
    const Pool& p = pools.at(reader.group(task));
    s.set("--" + role + ".num_nodes", p.nnodes);
    s.set("--" + role + ".num_gpus_per_node", p.gpus_per_node);
  };
  resources("actor", t.actor_train);
  if (t.ref >= 0) resources("ref", t.ref);
  if (t.critic_train >= 0) resources("critic", t.critic_train);
  if (t.reward >= 0) resources("reward", t.reward);
  if (colocate_all) s.set_switch("--train.colocate_all");
  if (colocate_actor_ref) s.set_switch("--train.colocate_actor_ref");
  if (colocate_critic_reward) s.set_switch("--train.colocate_critic_reward");
  s.set("--vllm.num_engines", rollout.replicas);
  s.set("--vllm.tensor_parallel_size", rollout.tp);
  s.set("--vllm.gpu_memory_utilization", fmt::format("{:.2f}", reader.rollout_memory_share()));
  const bool offload = in.plan.groups[actor_group].offload;
  if (colocate_all && offload) {
    s.set_switch("--vllm.enable_sleep");
    s.set_switch("--ds.enable_sleep");
  }
  if (async) {
    s.set_switch("--train.async_enable");
    s.set("--train.async_queue_size", w.max_staleness);
  }
  s.set("--ds.zero_stage", zero);
  if (tp > 1) s.set("--ds.tensor_parallel_size", tp);
  if (!adam_offloads.empty() && *adam_offloads.begin()) s.set_switch("--ds.adam_offload");
  if (!recomputes.empty() && *recomputes.begin() == cost::Recompute::kFull) {
    s.set_switch("--actor.gradient_checkpointing_enable");
  }
  s.set_switch("--ds.packing_samples");
  s.set_switch("--train.dynamic_batch_enable");
  s.set("--train.max_tokens_per_gpu", reader.micro_batch_tokens());
  s.set("--rollout.max_tokens_per_gpu", reader.micro_batch_tokens());
  s.set("--actor.model_name_or_path", reader.model_path(w.role(Role::kActor).model, out.notes));
  if (t.critic_train >= 0) s.set("--critic.model_name_or_path", reader.model_path(w.role(Role::kCritic).model, out.notes));
  if (t.reward >= 0) {
    s.set("--reward.model_name_or_path", reader.model_path(w.role(Role::kReward).model, out.notes));
  } else {
    out.notes.push_back("the reward is a rule: give it as --reward.remote_url or --train.agent_func_path");
  }
  s.set("--algo.advantage.estimator", t.critic_train >= 0 ? "gae" : "group_norm");
  s.set("--rollout.batch_size", w.prompts_per_iteration);
  s.set("--rollout.n_samples_per_prompt", w.samples_per_prompt);
  s.set("--train.batch_size", w.samples_per_iteration() / std::max(1, w.mini_batches));
  s.set("--train.max_epochs", w.epochs);
  s.set("--rollout.max_new_tokens", w.response.max());
  s.set("--data.max_len", w.prompt_length_tokens + w.response.max());
  out.settings = s.take();
  out.notes.push_back("give the prompts as --data.prompt_dataset, and submit it with ray job submit");
  out.notes.push_back(ray_cluster_note(pool_list));
  return out;
}

}  // namespace

Export export_plan(Runtime runtime, const ExportInputs& in) {
  Reader reader(in, runtime);
  Export out = runtime == Runtime::kVerl ? export_verl(reader) : export_openrlhf(reader);
  out.runtime = runtime;
  return out;
}

std::string format_export(const Export& exported, const ExportInputs& in, std::string_view workload_name) {
  const RuntimeDocs& docs = runtime_docs(exported.runtime);
  std::string out = "#!/usr/bin/env bash\n";
  out += fmt::format("# {} {}: plan by {} for {} on {}: {:.4g} samples/s predicted\n", docs.runtime, docs.version,
                     in.plan.planner.name.empty() ? "hand" : in.plan.planner.name, workload_name, in.cluster.name,
                     in.prediction.samples_per_second);
  out += fmt::format("# keys as documented in {}\n", docs.documents);
  for (const std::string& note : exported.notes) out += fmt::format("# {}\n", note);
  out += exported.command;
  for (const ExportSetting& s : exported.settings) {
    if (exported.runtime == Runtime::kVerl) {
      out += fmt::format(" \\\n  {}={}", s.key, s.value);
    } else {
      out += s.value.empty() ? fmt::format(" \\\n  {}", s.key) : fmt::format(" \\\n  {} {}", s.key, s.value);
    }
  }
  return out + "\n";
}

}  // namespace hetrl::plan
