#!/usr/bin/env bash
# OpenRLHF 0.11.0: plan by homogeneous for ppo-llama3.1-8b on zones2-a100-l40s-64: 8.169 samples/s predicted
# keys as documented in the flags of openrlhf.cli.train_ppo_ray (its --help and README)
# the reward is a rule: give it as --reward.remote_url or --train.agent_func_path
# give the prompts as --data.prompt_dataset, and submit it with ray job submit
# run it on a Ray cluster of the plan's 4 nodes: us-east-1a-p4de.24xlarge-0, us-east-1a-p4de.24xlarge-1, us-east-1a-p4de.24xlarge-2, us-east-1a-p4de.24xlarge-3
python3 -m openrlhf.cli.train_ppo_ray \
  --actor.num_nodes 4 \
  --actor.num_gpus_per_node 8 \
  --ref.num_nodes 4 \
  --ref.num_gpus_per_node 8 \
  --critic.num_nodes 4 \
  --critic.num_gpus_per_node 8 \
  --train.colocate_all \
  --vllm.num_engines 4 \
  --vllm.tensor_parallel_size 8 \
  --vllm.gpu_memory_utilization 0.28 \
  --ds.zero_stage 3 \
  --actor.gradient_checkpointing_enable \
  --ds.packing_samples \
  --train.dynamic_batch_enable \
  --train.max_tokens_per_gpu 8192 \
  --rollout.max_tokens_per_gpu 8192 \
  --actor.model_name_or_path meta-llama/Llama-3.1-8B \
  --critic.model_name_or_path meta-llama/Llama-3.1-8B \
  --algo.advantage.estimator gae \
  --rollout.batch_size 512 \
  --rollout.n_samples_per_prompt 1 \
  --train.batch_size 128 \
  --train.max_epochs 1 \
  --rollout.max_new_tokens 4096 \
  --data.max_len 5120
