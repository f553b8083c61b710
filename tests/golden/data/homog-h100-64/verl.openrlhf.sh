#!/usr/bin/env bash
# OpenRLHF 0.11.0: plan by verl for ppo-qwen2.5-7b on homog-h100-64: 26.68 samples/s predicted
# keys as documented in the flags of openrlhf.cli.train_ppo_ray (its --help and README)
# the reward is a rule: give it as --reward.remote_url or --train.agent_func_path
# give the prompts as --data.prompt_dataset, and submit it with ray job submit
# run it on a Ray cluster of the plan's 8 nodes: us-east-1a-p5.48xlarge-0, us-east-1a-p5.48xlarge-1, us-east-1a-p5.48xlarge-2, us-east-1a-p5.48xlarge-3, us-east-1a-p5.48xlarge-4, us-east-1a-p5.48xlarge-5, us-east-1a-p5.48xlarge-6, us-east-1a-p5.48xlarge-7
python3 -m openrlhf.cli.train_ppo_ray \
  --actor.num_nodes 8 \
  --actor.num_gpus_per_node 8 \
  --ref.num_nodes 8 \
  --ref.num_gpus_per_node 8 \
  --critic.num_nodes 8 \
  --critic.num_gpus_per_node 8 \
  --train.colocate_all \
  --vllm.num_engines 16 \
  --vllm.tensor_parallel_size 4 \
  --vllm.gpu_memory_utilization 0.38 \
  --ds.zero_stage 3 \
  --actor.gradient_checkpointing_enable \
  --ds.packing_samples \
  --train.dynamic_batch_enable \
  --train.max_tokens_per_gpu 8192 \
  --rollout.max_tokens_per_gpu 8192 \
  --actor.model_name_or_path Qwen/Qwen2.5-7B \
  --critic.model_name_or_path Qwen/Qwen2.5-7B \
  --algo.advantage.estimator gae \
  --rollout.batch_size 1024 \
  --rollout.n_samples_per_prompt 1 \
  --train.batch_size 256 \
  --train.max_epochs 1 \
  --rollout.max_new_tokens 4096 \
  --data.max_len 5120
