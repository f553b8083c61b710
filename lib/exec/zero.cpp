#include "exec/zero.h"

namespace hetrl::exec {

ShardedOptimizer::ShardedOptimizer(device::Backend& backend, Transformer& model, device::Communicator& group,
                                   device::DType reduce)
    : b_(backend), model_(model), group_(group), reduce_(reduce) {
  count_ = model_.parameter_count();
  chunk_ = model_.partition(0, group_.size()).last;
  own_ = model_.partition(group_.rank(), group_.size());
}

void ShardedOptimizer::reduce_scatter_gradients() {
  if (!gradients_.data()) {
    gradients_ = device::zeros(b_, chunk_ * static_cast<std::size_t>(group_.size()) * sizeof(float));
    mine_ = device::zeros(b_, chunk_ * sizeof(float));
  }
  model_.copy_gradients({0, count_}, gradients_.as<float>(), false);
  if (reduce_ == device::DType::kF32) {
    group_.reduce_scatter(device::DType::kF32, gradients_.data(), mine_.data(), chunk_);
  } else {
    const std::size_t e = device::dtype_bytes(reduce_);
    if (!sent_.data()) {
      sent_ = device::zeros(b_, chunk_ * static_cast<std::size_t>(group_.size()) * e);
      received_ = device::zeros(b_, chunk_ * e);
    }
    b_.cast(device::DType::kF32, gradients_.data(), reduce_, sent_.data(), chunk_ * static_cast<std::size_t>(group_.size()));
    group_.reduce_scatter(reduce_, sent_.data(), received_.data(), chunk_);
    b_.cast(reduce_, received_.data(), device::DType::kF32, mine_.data(), chunk_);
  }
  model_.copy_gradients(own_, mine_.as<float>(), true);
}

double ShardedOptimizer::gradient_norm() {
  return model_.gradient_norm(own_, [&](double* squares, int count) {
    for (int i = 0; i < count; ++i) squares[i] = sum_over(group_, squares[i]);
  });
}

void ShardedOptimizer::gather_weights() {
  const std::size_t e = device::dtype_bytes(model_.dtype());
  if (!weights_.data()) {
    weights_ = device::zeros(b_, chunk_ * static_cast<std::size_t>(group_.size()) * e);
    own_weights_ = device::zeros(b_, chunk_ * e);
  }
  model_.copy_weights(own_, own_weights_.data(), false);
  group_.all_gather(model_.dtype(), own_weights_.data(), weights_.data(), chunk_);
  model_.copy_weights({0, count_}, weights_.data(), true);
}

void all_reduce_gradients(device::Backend& backend, device::Communicator& comm, device::DType type, float* data,
                          std::size_t count, std::size_t bucket, device::Buffer& scratch) {
  if (type == device::DType::kF32) {
    device::all_reduce_in_buckets(comm, type, data, count, bucket);
    return;
  }
  const std::size_t bytes = count * device::dtype_bytes(type);
  if (scratch.bytes() < bytes) scratch = device::Buffer(backend, bytes);
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
