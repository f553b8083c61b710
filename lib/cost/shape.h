#pragma once
// FLOPs and bytes of a dense decoder-only model, per token and per pipeline stage: what the
// cost model multiplies by rates. Units: FLOP, bytes, tokens.
//
// A stage holds a contiguous run of layers; the first stage also holds the input embeddings
// and the last the final norm and LM head. Forward FLOPs of a token attending to `context`
// earlier tokens, per layer: 2 x (linear parameters) + 4 x (heads x head_dim) x context
// (scores and weighted sum); the LM head adds 2 x hidden x vocab where logits are needed.
// Backward is twice the forward (gradients of activations and of weights).

#include <array>
#include <cmath>
#include <cstdint>

#include "workload/model.h"

namespace hetrl::cost {

// The part of a model's weights one GPU holds: of the layers [first_layer, first_layer +
// layers) (with the embedding where that includes layer 0, the final norm and head where it
// includes the last), the tp_index-th of tp equal shards of each (of the ends too where the
// vocabulary is split), and under ZeRO-3 one of zero_shards pieces of that.
struct WeightSlice {
  int first_layer = 0;
  int layers = 0;
  int tp = 1;
  int tp_index = 0;
  int zero_shards = 1;
};

struct ModelShape {
  double layer_params = 0;        // parameters of one decoder layer
  double layer_linear_params = 0;  // of which in GEMMs (q, k, v, o, gate, up, down)
  double embedding_params = 0;
  double head_params = 0;          // the head: vocab x hidden, 0 when tied (the embedding matrix
                                   // is reused), hidden for a value head
  double hidden = 0;
  double vocab = 0;
  double q_dim = 0;                // heads x head_dim
  double kv_dim = 0;               // kv_heads x head_dim
  // Bytes the forward pass reads and writes per token and layer outside the GEMMs and fused
  // attention (bf16): two norms (read and write hidden each), two residual adds (read two,
  // write one), rotary embedding of q and k (read and write), the MLP activation (gated: read
  // gate and up, write one; plain: read one, write one). Memory-bound: priced at bandwidth.
  double elementwise_bytes = 0;
  // The same work one eager PyTorch operator at a time (Hugging Face's Llama modules): RMSNorm
  // upcasts, squares, averages, scales, downcasts and multiplies by its weight (36 bytes per
  // element against 4 fused), rotary embedding builds the rotated half and two products and
  // their sum (24 against 4 per q and k element), the gated activation and its product are two
  // operators (10 against 6 per ffn element); the residual adds are the same.
  double eager_elementwise_bytes = 0;
  // Of each, the hidden-wide part: the norms and the residual adds, which every tensor-parallel
  // shard does for every token unless sequence parallelism splits the tokens; the rest (rotary
  // over the heads, the MLP activation over the columns) each shard does for its own share.
  double elementwise_hidden_bytes = 0;
  double eager_elementwise_hidden_bytes = 0;
  // Bytes per token and layer a training pass under selective recompute keeps for the backward
  // (bf16): the layer's input, the fused attention's output, and every second GEMM output of
  // q, k, v, o, gate, up, down (torchtitan's per-op policy saves alternate matmuls).
  double selective_activation_bytes = 0;
  // A layer's GEMMs by the shape of their weights at TP 1 (`out` outputs, n, of `in` inputs,
  // k), each with how many of the layer's GEMMs have it: q (hidden to q_dim), k and v (hidden
  // to kv_dim), o (q_dim to hidden), the MLP's gate and up (hidden to ffn; without the gate
  // one) and its down (ffn to hidden). Tensor parallelism splits a column-parallel GEMM's
  // outputs (q, k, v, gate, up) and a row-parallel one's inputs (o, down).
  struct GemmShape {
    double count = 0;
    double out = 0;
    double in = 0;
    bool column_parallel = true;
  };
  std::array<GemmShape, 5> layer_gemms{};
  static constexpr std::size_t kKvGemms = 1;  // of layer_gemms, k and v's
  // One GEMM's weight on a shard: its FLOPs a token there, its outputs n and inputs k. It runs
  // at the rate of its width, k^s n^(1 - s) for the device's reduction share s
  // (hw::Efficiency::gemm_reduction_share): at s = 0.5 the geometric mean of the two, so the LM
  // head's (hidden to vocab) is several times the hidden size, the MLP's twice or more; at s
  // near 1, a CPU's few-row GEMMs, the inputs' alone.
  struct ShardGemm {
    double flops = 0;
    double n = 0;
    double k = 0;
    double width(double share) const;
  };
  // The layer's GEMMs on one of `tp` shards (layer_gemms' order), k and v split by whole heads
  // (past kv_heads shards each holds a copy of one head's).
  std::array<ShardGemm, 5> shard_layer_gemms(int tp) const;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  // Tensor parallelism splits the embedding and the LM head over the vocabulary (Megatron's
  // and vLLM's vocab-parallel layers); false: every shard holds and runs them whole.
  bool vocab_parallel = true;
  // Tensor parallelism's shards split the norms' and residual adds' tokens (Megatron's
  // sequence parallelism); false: every shard does them whole.
  bool sequence_parallel = true;

  // `head`: the model's last layer, a language head or (a critic's, a reward model's) a value head.
  explicit ModelShape(const workload::ModelArch& arch, workload::Head head = workload::Head::kLanguage);
  // Element-wise bytes per token and layer on one of `tp` shards, fused or eager.
  double shard_elementwise_bytes(bool eager, int tp) const {
    const double all = eager ? eager_elementwise_bytes : elementwise_bytes;
    const double whole = eager ? eager_elementwise_hidden_bytes : elementwise_hidden_bytes;
    return sequence_parallel ? all / tp : whole + (all - whole) / tp;
  }
  ModelShape() = default;

  double total_params() const;
  // Parameters of a stage holding `layers` layers; first and last say which ends it holds.
  double stage_params(int stage_layers, bool first, bool last) const;
  // Of which one GPU of the stage's TP group of `tp` holds: a tp-th of the layers, and of the
  // embedding, final norm and head a tp-th or, without vocab_parallel, all.
  double shard_params(int stage_layers, bool first, bool last, int tp) const;
  // Parameters of a slice (its ZeRO-3 piece where it has one), and those of `want` that `have`
  // holds: the layers both hold, of each the share of the layer both TP shards cover, and the
  // ends both hold (as shard_params splits them), over have's ZeRO-3 pieces. A tied head held
  // apart from the embedding counts as not held.
  double slice_params(const WeightSlice& s) const;
  double held_params(const WeightSlice& want, const WeightSlice& have) const;

  // Forward FLOPs per token through `stage_layers` layers at the given attention context: the
  // GEMMs and the attention (scores and weighted sum).
  double layer_flops(int stage_layers, double context) const {
    return linear_flops(stage_layers) + attention_flops(stage_layers, context);
  }
  double linear_flops(int stage_layers) const { return stage_layers * 2.0 * layer_linear_params; }
  double attention_flops(int stage_layers, double context) const { return stage_layers * 4.0 * q_dim * context; }
  double head_flops() const { return 2.0 * hidden * vocab; }
  // The LM head's GEMM on one of `tp` shards, a token's FLOPs and its shape: its vocabulary
  // split, or whole on every shard without vocab_parallel.
  ShardGemm head_gemm(int tp) const {
    const double shards = vocab_parallel ? tp : 1;
    return {head_flops() / shards, vocab / shards, hidden};
  }
  // The FLOPs a TP group of `tp` spends on one token's logits: the head's once, split over the
  // group, or without vocab_parallel on every GPU of it.
  double group_head_flops(int tp) const { return head_flops() * (vocab_parallel ? 1 : tp); }

  // KV-cache bytes per token per layer on one GPU of a TP group of `tp` (bf16 keys and
  // values; KV heads are split across TP ranks, and replicated when tp exceeds them).
  double kv_bytes_per_token_layer(int tp) const;
};

}  // namespace hetrl::cost
