#include "exec/transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "exec/timed.h"

namespace hetrl::exec {

using device::Buffer;
using device::DType;
using device::Purpose;

workload::ModelArch scaled(const workload::ModelArch& arch, const Scale& scale) {
  workload::ModelArch s = arch;
  const auto refuse = [&](const std::string& why) {
    throw core::InputError(fmt::format("model {}: cannot scale: {}", core::quoted(arch.name), why));
  };
  if (scale.layers < 0 || scale.hidden < 0 || scale.vocab < 0) refuse("a scale below 0");
  if (scale.layers > 0) {
    if (scale.layers > arch.layers) refuse(fmt::format("--layers {} is more than its {}", scale.layers, arch.layers));
    s.layers = scale.layers;
  }
  if (scale.hidden > 0 && scale.hidden != arch.hidden) {
    if (scale.hidden > arch.hidden) refuse(fmt::format("--hidden {} is more than its {}", scale.hidden, arch.hidden));
    // Heads narrow with the hidden size (head_dim kept), kv heads keep their share of the
    // heads as far as whole heads allow (one kv head at least, each serving as many query
    // heads), and the MLP keeps its ratio to the hidden size.
    const double ratio = static_cast<double>(scale.hidden) / arch.hidden;
    const int group = arch.heads / arch.kv_heads;
    const int heads = std::max(1, static_cast<int>(std::lround(arch.heads * ratio)));
    const int kv_heads = std::max(1, static_cast<int>(std::lround(static_cast<double>(heads) / group)));
    s.hidden = scale.hidden;
    s.kv_heads = kv_heads;
    s.heads = kv_heads * std::max(1, static_cast<int>(std::lround(static_cast<double>(heads) / kv_heads)));
    s.ffn_hidden = std::max(1, static_cast<int>(std::lround(arch.ffn_hidden * ratio)));
  }
  if (scale.vocab > 0) {
    if (scale.vocab > arch.vocab) refuse(fmt::format("--vocab {} is more than its {}", scale.vocab, arch.vocab));
    s.vocab = scale.vocab;
  }
  if (s.layers != arch.layers || s.hidden != arch.hidden || s.vocab != arch.vocab) {
    s.name = fmt::format("{} (scaled: {} layers, hidden {}, vocab {})", arch.name, s.layers, s.hidden, s.vocab);
    s.published_params = 0;
  }
  s.validate();
  return s;
}

namespace {

// A pipeline hook a stage needs: one that is missing is a bug in the caller.
template <class F>
const F& hook(const F& f, const char* name) {
  if (!f) throw std::logic_error(std::string("transformer: a pipeline stage without its ") + name + " hook");
  return f;
}

// Weights are uniform with the standard deviation 0.02 of GPT-2 and Llama initialisation.
constexpr float kWeightBound = 0.02f * 1.7320508f;

// Logits are computed this many values at a time at most (rows x vocab), so scoring long
// batches over a large vocabulary does not hold every row's logits at once.
constexpr std::size_t kLogitChunk = std::size_t{1} << 24;

}  // namespace

Transformer::Transformer(device::Backend& backend, const workload::ModelArch& arch, Head head,
                         const TransformerOptions& options)
    : b_(backend), arch_(arch), head_(head), options_(options), next_seed_(device::mix64(options.seed)) {
  arch_.validate();
  if (!arch_.gated_mlp) {
    throw core::InputError(fmt::format("model {}: hetrl-exec runs gated (SwiGLU) MLPs; this model has a plain one",
                                       core::quoted(arch_.name)));
  }
  if (arch_.head_dim > device::kMaxHeadDim || arch_.head_dim % 2 != 0) {
    throw core::InputError(fmt::format("model {}: head_dim {} must be even and at most {}", core::quoted(arch_.name),
                                       arch_.head_dim, device::kMaxHeadDim));
  }
  const int tp = options_.tp.size;
  // Fewer kv heads than shards: each kv head is copied to the shards whose query heads read
  // it (shard_shape), as Megatron and vLLM do.
  const bool kv_split = tp >= 1 && arch_.kv_heads % tp == 0;
  const bool kv_copied = tp >= 1 && tp % arch_.kv_heads == 0;
  if (tp < 1 || arch_.heads % tp != 0 || (!kv_split && !kv_copied) || arch_.ffn_hidden < tp) {
    throw core::InputError(fmt::format(
        "model {}: TP {} must divide its {} heads, and divide or be a multiple of its {} kv heads",
        core::quoted(arch_.name), tp, arch_.heads, arch_.kv_heads));
  }
  const PipelineParallel& pp = options_.pp;
  const int held = pp.layers > 0 ? pp.layers : arch_.layers - pp.first_layer;
  if (pp.first_layer < 0 || held < 1 || pp.first_layer + held > arch_.layers) {
    throw core::InputError(fmt::format("model {}: a pipeline stage of layers {} to {} of its {}", core::quoted(arch_.name),
                                       pp.first_layer, pp.first_layer + held - 1, arch_.layers));
  }
  first_layer_ = pp.first_layer;
  const bool starts = pp.first_layer == 0, ends = pp.first_layer + held == arch_.layers;
  std::vector<int> local = options_.tp.local;
  if (local.empty()) {
    for (int s = 0; s < tp; ++s) local.push_back(s);
  }
  for (const int s : local) {
    if (s < 0 || s >= tp) throw core::InputError(fmt::format("TP shard {} of {}", s, tp));
    shards_.push_back(shard_shape(arch_, tp, s));
  }
  const std::size_t hidden = static_cast<std::size_t>(arch_.hidden);
  const std::size_t hd = static_cast<std::size_t>(arch_.head_dim);
  const std::size_t q_width = static_cast<std::size_t>(arch_.heads) * hd;
  const std::size_t ffn = static_cast<std::size_t>(arch_.ffn_hidden);
  // Every stage draws every tensor's seed in the same order and makes the ones it holds, so a
  // stage's weights are the whole model's there. The last stage's copy of a tied embedding is
  // the first's.
  const bool ties = tied_head();
  const auto held_weight = [&](bool holds, std::size_t count) {
    if (holds) return make_weight(count, kWeightBound);
    next_seed();
    return Buffer();
  };
  embedding_ = held_weight(starts || (ends && ties), static_cast<std::size_t>(arch_.vocab) * hidden);
  // Each matrix has one seed; a shard fills its rows (column-parallel: q, k, v, gate, up) or
  // its columns (row-parallel: o, down) with the values the whole matrix has there.
  const auto rows_of = [&](std::size_t first, std::size_t count, std::size_t width) {
    return device::Block{count, width, width, first, 0};
  };
  const auto columns_of = [&](std::size_t rows, std::size_t first, std::size_t count, std::size_t full) {
    return device::Block{rows, count, full, 0, first};
  };
  for (int l = 0; l < arch_.layers; ++l) {
    const std::uint64_t seeds[] = {next_seed(), next_seed(), next_seed(), next_seed(), next_seed(), next_seed(),
                                   next_seed()};
    if (l < first_layer_ || l >= first_layer_ + held) continue;
    Layer layer;
    layer.attn_norm = make_constant(hidden, 1.0f);
    if (arch_.qk_norm) {
      layer.q_norm = make_constant(hd, 1.0f);
      layer.k_norm = make_constant(hd, 1.0f);
    }
    layer.mlp_norm = make_constant(hidden, 1.0f);
    for (const ShardShape& sh : shards_) {
      ShardWeights w;
      const std::size_t q0 = static_cast<std::size_t>(sh.first_head) * hd, qn = static_cast<std::size_t>(sh.heads) * hd;
      const std::size_t k0 = static_cast<std::size_t>(sh.first_kv) * hd, kn = static_cast<std::size_t>(sh.kv_heads) * hd;
      const std::size_t f0 = static_cast<std::size_t>(sh.first_ffn), fn = static_cast<std::size_t>(sh.ffn);
      w.wq = make_block(rows_of(q0, qn, hidden), kWeightBound, seeds[0]);
      w.wk = make_block(rows_of(k0, kn, hidden), kWeightBound, seeds[1]);
      w.wv = make_block(rows_of(k0, kn, hidden), kWeightBound, seeds[2]);
      if (arch_.qkv_bias) {
        w.bq = make_constant(qn, 0.0f);
        w.bk = make_constant(kn, 0.0f);
        w.bv = make_constant(kn, 0.0f);
      }
      w.wo = make_block(columns_of(hidden, q0, qn, q_width), kWeightBound, seeds[3]);
      w.w_gate = make_block(rows_of(f0, fn, hidden), kWeightBound, seeds[4]);
      w.w_up = make_block(rows_of(f0, fn, hidden), kWeightBound, seeds[5]);
      w.w_down = make_block(columns_of(hidden, f0, fn, ffn), kWeightBound, seeds[6]);
      layer.shards.push_back(std::move(w));
    }
    layers_.push_back(std::move(layer));
  }
  if (ends) final_norm_ = make_constant(hidden, 1.0f);
  if (head_ == Head::kScalar) {
    lm_head_ = held_weight(ends, hidden);
  } else if (!arch_.tied_embeddings) {
    lm_head_ = held_weight(ends, static_cast<std::size_t>(arch_.vocab) * hidden);
  }
  b_.synchronize();
}

std::size_t Transformer::parameter_bytes() const { return parameter_bytes_; }

void Transformer::release_workspace() {
  workspace_.clear();
  spare_.clear();
}

std::string Transformer::shard_name(const std::string& name, const ShardShape& shard) const {
  return options_.tp.size > 1 ? fmt::format("{}/{}", name, shard.index) : name;
}

std::vector<Transformer::Tensor> Transformer::parameters() {
  std::vector<Tensor> out;
  const std::size_t e = device::dtype_bytes(options_.dtype);
  const auto add = [&](std::string name, Buffer& b) {
    if (b.data()) out.push_back({std::move(name), &b, b.bytes() / e});
  };
  add("embedding", embedding_);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Layer& w = layers_[l];
    const std::string p = layer_prefix(l);
    add(p + "attn_norm", w.attn_norm);
    add(p + "q_norm", w.q_norm);
    add(p + "k_norm", w.k_norm);
    add(p + "mlp_norm", w.mlp_norm);
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      ShardWeights& sw = w.shards[s];
      const ShardShape& sh = shards_[s];
      add(shard_name(p + "wq", sh), sw.wq);
      add(shard_name(p + "wk", sh), sw.wk);
      add(shard_name(p + "wv", sh), sw.wv);
      add(shard_name(p + "bq", sh), sw.bq);
      add(shard_name(p + "bk", sh), sw.bk);
      add(shard_name(p + "bv", sh), sw.bv);
      add(shard_name(p + "wo", sh), sw.wo);
      add(shard_name(p + "w_gate", sh), sw.w_gate);
      add(shard_name(p + "w_up", sh), sw.w_up);
      add(shard_name(p + "w_down", sh), sw.w_down);
    }
  }
  add("final_norm", final_norm_);
  add("head", lm_head_);
  return out;
}

Transformer::ShardShape Transformer::shard_shape(const workload::ModelArch& arch, int tp, int index) {
  // Fewer kv heads than shards: each kv head is copied to the shards whose query heads read
  // it, as Megatron and vLLM do.
  const bool kv_split = arch.kv_heads % tp == 0;
  ShardShape shape;
  shape.index = index;
  shape.heads = arch.heads / tp;
  shape.first_head = index * shape.heads;
  shape.kv_heads = kv_split ? arch.kv_heads / tp : 1;
  shape.first_kv = kv_split ? index * shape.kv_heads : index * arch.kv_heads / tp;
  shape.first_ffn = arch.ffn_hidden * index / tp;
  shape.ffn = arch.ffn_hidden * (index + 1) / tp - shape.first_ffn;
  return shape;
}

std::vector<Transformer::Piece> Transformer::pieces(const ShardShape& from, Layers from_layers, const ShardShape& to,
                                                    Layers to_layers, bool whole) const {
  std::vector<Piece> out;
  const std::size_t hidden = static_cast<std::size_t>(arch_.hidden), hd = static_cast<std::size_t>(arch_.head_dim);
  const std::size_t vocab = static_cast<std::size_t>(arch_.vocab);
  const auto in = [](Layers l, int layer) { return layer >= l.first && layer < l.first + l.count; };
  const auto starts = [](Layers l) { return l.first == 0; };
  const auto ends = [&](Layers l) { return l.first + l.count == arch_.layers; };
  // The tensors every shard holds whole, where the giving stage holds them and the taking one
  // does; the sizes from the architecture, as both sides know them.
  const auto whole_tensor = [&](Weight w, int layer, std::size_t n, bool gives, bool takes) {
    if (whole && gives && takes) out.push_back({w, layer, 0, n, 0, n, n, 1});
  };
  const bool ties = tied_head();
  // A sharded tensor's slice [first, first + count) of the whole one: along its rows (`width`
  // elements a row), one contiguous run, or along its columns (`width` rows), a run a row;
  // one run too where both shards hold the same columns (an equal split), so that the
  // tensor goes straight from one shard's memory to the other's, not through a packed copy
  // on each side.
  struct Slice {
    std::size_t first, count;
  };
  const auto slice = [&](Weight w, int layer, Slice t, Slice f, bool by_rows, std::size_t width) {
    const std::size_t lo = std::max(t.first, f.first), hi = std::min(t.first + t.count, f.first + f.count);
    if (lo >= hi) return;
    if (by_rows || (hi - lo == f.count && hi - lo == t.count)) {
      const std::size_t run = (hi - lo) * width;
      out.push_back({w, layer, (lo - f.first) * width, run, (lo - t.first) * width, run, run, 1});
    } else {
      out.push_back({w, layer, lo - f.first, f.count, lo - t.first, t.count, hi - lo, width});
    }
  };
  const Slice tq{static_cast<std::size_t>(to.first_head) * hd, static_cast<std::size_t>(to.heads) * hd};
  const Slice tk{static_cast<std::size_t>(to.first_kv) * hd, static_cast<std::size_t>(to.kv_heads) * hd};
  const Slice tf{static_cast<std::size_t>(to.first_ffn), static_cast<std::size_t>(to.ffn)};
  const Slice fq{static_cast<std::size_t>(from.first_head) * hd, static_cast<std::size_t>(from.heads) * hd};
  const Slice fk{static_cast<std::size_t>(from.first_kv) * hd, static_cast<std::size_t>(from.kv_heads) * hd};
  const Slice ff{static_cast<std::size_t>(from.first_ffn), static_cast<std::size_t>(from.ffn)};
  // The embedding: a first stage's from the giving first stage; a last stage's copy of a tied
  // one from the giving last stage's (the two copies step alike), so that a layout split
  // alike takes it where it is.
  whole_tensor(Weight::kEmbedding, -1, vocab * hidden, starts(to_layers) ? starts(from_layers) : ends(from_layers),
               starts(to_layers) || (ends(to_layers) && ties));
  for (int l = 0; l < arch_.layers; ++l) {
    if (!in(from_layers, l) || !in(to_layers, l)) continue;
    whole_tensor(Weight::kAttnNorm, l, hidden, true, true);
    whole_tensor(Weight::kQNorm, l, hd, arch_.qk_norm, true);
    whole_tensor(Weight::kKNorm, l, hd, arch_.qk_norm, true);
    whole_tensor(Weight::kMlpNorm, l, hidden, true, true);
    slice(Weight::kWq, l, tq, fq, true, hidden);
    slice(Weight::kWk, l, tk, fk, true, hidden);
    slice(Weight::kWv, l, tk, fk, true, hidden);
    if (arch_.qkv_bias) {
      slice(Weight::kBq, l, tq, fq, true, 1);
      slice(Weight::kBk, l, tk, fk, true, 1);
      slice(Weight::kBv, l, tk, fk, true, 1);
    }
    slice(Weight::kWo, l, tq, fq, false, hidden);
    slice(Weight::kGate, l, tf, ff, true, hidden);
    slice(Weight::kUp, l, tf, ff, true, hidden);
    slice(Weight::kDown, l, tf, ff, false, hidden);
  }
  const bool head_ends = ends(from_layers) && ends(to_layers);
  whole_tensor(Weight::kFinalNorm, -1, hidden, head_ends, true);
  whole_tensor(Weight::kHead, -1, head_ == Head::kScalar ? hidden : vocab * hidden, head_ends, !ties);
  return out;
}

std::size_t Transformer::local_shard(int index) const {
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    if (shards_[s].index == index) return s;
  }
  throw std::logic_error(fmt::format("transformer: shard {} is not held here", index));
}

const Buffer& Transformer::weight(Weight w, int layer, int shard) const {
  switch (w) {
    case Weight::kEmbedding: return embedding_;
    case Weight::kFinalNorm: return final_norm_;
    case Weight::kHead: return lm_head_;
    default: break;
  }
  const Layer& l = this->layer(layer);
  switch (w) {
    case Weight::kAttnNorm: return l.attn_norm;
    case Weight::kQNorm: return l.q_norm;
    case Weight::kKNorm: return l.k_norm;
    case Weight::kMlpNorm: return l.mlp_norm;
    default: break;
  }
  const ShardWeights& s = l.shards[local_shard(shard)];
  switch (w) {
    case Weight::kWq: return s.wq;
    case Weight::kWk: return s.wk;
    case Weight::kWv: return s.wv;
    case Weight::kBq: return s.bq;
    case Weight::kBk: return s.bk;
    case Weight::kBv: return s.bv;
    case Weight::kWo: return s.wo;
    case Weight::kGate: return s.w_gate;
    case Weight::kUp: return s.w_up;
    default: return s.w_down;
  }
}

std::string Transformer::layer_prefix(std::size_t local) const {
  return fmt::format("layer.{}.", first_layer_ + static_cast<int>(local));
}

const Transformer::Layer& Transformer::layer(int index) const {
  const int local = index - first_layer_;
  if (local < 0 || local >= static_cast<int>(layers_.size())) {
    throw std::logic_error(fmt::format("transformer: layer {} is not held here", index));
  }
  return layers_[static_cast<std::size_t>(local)];
}

Buffer& Transformer::weight(Weight w, int layer, int shard) {
  return const_cast<Buffer&>(std::as_const(*this).weight(w, layer, shard));
}

void Transformer::check_reshard(const Transformer& from) const {
  if (from.arch_.name != arch_.name || from.arch_.layers != arch_.layers || from.arch_.hidden != arch_.hidden ||
      from.arch_.vocab != arch_.vocab || from.head_ != head_ || from.options_.dtype != options_.dtype) {
    throw std::logic_error("transformer: a reshard needs the same model on both sides");
  }
}

void Transformer::load_shard(const Transformer& from, int from_shard, int to_shard, bool whole) {
  check_reshard(from);
  check_whole("load");
  from.check_whole("a reshard");
  const std::size_t e = device::dtype_bytes(options_.dtype);
  const ShardShape& f = from.shards_[from.local_shard(from_shard)];
  for (const Piece& p : pieces(f, from.layers(), shards_[local_shard(to_shard)], layers(), whole)) {
    const char* in = static_cast<const char*>(from.weight(p.weight, p.layer, from_shard).data());
    char* out = static_cast<char*>(weight(p.weight, p.layer, to_shard).data());
    b_.copy_2d(out + p.to * e, p.to_pitch * e, in + p.from * e, p.from_pitch * e, p.run * e, p.rows);
  }
  optimizer_.clear();
  units_.clear();
}

void Transformer::load(const Transformer& from) {
  check_reshard(from);
  const Layers given = from.layers(), taken = layers();
  if (static_cast<int>(from.shards_.size()) != from.options_.tp.size || given.first > taken.first ||
      given.first + given.count < taken.first + taken.count) {
    throw std::logic_error("transformer: load needs every shard and layer of the giving model");
  }
  for (const ShardShape& to : shards_) {
    // The tensors every shard holds whole once, with the first pair.
    for (const ShardShape& f : from.shards_) {
      load_shard(from, f.index, to.index, f.index == from.shards_.front().index && to.index == shards_.front().index);
    }
  }
}

void Transformer::send_shard(int from_shard, int to_tp, int to_shard, bool whole, Layers to_layers,
                             const SendPiece& send) {
  check_whole("a reshard");
  const std::size_t e = device::dtype_bytes(options_.dtype);
  for (const Piece& p :
       pieces(shards_[local_shard(from_shard)], layers(), shard_shape(arch_, to_tp, to_shard), to_layers, whole)) {
    const char* in = static_cast<const char*>(weight(p.weight, p.layer, from_shard).data()) + p.from * e;
    if (p.rows == 1) {
      send(in, p.run * e);
    } else {
      Buffer& block = scratch("reshard", p.run * p.rows * e);
      b_.copy_2d(block.data(), p.run * e, in, p.from_pitch * e, p.run * e, p.rows);
      send(block.data(), p.run * p.rows * e);
    }
  }
}

void Transformer::receive_shard(int from_tp, int from_shard, Layers from_layers, int to_shard, bool whole,
                                const ReceivePiece& receive) {
  check_whole("a reshard");
  const std::size_t e = device::dtype_bytes(options_.dtype);
  for (const Piece& p :
       pieces(shard_shape(arch_, from_tp, from_shard), from_layers, shards_[local_shard(to_shard)], layers(), whole)) {
    char* out = static_cast<char*>(weight(p.weight, p.layer, to_shard).data()) + p.to * e;
    if (p.rows == 1) {
      receive(out, p.run * e);
    } else {
      Buffer& block = scratch("reshard", p.run * p.rows * e);
      receive(block.data(), p.run * p.rows * e);
      b_.copy_2d(out, p.to_pitch * e, block.data(), p.run * e, p.run * e, p.rows);
    }
  }
  optimizer_.clear();
  units_.clear();
}

std::uint64_t Transformer::next_seed() {
  const std::uint64_t seed = next_seed_;
  next_seed_ = device::mix64(next_seed_);
  return seed;
}

Buffer Transformer::make_weight(std::size_t count, float bound) { return make_block(device::whole(count), bound, next_seed()); }

Buffer Transformer::make_block(const device::Block& block, float bound, std::uint64_t seed) {
  Buffer w(b_, block.count() * device::dtype_bytes(options_.dtype), Purpose::kWeights);
  b_.fill_uniform(options_.dtype, w.data(), block, -bound, bound, seed);
  parameter_bytes_ += w.bytes();
  return w;
}

Buffer Transformer::make_constant(std::size_t count, float value) {
  Buffer w(b_, count * device::dtype_bytes(options_.dtype), Purpose::kWeights);
  b_.fill_value(options_.dtype, w.data(), count, value);
  parameter_bytes_ += w.bytes();
  return w;
}

Buffer& Transformer::scratch(const std::string& name, std::size_t bytes) {
  Buffer& buffer = workspace_[name];
  if (buffer.bytes() < bytes) {
    buffer = Buffer();  // released before the larger one is taken
    buffer = Buffer(b_, bytes, Purpose::kWorkspace);
  }
  return buffer;
}

Buffer& Transformer::upload_floats(const std::string& name, const std::vector<float>& values) {
  Buffer& buffer = scratch(name, std::max<std::size_t>(1, values.size()) * sizeof(float));
  if (!values.empty()) b_.upload(buffer.data(), values.data(), values.size() * sizeof(float));
  return buffer;
}

Buffer& Transformer::upload_ints(const std::string& name, const std::vector<int>& values) {
  Buffer& buffer = scratch(name, std::max<std::size_t>(1, values.size()) * sizeof(int));
  if (!values.empty()) b_.upload(buffer.data(), values.data(), values.size() * sizeof(int));
  return buffer;
}

void Transformer::linear(const Buffer& x, const Buffer& w, Buffer& y, int rows, int in, int out, bool accumulate) {
  device::Gemm g;
  g.dtype = options_.dtype;
  g.m = rows;
  g.n = out;
  g.k = in;
  g.b_transposed = true;
  g.accumulate = accumulate;
  b_.gemm(g, x.data(), w.data(), y.data());
}

void Transformer::reduce(Buffer& x, std::size_t count) {
  if (!options_.tp.all_reduce) return;
  timed_call(collective_time_, options_.tp.timed, [&] { options_.tp.all_reduce(options_.dtype, x.data(), count); });
}

Transformer::Cache Transformer::make_cache(int slots, int capacity) {
  if (slots < 1 || capacity < 1) throw core::InputError("a KV cache needs at least one slot and one position");
  Cache cache;
  cache.slots_ = slots;
  cache.capacity_ = capacity;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    for (const ShardShape& sh : shards_) {
      const std::size_t bytes = static_cast<std::size_t>(slots) * static_cast<std::size_t>(capacity) *
                                static_cast<std::size_t>(sh.kv_heads) * static_cast<std::size_t>(arch_.head_dim) *
                                device::dtype_bytes(options_.dtype);
      cache.k.emplace_back(b_, bytes, Purpose::kKvCache);
      cache.v.emplace_back(b_, bytes, Purpose::kKvCache);
    }
  }
  return cache;
}

const Buffer& Transformer::run_layers(const Step& step, Pass* pass) {
  const bool save = pass != nullptr;
  const DType t = options_.dtype;
  const std::size_t e = device::dtype_bytes(t);
  const int rows = static_cast<int>(step.tokens.size());
  const int hidden = arch_.hidden, head_dim = arch_.head_dim;
  const std::size_t n = static_cast<std::size_t>(rows);
  const std::size_t local = shards_.size();
  const bool packed = !step.starts.empty();
  Buffer& tokens = upload_ints("tokens", step.tokens);
  Buffer& positions = upload_ints("positions", step.positions);
  Buffer& lengths = upload_ints(packed ? "starts" : "lengths", packed ? step.starts : step.lengths);
  Buffer* slots = step.slots.empty() ? nullptr : &upload_ints("slots", step.slots);
  Buffer* rows_at = step.cache ? &upload_ints("rows_at", step.rows_at) : nullptr;
  // A training forward keeps each layer's activations in its pass (sized to the step); any
  // other step works in the workspace.
  if (save) {
    pass->saved.resize(layers_.size());
    for (Saved& keep : pass->saved) keep.shards.resize(local);
  }
  const auto kept = [&](Buffer& saved, const std::string& name, std::size_t bytes) -> Buffer& {
    if (!save) return scratch(name, bytes);
    if (saved.bytes() < bytes) {
      saved = Buffer();
      saved = Buffer(b_, bytes, Purpose::kActivations);
    }
    return saved;
  };
  Buffer& tmp = scratch("tmp", n * hidden * e);

  Buffer unsaved;
  Buffer* x = &kept(save ? pass->saved.front().x_in : unsaved, "x", n * hidden * e);
  // Under ZeRO-3 each unit is gathered just before its use and freed after (idle_forward runs
  // the same collectives): the embedding kept to the end where it is the head.
  gather_unit(embedding_unit_);
  if (first_stage()) {
    b_.embed(t, embedding_.data(), tokens.as<int>(), x->data(), rows, hidden);
  } else {
    b_.synchronize();
    hook(options_.pp.receive_activations, "receive_activations")(x->data(), n * hidden * e);
  }
  if (!(tied_head() && last_stage())) release_unit(embedding_unit_);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    gather_unit(layer_unit(l));
    const Layer& w = layers_[l];
    Saved dummy;
    dummy.shards.resize(local);
    Saved& keep = save ? pass->saved[l] : dummy;
    Buffer& h = kept(keep.h, "h", n * hidden * e);
    b_.rmsnorm(t, x->data(), w.attn_norm.data(), h.data(), rows, hidden, options_.norm_eps);
    // Attention, shard by shard over its heads; the output projections' partial sums add up
    // in tmp, and over the other processes' shards.
    for (std::size_t s = 0; s < local; ++s) {
      const ShardShape& sh = shards_[s];
      const ShardWeights& sw = w.shards[s];
      SavedShard& ks = keep.shards[s];
      const std::string tag = std::to_string(s);
      const int q_width = sh.heads * head_dim, kv_width = sh.kv_heads * head_dim;
      Buffer& q = kept(ks.q, "q" + tag, n * q_width * e);
      Buffer& k = kept(ks.k, "k" + tag, n * kv_width * e);
      Buffer& v = kept(ks.v, "v" + tag, n * kv_width * e);
      Buffer& o = kept(ks.o, "o" + tag, n * q_width * e);
      Buffer& q_raw = arch_.qk_norm ? kept(ks.q_raw, "q_raw" + tag, n * q_width * e) : q;
      Buffer& k_raw = arch_.qk_norm ? kept(ks.k_raw, "k_raw" + tag, n * kv_width * e) : k;
      float* lse = save ? kept(ks.lse, "lse" + tag, n * sh.heads * sizeof(float)).as<float>() : nullptr;
      linear(h, sw.wq, q_raw, rows, hidden, q_width);
      linear(h, sw.wk, k_raw, rows, hidden, kv_width);
      linear(h, sw.wv, v, rows, hidden, kv_width);
      if (arch_.qkv_bias) {
        b_.add_bias(t, q_raw.data(), sw.bq.data(), rows, q_width);
        b_.add_bias(t, k_raw.data(), sw.bk.data(), rows, kv_width);
        b_.add_bias(t, v.data(), sw.bv.data(), rows, kv_width);
      }
      if (arch_.qk_norm) {
        b_.rmsnorm(t, q_raw.data(), w.q_norm.data(), q.data(), rows * sh.heads, head_dim, options_.norm_eps);
        b_.rmsnorm(t, k_raw.data(), w.k_norm.data(), k.data(), rows * sh.kv_heads, head_dim, options_.norm_eps);
      }
      b_.rope_at(t, q.data(), positions.as<int>(), rows, sh.heads, head_dim, options_.rope_theta, false);
      b_.rope_at(t, k.data(), positions.as<int>(), rows, sh.kv_heads, head_dim, options_.rope_theta, false);
      const void* keys = k.data();
      const void* values = v.data();
      if (step.cache) {
        Cache& cache = *step.cache;
        const std::size_t at = l * local + s;
        b_.scatter(t, k.data(), rows_at->as<int>(), cache.k[at].data(), rows, kv_width);
        b_.scatter(t, v.data(), rows_at->as<int>(), cache.v[at].data(), rows, kv_width);
        keys = cache.k[at].data();
        values = cache.v[at].data();
      }
      if (packed) {
        b_.packed_attention(packed_shape(step.batch, rows, sh), q.data(), keys, values, lengths.as<int>(), o.data(),
                            lse);
      } else {
        device::Attention a;
        a.dtype = t;
        a.batch = step.batch;
        a.queries = step.queries;
        a.heads = sh.heads;
        a.kv_heads = sh.kv_heads;
        a.head_dim = head_dim;
        a.capacity = step.cache ? step.cache->capacity() : step.queries;
        b_.attention(a, q.data(), keys, values, lengths.as<int>(), slots ? slots->as<int>() : nullptr, o.data(), lse);
      }
      linear(o, sw.wo, tmp, rows, q_width, hidden, s > 0);
    }
    reduce(tmp, n * hidden);
    if (save) {
      // The residual stream after attention is kept apart from the layer's input.
      Buffer& mid = kept(keep.x_mid, "x_mid", n * hidden * e);
      b_.copy(mid.data(), x->data(), n * hidden * e);
      x = &mid;
    }
    b_.add(t, x->data(), tmp.data(), n * hidden);
    Buffer& h2 = kept(keep.h2, "h2", n * hidden * e);
    b_.rmsnorm(t, x->data(), w.mlp_norm.data(), h2.data(), rows, hidden, options_.norm_eps);
    for (std::size_t s = 0; s < local; ++s) {
      const ShardShape& sh = shards_[s];
      const ShardWeights& sw = w.shards[s];
      const std::string tag = std::to_string(s);
      const std::size_t width = static_cast<std::size_t>(sh.ffn);
      Buffer& gate = kept(keep.shards[s].gate, "gate" + tag, n * width * e);
      Buffer& up = kept(keep.shards[s].up, "up" + tag, n * width * e);
      Buffer& act = scratch("act", n * width * e);
      linear(h2, sw.w_gate, gate, rows, hidden, sh.ffn);
      linear(h2, sw.w_up, up, rows, hidden, sh.ffn);
      b_.swiglu(t, gate.data(), up.data(), act.data(), n * width);
      linear(act, sw.w_down, tmp, rows, sh.ffn, hidden, s > 0);
    }
    reduce(tmp, n * hidden);
    if (save) {
      Buffer& next = l + 1 < layers_.size() ? kept(pass->saved[l + 1].x_in, "x", n * hidden * e)
                                            : kept(pass->x_out, "x_out", n * hidden * e);
      b_.copy(next.data(), x->data(), n * hidden * e);
      x = &next;
    }
    b_.add(t, x->data(), tmp.data(), n * hidden);
    release_unit(layer_unit(l));
  }
  if (!last_stage()) {
    b_.synchronize();
    hook(options_.pp.send_activations, "send_activations")(x->data(), n * hidden * e);
    return *x;
  }
  gather_unit(tail_unit_);  // freed with the embedding after the head's outputs
  Buffer& final_states = save ? kept(pass->final_states, "final", n * hidden * e) : scratch("final", n * hidden * e);
  b_.rmsnorm(t, x->data(), final_norm_.data(), final_states.data(), rows, hidden, options_.norm_eps);
  return final_states;
}

namespace {

void check_sequences(const std::vector<int>& tokens, int batch, int length, int vocab, const char* what) {
  if (batch < 1 || length < 1 || tokens.size() != static_cast<std::size_t>(batch) * static_cast<std::size_t>(length)) {
    throw core::InputError(fmt::format("{}: {} tokens for {} sequences of {}", what, tokens.size(), batch, length));
  }
  for (int token : tokens) {
    if (token < 0 || token >= vocab) {
      throw core::InputError(fmt::format("{}: token {} outside the vocabulary of {}", what, token, vocab));
    }
  }
}

}  // namespace

Transformer::Step Transformer::whole_sequences(const std::vector<int>& tokens, int batch, int length,
                                               const std::vector<int>& ends, const char* what) const {
  check_sequences(tokens, batch, length, arch_.vocab, what);
  if (!ends.empty() && ends.size() != static_cast<std::size_t>(batch)) {
    throw core::InputError(fmt::format("{}: {} sequence ends for {} sequences", what, ends.size(), batch));
  }
  Step step;
  step.batch = batch;
  step.queries = length;
  step.starts.push_back(0);
  for (int s = 0; s < batch; ++s) {
    const int end = ends.empty() ? length : std::clamp(ends[static_cast<std::size_t>(s)], 0, length);
    const auto from = tokens.begin() + static_cast<long>(s) * length;
    step.tokens.insert(step.tokens.end(), from, from + end);
    for (int p = 0; p < end; ++p) step.positions.push_back(p);
    step.starts.push_back(step.starts.back() + end);
  }
  if (step.tokens.empty()) throw core::InputError(fmt::format("{}: every sequence ends before its first token", what));
  return step;
}

device::PackedAttention Transformer::packed_shape(int batch, int rows, const ShardShape& shard) const {
  device::PackedAttention a;
  a.dtype = options_.dtype;
  a.batch = batch;
  a.tokens = rows;
  a.heads = shard.heads;
  a.kv_heads = shard.kv_heads;
  a.head_dim = arch_.head_dim;
  return a;
}

void Transformer::head_logits(const Buffer& states, int first, int rows, Buffer& logits) {
  const std::size_t e = device::dtype_bytes(options_.dtype);
  device::Gemm g;
  g.dtype = options_.dtype;
  g.m = rows;
  g.n = arch_.vocab;
  g.k = arch_.hidden;
  g.b_transposed = true;
  b_.gemm(g, static_cast<const char*>(states.data()) + static_cast<std::size_t>(first) * arch_.hidden * e,
          language_head().data(), logits.data());
}

int Transformer::logit_chunk() const {
  return static_cast<int>(std::max<std::size_t>(1, kLogitChunk / static_cast<std::size_t>(arch_.vocab)));
}

std::vector<float> Transformer::score(const std::vector<int>& tokens, int batch, int length, int first,
                                      const std::vector<int>& ends) {
  const Step step = whole_sequences(tokens, batch, length, ends, "score");
  const Buffer& final_states = run_layers(step);
  std::vector<float> out;
  if (last_stage()) out = head_outputs(final_states, step, length, scored_positions(step, length, first));
  release_unit(tail_unit_);
  release_unit(embedding_unit_);
  return out;
}

Transformer::Scored Transformer::scored_positions(const Step& step, int length, int first) {
  Scored scored;
  scored.length = length;
  first = std::clamp(first, 0, length - 1);
  for (int s = 0; s < step.batch; ++s) {
    const int count = step.length_of(s) - 1 - first;
    if (count <= 0) continue;
    scored.runs.push_back({s, first, count, scored.rows, step.start(s) + first});
    scored.rows += count;
  }
  return scored;
}

const Buffer& Transformer::scored_rows(const Buffer& final_states, const Scored& scored) {
  const std::size_t row = static_cast<std::size_t>(arch_.hidden) * device::dtype_bytes(options_.dtype);
  Buffer& rows = scratch("scored_rows", std::max<std::size_t>(1, static_cast<std::size_t>(scored.rows)) * row);
  for (const Scored::Run& r : scored.runs) {
    b_.copy(static_cast<char*>(rows.data()) + static_cast<std::size_t>(r.at) * row,
            static_cast<const char*>(final_states.data()) + static_cast<std::size_t>(r.row) * row,
            static_cast<std::size_t>(r.count) * row);
  }
  return rows;
}

std::vector<int> Transformer::scored_targets(const std::vector<int>& packed, const Scored& scored) {
  std::vector<int> targets;
  for (const Scored::Run& r : scored.runs) {
    for (int i = 1; i <= r.count; ++i) targets.push_back(packed[static_cast<std::size_t>(r.row + i)]);
  }
  return targets;
}

std::vector<float> Transformer::head_outputs(const Buffer& final_states, const Step& step, int length,
                                             const Scored& scored) {
  const DType t = options_.dtype;
  const std::size_t e = device::dtype_bytes(t);
  const int batch = step.batch, rows = static_cast<int>(step.tokens.size());
  std::vector<float> out;
  if (head_ == Head::kScalar) {
    Buffer& values = scratch("values", static_cast<std::size_t>(rows) * e);
    Buffer& wide = scratch("values_f32", static_cast<std::size_t>(rows) * sizeof(float));
    linear(final_states, lm_head_, values, rows, arch_.hidden, 1);
    b_.cast(t, values.data(), DType::kF32, wide.data(), static_cast<std::size_t>(rows));
    std::vector<float> packed(static_cast<std::size_t>(rows));
    b_.download(packed.data(), wide.data(), packed.size() * sizeof(float));
    // Each sequence's values at its positions; none past its end.
    out.assign(static_cast<std::size_t>(batch) * static_cast<std::size_t>(length), 0.0f);
    for (int s = 0; s < batch; ++s) {
      std::copy(packed.begin() + step.start(s), packed.begin() + step.start(s + 1), out.begin() + static_cast<long>(s) * length);
    }
    return out;
  }
  // Log-probabilities of the scored positions' next tokens, in chunks of rows of the logits.
  out.assign(static_cast<std::size_t>(batch) * static_cast<std::size_t>(length - 1), 0.0f);
  if (scored.rows == 0) return out;
  const Buffer& states = scored_rows(final_states, scored);
  Buffer& device_targets = upload_ints("targets", scored_targets(step.tokens, scored));
  const int chunk = logit_chunk();
  Buffer& logits = scratch("logits", static_cast<std::size_t>(std::min(chunk, scored.rows)) * arch_.vocab * e);
  Buffer& losses = scratch("losses", static_cast<std::size_t>(scored.rows) * sizeof(float));
  for (int from = 0; from < scored.rows; from += chunk) {
    const int count = std::min(chunk, scored.rows - from);
    head_logits(states, from, count, logits);
    b_.cross_entropy(t, logits.data(), device_targets.as<int>() + from, losses.as<float>() + from, nullptr, count,
                     arch_.vocab, 1.0f, nullptr);
  }
  std::vector<float> all(static_cast<std::size_t>(scored.rows));
  b_.download(all.data(), losses.data(), all.size() * sizeof(float));
  for (const Scored::Run& r : scored.runs) {
    for (int i = 0; i < r.count; ++i) {
      out[static_cast<std::size_t>(r.sequence * (length - 1) + r.first + i)] = -all[static_cast<std::size_t>(r.at + i)];
    }
  }
  return out;
}

std::vector<float> Transformer::forward(const std::vector<int>& tokens, int batch, int length, int first,
                                        const std::vector<int>& ends) {
  Step step = whole_sequences(tokens, batch, length, ends, "forward");
  // A pass done before lends its buffers.
  Pass pass;
  if (!spare_.empty()) {
    pass = std::move(spare_.back());
    spare_.pop_back();
  }
  pass.scored = scored_positions(step, length, first);
  const Buffer& final_states = run_layers(step, &pass);
  std::vector<float> out;
  if (last_stage()) out = head_outputs(final_states, step, length, pass.scored);
  release_unit(tail_unit_);
  release_unit(embedding_unit_);
  pass.length = length;
  pass.step = std::move(step);
  passes_.push_back(std::move(pass));
  return out;
}

Buffer& Transformer::grad(const std::string& name) {
  Optimizer& o = optimizer_[name];
  if (!o.grad.data() && sharded_) {
    // Under ZeRO-3 a unit's gradients are views of one buffer of the unit's, reduce-scattered
    // whole (scatter_gradients).
    if (const auto [unit, t] = unit_of(name); unit) {
      o.grad = Buffer::view(unit_gradients(*unit) + t->at, t->count * sizeof(float));
      return o.grad;
    }
  }
  if (!o.grad.data()) {
    const std::size_t count = parameter_elements(name);
    if (count == 0) throw std::logic_error("transformer: no parameter " + name);
    o.grad = device::zeros(b_, count * sizeof(float), Purpose::kGradients);
  }
  return o.grad;
}

void Transformer::add_grad(const std::string& name, const Buffer& fp32, std::size_t count) {
  b_.add(DType::kF32, grad(name).data(), fp32.data(), count);
}

void Transformer::linear_backward(const Buffer& x, const Buffer& w, const Buffer& dy, Buffer* dx, bool accumulate_dx,
                                  const std::string& weight, int rows, int in, int out) {
  if (dx) {
    device::Gemm g;  // dx[rows][in] = dy[rows][out] w[out][in]
    g.dtype = options_.dtype;
    g.m = rows;
    g.n = in;
    g.k = out;
    g.accumulate = accumulate_dx;
    b_.gemm(g, dy.data(), w.data(), dx->data());
  }
  device::Gemm g;  // dw[out][in] += dy^T x
  g.dtype = options_.dtype;
  g.m = out;
  g.n = in;
  g.k = rows;
  g.a_transposed = true;
  g.c_fp32 = true;
  g.accumulate = true;
  b_.gemm(g, dy.data(), x.data(), grad(weight).data());
}

void Transformer::backward(const std::vector<float>& doutput) {
  if (passes_.empty()) throw std::logic_error("transformer: backward without a training forward before it");
  {
    const Pass& next = passes_.front();
    const std::size_t outputs = !last_stage() ? 0
                                : static_cast<std::size_t>(next.step.batch) *
                                      static_cast<std::size_t>(head_ == Head::kScalar ? next.length : next.length - 1);
    if (doutput.size() != outputs) {
      throw core::InputError(fmt::format("backward: {} output gradients for {} outputs", doutput.size(), outputs));
    }
  }
  Pass pass = std::move(passes_.front());
  passes_.pop_front();
  const DType t = options_.dtype;
  const std::size_t e = device::dtype_bytes(t);
  const Step& step = pass.step;
  const int batch = step.batch, length = pass.length, rows = static_cast<int>(step.tokens.size());
  const int hidden = arch_.hidden, head_dim = arch_.head_dim;
  const std::size_t n = static_cast<std::size_t>(rows);
  Buffer& dx = scratch("dx", n * hidden * e);
  Buffer& dfinal = scratch("dfinal", n * hidden * e);
  Buffer& dtmp = scratch("dtmp", n * hidden * e);
  Buffer& dnorm = scratch("dnorm", static_cast<std::size_t>(std::max(hidden, head_dim)) * sizeof(float));
  const Buffer& final_states = pass.final_states;
  // Under ZeRO-3 the units are gathered again as the pass reaches them and their gradients
  // reduce-scattered once complete (idle_backward runs the same collectives).
  gather_unit(tail_unit_);
  if (tied_head() && last_stage()) gather_unit(embedding_unit_);

  if (!last_stage()) {
    // The gradient of this stage's output rows, from the next stage.
    b_.synchronize();
    hook(options_.pp.receive_gradients, "receive_gradients")(dx.data(), n * hidden * e);
  } else if (head_ == Head::kScalar) {
    // The gradients of the values each sequence has, packed as its rows are.
    std::vector<float> packed;
    for (int s = 0; s < batch; ++s) {
      const auto from = doutput.begin() + static_cast<long>(s) * length;
      packed.insert(packed.end(), from, from + step.length_of(s));
    }
    Buffer& wide = upload_floats("dvalues_f32", packed);
    Buffer& dvalues = scratch("dvalues", n * e);
    b_.cast(DType::kF32, wide.data(), t, dvalues.data(), n);
    linear_backward(final_states, lm_head_, dvalues, &dfinal, false, "head", rows, hidden, 1);
  } else {
    // The cross-entropy kernel's gradient is d(-log p)/d logits times a row weight, so each
    // scored row's weight is -d loss / d log p; the rows the head did not score get none.
    const Scored& scored = pass.scored;
    std::vector<float> weights(static_cast<std::size_t>(std::max(1, scored.rows)), 0.0f);
    for (const Scored::Run& r : scored.runs) {
      for (int i = 0; i < r.count; ++i) {
        weights[static_cast<std::size_t>(r.at + i)] = -doutput[static_cast<std::size_t>(r.sequence * (length - 1) + r.first + i)];
      }
    }
    b_.fill_zero(dfinal.data(), n * hidden * e);
    if (scored.rows > 0) {
      Buffer& row_weights = upload_floats("row_weights", weights);
      Buffer& targets = upload_ints("targets", scored_targets(step.tokens, scored));
      const Buffer& states = scored_rows(final_states, scored);
      Buffer& dstates = scratch("dscored_rows", static_cast<std::size_t>(scored.rows) * hidden * e);
      const int chunk = logit_chunk();
      Buffer& logits = scratch("logits", static_cast<std::size_t>(std::min(chunk, scored.rows)) * arch_.vocab * e);
      Buffer& losses = scratch("losses", static_cast<std::size_t>(scored.rows) * sizeof(float));
      const Buffer& head = language_head();
      const std::string head_name = arch_.tied_embeddings ? "embedding" : "head";
      for (int from = 0; from < scored.rows; from += chunk) {
        // The chunk's logits again (not kept: rows x vocab), their gradient in place.
        const int count = std::min(chunk, scored.rows - from);
        const std::size_t offset = static_cast<std::size_t>(from) * hidden * e;
        head_logits(states, from, count, logits);
        b_.cross_entropy(t, logits.data(), targets.as<int>() + from, losses.as<float>() + from, logits.data(), count,
                         arch_.vocab, 1.0f, row_weights.as<float>() + from);
        device::Gemm back;  // dstates[count][hidden] = dlogits head
        back.dtype = t;
        back.m = count;
        back.n = hidden;
        back.k = arch_.vocab;
        b_.gemm(back, logits.data(), head.data(), static_cast<char*>(dstates.data()) + offset);
        device::Gemm dw;  // dhead[vocab][hidden] += dlogits^T states
        dw.dtype = t;
        dw.m = arch_.vocab;
        dw.n = hidden;
        dw.k = count;
        dw.a_transposed = true;
        dw.c_fp32 = true;
        dw.accumulate = true;
        b_.gemm(dw, logits.data(), static_cast<const char*>(states.data()) + offset, grad(head_name).data());
      }
      // Back to each sequence's rows of the final states.
      const std::size_t row = static_cast<std::size_t>(hidden) * e;
      for (const Scored::Run& r : scored.runs) {
        b_.copy(static_cast<char*>(dfinal.data()) + static_cast<std::size_t>(r.row) * row,
                static_cast<const char*>(dstates.data()) + static_cast<std::size_t>(r.at) * row,
                static_cast<std::size_t>(r.count) * row);
      }
    }
  }
  if (last_stage()) {
    b_.rmsnorm_backward(t, pass.x_out.data(), final_norm_.data(), dfinal.data(), dx.data(), dnorm.as<float>(), rows,
                        hidden, options_.norm_eps);
    add_grad("final_norm", dnorm, static_cast<std::size_t>(hidden));
  }
  scatter_gradients(tail_unit_);
  release_unit(tail_unit_);

  Buffer& positions = upload_ints("positions", step.positions);
  Buffer& starts = upload_ints("starts", step.starts);
  for (std::size_t l = layers_.size(); l-- > 0;) {
    gather_unit(layer_unit(l));
    const Layer& w = layers_[l];
    const Saved& saved = pass.saved[l];
    const std::string p = layer_prefix(l);
    // The MLP: x_out = x_mid + sum over shards of down_s(swiglu(gate_s(h2), up_s(h2))),
    // h2 = norm(x_mid); each shard's part of d h2 adds up in dtmp, and over the processes.
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const ShardShape& sh = shards_[s];
      const ShardWeights& sw = w.shards[s];
      const SavedShard& ss = saved.shards[s];
      const std::size_t width = static_cast<std::size_t>(sh.ffn);
      Buffer& act = scratch("act", n * width * e);
      Buffer& dact = scratch("dact", n * width * e);
      Buffer& dgate = scratch("dgate", n * width * e);
      Buffer& dup = scratch("dup", n * width * e);
      b_.swiglu(t, ss.gate.data(), ss.up.data(), act.data(), n * width);
      linear_backward(act, sw.w_down, dx, &dact, false, shard_name(p + "w_down", sh), rows, sh.ffn, hidden);
      b_.swiglu_backward(t, ss.gate.data(), ss.up.data(), dact.data(), dgate.data(), dup.data(), n * width);
      linear_backward(saved.h2, sw.w_gate, dgate, &dtmp, s > 0, shard_name(p + "w_gate", sh), rows, hidden, sh.ffn);
      linear_backward(saved.h2, sw.w_up, dup, &dtmp, true, shard_name(p + "w_up", sh), rows, hidden, sh.ffn);
    }
    reduce(dtmp, n * hidden);
    b_.rmsnorm_backward(t, saved.x_mid.data(), w.mlp_norm.data(), dtmp.data(), dfinal.data(), dnorm.as<float>(), rows,
                        hidden, options_.norm_eps);
    add_grad(p + "mlp_norm", dnorm, static_cast<std::size_t>(hidden));
    b_.add(t, dx.data(), dfinal.data(), n * hidden);
    // Attention: x_mid = x_in + sum over shards of o_s(attention(q_s, k_s, v_s)), the shard's
    // heads from h = norm(x_in).
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const ShardShape& sh = shards_[s];
      const ShardWeights& sw = w.shards[s];
      const SavedShard& ss = saved.shards[s];
      const int q_width = sh.heads * head_dim, kv_width = sh.kv_heads * head_dim;
      Buffer& dq = scratch("dq", n * q_width * e);
      Buffer& dq_raw = scratch("dq_raw", n * q_width * e);
      Buffer& dk = scratch("dk", n * kv_width * e);
      Buffer& dk_raw = scratch("dk_raw", n * kv_width * e);
      Buffer& dv = scratch("dv", n * kv_width * e);
      Buffer& dout = scratch("do", n * q_width * e);
      Buffer& delta = scratch("delta", n * sh.heads * sizeof(float));
      linear_backward(ss.o, sw.wo, dx, &dout, false, shard_name(p + "wo", sh), rows, q_width, hidden);
      b_.packed_attention_backward(packed_shape(batch, rows, sh), ss.q.data(), ss.k.data(), ss.v.data(),
                                   starts.as<int>(), ss.o.data(), dout.data(), ss.lse.as<float>(), delta.as<float>(),
                                   dq.data(), dk.data(), dv.data());
      b_.rope_at(t, dq.data(), positions.as<int>(), rows, sh.heads, head_dim, options_.rope_theta, true);
      b_.rope_at(t, dk.data(), positions.as<int>(), rows, sh.kv_heads, head_dim, options_.rope_theta, true);
      Buffer* dq_in = &dq;
      Buffer* dk_in = &dk;
      if (arch_.qk_norm) {
        b_.rmsnorm_backward(t, ss.q_raw.data(), w.q_norm.data(), dq.data(), dq_raw.data(), dnorm.as<float>(),
                            rows * sh.heads, head_dim, options_.norm_eps);
        add_grad(p + "q_norm", dnorm, static_cast<std::size_t>(head_dim));
        b_.rmsnorm_backward(t, ss.k_raw.data(), w.k_norm.data(), dk.data(), dk_raw.data(), dnorm.as<float>(),
                            rows * sh.kv_heads, head_dim, options_.norm_eps);
        add_grad(p + "k_norm", dnorm, static_cast<std::size_t>(head_dim));
        dq_in = &dq_raw;
        dk_in = &dk_raw;
      }
      if (arch_.qkv_bias) {
        b_.bias_backward(t, dq_in->data(), grad(shard_name(p + "bq", sh)).as<float>(), rows, q_width);
        b_.bias_backward(t, dk_in->data(), grad(shard_name(p + "bk", sh)).as<float>(), rows, kv_width);
        b_.bias_backward(t, dv.data(), grad(shard_name(p + "bv", sh)).as<float>(), rows, kv_width);
      }
      linear_backward(saved.h, sw.wq, *dq_in, &dtmp, s > 0, shard_name(p + "wq", sh), rows, hidden, q_width);
      linear_backward(saved.h, sw.wk, *dk_in, &dtmp, true, shard_name(p + "wk", sh), rows, hidden, kv_width);
      linear_backward(saved.h, sw.wv, dv, &dtmp, true, shard_name(p + "wv", sh), rows, hidden, kv_width);
    }
    reduce(dtmp, n * hidden);
    b_.rmsnorm_backward(t, saved.x_in.data(), w.attn_norm.data(), dtmp.data(), dfinal.data(), dnorm.as<float>(), rows,
                        hidden, options_.norm_eps);
    add_grad(p + "attn_norm", dnorm, static_cast<std::size_t>(hidden));
    b_.add(t, dx.data(), dfinal.data(), n * hidden);
    if (sharded_) {
      share_layer_gradients(l);
      scatter_gradients(layer_unit(l));
      release_unit(layer_unit(l));
    }
  }
  if (first_stage()) {
    Buffer& tokens = upload_ints("tokens", step.tokens);
    b_.embed_backward(t, dx.data(), tokens.as<int>(), grad("embedding").as<float>(), rows, hidden);
  } else {
    b_.synchronize();
    hook(options_.pp.send_gradients, "send_gradients")(dx.data(), n * hidden * e);
  }
  scatter_gradients(embedding_unit_);
  release_unit(embedding_unit_);
  spare_.push_back(std::move(pass));
}

void Transformer::step(const device::AdamW& options) {
  check_whole("step");
  begin_step();
  update(options, partition(0, 1));
  end_step();
}

void Transformer::begin_step() {
  ++steps_;
  // A tied embedding split over stages: the head's gradient on the last stage's copy and the
  // input's on the first's make one gradient, summed into both, which step alike (a stage
  // between them holds neither). Under ZeRO-3 the two stages' embedding units are alike, so
  // their stretches of the sum are.
  if ((first_stage() != last_stage()) && tied_head()) {
    if (sharded_) {
      Unit& unit = units_.at(static_cast<std::size_t>(embedding_unit_));
      hook(options_.pp.sum_tied_embedding, "sum_tied_embedding")(unit.own_grad.as<float>(), unit.chunk);
    } else {
      Buffer& g = grad("embedding");
      hook(options_.pp.sum_tied_embedding, "sum_tied_embedding")(g.as<float>(), g.bytes() / sizeof(float));
    }
  }
  if (!sharded_) {
    for (std::size_t l = 0; l < layers_.size(); ++l) share_layer_gradients(l);
  }
}

void Transformer::share_layer_gradients(std::size_t l) {
  const std::string p = layer_prefix(l);
  // The qk norms are whole on every shard but each shard's heads give a part of their
  // gradient: summed over the processes holding the other shards.
  if (arch_.qk_norm && options_.tp.all_reduce) {
    for (const char* norm : {"q_norm", "k_norm"}) {
      Buffer& g = grad(p + norm);
      options_.tp.all_reduce(DType::kF32, g.data(), g.bytes() / sizeof(float));
    }
  }
  // A kv head copied to several shards has one gradient: the sum of its copies'.
  if (options_.tp.size > arch_.kv_heads) {
    if (static_cast<int>(shards_.size()) < options_.tp.size) {
      throw std::logic_error("transformer: training kv heads copied over processes is not supported");
    }
    for (const char* tensor : {"wk", "wv", "bk", "bv"}) {
      if (!arch_.qkv_bias && tensor[0] == 'b') continue;
      for (std::size_t a = 0; a < shards_.size(); ++a) {
        if (a > 0 && shards_[a - 1].first_kv == shards_[a].first_kv) continue;  // its group's first only
        std::size_t end = a + 1;
        while (end < shards_.size() && shards_[end].first_kv == shards_[a].first_kv) ++end;
        Buffer& total = grad(shard_name(p + tensor, shards_[a]));
        const std::size_t count = total.bytes() / sizeof(float);
        for (std::size_t c = a + 1; c < end; ++c) b_.add(DType::kF32, total.data(), grad(shard_name(p + tensor, shards_[c])).data(), count);
        for (std::size_t c = a + 1; c < end; ++c) b_.copy(grad(shard_name(p + tensor, shards_[c])).data(), total.data(), total.bytes());
      }
    }
  }
}

void Transformer::update(const device::AdamW& options, Stretch stretch) {
  check_whole("update");
  device::AdamW o = options;
  o.step = steps_;
  const std::size_t e = device::dtype_bytes(options_.dtype);
  for_each_piece(stretch, [&](const Tensor& p, std::size_t first, std::size_t count, std::size_t) {
    Optimizer& opt = optimizer_[p.name];
    if (!opt.grad.data()) return;  // no gradient reached it (a head another task trains)
    auto moments = std::find_if(opt.moments.begin(), opt.moments.end(), [&](const Moments& m) { return m.first == first; });
    if (moments == opt.moments.end()) {
      Moments m;
      m.first = first;
      m.master = Buffer(b_, count * sizeof(float), Purpose::kOptimizer);
      m.m = Buffer(b_, count * sizeof(float), Purpose::kOptimizer);
      m.v = Buffer(b_, count * sizeof(float), Purpose::kOptimizer);
      b_.cast(options_.dtype, static_cast<const char*>(p.buffer->data()) + first * e, DType::kF32, m.master.data(), count);
      b_.fill_zero(m.m.data(), m.m.bytes());
      b_.fill_zero(m.v.data(), m.v.bytes());
      opt.moments.push_back(std::move(m));
      moments = std::prev(opt.moments.end());
    }
    if (moments->master.bytes() != count * sizeof(float)) throw std::logic_error("transformer: a stretch of another partition");
    b_.adamw(options_.dtype, moments->master.as<float>(), moments->m.as<float>(), moments->v.as<float>(),
             opt.grad.as<float>() + first, static_cast<char*>(p.buffer->data()) + first * e, count, o);
  });
}

void Transformer::end_step() {
  for (auto& [name, opt] : optimizer_) {
    if (opt.grad.data()) b_.fill_zero(opt.grad.data(), opt.grad.bytes());
  }
  if (sharded_) {
    for (Unit& unit : units_) b_.fill_zero(unit.own_grad.data(), unit.own_grad.bytes());
  }
}

std::size_t Transformer::parameter_elements(const std::string& name) {
  for (const Tensor& p : parameters()) {
    if (p.name == name) return p.count;
  }
  // A unit ZeRO-3 holds only a stretch of now.
  const auto [unit, t] = unit_of(name);
  return unit ? t->count : 0;
}

std::size_t Transformer::parameter_count() {
  std::size_t count = 0;
  for (const Tensor& p : parameters()) count += p.count;
  return count;
}

Transformer::Stretch Transformer::partition(int part, int parts) {
  if (parts < 1 || part < 0 || part >= parts) throw std::logic_error("transformer: a partition outside its parts");
  const std::size_t count = parameter_count();
  const std::size_t chunk = (count + static_cast<std::size_t>(parts) - 1) / static_cast<std::size_t>(parts);
  const std::size_t first = std::min(count, chunk * static_cast<std::size_t>(part));
  return {first, std::min(count, first + chunk)};
}

void Transformer::for_each_piece(Stretch stretch,
                                 const std::function<void(const Tensor&, std::size_t, std::size_t, std::size_t)>& f) {
  std::size_t at = 0;
  for (const Tensor& p : parameters()) {
    const std::size_t from = std::max(at, stretch.first), to = std::min(at + p.count, stretch.last);
    if (from < to) f(p, from - at, to - from, from - stretch.first);
    at += p.count;
  }
}

namespace {

// Makes each tensor `buffer(p)` a view of its place in one flat buffer of `bytes` in
// parameters() order, `element` bytes an element: `flat`, replaced by a new one of zeros where
// its size differs, which takes each tensor's contents before the one they were views of goes;
// a tensor with none gets zeros.
template <typename Place>
void* into_flat(device::Backend& b, device::Buffer& flat, std::size_t bytes, std::size_t element, Purpose purpose,
                const std::vector<Transformer::Tensor>& tensors, Place buffer) {
  Buffer fresh;
  if (flat.bytes() != bytes) fresh = device::zeros(b, bytes, purpose);
  auto* start = static_cast<std::byte*>((fresh.data() ? fresh : flat).data());
  std::size_t at = 0;
  for (const Transformer::Tensor& p : tensors) {
    std::byte* place = start + at;
    const std::size_t size = p.count * element;
    Buffer& held = buffer(p);
    if (held.data() != place) {
      if (held.data()) {
        b.copy(place, held.data(), size);
      } else {
        b.fill_zero(place, size);
      }
      held = Buffer::view(place, size);
    }
    at += size;
  }
  if (fresh.data()) flat = std::move(fresh);
  return start;
}

}  // namespace

float* Transformer::flat_gradients(std::size_t elements) {
  check_whole("flat_gradients");
  if (elements < parameter_count()) throw std::logic_error("transformer: a flat gradient shorter than the parameters");
  return static_cast<float*>(into_flat(b_, flat_gradients_, elements * sizeof(float), sizeof(float), Purpose::kGradients, parameters(),
                                       [&](const Tensor& p) -> Buffer& { return optimizer_[p.name].grad; }));
}

void* Transformer::flat_weights(std::size_t elements) {
  check_whole("flat_weights");
  if (elements < parameter_count()) throw std::logic_error("transformer: a flat weight buffer shorter than the parameters");
  const std::size_t e = device::dtype_bytes(options_.dtype);
  return into_flat(b_, flat_weights_, elements * e, e, Purpose::kWeights, parameters(), [](const Tensor& p) -> Buffer& { return *p.buffer; });
}

void Transformer::reduce_gradients(const std::function<void(float* data, std::size_t count)>& sum) {
  check_whole("reduce_gradients");
  for (const Tensor& p : parameters()) {
    Buffer& g = grad(p.name);
    sum(g.as<float>(), g.bytes() / sizeof(float));
  }
}

double Transformer::gradient_norm() {
  if (!sharded_) return gradient_norm(partition(0, 1), {});
  // Under ZeRO-3 each process's stretches of the summed gradients, over the group.
  double squares[2] = {0, 0};  // whole, sharded
  for (const Unit& unit : units_) {
    const std::size_t first = unit.chunk * static_cast<std::size_t>(sharding_.rank), last = first + own_count(unit);
    for (const UnitTensor& t : unit.tensors) {
      const std::size_t from = std::max(first, t.at), to = std::min(last, t.at + t.count);
      if (from >= to || (t.name == "embedding" && !first_stage())) continue;
      squares[options_.tp.size > 1 && t.name.find('/') != std::string::npos ? 1 : 0] +=
          b_.sum_squares(unit.own_grad.as<float>() + (from - first), to - from);
    }
  }
  sharding_.sum(squares, 2);
  return norm_of(squares);
}

double Transformer::gradient_norm(Stretch stretch, const std::function<void(double* squares, int count)>& over_replicas) {
  check_whole("gradient_norm of a stretch");
  // Whole tensors' gradients are alike on every shard; the shards' own add up over the
  // processes holding the others.
  double squares[2] = {0, 0};  // whole, sharded
  for_each_piece(stretch, [&](const Tensor& p, std::size_t first, std::size_t count, std::size_t) {
    const auto found = optimizer_.find(p.name);
    if (found == optimizer_.end() || !found->second.grad.data()) return;
    // The last stage's copy of a tied embedding counts once, with the first's.
    if (p.name == "embedding" && !first_stage()) return;
    const double sum = b_.sum_squares(found->second.grad.as<float>() + first, count);
    squares[options_.tp.size > 1 && p.name.find('/') != std::string::npos ? 1 : 0] += sum;
  });
  if (over_replicas) over_replicas(squares, 2);
  return norm_of(squares);
}

double Transformer::norm_of(double* squares) {
  if (options_.tp.all_reduce) {
    float part = static_cast<float>(squares[1]);
    Buffer& one = scratch("norm", sizeof(float));
    b_.upload(one.data(), &part, sizeof part);
    options_.tp.all_reduce(DType::kF32, one.data(), 1);
    b_.download(&part, one.data(), sizeof part);
    squares[1] = part;
  }
  if (options_.pp.sum_over_stages) options_.pp.sum_over_stages(squares, 2);
  return std::sqrt(squares[0] + squares[1]);
}

std::vector<float> Transformer::gradient(const std::string& name) {
  const auto found = optimizer_.find(name);
  if (found == optimizer_.end() || !found->second.grad.data()) return {};
  std::vector<float> out(found->second.grad.bytes() / sizeof(float));
  b_.download(out.data(), found->second.grad.data(), out.size() * sizeof(float));
  return out;
}

const Buffer& Transformer::prefill(Cache& cache, int slot, const std::vector<int>& prompt) {
  return prefill(cache, std::vector<int>{slot}, prompt, static_cast<int>(prompt.size()));
}

const Buffer& Transformer::prefill(Cache& cache, const std::vector<int>& slots, const std::vector<int>& tokens,
                                   int length) {
  check_whole("prefill");
  const int batch = static_cast<int>(slots.size());
  if (batch < 1 || length < 1 || length > cache.capacity() ||
      tokens.size() != static_cast<std::size_t>(batch) * static_cast<std::size_t>(length)) {
    throw core::InputError(fmt::format("prefill: {} tokens for {} prompts of {} into a cache of {} positions",
                                       tokens.size(), batch, length, cache.capacity()));
  }
  Step step;
  step.batch = batch;
  step.queries = length;
  step.cache = &cache;
  step.tokens = tokens;
  step.slots = slots;
  for (const int slot : slots) {
    if (slot < 0 || slot >= cache.slots() || std::count(slots.begin(), slots.end(), slot) > 1) {
      throw core::InputError(fmt::format("prefill: slot {} twice or outside a cache of {} slots", slot, cache.slots()));
    }
    for (int p = 0; p < length; ++p) {
      step.positions.push_back(p);
      step.rows_at.push_back(slot * cache.capacity() + p);
    }
    step.lengths.push_back(length);
  }
  const Buffer& final_states = run_layers(step);
  if (!last_stage()) return scratch("no_logits", 0);
  // Each prompt's last position, gathered into one block for the head.
  const std::size_t row = static_cast<std::size_t>(arch_.hidden) * device::dtype_bytes(options_.dtype);
  Buffer& last = scratch("prefill_last", static_cast<std::size_t>(batch) * row);
  for (int b = 0; b < batch; ++b) {
    b_.copy(static_cast<char*>(last.data()) + static_cast<std::size_t>(b) * row,
            static_cast<const char*>(final_states.data()) +
                (static_cast<std::size_t>(b) * static_cast<std::size_t>(length) + static_cast<std::size_t>(length - 1)) * row,
            row);
  }
  Buffer& logits = scratch("step_logits", static_cast<std::size_t>(batch) * arch_.vocab * device::dtype_bytes(options_.dtype));
  head_logits(last, 0, batch, logits);
  return logits;
}

const Buffer& Transformer::decode(Cache& cache, const std::vector<int>& slots, const std::vector<int>& tokens,
                                  const std::vector<int>& positions) {
  check_whole("decode");
  const int rows = static_cast<int>(slots.size());
  if (rows < 1 || tokens.size() != slots.size() || positions.size() != slots.size()) {
    throw core::InputError("decode: slots, tokens and positions must be as many, and at least one");
  }
  Step step;
  step.batch = rows;
  step.queries = 1;
  step.cache = &cache;
  step.tokens = tokens;
  step.positions = positions;
  step.slots = slots;
  for (int r = 0; r < rows; ++r) {
    const std::size_t i = static_cast<std::size_t>(r);
    if (slots[i] < 0 || slots[i] >= cache.slots() || positions[i] < 0 || positions[i] >= cache.capacity()) {
      throw core::InputError(fmt::format("decode: slot {} position {} outside a cache of {} slots of {} positions",
                                         slots[i], positions[i], cache.slots(), cache.capacity()));
    }
    step.lengths.push_back(positions[i] + 1);
    step.rows_at.push_back(slots[i] * cache.capacity() + positions[i]);
  }
  const Buffer& final_states = run_layers(step);
  if (!last_stage()) return scratch("no_logits", 0);
  Buffer& logits = scratch("step_logits", static_cast<std::size_t>(rows) * arch_.vocab * device::dtype_bytes(options_.dtype));
  head_logits(final_states, 0, rows, logits);
  return logits;
}

std::vector<int> Transformer::sample(const Buffer& logits, int rows, float temperature, std::uint64_t seed,
                                     const std::vector<int>& sequences, const std::vector<int>& positions) {
  std::vector<int> out(static_cast<std::size_t>(rows));
  if (!last_stage()) {
    hook(options_.pp.share_tokens, "share_tokens")(out.data(), out.size());
    return out;
  }
  Buffer& ds = upload_ints("sample_sequences", sequences);
  Buffer& dp = upload_ints("sample_positions", positions);
  Buffer& tokens = scratch("sampled", static_cast<std::size_t>(rows) * sizeof(int));
  b_.sample(options_.dtype, logits.data(), rows, arch_.vocab, temperature, seed, ds.as<int>(), dp.as<int>(),
            tokens.as<int>());
  b_.download(out.data(), tokens.data(), out.size() * sizeof(int));
  if (!first_stage()) hook(options_.pp.share_tokens, "share_tokens")(out.data(), out.size());
  return out;
}

}  // namespace hetrl::exec
