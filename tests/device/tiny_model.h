#pragma once
// The model the transformer tests run: small enough to follow in double precision, with
// grouped-query attention (4 heads, 2 kv heads) so that TP 2 splits its kv heads.

#include "workload/model.h"

namespace hetrl::exec {

inline workload::ModelArch tiny(bool qk_norm, bool qkv_bias, bool tied) {
  workload::ModelArch a;
  a.name = "tiny";
  a.layers = 2;
  a.hidden = 32;
  a.heads = 4;
  a.kv_heads = 2;
  a.head_dim = 8;
  a.ffn_hidden = 48;
  a.vocab = 300;
  a.qk_norm = qk_norm;
  a.qkv_bias = qkv_bias;
  a.tied_embeddings = tied;
  return a;
}

}  // namespace hetrl::exec
