#include "cost/shape.h"

#include <algorithm>
#include <cmath>

namespace hetrl::cost {

ModelShape::ModelShape(const workload::ModelArch& arch, workload::Head head)
    : layer_params(static_cast<double>(arch.params_per_layer())),
      embedding_params(static_cast<double>(arch.embedding_params())),
      head_params(static_cast<double>(arch.head_params(head))),
      hidden(arch.hidden),
      vocab(arch.vocab),
      q_dim(static_cast<double>(arch.heads) * arch.head_dim),
      kv_dim(static_cast<double>(arch.kv_heads) * arch.head_dim),
      layers(arch.layers),
      heads(arch.heads),
      kv_heads(arch.kv_heads) {
  const double ffn = arch.ffn_hidden;
  layer_gemms = {GemmShape{1, q_dim, hidden, true}, GemmShape{2, kv_dim, hidden, true},
                 GemmShape{1, hidden, q_dim, false}, GemmShape{arch.gated_mlp ? 2.0 : 1.0, ffn, hidden, true},
                 GemmShape{1, hidden, ffn, false}};
  for (const GemmShape& g : layer_gemms) layer_linear_params += g.count * g.out * g.in;
  elementwise_hidden_bytes = 2.0 * 10 * hidden;
  elementwise_bytes = elementwise_hidden_bytes + 2.0 * (2 * (q_dim + kv_dim) + (arch.gated_mlp ? 3.0 : 2.0) * arch.ffn_hidden);
  eager_elementwise_hidden_bytes = 2 * 36 * hidden + 2 * 6 * hidden;
  eager_elementwise_bytes =
      eager_elementwise_hidden_bytes + 24 * (q_dim + kv_dim) + (arch.gated_mlp ? 10.0 : 4.0) * arch.ffn_hidden;
  const double gemm_outputs = q_dim + 2 * kv_dim + 2 * hidden + (arch.gated_mlp ? 2.0 : 1.0) * arch.ffn_hidden;
  selective_activation_bytes = 2.0 * (hidden + q_dim + gemm_outputs / 2);
}

double ModelShape::ShardGemm::width(double share) const {
  if (share == 0.5) return std::sqrt(n * k);
  return std::exp(share * std::log(k) + (1 - share) * std::log(n));
}

std::array<ModelShape::ShardGemm, 5> ModelShape::shard_layer_gemms(int tp) const {
  std::array<ShardGemm, 5> out{};
  for (std::size_t i = 0; i < layer_gemms.size(); ++i) {
    const GemmShape& g = layer_gemms[i];
    const double shards = i == kKvGemms ? std::min(tp, std::max(1, kv_heads)) : tp;
    out[i] = {2.0 * g.count * g.out * g.in / shards, g.column_parallel ? g.out / shards : g.out,
              g.column_parallel ? g.in : g.in / shards};
  }
  return out;
}

double ModelShape::total_params() const {
  return embedding_params + layers * layer_params + hidden + head_params;
}

double ModelShape::stage_params(int stage_layers, bool first, bool last) const {
  double params = stage_layers * layer_params;
  if (first) params += embedding_params;
  if (last) params += hidden + (head_params > 0 ? head_params : (first ? 0.0 : embedding_params));
  return params;
}

double ModelShape::shard_params(int stage_layers, bool first, bool last, int tp) const {
  const double split = stage_layers * layer_params;
  const double ends = stage_params(stage_layers, first, last) - split;
  return split / tp + ends / (vocab_parallel ? tp : 1);
}

double ModelShape::slice_params(const WeightSlice& s) const {
  return shard_params(s.layers, s.first_layer == 0, s.first_layer + s.layers == layers, s.tp) / s.zero_shards;
}

double ModelShape::held_params(const WeightSlice& want, const WeightSlice& have) const {
  const int both_layers = std::min(want.first_layer + want.layers, have.first_layer + have.layers) -
                          std::max(want.first_layer, have.first_layer);
  if (have.layers <= 0 || want.layers <= 0) return 0;
  // The share of a layer both TP shards cover: [i / tp, (i + 1) / tp) of each, intersected.
  const double lo = std::max(static_cast<double>(want.tp_index) / want.tp, static_cast<double>(have.tp_index) / have.tp);
  const double hi =
      std::min(static_cast<double>(want.tp_index + 1) / want.tp, static_cast<double>(have.tp_index + 1) / have.tp);
  const double share = std::max(0.0, hi - lo);
  const bool first = want.first_layer == 0 && have.first_layer == 0;
  const bool last = want.first_layer + want.layers == layers && have.first_layer + have.layers == layers;
  const double ends = stage_params(0, first, last) * (vocab_parallel ? share : 1.0);
  const double held = (std::max(0, both_layers) * layer_params * share + ends) / have.zero_shards;
  return std::min(held, slice_params(want));
}

double ModelShape::kv_bytes_per_token_layer(int tp) const {
  const double heads_per_rank = std::max(1.0, static_cast<double>(kv_heads) / tp);
  return 2.0 /* K and V */ * heads_per_rank * (kv_dim / kv_heads) * 2.0 /* bf16 */;
}

}  // namespace hetrl::cost
