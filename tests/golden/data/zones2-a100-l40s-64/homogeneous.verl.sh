#!/usr/bin/env bash
# verl 0.8.0.dev: plan by homogeneous for ppo-llama3.1-8b on zones2-a100-l40s-64: 8.169 samples/s predicted
# keys as documented in the reference configurations ppo_trainer.yaml and ppo_megatron_trainer.yaml (docs/examples/config.rst) and the one-step-off-policy recipe (docs/advance/one_step_off.md)
# the reward is a rule: give it as custom_reward_function.path and .name
# give the data as data.train_files and data.val_files
# run it on a Ray cluster of the plan's 4 nodes: us-east-1a-p4de.24xlarge-0, us-east-1a-p4de.24xlarge-1, us-east-1a-p4de.24xlarge-2, us-east-1a-p4de.24xlarge-3
python3 -m verl.trainer.main_ppo --config-name=ppo_trainer \
  algorithm.adv_estimator=gae \
  data.train_batch_size=512 \
  data.max_prompt_length=1024 \
  data.max_response_length=4096 \
  actor_rollout_ref.model.path=meta-llama/Llama-3.1-8B \
  actor_rollout_ref.hybrid_engine=True \
  actor_rollout_ref.actor.strategy=fsdp \
  actor_rollout_ref.actor.ppo_mini_batch_size=128 \
  actor_rollout_ref.actor.ppo_epochs=1 \
  actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192 \
  actor_rollout_ref.actor.fsdp_config.param_offload=False \
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=1 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=8 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.28 \
  actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True \
  actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=8192 \
  actor_rollout_ref.ref.strategy=fsdp \
  actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True \
  actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=8192 \
  actor_rollout_ref.ref.fsdp_config.param_offload=False \
  critic.strategy=fsdp \
  critic.model.path=meta-llama/Llama-3.1-8B \
  critic.ppo_epochs=1 \
  critic.use_dynamic_bsz=True \
  critic.ppo_max_token_len_per_gpu=8192 \
  critic.forward_max_token_len_per_gpu=8192 \
  critic.model.fsdp_config.param_offload=False \
  critic.model.fsdp_config.optimizer_offload=False \
  critic.model.enable_gradient_checkpointing=True \
  reward_model.enable=False \
  trainer.nnodes=4 \
  trainer.n_gpus_per_node=8
