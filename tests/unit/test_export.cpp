// hetrl-plan export: plans as verl's overrides and OpenRLHF's flags, and the plans each runtime
// cannot run refused with the reason.

#include <doctest/doctest.h>

#include <algorithm>

#include "core/error.h"
#include "fixtures.h"
#include "plan/export.h"
#include "planner/baselines.h"
#include "planner/layout.h"

namespace hetrl {
namespace {

using testing::Fixture;

// The value of a setting, or "absent".
std::string value(const plan::Export& e, const std::string& key) {
  for (const plan::ExportSetting& s : e.settings) {
    if (s.key == key) return s.value;
  }
  return "absent";
}

struct Exporter {
  Fixture& f;
  plan::Evaluator evaluator{f.model};
  plan::Export run(plan::Runtime runtime, const plan::Plan& p) {
    const plan::Prediction& prediction = evaluator.evaluate(p, true);
    REQUIRE(prediction.feasible);
    return plan::export_plan(runtime, {p, f.cluster, f.workload, f.graph, testing::catalogs().models, f.model, prediction});
  }
  // The reason the runtime refuses the plan, or "" when it exports it.
  std::string refusal(plan::Runtime runtime, const plan::Plan& p) {
    try {
      run(runtime, p);
    } catch (const core::JobError& e) {
      return e.what();
    }
    return "";
  }
};

plan::Plan verl_plan(Fixture& f) {
  planner::PlannerResult r = planner::plan_verl(f.model, testing::catalogs().models, planner::all_nodes(f.cluster));
  REQUIRE(r.found);
  return r.plan;
}

// Every GPU task on every GPU of the cluster: generation in TP `gen_tp`, the others in TP `tp`
// and PP `pp`, training with `train`.
plan::Plan colocated(Fixture& f, int gen_tp, int tp, int pp, cost::TrainOptions train) {
  const std::vector<int> nodes = planner::all_nodes(f.cluster);
  plan::Plan p;
  p.groups.emplace_back();
  p.groups[0].gpus = planner::gpus_of(f.cluster, nodes);
  for (int task : f.graph.gpu_tasks()) {
    const workload::Task& t = f.graph.tasks[task];
    const bool generates = t.kind == workload::TaskKind::kGenerate;
    plan::TaskPlacement placement;
    placement.task = task;
    placement.train = train;
    const int layers = testing::catalogs().models.get(t.model, "").layers;
    REQUIRE(planner::uniform_replicas(f.cluster, nodes, generates ? gen_tp : tp, generates ? 1 : pp, layers,
                                      placement.replicas));
    p.groups[0].tasks.push_back(std::move(placement));
  }
  p.planner.name = "test";
  return p;
}

// FSDP as verl and OpenRLHF both run it: TP1 with ZeRO-3, generation in TP2.
plan::Plan fsdp_plan(Fixture& f) { return colocated(f, 2, 1, 1, {3, cost::Recompute::kFull, false}); }

plan::TaskPlacement& placed(plan::Plan& p, int task) {
  for (plan::Group& g : p.groups) {
    for (plan::TaskPlacement& t : g.tasks) {
      if (t.task == task) return t;
    }
  }
  FAIL("task not placed");
  throw;
}

Fixture ppo_on_h100(int nodes, const std::string& model = "Qwen2.5-7B") {
  return Fixture(testing::make_cluster({"us-east-1a:" + std::to_string(nodes) + "x8xH100-SXM"}),
                 testing::ppo(model, 256, 512, 512, 2));
}

TEST_CASE("verl's colocated plan exports to both runtimes with the plan's pools, layouts and batch") {
  Fixture f = ppo_on_h100(2);
  Exporter x{f};
  const plan::Plan p = fsdp_plan(f);
  const plan::TaskPlacement& gen = *p.placement(f.task("generate"));
  const int rollout_tp = static_cast<int>(gen.replicas[0].stages[0].devices.size());
  const plan::Export verl = x.run(plan::Runtime::kVerl, p);
  CHECK(verl.command == "python3 -m verl.trainer.main_ppo --config-name=ppo_trainer");
  CHECK(value(verl, "actor_rollout_ref.actor.strategy") == "fsdp");
  CHECK(value(verl, "actor_rollout_ref.model.enable_gradient_checkpointing") == "True");
  CHECK(value(verl, "trainer.nnodes") == "2");
  CHECK(value(verl, "trainer.n_gpus_per_node") == "8");
  CHECK(value(verl, "actor_rollout_ref.rollout.tensor_model_parallel_size") == std::to_string(rollout_tp));
  CHECK(value(verl, "actor_rollout_ref.hybrid_engine") == "True");
  CHECK(value(verl, "data.train_batch_size") == "256");
  CHECK(value(verl, "actor_rollout_ref.actor.ppo_mini_batch_size") == "128");
  CHECK(value(verl, "algorithm.adv_estimator") == "gae");
  CHECK(value(verl, "critic.model.path") == "Qwen/Qwen2.5-7B");
  CHECK(value(verl, "rollout.nnodes") == "absent");
  const double share = std::stod(value(verl, "actor_rollout_ref.rollout.gpu_memory_utilization"));
  CHECK(share > 0.05);
  CHECK(share <= 0.9);

  const plan::Export orl = x.run(plan::Runtime::kOpenRlhf, p);
  CHECK(value(orl, "--train.colocate_all").empty());
  CHECK(value(orl, "--vllm.num_engines") == std::to_string(gen.replicas.size()));
  CHECK(value(orl, "--vllm.tensor_parallel_size") == std::to_string(rollout_tp));
  CHECK(value(orl, "--actor.num_nodes") == "2");
  CHECK(value(orl, "--critic.num_gpus_per_node") == "8");
  CHECK(value(orl, "--train.batch_size") == "128");
  CHECK(value(orl, "--algo.advantage.estimator") == "gae");
}

TEST_CASE("the rollout's memory share is what the group's other roles leave it") {
  Fixture f = ppo_on_h100(1, "Qwen2.5-1.5B");
  Exporter x{f};
  plan::Plan p = fsdp_plan(f);
  const double resident = std::stod(value(x.run(plan::Runtime::kVerl, p), "actor_rollout_ref.rollout.gpu_memory_utilization"));
  // Offloaded between turns, the others leave it more.
  p.groups[0].offload = true;
  const plan::Export offloaded = x.run(plan::Runtime::kVerl, p);
  CHECK(std::stod(value(offloaded, "actor_rollout_ref.rollout.gpu_memory_utilization")) > resident);
  CHECK(value(offloaded, "actor_rollout_ref.actor.fsdp_config.param_offload") == "True");
}

TEST_CASE("uneven shares, replicas of two layouts and a task on part of its group are refused") {
  Fixture f = ppo_on_h100(1, "Qwen2.5-1.5B");
  Exporter x{f};
  const plan::Plan base = fsdp_plan(f);
  for (const plan::Runtime runtime : {plan::Runtime::kVerl, plan::Runtime::kOpenRlhf}) {
    CAPTURE(plan::runtime_name(runtime));
    CHECK(x.refusal(runtime, base).empty());
    plan::Plan uneven = base;
    std::vector<plan::Replica>& gen = placed(uneven, f.task("generate")).replicas;
    REQUIRE(gen.size() >= 2);
    gen[0].share += 0.01;
    gen[1].share -= 0.01;
    CHECK(x.refusal(runtime, uneven).find("generate's replicas carry uneven batch shares") != std::string::npos);

    // The reference on half the group's GPUs.
    plan::Plan half = base;
    std::vector<plan::Replica>& ref = placed(half, f.task("ref_logprob")).replicas;
    ref.resize(ref.size() / 2);
    for (plan::Replica& r : ref) r.share = 1.0 / static_cast<double>(ref.size());
    CHECK(x.refusal(runtime, half).find("ref_logprob runs on 4 of its group's 8 GPUs") != std::string::npos);
  }
  // Generation in TP1 and TP2 replicas on one node.
  plan::Plan mixed = base;
  const workload::ModelArch& arch = testing::catalogs().models.get("Qwen2.5-1.5B", "");
  std::vector<plan::Replica> tp1, tp2;
  REQUIRE(planner::uniform_replicas(f.cluster, std::vector<int>{0}, 1, 1, arch.layers, tp1));
  REQUIRE(planner::uniform_replicas(f.cluster, std::vector<int>{0}, 2, 1, arch.layers, tp2));
  std::vector<plan::Replica> both(tp1.begin(), tp1.begin() + 4);
  both.insert(both.end(), tp2.begin() + 2, tp2.end());
  for (plan::Replica& r : both) r.share = 1.0 / static_cast<double>(both.size());
  placed(mixed, f.task("generate")).replicas = both;
  CHECK(x.refusal(plan::Runtime::kVerl, mixed).find("generate's replicas have different layouts (TP1, TP2)") !=
        std::string::npos);
}

TEST_CASE("verl's trainers: FSDP for ZeRO-3 alone, Megatron for TP and PP with ZeRO-1, nothing else") {
  using cost::Recompute;
  CHECK_FALSE(plan::verl_trainer_refusal(1, 1, {3, Recompute::kFull, false}).has_value());
  CHECK_FALSE(plan::verl_trainer_refusal(2, 2, {1, Recompute::kSelective, false}).has_value());
  CHECK_FALSE(plan::verl_trainer_refusal(1, 1, {1, Recompute::kNone, false}).has_value());
  CHECK(plan::verl_trainer_refusal(2, 1, {3, Recompute::kNone, false}).value_or("").find("ZeRO-3 with TP2 PP1") == 0);
  CHECK(plan::verl_trainer_refusal(1, 1, {2, Recompute::kNone, false}).value_or("").find("ZeRO-2") == 0);
  CHECK(plan::verl_trainer_refusal(1, 1, {3, Recompute::kSelective, false}).has_value());
  CHECK(plan::verl_trainer_refusal(1, 1, {3, Recompute::kNone, true}).has_value());

  // Every task in TP2 with ZeRO-1: verl's Megatron workers.
  Fixture f = ppo_on_h100(1, "Qwen2.5-1.5B");
  Exporter x{f};
  plan::Plan p = colocated(f, 2, 2, 1, {1, cost::Recompute::kFull, false});
  const plan::Export megatron = x.run(plan::Runtime::kVerl, p);
  CHECK(megatron.command.ends_with("--config-name=ppo_megatron_trainer"));
  CHECK(value(megatron, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size") == "2");
  CHECK(value(megatron, "critic.megatron.use_distributed_optimizer") == "True");
  CHECK(value(megatron, "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity") == "full");
  // ZeRO-3 there is refused, by verl and by OpenRLHF (DeepSpeed's AutoTP).
  for (plan::TaskPlacement& t : p.groups[0].tasks) t.train.zero_stage = 3;
  CHECK(x.refusal(plan::Runtime::kVerl, p).find("actor_train trains with ZeRO-3 with TP2 PP1") != std::string::npos);
  CHECK(x.refusal(plan::Runtime::kOpenRlhf, p).find("TP2 with ZeRO-3") != std::string::npos);
}

TEST_CASE("generation apart from training: verl one step off policy only, OpenRLHF with its pools") {
  Fixture sync = ppo_on_h100(2);
  Exporter xs{sync};
  planner::PlannerResult streamrl =
      planner::plan_streamrl(sync.model, testing::catalogs().models, planner::all_nodes(sync.cluster));
  REQUIRE(streamrl.found);
  CHECK(xs.refusal(plan::Runtime::kVerl, streamrl.plan).find("generation runs apart from training synchronously") !=
        std::string::npos);
  // StreamRL's training pool holds actor, critic and reference together.
  CHECK(xs.refusal(plan::Runtime::kOpenRlhf, streamrl.plan).find("actor and critic share GPUs") !=
        std::string::npos);

  Fixture async(testing::make_cluster({"us-east-1a:2x8xH100-SXM"}),
                testing::in_mode(testing::ppo("Qwen2.5-7B", 256, 512, 512, 2), "async"));
  Exporter xa{async};
  planner::PlannerResult one_off =
      planner::plan_verl_async(async.model, testing::catalogs().models, planner::all_nodes(async.cluster));
  REQUIRE(one_off.found);
  const plan::Export verl = xa.run(plan::Runtime::kVerl, one_off.plan);
  CHECK(verl.command.find("verl.experimental.one_step_off_policy.async_main_ppo") != std::string::npos);
  CHECK(value(verl, "actor_rollout_ref.hybrid_engine") == "False");
  const int gen_gpus = static_cast<int>(one_off.plan.groups[one_off.plan.group_of(async.task("generate"))].gpus.size());
  CHECK(std::stoi(value(verl, "rollout.nnodes")) * std::stoi(value(verl, "rollout.n_gpus_per_node")) == gen_gpus);
  CHECK(std::stoi(value(verl, "trainer.nnodes")) * std::stoi(value(verl, "trainer.n_gpus_per_node")) == 16 - gen_gpus);
  // Two iterations ahead is more than verl's recipe runs.
  async.workload.max_staleness = 2;
  CHECK(xa.refusal(plan::Runtime::kVerl, one_off.plan).find("run 2 iterations ahead") != std::string::npos);
}

TEST_CASE("a colocated plan of an asynchronous workload runs on policy: the runtimes' synchronous trainers") {
  // Generation on the trainer's GPUs waits for training, whatever staleness the workload allows.
  Fixture f(testing::make_cluster({"us-east-1a:2x8xH100-SXM"}),
            testing::in_mode(testing::ppo("Qwen2.5-7B", 256, 512, 512, 2), "async"));
  Exporter x{f};
  const plan::Plan p = verl_plan(f);
  const plan::Export verl = x.run(plan::Runtime::kVerl, p);
  CHECK(verl.command.find("verl.trainer.main_ppo") != std::string::npos);
  CHECK(value(verl, "actor_rollout_ref.hybrid_engine") == "True");
  const plan::Export orl = x.run(plan::Runtime::kOpenRlhf, fsdp_plan(f));  // DeepSpeed has no PP
  CHECK(value(orl, "--train.colocate_all").empty());
  CHECK(value(orl, "--train.async_enable") == "absent");
}

TEST_CASE("pools on different GPU types, and a pool with uneven nodes, are refused") {
  Fixture f(testing::make_cluster({"us-east-1a:1x8xH100-SXM", "us-east-1a:1x8xA100-SXM-80G"}),
            testing::in_mode(testing::ppo("Qwen2.5-7B", 256, 512, 512, 2), "async"));
  Exporter x{f};
  planner::PlannerResult r = planner::plan_verl_async(f.model, testing::catalogs().models, planner::all_nodes(f.cluster));
  REQUIRE(r.found);
  for (const plan::Runtime runtime : {plan::Runtime::kVerl, plan::Runtime::kOpenRlhf}) {
    CHECK(x.refusal(runtime, r.plan).find("its pools are on different GPU types (A100-SXM-80G, H100-SXM)") !=
          std::string::npos);
  }
  Fixture uneven(testing::make_cluster({"us-east-1a:1x8xH100-SXM", "us-east-1a:1x4xH100-SXM"}),
                 testing::ppo("Qwen2.5-7B", 256, 512, 512, 2));
  Exporter xu{uneven};
  const plan::Plan p = verl_plan(uneven);
  CHECK(xu.refusal(plan::Runtime::kVerl, p).find("uses 4 GPUs on some nodes and 8 on others") != std::string::npos);
}

TEST_CASE("pipeline stages on different GPU types are refused") {
  Fixture f(testing::make_cluster({"us-east-1a:1x8xH100-SXM", "us-east-1a:1x8xA100-SXM-80G"}),
            testing::ppo("Llama-3.1-8B", 256, 512, 512, 2));
  Exporter x{f};
  // TP8 x PP2: each replica's first stage on the H100 node, its second on the A100 node.
  const plan::Plan p = colocated(f, 8, 8, 2, {1, cost::Recompute::kFull, false});
  const std::string why = x.refusal(plan::Runtime::kVerl, p);
  CHECK(why.find("actor_train's pipeline stages are on different GPU types (A100-SXM-80G, H100-SXM)") !=
        std::string::npos);
  // The same layout on one GPU type exports.
  Fixture same(testing::make_cluster({"us-east-1a:2x8xH100-SXM"}), testing::ppo("Llama-3.1-8B", 256, 512, 512, 2));
  Exporter xs{same};
  CHECK(value(xs.run(plan::Runtime::kVerl, colocated(same, 8, 8, 2, {1, cost::Recompute::kFull, false})),
              "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size") == "2");
}

}  // namespace
}  // namespace hetrl
