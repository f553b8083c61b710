#!/usr/bin/env bash
# verl 0.8.0.dev: plan by verl for grpo-qwen2.5-14b on zones3-mixed-64: 6.234 samples/s predicted
# keys as documented in the reference configurations ppo_trainer.yaml and ppo_megatron_trainer.yaml (docs/examples/config.rst) and the one-step-off-policy recipe (docs/advance/one_step_off.md)
# the reward is a rule: give it as custom_reward_function.path and .name
# give the data as data.train_files and data.val_files
# run it on a Ray cluster of the plan's 8 nodes: us-east-1a-p5.48xlarge-0, us-east-1a-p5.48xlarge-1, us-east-1b-p4de.24xlarge-0, us-east-1b-p4de.24xlarge-1, us-east-1b-p4de.24xlarge-2, us-east-1b-p4de.24xlarge-3, us-east-1c-g6e.48xlarge-0, us-east-1c-g6e.48xlarge-1
python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer \
  algorithm.adv_estimator=grpo \
  data.train_batch_size=128 \
  data.max_prompt_length=512 \
  data.max_response_length=4096 \
  actor_rollout_ref.model.path=Qwen/Qwen2.5-14B \
  actor_rollout_ref.hybrid_engine=True \
  actor_rollout_ref.actor.strategy=megatron \
  actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  actor_rollout_ref.actor.ppo_epochs=1 \
  actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192 \
  actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1 \
  actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=4 \
  actor_rollout_ref.actor.megatron.param_offload=False \
  actor_rollout_ref.actor.megatron.use_distributed_optimizer=True \
  actor_rollout_ref.actor.megatron.grad_offload=False \
  actor_rollout_ref.actor.megatron.optimizer_offload=False \
  actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full \
  actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform \
  actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=8 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.36 \
  actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True \
  actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=8192 \
  actor_rollout_ref.ref.strategy=megatron \
  actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True \
  actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=8192 \
  actor_rollout_ref.ref.megatron.tensor_model_parallel_size=1 \
  actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=4 \
  actor_rollout_ref.ref.megatron.param_offload=False \
  reward_model.enable=False \
  trainer.nnodes=8 \
  trainer.n_gpus_per_node=8
