#pragma once
// ZeRO's sharded optimiser over a data-parallel group of processes (stages 1 and 2, as
// Megatron's distributed optimiser and DeepSpeed run them): after the replicas' passes their
// gradients are reduce-scattered, so each process holds the sum over its own stretch of the
// flattened parameters (Transformer::partition); it updates that stretch alone, keeping the
// fp32 master weights and moments of it only, and the processes all-gather each other's
// updated weights. What crosses the group per step: the fp32 gradients once, the weights once
// (the cost model's kGradientReduceScatterTerm). The gradients are reduced in fp32 whatever
// the workload's gradient_reduce says.

#include "device/backend.h"
#include "device/comm.h"
#include "exec/transformer.h"

namespace hetrl::exec {

class ShardedOptimizer {
 public:
  // `model` is this process's replica; every process of `group` holds one of the same layout.
  ShardedOptimizer(device::Backend& backend, Transformer& model, device::Communicator& group);

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
  std::size_t count_ = 0, chunk_ = 0;
  Transformer::Stretch own_;
  // The flat buffers, made at the first use: every gradient (zeros past the last parameter, to
  // even parts), this process's part of their sum; every weight, this process's stretch.
  device::Buffer gradients_, mine_, weights_, own_weights_;
};

// A number summed over the processes, in double on the host.
double sum_over(device::Communicator& c, double x);

}  // namespace hetrl::exec
