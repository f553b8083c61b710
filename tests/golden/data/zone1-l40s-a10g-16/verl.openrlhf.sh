#!/usr/bin/env bash
# OpenRLHF 0.11.0: plan by verl for grpo-qwen2.5-3b on zone1-l40s-a10g-16: 4.494 samples/s predicted
# keys as documented in the flags of openrlhf.cli.train_ppo_ray (its --help and README)
# the reward is a rule: give it as --reward.remote_url or --train.agent_func_path
# give the prompts as --data.prompt_dataset, and submit it with ray job submit
# run it on a Ray cluster of the plan's 2 nodes: us-east-1a-g5.48xlarge-0, us-east-1a-g6e.48xlarge-0
python3 -m openrlhf.cli.train_ppo_ray \
  --actor.num_nodes 2 \
  --actor.num_gpus_per_node 8 \
  --ref.num_nodes 2 \
  --ref.num_gpus_per_node 8 \
  --train.colocate_all \
  --vllm.num_engines 4 \
  --vllm.tensor_parallel_size 4 \
  --vllm.gpu_memory_utilization 0.36 \
  --ds.zero_stage 3 \
  --actor.gradient_checkpointing_enable \
  --ds.packing_samples \
  --train.dynamic_batch_enable \
  --train.max_tokens_per_gpu 8192 \
  --rollout.max_tokens_per_gpu 8192 \
  --actor.model_name_or_path Qwen/Qwen2.5-3B \
  --algo.advantage.estimator group_norm \
  --rollout.batch_size 64 \
  --rollout.n_samples_per_prompt 8 \
  --train.batch_size 128 \
  --train.max_epochs 1 \
  --rollout.max_new_tokens 4096 \
  --data.max_len 4608
