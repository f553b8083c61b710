#include "workload/model.h"

#include <fmt/format.h>

#include "core/error.h"

namespace hetrl::workload {

std::int64_t ModelArch::params_per_layer() const {
  const std::int64_t h = hidden;
  const std::int64_t q = static_cast<std::int64_t>(heads) * head_dim;
  const std::int64_t kv = static_cast<std::int64_t>(kv_heads) * head_dim;
  std::int64_t count = h * q + 2 * h * kv + q * h;  // q, k, v, o projections
  count += 3 * h * ffn_hidden;                      // gate, up, down
  count += 2 * h;                                   // input and post-attention norms
  if (qkv_bias) count += q + 2 * kv;
  if (qk_norm) count += 2 * static_cast<std::int64_t>(head_dim);
  return count;
}

std::int64_t ModelArch::embedding_params() const {
  return static_cast<std::int64_t>(vocab) * hidden;
}

std::int64_t ModelArch::lm_head_params() const {
  return tied_embeddings ? 0 : static_cast<std::int64_t>(vocab) * hidden;
}

std::int64_t ModelArch::parameter_count() const {
  return embedding_params() + layers * params_per_layer() + hidden + lm_head_params();
}

void ModelArch::validate() const {
  auto positive = [&](int value, std::string_view field) {
    if (value < 1) {
      throw core::InputError(fmt::format("model {}: {} must be at least 1, found {}",
                                         core::quoted(name), field, value));
    }
  };
  positive(layers, "layers");
  positive(hidden, "hidden");
  positive(heads, "heads");
  positive(kv_heads, "kv_heads");
  positive(head_dim, "head_dim");
  positive(ffn_hidden, "ffn_hidden");
  positive(vocab, "vocab");
  if (heads % kv_heads != 0) {
    throw core::InputError(fmt::format("model {}: heads ({}) must be a multiple of kv_heads ({})",
                                       core::quoted(name), heads, kv_heads));
  }
}

const ModelArch* ModelCatalog::find(std::string_view name) const {
  for (const ModelArch& model : models) {
    if (model.name == name) return &model;
  }
  return nullptr;
}

const ModelArch& ModelCatalog::get(std::string_view name, std::string_view where) const {
  if (const ModelArch* model = find(name)) return *model;
  throw core::InputError(core::located(
      where, fmt::format("unknown model {}{}", core::quoted(name),
                         core::did_you_mean(name, names()))));
}

std::vector<std::string> ModelCatalog::names() const {
  std::vector<std::string> out;
  for (const ModelArch& model : models) out.push_back(model.name);
  return out;
}

}  // namespace hetrl::workload
