#include "workload/model.h"

#include <fmt/format.h>

#include "core/error.h"

namespace hetrl::workload {

std::int64_t ModelArch::params_per_layer() const {
  const std::int64_t h = hidden;
  const std::int64_t q = static_cast<std::int64_t>(heads) * head_dim;
  const std::int64_t kv = static_cast<std::int64_t>(kv_heads) * head_dim;
  std::int64_t count = h * q + 2 * h * kv + q * h;  // q, k, v, o projections
  count += (gated_mlp ? 3 : 2) * h * ffn_hidden;    // gate, up, down (or up, down)
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

std::int64_t ModelArch::head_params(Head head) const {
  return head == Head::kScalar ? hidden : lm_head_params();
}

std::int64_t ModelArch::parameter_count(Head head) const {
  return embedding_params() + layers * params_per_layer() + hidden + head_params(head);
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
  const auto implausible = [&](std::string_view what) {
    throw core::InputError(fmt::format("model {}: implausible architecture: {}", core::quoted(name), what));
  };
  const double width = static_cast<double>(heads) * head_dim;
  if (width < hidden / 4.0 || width > hidden * 4.0) {
    implausible(fmt::format("heads x head_dim ({} x {} = {:.0f}) should be within 4x of hidden ({})", heads,
                            head_dim, width, hidden));
  }
  if (ffn_hidden < hidden / 4 || ffn_hidden > 16.0 * hidden) {
    implausible(fmt::format("ffn_hidden ({}) should be between a quarter of and 16 times hidden ({})", ffn_hidden,
                            hidden));
  }
  if (vocab < 256) implausible(fmt::format("vocab ({}) should be at least 256", vocab));
  if (layers > 1024) implausible(fmt::format("layers ({}) should be at most 1024", layers));
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
