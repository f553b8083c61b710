#pragma once
// ZeRO's sharded optimiser over a data-parallel group of processes (stages 1 and 2, as
// Megatron's distributed optimiser and DeepSpeed run them): after the replicas' passes their
// gradients are reduce-scattered, so each process holds the sum over its own stretch of the
// flattened parameters (Transformer::partition); it updates that stretch alone, keeping the
// fp32 master weights and moments of it only, and the processes all-gather each other's
// updated weights. The model keeps its gradients and weights in one flat buffer each
// (Transformer::flat_gradients, flat_weights), as Megatron's gradient and parameter buffers,
// so that both collectives run in place, nothing copied out or back. What crosses the group
// per step: the gradients once, the weights once (the cost model's
// kGradientReduceScatterTerm). The gradients cross in the precision the
// workload's gradient_reduce names: fp32 as they are held, or bf16 (each process's cast, the
// sum in fp32 rounded to bf16 at each step, as NCCL's bf16 reduce-scatter, and cast back).

#include "device/backend.h"
#include "device/comm.h"
#include "exec/transformer.h"

namespace hetrl::exec {

class ShardedOptimizer {
 public:
  // `model` is this process's replica; every process of `group` holds one of the same layout.
  // `reduce`: the type the gradients cross in (kF32 or kBf16).
  ShardedOptimizer(device::Backend& backend, Transformer& model, device::Communicator& group,
                   device::DType reduce = device::DType::kF32);

  Transformer::Stretch own() const { return own_; }
  // Collectives: every process of the group calls each, in the same order. After the model's
  // begin_step (the sums its tensor-parallel shards share) and before its end_step.
  void reduce_scatter_gradients();
  // The norm of the summed gradients (all of them, over the group).
  double gradient_norm();
  void update(const device::AdamW& options) { model_.update(options, own_); }
  void gather_weights();

 private:
  device::Backend& b_;
  Transformer& model_;
  device::Communicator& group_;
  device::DType reduce_;
  // Every stretch's elements, the last padded to the others' length.
  std::size_t whole() const { return chunk_ * static_cast<std::size_t>(group_.size()); }
  std::size_t chunk_ = 0;
  Transformer::Stretch own_;
  // In the reduce type where it is not fp32, made as zeros at the first use (every page touched
  // then): every gradient and this process's part of their sum.
  device::Buffer sent_, received_;
};

// comm's all-reduce of `count` fp32 values in place, in pieces of at most `bucket`, crossing in
// `type` (kF32, or kBf16 through `scratch`, grown as needed: cast, summed, cast back).
void all_reduce_gradients(device::Backend& backend, device::Communicator& comm, device::DType type, float* data,
                          std::size_t count, std::size_t bucket, device::Buffer& scratch);

// A number summed over the processes, in double on the host.
double sum_over(device::Communicator& c, double x);

}  // namespace hetrl::exec
