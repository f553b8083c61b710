#pragma once
// The arithmetic of every device kernel, written once. The CPU backend loops over these
// functions; a CUDA kernel calls one of them per thread (cuda_backend.cu), so the tests on the
// CPU check the arithmetic the GPU runs and only launch geometry and memory movement are
// GPU-only.
//
// Reading map: each function does one unit of work (a row, a pair, an element, one query head)
// on storage type T (float, Bf16, Half) and computes in fp32. A function over a row or a head
// takes `lanes`, the workers sharing that unit: one alone on the CPU (OneLane), the 32 threads
// of a warp or a block's threads on the GPU (cuda_backend.cu), each taking every count()-th
// element and combining partial sums and maxima through the lanes. Rows are contiguous; the caller
// passes pointers already offset to the row. The conventions are those of Llama-family models
// (Hugging Face transformers, Megatron-LM): RMSNorm with a learned scale and eps inside the
// square root; RoPE rotating the pairs (i, i + d/2) of each head ("rotate half"), angle
// pos * theta^(-2i/d); SwiGLU = silu(gate) * up; grouped-query attention over a KV cache laid
// out [position][kv_head][head_dim]; cross-entropy in nats over the vocabulary; AdamW with
// bias correction and decoupled weight decay on fp32 master weights.

#include <cmath>

#include "device/numeric.h"

namespace hetrl::device {

// The largest head dimension attention keeps in registers (Llama and Qwen use 128).
inline constexpr int kMaxHeadDim = 256;

// The workers sharing one unit of work. Lane first() of count() takes elements first,
// first + count(), ...; sum, most and least combine one value over every lane and give each
// lane the result, so all lanes go on with the same scalars. A function written against lanes
// computes the same for any number of them but for the order of fp32 additions. kMinCount: the
// fewest lanes a kind has, which sizes per-lane register arrays. This is the CPU's: one worker.
struct OneLane {
  static constexpr int kMinCount = 1;
  HETRL_HD int first() const { return 0; }
  HETRL_HD int count() const { return 1; }
  HETRL_HD float sum(float x) const { return x; }
  HETRL_HD float most(float x) const { return x; }
  HETRL_HD int least(int x) const { return x; }
};

// 1 / sqrt(mean(x^2) + eps) over one row of n.
template <typename T, typename L>
HETRL_HD float inverse_rms(const L& lanes, const T* x, int n, float eps) {
  float squares = 0;
  for (int i = lanes.first(); i < n; i += lanes.count()) {
    const float v = to_float(x[i]);
    squares += v * v;
  }
  return 1.0f / sqrtf(lanes.sum(squares) / static_cast<float>(n) + eps);
}

// y = x * w / sqrt(mean(x^2) + eps) over one row of n.
template <typename T, typename L>
HETRL_HD void rmsnorm_row(const L& lanes, const T* x, const T* w, T* y, int n, float eps) {
  const float r = inverse_rms(lanes, x, n, eps);
  for (int i = lanes.first(); i < n; i += lanes.count()) y[i] = store<T>(to_float(x[i]) * r * to_float(w[i]));
}

// The gradient of rmsnorm_row with respect to x, given dy:
// dx_i = r w_i dy_i - r^3 x_i sum_j(w_j dy_j x_j) / n.
template <typename T, typename L>
HETRL_HD void rmsnorm_backward_row(const L& lanes, const T* x, const T* w, const T* dy, T* dx, int n, float eps) {
  float squares = 0, dot = 0;
  for (int i = lanes.first(); i < n; i += lanes.count()) {
    const float v = to_float(x[i]);
    squares += v * v;
    dot += to_float(w[i]) * to_float(dy[i]) * v;
  }
  squares = lanes.sum(squares);
  dot = lanes.sum(dot);
  const float r = 1.0f / sqrtf(squares / static_cast<float>(n) + eps);
  const float c = r * r * r * dot / static_cast<float>(n);
  for (int i = lanes.first(); i < n; i += lanes.count()) {
    dx[i] = store<T>(r * to_float(w[i]) * to_float(dy[i]) - c * to_float(x[i]));
  }
}

// The gradient of rmsnorm's scale for column `col`, summed over `rows` rows of n, given each
// row's inverse_rms (one thread per column, so no two threads write the same sum).
template <typename T>
HETRL_HD float rmsnorm_weight_grad(const T* x, const T* dy, const float* inverse, int rows, int n, int col) {
  float grad = 0;
  for (int row = 0; row < rows; ++row) {
    const long at = static_cast<long>(row) * n + col;
    grad += to_float(dy[at]) * to_float(x[at]) * inverse[row];
  }
  return grad;
}

// Rotates pair i of one head (elements i and i + head_dim/2) for position pos; `inverse`
// rotates back, which is also the gradient (the rotation is orthogonal).
template <typename T>
HETRL_HD void rope_pair(T* head, int i, int head_dim, float pos, float theta, bool inverse) {
  const int half = head_dim / 2;
  const float frequency = powf(theta, -2.0f * static_cast<float>(i) / static_cast<float>(head_dim));
  const float angle = pos * frequency;
  const float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
  const float a = to_float(head[i]), b = to_float(head[i + half]);
  head[i] = store<T>(a * c - b * s);
  head[i + half] = store<T>(a * s + b * c);
}

HETRL_HD inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// silu(gate) * up for one element.
template <typename T>
HETRL_HD T swiglu(T gate, T up) {
  const float g = to_float(gate);
  return store<T>(g * sigmoid(g) * to_float(up));
}

// The gradients of swiglu for one element given dh.
template <typename T>
HETRL_HD void swiglu_backward(T gate, T up, T dh, T& dgate, T& dup) {
  const float g = to_float(gate), u = to_float(up), d = to_float(dh);
  const float s = sigmoid(g);
  dgate = store<T>(d * u * s * (1.0f + g * (1.0f - s)));
  dup = store<T>(d * g * s);
}

// The lanes share a head's dimensions: lane l holds elements l, l + count, ... of a head in
// slot 0, 1, ... of its register arrays (kHeadSlots<L> of them).
template <typename L>
inline constexpr int kHeadSlots = (kMaxHeadDim + L::kMinCount - 1) / L::kMinCount;

// Calls f(slot, d) for each dimension d of a head this lane holds, in slot 0, 1, ...: a loop
// of fixed length, unrolled on the GPU, so that the per-lane arrays f indexes by slot stay in
// registers (a loop bounded by head_dim put them in local memory: ptxas reported a 32-byte
// stack frame per attention kernel, 64 for the key-value gradient's).
template <typename L, typename F>
HETRL_HD void for_each_slot(const L& lanes, int head_dim, F&& f) {
  HETRL_UNROLL
  for (int slot = 0; slot < kHeadSlots<L>; ++slot) {
    const int d = lanes.first() + slot * lanes.count();
    if (d >= head_dim) return;
    f(slot, d);
  }
}

// a . b over one head's dimensions, summed over the lanes.
template <typename T, typename L>
HETRL_HD float head_dot(const L& lanes, const T* a, const T* b, int head_dim) {
  float dot = 0;
  for (int d = lanes.first(); d < head_dim; d += lanes.count()) dot += to_float(a[d]) * to_float(b[d]);
  return lanes.sum(dot);
}

// A row's maximum and the sum of exp(x - maximum): softmax's denominator, stably.
struct SoftmaxScale {
  float most, total;
};

// One query head attending over cached positions begin to end - 1 with a running maximum
// (the online softmax), so a head reads its cache once. k and v point at the head's kv head in
// position 0; positions are `stride` elements apart. Leaves in acc this lane's dimensions of
// sum_j exp(score_j - most) v_j and returns most (-infinity over no positions) and total =
// sum_j exp(score_j - most).
template <typename T, typename L>
HETRL_HD SoftmaxScale attend_range(const L& lanes, const T* q, const T* k, const T* v, int begin, int end, long stride,
                                   int head_dim, float scale, float (&acc)[kHeadSlots<L>]) {
  for (float& a : acc) a = 0;
  float running_max = -INFINITY, total = 0;
  for (int t = begin; t < end; ++t) {
    const float score = head_dot(lanes, q, k + t * stride, head_dim) * scale;
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max);
    const float p = expf(score - new_max);
    total = total * correction + p;
    const T* vt = v + t * stride;
    for_each_slot(lanes, head_dim, [&](int slot, int d) { acc[slot] = acc[slot] * correction + p * to_float(vt[d]); });
    running_max = new_max;
  }
  return {running_max, total};
}

// One query head attending over `length` cached positions: out = softmax(q K^T * scale) V.
// Returns the log of the softmax's denominator (max + log sum exp), which the backward pass
// uses to recompute the probabilities; -infinity over no positions.
template <typename T, typename L>
HETRL_HD float attend_cached(const L& lanes, const T* q, const T* k, const T* v, int length, long stride,
                             int head_dim, float scale, T* out) {
  float acc[kHeadSlots<L>];
  const SoftmaxScale s = attend_range(lanes, q, k, v, 0, length, stride, head_dim, scale, acc);
  const float inverse = length > 0 ? 1.0f / s.total : 0.0f;
  for_each_slot(lanes, head_dim, [&](int slot, int d) { out[d] = store<T>(acc[slot] * inverse); });
  return length > 0 ? s.most + logf(s.total) : -INFINITY;
}

// Attention split over positions (as flash-decoding does), for steps with too few query heads
// to fill a GPU when each head's positions are taken in turn: a head's positions go to `parts`
// workers, span = ceil(capacity / parts) each, and a second pass combines the parts. A part is
// kPartHeader + head_dim floats: its most, its total, then its unnormalised sums.
inline constexpr int kPartHeader = 2;
inline constexpr int kMinPartPositions = 32;

// How many parts for `rows` query heads over up to `capacity` positions each on a device that
// runs `workers` of them at once: enough that the rows fill the workers, none shorter than
// kMinPartPositions positions; 1 (no split) where the rows fill it already.
HETRL_HD inline int attention_parts(long rows, int capacity, long workers) {
  if (rows <= 0 || capacity <= kMinPartPositions) return 1;
  const long wanted = (workers + rows - 1) / rows;
  const long longest = (capacity + kMinPartPositions - 1) / kMinPartPositions;
  const long parts = wanted < longest ? wanted : longest;
  return parts > 1 ? static_cast<int>(parts) : 1;
}

// Part `index` of a query head that sees `length` positions, each part `span` positions.
template <typename T, typename L>
HETRL_HD void attend_cached_part(const L& lanes, const T* q, const T* k, const T* v, int length, int index, int span,
                                 long stride, int head_dim, float scale, float* part) {
  const int begin = index * span;
  const int end = begin + span < length ? begin + span : length;  // at or before begin: no positions
  float acc[kHeadSlots<L>];
  const SoftmaxScale s = attend_range(lanes, q, k, v, begin, end, stride, head_dim, scale, acc);
  if (lanes.first() == 0) {
    part[0] = s.most;
    part[1] = s.total;
  }
  for_each_slot(lanes, head_dim, [&](int slot, int d) { part[kPartHeader + d] = acc[slot]; });
}

// A query head's `count` parts (one after another) combined into out, rescaling each part's
// sums from its maximum to the overall one; returns the log of the denominator as
// attend_cached does.
template <typename T, typename L>
HETRL_HD float combine_attention_parts(const L& lanes, const float* parts, int count, int head_dim, T* out) {
  const long size = kPartHeader + head_dim;
  float most = -INFINITY;
  for (int p = 0; p < count; ++p) most = fmaxf(most, parts[p * size]);
  float acc[kHeadSlots<L>];
  for (float& a : acc) a = 0;
  float total = 0;
  for (int p = 0; p < count; ++p) {
    const float* part = parts + p * size;
    if (!(part[1] > 0)) continue;  // no positions
    const float weight = expf(part[0] - most);
    total += weight * part[1];
    for_each_slot(lanes, head_dim, [&](int slot, int d) { acc[slot] += weight * part[kPartHeader + d]; });
  }
  const float inverse = total > 0 ? 1.0f / total : 0.0f;
  for_each_slot(lanes, head_dim, [&](int slot, int d) { out[d] = store<T>(acc[slot] * inverse); });
  return total > 0 ? most + logf(total) : -INFINITY;
}

// Which query of a step sees a cached position: a step appends `queries` tokens to a sequence
// whose cache then holds `length` positions, and its query t sees positions 0 to
// length - queries + t (causal). visible_length gives query t's count, first_query_seeing the
// first query that sees position j.
HETRL_HD inline int visible_length(int length, int queries, int t) { return length - queries + t + 1; }
HETRL_HD inline int first_query_seeing(int length, int queries, int j) {
  const int t = j - (length - queries);
  return t > 0 ? t : 0;
}

// The packed sequence holding row `row`: the last s with starts[s] <= row, over `batch`
// sequences (PackedAttention's starts).
HETRL_HD inline int packed_sequence(const int* starts, int batch, int row) {
  int low = 0, high = batch - 1;
  while (low < high) {
    const int mid = (low + high + 1) / 2;
    if (starts[mid] <= row) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

// D = dout . out for one query head: the softmax backward's row term.
template <typename T, typename L>
HETRL_HD float attention_delta(const L& lanes, const T* out, const T* dout, int head_dim) {
  return head_dot(lanes, out, dout, head_dim);
}

// The gradient of attend_cached with respect to its query, for one query head:
// dq = scale sum_j p_j (dout . v_j - delta) k_j, with p_j = exp(scale q . k_j - lse) recomputed.
template <typename T, typename L>
HETRL_HD void attend_cached_dq(const L& lanes, const T* q, const T* k, const T* v, const T* dout, float lse,
                               float delta, int length, long stride, int head_dim, float scale, T* dq) {
  float acc[kHeadSlots<L>];
  for (float& a : acc) a = 0;
  for (int t = 0; t < length; ++t) {
    const T* kt = k + t * stride;
    const float score = head_dot(lanes, q, kt, head_dim);
    const float dp = head_dot(lanes, dout, v + t * stride, head_dim);
    const float ds = expf(score * scale - lse) * (dp - delta);
    for_each_slot(lanes, head_dim, [&](int slot, int d) { acc[slot] += ds * to_float(kt[d]); });
  }
  for_each_slot(lanes, head_dim, [&](int slot, int d) { dq[d] = store<T>(acc[slot] * scale); });
}

// The gradients of one cached key and value (position j of one kv head) over every query head
// that reads them: the queries first..queries-1 of the step, heads group_first..+group-1.
// q and dout are the step's [query][head][head_dim]; lse and delta its [query][head].
template <typename T, typename L>
HETRL_HD void attend_cached_dkv(const L& lanes, const T* q, const T* dout, const float* lse, const float* delta,
                                const T* kj, const T* vj, int first, int queries, int heads, int group_first,
                                int group, int head_dim, float scale, T* dk, T* dv) {
  float dk_acc[kHeadSlots<L>], dv_acc[kHeadSlots<L>];
  for (int slot = 0; slot < kHeadSlots<L>; ++slot) dk_acc[slot] = dv_acc[slot] = 0;
  for (int t = first; t < queries; ++t) {
    for (int h = group_first; h < group_first + group; ++h) {
      const long row = static_cast<long>(t) * heads + h;
      const T* qh = q + row * head_dim;
      const T* doh = dout + row * head_dim;
      const float score = head_dot(lanes, qh, kj, head_dim);
      const float dp = head_dot(lanes, doh, vj, head_dim);
      const float p = expf(score * scale - lse[row]);
      const float ds = p * (dp - delta[row]) * scale;
      for_each_slot(lanes, head_dim, [&](int slot, int d) {
        dv_acc[slot] += p * to_float(doh[d]);
        dk_acc[slot] += ds * to_float(qh[d]);
      });
    }
  }
  for_each_slot(lanes, head_dim, [&](int slot, int d) {
    dk[d] = store<T>(dk_acc[slot]);
    dv[d] = store<T>(dv_acc[slot]);
  });
}

template <typename T, typename L>
HETRL_HD SoftmaxScale softmax_scale(const L& lanes, const T* x, int n) {
  float most = -INFINITY;
  for (int i = lanes.first(); i < n; i += lanes.count()) most = fmaxf(most, to_float(x[i]));
  most = lanes.most(most);
  float total = 0;
  for (int i = lanes.first(); i < n; i += lanes.count()) total += expf(to_float(x[i]) - most);
  return {most, lanes.sum(total)};
}

// In-place softmax over one row of n.
template <typename T, typename L>
HETRL_HD void softmax_row(const L& lanes, T* x, int n) {
  const SoftmaxScale s = softmax_scale(lanes, x, n);
  for (int i = lanes.first(); i < n; i += lanes.count()) x[i] = store<T>(expf(to_float(x[i]) - s.most) / s.total);
}

// -log softmax(logits)[target] over a row of `vocab`.
template <typename T, typename L>
HETRL_HD float cross_entropy_row(const L& lanes, const T* logits, int vocab, int target) {
  const SoftmaxScale s = softmax_scale(lanes, logits, vocab);
  return s.most + logf(s.total) - to_float(logits[target]);
}

// d loss / d logits for one row, times dloss: (softmax - onehot(target)) * dloss.
template <typename T, typename L>
HETRL_HD void cross_entropy_backward_row(const L& lanes, const T* logits, int vocab, int target, float dloss,
                                         T* dlogits) {
  const SoftmaxScale s = softmax_scale(lanes, logits, vocab);
  for (int i = lanes.first(); i < vocab; i += lanes.count()) {
    const float p = expf(to_float(logits[i]) - s.most) / s.total;
    dlogits[i] = store<T>((p - (i == target ? 1.0f : 0.0f)) * dloss);
  }
}

// A 64-bit mix of a few integers (splitmix64's finaliser), the same on host and device: the
// random numbers of sampling depend on what they are for, not on the order they are drawn in.
HETRL_HD inline unsigned long long mix64(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The next token of one row of logits: the largest logit when temperature is 0, else a draw
// from softmax(logits / temperature) by the Gumbel-max trick, its noise a function of (seed,
// sequence, position, token) alone, so a sequence draws the same tokens however it is batched.
template <typename T, typename L>
HETRL_HD int sample_row(const L& lanes, const T* logits, int vocab, float temperature, unsigned long long seed,
                        int sequence, int position) {
  int best = lanes.first();  // taken unless some logit beats -infinity, as by one worker
  float best_score = -INFINITY;
  const unsigned long long key = mix64(seed ^ mix64((static_cast<unsigned long long>(sequence) << 32) |
                                                    static_cast<unsigned int>(position)));
  for (int i = lanes.first(); i < vocab; i += lanes.count()) {
    float score = to_float(logits[i]);
    if (temperature > 0) {
      // A uniform in (0, 1) from the top 24 bits, then Gumbel noise -log(-log(u)).
      const float u = (static_cast<float>(mix64(key + static_cast<unsigned long long>(i)) >> 40) + 0.5f) *
                      5.9604644775390625e-8f;
      score = score / temperature - logf(-logf(u));
    }
    if (score > best_score) {
      best_score = score;
      best = i;
    }
  }
  // The first token of the largest score over every lane, as one worker scanning in order finds.
  const float top = lanes.most(best_score);
  return lanes.least(best_score == top ? best : vocab);
}

// Element i of a tensor of uniform random values in [low, high), a function of (seed, i) alone.
HETRL_HD inline float uniform_element(unsigned long long seed, unsigned long long i, float low, float high) {
  const float u = static_cast<float>(mix64(mix64(seed) + i) >> 40) * 5.9604644775390625e-8f;
  return low + (high - low) * u;
}

// The embedding gradient of one column: every row's dy added into its token's row of the fp32
// table gradient (one thread per column, so rows of the same token never race).
template <typename T>
HETRL_HD void embed_grad_column(const T* dy, const int* tokens, float* dtable, int rows, int n, int col) {
  for (int r = 0; r < rows; ++r) dtable[static_cast<long>(tokens[r]) * n + col] += to_float(dy[static_cast<long>(r) * n + col]);
}

// The sum of one column over `rows` rows of n, in fp32 (a bias's gradient).
template <typename T>
HETRL_HD float column_sum(const T* x, int rows, int n, int col) {
  float total = 0;
  for (int r = 0; r < rows; ++r) total += to_float(x[static_cast<long>(r) * n + col]);
  return total;
}

template <typename T>
HETRL_HD T add(T a, T b) {
  return store<T>(to_float(a) + to_float(b));
}

struct AdamW {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  int step = 1;  // 1 on the first update (bias correction)
};

// One step's AdamW settings with its bias corrections worked out once for every element.
struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay;
  float m_scale, v_scale;  // 1 / (1 - beta^step)
};

inline AdamWStep adamw_step(const AdamW& o) {
  const float step = static_cast<float>(o.step);
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, 1.0f / (1 - powf(o.beta1, step)),
          1.0f / (1 - powf(o.beta2, step))};
}

// One AdamW update of element i: fp32 master weight and moments, the working copy in T.
template <typename T>
HETRL_HD void adamw_element(float& master, float& m, float& v, float grad, const AdamWStep& o, T& weight) {
  m = o.beta1 * m + (1 - o.beta1) * grad;
  v = o.beta2 * v + (1 - o.beta2) * grad * grad;
  const float m_hat = m * o.m_scale;
  const float v_hat = v * o.v_scale;
  master -= o.lr * (m_hat / (sqrtf(v_hat) + o.eps) + o.weight_decay * master);
  weight = store<T>(master);
}

// into[i] += from[i] for one step of a sum across devices: fp32, rounded to T.
template <typename T>
HETRL_HD void add_into(T* into, const T* from, long count) {
  for (long i = 0; i < count; ++i) into[i] = store<T>(to_float(into[i]) + to_float(from[i]));
}

// One term of a squared norm, in fp64 so that sums over billions of terms keep their digits.
HETRL_HD inline double square(float x) { return static_cast<double>(x) * x; }

template <typename To, typename From>
HETRL_HD To cast(From x) {
  return store<To>(to_float(x));
}

}  // namespace hetrl::device
