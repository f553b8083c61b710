// ZeRO-3 for the transformer (transformer.h, WeightSharding): the weights, the gradients' sums
// and the Adam state sharded over a data-parallel group unit by unit, the units gathered whole
// around the passes that use them.

#include <algorithm>
#include <stdexcept>

#include "exec/timed.h"
#include "exec/transformer.h"

namespace hetrl::exec {

using device::Buffer;
using device::DType;
using device::Purpose;


void Transformer::check_whole(const char* what) const {
  if (sharded_) throw std::logic_error(std::string("transformer: ") + what + " needs the weights whole (gather_weights)");
}

std::pair<Transformer::Unit*, const Transformer::UnitTensor*> Transformer::unit_of(const std::string& name) {
  for (Unit& unit : units_) {
    for (const UnitTensor& t : unit.tensors) {
      if (t.name == name) return {&unit, &t};
    }
  }
  return {nullptr, nullptr};
}

float* Transformer::unit_gradients(Unit& unit) {
  if (!unit.grads.data()) unit.grads = device::zeros(b_, whole_count(unit) * sizeof(float), Purpose::kGradients);
  return unit.grads.as<float>();
}

std::size_t Transformer::own_count(const Unit& unit) const {
  const std::size_t first = std::min(unit.count, unit.chunk * static_cast<std::size_t>(sharding_.rank));
  return std::min(unit.chunk, unit.count - first);
}

void Transformer::shard_weights(const WeightSharding& sharding) {
  if (sharding.size < 1 || sharding.rank < 0 || sharding.rank >= sharding.size || !sharding.all_gather ||
      !sharding.reduce_scatter || !sharding.sum) {
    throw std::logic_error("transformer: ZeRO-3 needs a rank in its group and the group's collectives");
  }
  if (sharded_) throw std::logic_error("transformer: the weights are sharded already");
  if (!units_.empty() && (sharding.rank != sharding_.rank || sharding.size != sharding_.size)) units_.clear();
  sharding_ = sharding;
  const std::size_t e = device::dtype_bytes(options_.dtype);
  if (units_.empty()) {
    // The units, in parameters() order: the embedding, each layer, the tail.
    embedding_unit_ = tail_unit_ = -1;
    layer_units_ = 0;
    std::vector<Unit> layer_units(layers_.size());
    Unit embedding, tail;
    for (const Tensor& p : parameters()) {
      Unit* unit = &tail;
      if (p.name == "embedding") {
        unit = &embedding;
      } else if (p.name.rfind("layer.", 0) == 0) {
        unit = &layer_units.at(static_cast<std::size_t>(std::stoi(p.name.substr(6)) - first_layer_));
      }
      unit->tensors.push_back({p.name, p.buffer, p.count, unit->count});
      unit->count += p.count;
    }
    if (embedding.count > 0) {
      embedding_unit_ = 0;
      units_.push_back(std::move(embedding));
    }
    layer_units_ = static_cast<int>(units_.size());
    for (Unit& unit : layer_units) units_.push_back(std::move(unit));
    if (tail.count > 0) {
      tail_unit_ = static_cast<int>(units_.size());
      units_.push_back(std::move(tail));
    }
    std::size_t largest = 0;
    for (Unit& unit : units_) {
      unit.chunk = (unit.count + static_cast<std::size_t>(sharding_.size) - 1) / static_cast<std::size_t>(sharding_.size);
      unit.own = device::zeros(b_, unit.chunk * e, Purpose::kWeights);
      unit.own_grad = device::zeros(b_, unit.chunk * sizeof(float), Purpose::kGradients);
      largest = std::max(largest, unit.chunk);
    }
    const std::size_t all = largest * static_cast<std::size_t>(sharding_.size);
    if (sharding_.reduce != DType::kF32) {
      mine_ = Buffer(b_, largest * sizeof(float), Purpose::kCommunication);
      const std::size_t r = device::dtype_bytes(sharding_.reduce);
      sent_ = Buffer(b_, all * r, Purpose::kCommunication);
      received_ = Buffer(b_, largest * r, Purpose::kCommunication);
    }
  }
  // Each unit keeps its own stretch of the weights, whole until now, and frees them.
  for (Unit& unit : units_) {
    const std::size_t first = unit.chunk * static_cast<std::size_t>(sharding_.rank);
    for (const UnitTensor& t : unit.tensors) {
      const std::size_t from = std::max(first, t.at), to = std::min(first + unit.chunk, t.at + t.count);
      if (from >= to) continue;
      b_.copy(static_cast<char*>(unit.own.data()) + (from - first) * e,
              static_cast<const char*>(t.buffer->data()) + (from - t.at) * e, (to - from) * e);
    }
    b_.synchronize();
    for (const UnitTensor& t : unit.tensors) *t.buffer = Buffer();
    unit.gathered = false;
  }
  // The whole model's gradients and optimiser state are the shards' now.
  optimizer_.clear();
  sharded_ = true;
}

void Transformer::gather_weights() {
  if (!sharded_) return;
  const std::size_t e = device::dtype_bytes(options_.dtype);
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    gather_unit(u);
    // Whole again for good: each tensor its own buffer, not a view of the unit's.
    Unit& unit = units_[static_cast<std::size_t>(u)];
    for (const UnitTensor& t : unit.tensors) {
      Buffer own(b_, t.count * e);
      b_.copy(own.data(), t.buffer->data(), t.count * e);
      *t.buffer = std::move(own);
    }
    b_.synchronize();
    unit.whole = Buffer();
  }
  sharded_ = false;
}

void Transformer::gather_unit(int u) {
  if (!sharded_ || u < 0) return;
  Unit& unit = units_[static_cast<std::size_t>(u)];
  if (unit.gathered) return;
  const std::size_t e = device::dtype_bytes(options_.dtype);
  timed_call(sharding_time_, sharding_.timed, [&] {
    // Gathered into one buffer of the unit's, its tensors views of it (FSDP's flat parameter).
    unit.whole = Buffer(b_, whole_count(unit) * e, Purpose::kWeights);
    sharding_.all_gather(options_.dtype, unit.own.data(), unit.whole.data(), unit.chunk);
    for (const UnitTensor& t : unit.tensors) {
      *t.buffer = Buffer::view(unit.whole.as<std::byte>() + t.at * e, t.count * e);
    }
  });
  unit.gathered = true;
}

void Transformer::release_unit(int u) {
  if (!sharded_ || u < 0) return;
  Unit& unit = units_[static_cast<std::size_t>(u)];
  if (!unit.gathered) return;
  b_.synchronize();  // the pass's last reads of them done
  for (const UnitTensor& t : unit.tensors) *t.buffer = Buffer();
  unit.whole = Buffer();
  unit.gathered = false;
}

void Transformer::scatter_gradients(int u) {
  if (!sharded_ || u < 0) return;
  Unit& unit = units_[static_cast<std::size_t>(u)];
  timed_call(sharding_time_, sharding_.timed, [&] {
    const std::size_t all = whole_count(unit);
    // The unit's gradients of this pass are views of one buffer (grad), zeros where the pass
    // reached none; summed in place, then freed: between passes a process holds its
    // stretch's sum only.
    float* flat = unit_gradients(unit);
    for (const UnitTensor& t : unit.tensors) optimizer_.erase(t.name);
    float* mine = flat + unit.chunk * static_cast<std::size_t>(sharding_.rank);
    if (sharding_.reduce == DType::kF32) {
      sharding_.reduce_scatter(DType::kF32, flat, mine, unit.chunk);
    } else {
      b_.cast(DType::kF32, flat, sharding_.reduce, sent_.data(), all);
      sharding_.reduce_scatter(sharding_.reduce, sent_.data(), received_.data(), unit.chunk);
      b_.cast(sharding_.reduce, received_.data(), DType::kF32, mine_.data(), unit.chunk);
      mine = mine_.as<float>();
    }
    b_.add(DType::kF32, unit.own_grad.data(), mine, unit.chunk);
    b_.synchronize();  // the sum's reads of the unit's gradients done
    unit.grads = Buffer();
  });
}

void Transformer::idle_forward() {
  if (!sharded_) throw std::logic_error("transformer: an idle pass is ZeRO-3's");
  // forward()'s gathers and releases in its order (run_layers, then the head's).
  gather_unit(embedding_unit_);
  if (!(tied_head() && last_stage())) release_unit(embedding_unit_);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    gather_unit(layer_unit(l));
    release_unit(layer_unit(l));
  }
  gather_unit(tail_unit_);
  release_unit(tail_unit_);
  release_unit(embedding_unit_);
}

void Transformer::idle_backward() {
  if (!sharded_) throw std::logic_error("transformer: an idle pass is ZeRO-3's");
  // backward()'s collectives in its order, with no gradients of its own.
  gather_unit(tail_unit_);
  if (tied_head() && last_stage()) gather_unit(embedding_unit_);
  scatter_gradients(tail_unit_);
  release_unit(tail_unit_);
  for (std::size_t l = layers_.size(); l-- > 0;) {
    gather_unit(layer_unit(l));
    share_layer_gradients(l);
    scatter_gradients(layer_unit(l));
    release_unit(layer_unit(l));
  }
  scatter_gradients(embedding_unit_);
  release_unit(embedding_unit_);
}

void Transformer::update_shards(const device::AdamW& options) {
  if (!sharded_) throw std::logic_error("transformer: update_shards needs the weights sharded");
  device::AdamW o = options;
  o.step = steps_;
  for (Unit& unit : units_) {
    const std::size_t count = own_count(unit);
    if (count == 0) continue;
    if (!unit.master.data()) {
      unit.master = Buffer(b_, unit.chunk * sizeof(float), Purpose::kOptimizer);
      unit.m = Buffer(b_, unit.chunk * sizeof(float), Purpose::kOptimizer);
      unit.v = Buffer(b_, unit.chunk * sizeof(float), Purpose::kOptimizer);
      b_.cast(options_.dtype, unit.own.data(), DType::kF32, unit.master.data(), count);
      b_.fill_zero(unit.m.data(), unit.m.bytes());
      b_.fill_zero(unit.v.data(), unit.v.bytes());
    }
    b_.adamw(options_.dtype, unit.master.as<float>(), unit.m.as<float>(), unit.v.as<float>(), unit.own_grad.as<float>(),
             unit.own.data(), count, o);
  }
}

}  // namespace hetrl::exec
