#pragma once
// Dense decoder-only LLM architectures and their parameter counts. The shape is what the cost
// model needs (FLOPs, bytes, KV cache); the count is derived from it, never stored, and the
// catalogue's published count only checks it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hetrl::workload {

// The layer a model ends in: a language head (logits over the vocabulary; the input embedding
// reused where the embeddings are tied) or a value head (hidden -> 1, one value per token), which
// replaces it in a critic or a reward model built from a language model.
enum class Head {
  kLanguage,
  kScalar,
};

struct ModelArch {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int ffn_hidden = 0;  // MLP width: gate and up (or up alone) project hidden -> ffn_hidden, down back
  bool gated_mlp = true;  // SwiGLU-style gate and up, or one up projection (GPT, OPT, MPT)
  int vocab = 0;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  std::int64_t published_params = 0;  // as the publisher states it, for checking
  std::string source;
  // Where the weights are published (a Hugging Face repository id, "Qwen/Qwen3-8B"): what a
  // runtime's configuration names as the model's path. Empty when unknown.
  std::string repository;

  std::int64_t params_per_layer() const;
  std::int64_t embedding_params() const;  // input embeddings
  std::int64_t lm_head_params() const;    // 0 when tied
  // The head's own parameters: lm_head_params() for a language head, hidden for a value head.
  std::int64_t head_params(Head head) const;
  std::int64_t parameter_count(Head head = Head::kLanguage) const;

  // Throws core::InputError naming the model and the field: counts below 1, heads not a
  // multiple of kv_heads, or a shape no trained dense model has (attention width far from the
  // hidden size, an MLP narrower than a quarter or wider than 16 times it, a tiny vocabulary).
  void validate() const;
};

struct ModelCatalog {
  std::vector<ModelArch> models;

  const ModelArch* find(std::string_view name) const;
  // Throws core::InputError naming `where` and the closest known name.
  const ModelArch& get(std::string_view name, std::string_view where) const;
  std::vector<std::string> names() const;
};

}  // namespace hetrl::workload
