#include "exec/zero.h"

namespace hetrl::exec {

ShardedOptimizer::ShardedOptimizer(device::Backend& backend, Transformer& model, device::Communicator& group,
                                   device::DType reduce)
    : b_(backend), model_(model), group_(group), reduce_(reduce) {
  chunk_ = model_.partition(0, group_.size()).last;
  own_ = model_.partition(group_.rank(), group_.size());
  model_.flat_gradients(whole());
  model_.flat_weights(whole());
}

void ShardedOptimizer::reduce_scatter_gradients() {
  // The model's gradients are one flat buffer (again, where it dropped them since), its
  // stretches in the group's order: the sum is reduce-scattered in place in fp32, and in the
  // reduce type through a cast copy whose sum is cast back into this process's stretch.
  float* flat = model_.flat_gradients(whole());
  float* mine = flat + chunk_ * static_cast<std::size_t>(group_.rank());
  if (reduce_ == device::DType::kF32) {
    group_.reduce_scatter(device::DType::kF32, flat, mine, chunk_);
    return;
  }
  const std::size_t e = device::dtype_bytes(reduce_);
  if (!sent_.data()) {
    sent_ = device::zeros(b_, whole() * e, device::Purpose::kCommunication);
    received_ = device::zeros(b_, chunk_ * e, device::Purpose::kCommunication);
  }
  b_.cast(device::DType::kF32, flat, reduce_, sent_.data(), whole());
  group_.reduce_scatter(reduce_, sent_.data(), received_.data(), chunk_);
  b_.cast(reduce_, received_.data(), device::DType::kF32, mine, chunk_);
}

double ShardedOptimizer::gradient_norm() {
  return model_.gradient_norm(own_, [&](double* squares, int count) {
    for (int i = 0; i < count; ++i) squares[i] = sum_over(group_, squares[i]);
  });
}

void ShardedOptimizer::gather_weights() {
  // This process's stretch was updated in place in the model's flat weights; the all-gather
  // fills in the others'.
  auto* flat = static_cast<std::byte*>(model_.flat_weights(whole()));
  const std::size_t e = device::dtype_bytes(model_.dtype());
  group_.all_gather(model_.dtype(), flat + chunk_ * static_cast<std::size_t>(group_.rank()) * e, flat, chunk_);
}

void all_reduce_gradients(device::Backend& backend, device::Communicator& comm, device::DType type, float* data,
                          std::size_t count, std::size_t bucket, device::Buffer& scratch) {
  if (type == device::DType::kF32) {
    device::all_reduce_in_buckets(comm, type, data, count, bucket);
    return;
  }
  const std::size_t bytes = count * device::dtype_bytes(type);
  if (scratch.bytes() < bytes) scratch = device::Buffer(backend, bytes, device::Purpose::kCommunication);
  backend.cast(device::DType::kF32, data, type, scratch.data(), count);
  device::all_reduce_in_buckets(comm, type, scratch.data(), count, bucket);
  backend.cast(type, scratch.data(), device::DType::kF32, data, count);
}

double sum_over(device::Communicator& c, double x) {
  double total = 0;
  for (int root = 0; root < c.size(); ++root) {
    double part = x;
    c.broadcast_host(&part, sizeof part, root);
    total += part;
  }
  return total;
}

}  // namespace hetrl::exec
