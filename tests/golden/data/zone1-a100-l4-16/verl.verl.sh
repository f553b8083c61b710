#!/usr/bin/env bash
# verl 0.8.0.dev: plan by verl for grpo-qwen2.5-1.5b on zone1-a100-l4-16: 6.947 samples/s predicted
# keys as documented in the reference configurations ppo_trainer.yaml and ppo_megatron_trainer.yaml (docs/examples/config.rst) and the one-step-off-policy recipe (docs/advance/one_step_off.md)
# the reward is a rule: give it as custom_reward_function.path and .name
# give the data as data.train_files and data.val_files
# run it on a Ray cluster of the plan's 2 nodes: us-east-1a-a100-sxm-80g-0, us-east-1a-g6.48xlarge-0
python3 -m verl.trainer.main_ppo --config-name=ppo_trainer \
  algorithm.adv_estimator=grpo \
  data.train_batch_size=64 \
  data.max_prompt_length=512 \
  data.max_response_length=4096 \
  actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B \
  actor_rollout_ref.hybrid_engine=True \
  actor_rollout_ref.actor.strategy=fsdp \
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.ppo_epochs=1 \
  actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192 \
  actor_rollout_ref.actor.fsdp_config.param_offload=False \
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=4 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.63 \
  actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True \
  actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=8192 \
  actor_rollout_ref.ref.strategy=fsdp \
  actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True \
  actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=8192 \
  actor_rollout_ref.ref.fsdp_config.param_offload=False \
  reward_model.enable=False \
  trainer.nnodes=2 \
  trainer.n_gpus_per_node=8
