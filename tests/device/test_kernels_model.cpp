// The kernels a transformer's forward and backward passes need beyond those of
// test_kernels.cpp (GEMMs with a transposed or fp32 operand, causal attention over a cache and
// its gradients, RoPE at per-token positions, embeddings, residuals and biases, sampling,
// per-token loss weights), each against a double-precision reference and every gradient
// against finite differences. Built, like test_kernels.cpp, into the cpu unit tests and the
// gpu-labelled tests.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "device/backend.h"
#include "device/kernels.h"
#include "device_test_backend.h"
#include "kernel_checks.h"

namespace hetrl::device {
namespace {

TEST_CASE("kernels: GEMM of 1 to 16 rows (decode steps' products), alone and accumulated, against a direct product") {
  // The cpu backend sums products of a few rows by a transposed weight in a path of its own:
  // every row count on either side of it, widths that leave part of a column block and part of
  // sixteen lanes over.
  auto b = test_backend();
  const int n = 7, k = 37;
  for (DType t : kTypes) {
    for (int m = 1; m <= 16; ++m) {
      CAPTURE(dtype_name(t));
      CAPTURE(m);
      const std::vector<double> a = random_values(static_cast<std::size_t>(m * k), 1.0, 31, t);
      const std::vector<double> w = random_values(static_cast<std::size_t>(n * k), 1.0, 32, t);
      const std::vector<double> c0 = random_values(static_cast<std::size_t>(m * n), 1.0, 33, t);
      std::vector<double> product(static_cast<std::size_t>(m * n), 0.0), sum(product.size());
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          for (int p = 0; p < k; ++p) product[i * n + j] += a[i * k + p] * w[j * k + p];
          sum[i * n + j] = c0[i * n + j] + product[i * n + j];
        }
      }
      const Buffer da = put(*b, t, a), dw = put(*b, t, w), dc = put(*b, t, c0), dacc = put(*b, t, c0);
      Gemm g{t, m, n, k, true};
      b->gemm(g, da.data(), dw.data(), dc.data());
      check_close(get(*b, t, dc, product.size()), product, 2 * precision(t), std::sqrt(k));
      g.accumulate = true;
      b->gemm(g, da.data(), dw.data(), dacc.data());
      check_close(get(*b, t, dacc, sum.size()), sum, 2 * precision(t), std::sqrt(k));
    }
  }
}

TEST_CASE("kernels: GEMM with A transposed, an fp32 result, and accumulation into it") {
  auto b = test_backend();
  const int m = 6, n = 11, k = 29;
  for (DType t : kTypes) {
    for (const bool a_transposed : {false, true}) {
      for (const bool b_transposed : {false, true}) {
        CAPTURE(dtype_name(t));
        CAPTURE(a_transposed);
        CAPTURE(b_transposed);
        const std::vector<double> a = random_values(static_cast<std::size_t>(m * k), 1.0, 21, t);
        const std::vector<double> bm = random_values(static_cast<std::size_t>(k * n), 1.0, 22, t);
        const std::vector<double> c0 = random_values(static_cast<std::size_t>(m * n), 1.0, 23, t);
        std::vector<double> product(static_cast<std::size_t>(m * n), 0.0);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            for (int p = 0; p < k; ++p) {
              product[i * n + j] += (a_transposed ? a[p * m + i] : a[i * k + p]) * (b_transposed ? bm[j * k + p] : bm[p * n + j]);
            }
          }
        }
        const Buffer da = put(*b, t, a), db = put(*b, t, bm);
        Gemm g{t, m, n, k, b_transposed, a_transposed, false, false};
        const Buffer dc = put(*b, t, c0);
        b->gemm(g, da.data(), db.data(), dc.data());
        check_close(get(*b, t, dc, product.size()), product, 2 * precision(t), std::sqrt(k));

        // Accumulated onto C in its storage type, and into an fp32 C.
        std::vector<double> sum(product.size());
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = c0[i] + product[i];
        const Buffer dacc = put(*b, t, c0);
        g.accumulate = true;
        b->gemm(g, da.data(), db.data(), dacc.data());
        check_close(get(*b, t, dacc, sum.size()), sum, 2 * precision(t), std::sqrt(k));
        const std::vector<float> c0_wide(c0.begin(), c0.end());
        const Buffer dwide = put_raw(*b, c0_wide);
        g.c_fp32 = true;
        b->gemm(g, da.data(), db.data(), dwide.data());
        b->gemm(g, da.data(), db.data(), dwide.data());
        std::vector<double> twice(product.size());
        for (std::size_t i = 0; i < twice.size(); ++i) twice[i] = c0[i] + 2 * product[i];
        check_close(widen(get_raw<float>(*b, dwide, twice.size())), twice, 1e-5, std::sqrt(k));
      }
    }
  }
}

// Causal attention over a cache in double: out [s][t][h][d] and the log-sum-exp of each row.
struct AttentionReference {
  std::vector<double> out, lse;
};

AttentionReference attention_reference(const Attention& a, const std::vector<double>& q, const std::vector<double>& k,
                                       const std::vector<double>& v, const std::vector<int>& lengths) {
  AttentionReference r;
  r.out.assign(q.size(), 0.0);
  r.lse.assign(q.size() / a.head_dim, 0.0);
  const int group = a.heads / a.kv_heads;
  for (int s = 0; s < a.batch; ++s) {
    for (int t = 0; t < a.queries; ++t) {
      const int seen = lengths[s] - a.queries + t + 1;
      for (int h = 0; h < a.heads; ++h) {
        const int row = (s * a.queries + t) * a.heads + h;
        std::vector<double> scores(static_cast<std::size_t>(seen));
        double most = -1e300;
        for (int p = 0; p < seen; ++p) {
          double score = 0;
          for (int d = 0; d < a.head_dim; ++d) {
            score += q[row * a.head_dim + d] * k[((s * a.capacity + p) * a.kv_heads + h / group) * a.head_dim + d];
          }
          scores[p] = score / std::sqrt(a.head_dim);
          most = std::max(most, scores[p]);
        }
        double total = 0;
        for (double& score : scores) total += (score = std::exp(score - most));
        r.lse[row] = most + std::log(total);
        for (int d = 0; d < a.head_dim; ++d) {
          double sum = 0;
          for (int p = 0; p < seen; ++p) {
            sum += scores[p] * v[((s * a.capacity + p) * a.kv_heads + h / group) * a.head_dim + d];
          }
          r.out[row * a.head_dim + d] = sum / total;
        }
      }
    }
  }
  return r;
}

TEST_CASE("kernels: causal attention over a cache (prefill and continued steps) and its gradients") {
  auto b = test_backend();
  // Two sequences of five new queries each; the second had two positions cached before them.
  Attention a;
  a.batch = 2, a.queries = 5, a.heads = 4, a.kv_heads = 2, a.head_dim = 8, a.capacity = 8;
  const std::vector<int> lengths{5, 7};
  const std::size_t q_count = static_cast<std::size_t>(a.batch * a.queries * a.heads * a.head_dim);
  const std::size_t kv_count = static_cast<std::size_t>(a.batch * a.capacity * a.kv_heads * a.head_dim);
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    a.dtype = t;
    const std::vector<double> q = random_values(q_count, 1.0, 31, t), k = random_values(kv_count, 1.0, 32, t),
                              v = random_values(kv_count, 1.0, 33, t), g = random_values(q_count, 1.0, 34, t);
    const AttentionReference expected = attention_reference(a, q, k, v, lengths);
    const Buffer dq_in = put(*b, t, q), dk_in = put(*b, t, k), dv_in = put(*b, t, v), dl = put_raw(*b, lengths);
    const Buffer out(*b, q_count * dtype_bytes(t)), lse(*b, q_count / a.head_dim * sizeof(float));
    b->attention(a, dq_in.data(), dk_in.data(), dv_in.data(), dl.as<int>(), nullptr, out.data(), lse.as<float>());
    check_close(get(*b, t, out, q_count), expected.out, 2 * precision(t));
    check_close(widen(get_raw<float>(*b, lse, expected.lse.size())), expected.lse, 1e-5);

    // Gradients of sum(out * g), with dout = g; positions past a sequence's length stay zero.
    const Buffer dout = put(*b, t, g), delta(*b, q_count / a.head_dim * sizeof(float));
    const Buffer dq(*b, q_count * dtype_bytes(t)), dk(*b, kv_count * dtype_bytes(t)), dv(*b, kv_count * dtype_bytes(t));
    b->fill_zero(dk.data(), dk.bytes());
    b->fill_zero(dv.data(), dv.bytes());
    b->attention_backward(a, dq_in.data(), dk_in.data(), dv_in.data(), dl.as<int>(), out.data(), dout.data(),
                          lse.as<float>(), delta.as<float>(), dq.data(), dk.data(), dv.data());
    const auto loss_q = [&](const std::vector<double>& x) { return dot(attention_reference(a, x, k, v, lengths).out, g); };
    const auto loss_k = [&](const std::vector<double>& x) { return dot(attention_reference(a, q, x, v, lengths).out, g); };
    const auto loss_v = [&](const std::vector<double>& x) { return dot(attention_reference(a, q, k, x, lengths).out, g); };
    const double tolerance = 8 * precision(t) + 1e-5;
    check_close(get(*b, t, dq, q_count), numeric_gradient(loss_q, q), tolerance);
    check_close(get(*b, t, dk, kv_count), numeric_gradient(loss_k, k), tolerance);
    check_close(get(*b, t, dv, kv_count), numeric_gradient(loss_v, v), tolerance);
  }
}

// Packed attention in double: each sequence's rows as one whole sequence over its own keys.
AttentionReference packed_reference(const PackedAttention& a, const std::vector<int>& starts,
                                    const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v) {
  AttentionReference r;
  const std::size_t q_row = static_cast<std::size_t>(a.heads * a.head_dim), kv_row = static_cast<std::size_t>(a.kv_heads * a.head_dim);
  for (int s = 0; s < a.batch; ++s) {
    const int n = starts[s + 1] - starts[s];
    if (n == 0) continue;
    Attention one;
    one.batch = 1, one.queries = n, one.capacity = n, one.heads = a.heads, one.kv_heads = a.kv_heads;
    one.head_dim = a.head_dim;
    const auto slice = [&](const std::vector<double>& x, std::size_t row) {
      return std::vector<double>(x.begin() + static_cast<long>(starts[s] * row),
                                 x.begin() + static_cast<long>((starts[s] + n) * row));
    };
    const AttentionReference part = attention_reference(one, slice(q, q_row), slice(k, kv_row), slice(v, kv_row), {n});
    r.out.insert(r.out.end(), part.out.begin(), part.out.end());
    r.lse.insert(r.lse.end(), part.lse.begin(), part.lse.end());
  }
  return r;
}

TEST_CASE("kernels: attention over packed sequences of different lengths is each one's own, and its gradients") {
  auto b = test_backend();
  // Three sequences one after another, the middle one empty (a sample with nothing to score).
  PackedAttention a;
  a.batch = 3, a.tokens = 7, a.heads = 4, a.kv_heads = 2, a.head_dim = 8;
  const std::vector<int> starts{0, 3, 3, 7};
  // The sequence of each row, as the GPU's threads find it: the empty one holds none.
  const std::vector<int> owner{0, 0, 0, 2, 2, 2, 2};
  for (int row = 0; row < a.tokens; ++row) CHECK(packed_sequence(starts.data(), a.batch, row) == owner[static_cast<std::size_t>(row)]);
  const std::size_t q_count = static_cast<std::size_t>(a.tokens * a.heads * a.head_dim);
  const std::size_t kv_count = static_cast<std::size_t>(a.tokens * a.kv_heads * a.head_dim);
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    a.dtype = t;
    const std::vector<double> q = random_values(q_count, 1.0, 41, t), k = random_values(kv_count, 1.0, 42, t),
                              v = random_values(kv_count, 1.0, 43, t), g = random_values(q_count, 1.0, 44, t);
    const AttentionReference expected = packed_reference(a, starts, q, k, v);
    const Buffer dq_in = put(*b, t, q), dk_in = put(*b, t, k), dv_in = put(*b, t, v), ds = put_raw(*b, starts);
    const Buffer out(*b, q_count * dtype_bytes(t)), lse(*b, q_count / a.head_dim * sizeof(float));
    b->packed_attention(a, dq_in.data(), dk_in.data(), dv_in.data(), ds.as<int>(), out.data(), lse.as<float>());
    check_close(get(*b, t, out, q_count), expected.out, 2 * precision(t));
    check_close(widen(get_raw<float>(*b, lse, expected.lse.size())), expected.lse, 1e-5);

    const Buffer dout = put(*b, t, g), delta(*b, q_count / a.head_dim * sizeof(float));
    const Buffer dq(*b, q_count * dtype_bytes(t)), dk(*b, kv_count * dtype_bytes(t)), dv(*b, kv_count * dtype_bytes(t));
    b->packed_attention_backward(a, dq_in.data(), dk_in.data(), dv_in.data(), ds.as<int>(), out.data(), dout.data(),
                                 lse.as<float>(), delta.as<float>(), dq.data(), dk.data(), dv.data());
    const auto loss_q = [&](const std::vector<double>& x) { return dot(packed_reference(a, starts, x, k, v).out, g); };
    const auto loss_k = [&](const std::vector<double>& x) { return dot(packed_reference(a, starts, q, x, v).out, g); };
    const auto loss_v = [&](const std::vector<double>& x) { return dot(packed_reference(a, starts, q, k, x).out, g); };
    const double tolerance = 8 * precision(t) + 1e-5;
    check_close(get(*b, t, dq, q_count), numeric_gradient(loss_q, q), tolerance);
    check_close(get(*b, t, dk, kv_count), numeric_gradient(loss_k, k), tolerance);
    check_close(get(*b, t, dv, kv_count), numeric_gradient(loss_v, v), tolerance);
  }
}

// A decode step through attention (general, and with its queries reordered through slots) and
// decode_attention, against each other and the reference.
void check_decode_step(const Attention& a, const std::vector<int>& lengths) {
  auto b = test_backend();
  const std::size_t q_count = static_cast<std::size_t>(a.batch * a.heads * a.head_dim);
  const std::size_t kv_count = static_cast<std::size_t>(a.batch * a.capacity * a.kv_heads * a.head_dim);
  const std::vector<double> q = random_values(q_count, 1.0, 35, a.dtype), k = random_values(kv_count, 1.0, 36, a.dtype),
                            v = random_values(kv_count, 1.0, 37, a.dtype);
  const Buffer dq = put(*b, a.dtype, q), dk = put(*b, a.dtype, k), dv = put(*b, a.dtype, v), dl = put_raw(*b, lengths);
  const Buffer general(*b, q_count * 4), decode(*b, q_count * 4), lse(*b, q_count / a.head_dim * sizeof(float));
  b->attention(a, dq.data(), dk.data(), dv.data(), dl.as<int>(), nullptr, general.data(), lse.as<float>());
  const DecodeAttention d{a.dtype, a.batch, a.heads, a.kv_heads, a.head_dim, a.capacity};
  b->decode_attention(d, dq.data(), dk.data(), dv.data(), dl.as<int>(), decode.data());
  const std::vector<double> found = get(*b, a.dtype, general, q_count);
  check_close(found, get(*b, a.dtype, decode, q_count), 1e-6);
  const AttentionReference expected = attention_reference(a, q, k, v, lengths);
  check_close(found, expected.out, 1e-5);
  check_close(widen(get_raw<float>(*b, lse, expected.lse.size())), expected.lse, 1e-5);

  // The same queries in another order, each reading its own cache through `slots`.
  std::vector<int> order(static_cast<std::size_t>(a.batch));
  for (int s = 0; s < a.batch; ++s) order[s] = (s + 2) % a.batch;
  std::vector<double> q_permuted;
  std::vector<int> lengths_permuted;
  for (int s : order) {
    q_permuted.insert(q_permuted.end(), q.begin() + s * a.heads * a.head_dim, q.begin() + (s + 1) * a.heads * a.head_dim);
    lengths_permuted.push_back(lengths[s]);
  }
  const Buffer dqp = put(*b, a.dtype, q_permuted), dlp = put_raw(*b, lengths_permuted), dslots = put_raw(*b, order);
  const Buffer permuted(*b, q_count * 4);
  b->attention(a, dqp.data(), dk.data(), dv.data(), dlp.as<int>(), dslots.as<int>(), permuted.data(), nullptr);
  const std::vector<double> found_permuted = get(*b, a.dtype, permuted, q_count);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto row = [&](const std::vector<double>& x, int s) {
      return std::vector<double>(x.begin() + s * a.heads * a.head_dim, x.begin() + (s + 1) * a.heads * a.head_dim);
    };
    CHECK(row(found_permuted, static_cast<int>(i)) == row(found, order[i]));
  }
}

TEST_CASE("kernels: a decode step is the attention of one new query") {
  Attention a;
  a.dtype = DType::kF32, a.batch = 3, a.queries = 1, a.heads = 4, a.kv_heads = 1, a.head_dim = 16, a.capacity = 10;
  check_decode_step(a, {1, 6, 10});
  // A long cache and few heads: the cuda backend splits each head's positions over warps.
  a.batch = 3, a.heads = 4, a.kv_heads = 2, a.head_dim = 64, a.capacity = 300;
  REQUIRE(attention_parts(a.batch * a.heads, a.capacity, 132 * 64) > 1);
  check_decode_step(a, {300, 45, 1});
}

TEST_CASE("kernels: attention split over positions and its parts combined is attention in one pass") {
  const int head_dim = 16, capacity = 128;
  const long stride = 2 * head_dim;  // two kv heads a position; this head reads the second
  const std::vector<double> qd = random_values(head_dim, 1.0, 41, DType::kF32),
                            kd = random_values(capacity * stride, 1.5, 42, DType::kF32),
                            vd = random_values(capacity * stride, 1.0, 43, DType::kF32);
  const std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
  const float scale = 0.25f;
  for (int length : {0, 1, 31, 100, capacity}) {
    CAPTURE(length);
    std::vector<float> whole(head_dim);
    const float lse = attend_cached(OneLane{}, q.data(), k.data() + head_dim, v.data() + head_dim, length, stride,
                                    head_dim, scale, whole.data());
    for (int parts : {1, 2, 3, 4, 7}) {
      CAPTURE(parts);
      const int span = (capacity + parts - 1) / parts;  // parts past `length` hold no positions
      std::vector<float> partials(static_cast<std::size_t>(parts * (kPartHeader + head_dim)), -1.0f);
      for (int p = 0; p < parts; ++p) {
        attend_cached_part(OneLane{}, q.data(), k.data() + head_dim, v.data() + head_dim, length, p, span, stride,
                           head_dim, scale, partials.data() + p * (kPartHeader + head_dim));
      }
      std::vector<float> combined(head_dim);
      const float combined_lse = combine_attention_parts(OneLane{}, partials.data(), parts, head_dim, combined.data());
      if (length == 0) {
        CHECK(std::isinf(combined_lse));
        CHECK(combined_lse < 0);
      } else {
        CHECK(combined_lse == doctest::Approx(lse).epsilon(1e-6));
      }
      check_close(std::vector<double>(combined.begin(), combined.end()), std::vector<double>(whole.begin(), whole.end()),
                  1e-6);
    }
  }
}

TEST_CASE("kernels: attention is split only where its heads do not fill the device, into parts of 32 positions or more") {
  CHECK(attention_parts(8192, 4096, 8192) == 1);   // the heads fill it
  CHECK(attention_parts(32, 4096, 8192) == 128);   // 32 x 256 fills it: 32 positions a part
  CHECK(attention_parts(32, 256, 8192) == 8);      // no part under 32 positions
  CHECK(attention_parts(1000, 4096, 8192) == 9);   // ceil(8192 / 1000)
  CHECK(attention_parts(4, 32, 8192) == 1);        // too short to split
  CHECK(attention_parts(0, 4096, 8192) == 1);
}

TEST_CASE("kernels: a seeded uniform fill has the range, mean and spread of its distribution, and a constant fill") {
  auto b = test_backend();
  const std::size_t count = 20000;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const Buffer x(*b, count * dtype_bytes(t)), y(*b, count * dtype_bytes(t));
    b->fill_uniform(t, x.data(), whole(count), -0.5f, 1.5f, 3);
    b->fill_uniform(t, y.data(), whole(count), -0.5f, 1.5f, 3);
    const std::vector<double> v = get(*b, t, x, count);
    CHECK(get(*b, t, y, count) == v);  // a function of the seed
    double sum = 0, squares = 0;
    for (double e : v) {
      CHECK(e >= -0.5);
      CHECK(e <= 1.5);
      sum += e;
      squares += e * e;
    }
    const double mean = sum / count, variance = squares / count - mean * mean;
    CHECK(std::abs(mean - 0.5) < 0.02);            // 5 sigma of a mean of 20,000 draws is 0.02
    CHECK(std::abs(variance - 4.0 / 12) < 0.02);
    b->fill_uniform(t, y.data(), whole(count), -0.5f, 1.5f, 4);
    CHECK(get(*b, t, y, count) != v);
    b->fill_value(t, y.data(), count, 0.25f);
    CHECK(get(*b, t, y, count) == std::vector<double>(count, 0.25));
    // A block of a 100 x 200 matrix holds the values the whole matrix has there.
    const std::size_t rows = 100, cols = 200;
    b->fill_uniform(t, x.data(), whole(rows * cols), -1.0f, 1.0f, 9);
    const std::vector<double> full = get(*b, t, x, rows * cols);
    const Block block{30, 50, cols, 60, 120};
    b->fill_uniform(t, y.data(), block, -1.0f, 1.0f, 9);
    const std::vector<double> part = get(*b, t, y, block.count());
    for (std::size_t r = 0; r < block.rows; ++r) {
      for (std::size_t c = 0; c < block.cols; ++c) REQUIRE(part[r * block.cols + c] == full[(60 + r) * cols + 120 + c]);
    }
  }
}

TEST_CASE("kernels: rows scattered to the places an index gives") {
  auto b = test_backend();
  const int n = 3;
  const std::vector<int> at{4, 0, 2};
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<double> x = random_values(9, 1.0, 48, t);
    std::vector<double> expected(15, 0.0);
    for (int r = 0; r < 3; ++r) {
      for (int i = 0; i < n; ++i) expected[at[r] * n + i] = x[r * n + i];
    }
    const Buffer dx = put(*b, t, x), dat = put_raw(*b, at), out = put(*b, t, std::vector<double>(15, 0.0));
    b->scatter(t, dx.data(), dat.as<int>(), out.data(), 3, n);
    CHECK(get(*b, t, out, 15) == expected);
  }
}

TEST_CASE("kernels: RoPE at per-token positions rotates each token by its own angle, and back") {
  auto b = test_backend();
  const int tokens = 3, heads = 2, head_dim = 8;
  const float theta = 10000.0f;
  const std::vector<int> positions{7, 0, 123};
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<double> x = random_values(static_cast<std::size_t>(tokens * heads * head_dim), 1.0, 41, t);
    std::vector<double> expected(x.size());
    for (int token = 0; token < tokens; ++token) {
      for (int h = 0; h < heads; ++h) {
        const int at = (token * heads + h) * head_dim;
        for (int i = 0; i < head_dim / 2; ++i) {
          const double angle = positions[token] * std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
          const double u = x[at + i], w = x[at + i + head_dim / 2];
          expected[at + i] = u * std::cos(angle) - w * std::sin(angle);
          expected[at + i + head_dim / 2] = u * std::sin(angle) + w * std::cos(angle);
        }
      }
    }
    const Buffer d = put(*b, t, x), dp = put_raw(*b, positions);
    b->rope_at(t, d.data(), dp.as<int>(), tokens, heads, head_dim, theta, false);
    check_close(get(*b, t, d, x.size()), expected, 4 * precision(t));
    b->rope_at(t, d.data(), dp.as<int>(), tokens, heads, head_dim, theta, true);
    check_close(get(*b, t, d, x.size()), x, 8 * precision(t));
  }
}

TEST_CASE("kernels: embedding rows gathered by token, their gradient summed per token") {
  auto b = test_backend();
  const int vocab = 9, n = 5;
  const std::vector<int> tokens{3, 0, 3, 8, 3};
  const int rows = static_cast<int>(tokens.size());
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<double> table = random_values(static_cast<std::size_t>(vocab * n), 1.0, 42, t);
    const std::vector<double> dy = random_values(static_cast<std::size_t>(rows * n), 1.0, 43, t);
    std::vector<double> gathered, dtable(table.size(), 0.0);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < n; ++i) {
        gathered.push_back(table[tokens[r] * n + i]);
        dtable[tokens[r] * n + i] += dy[r * n + i];
      }
    }
    const Buffer dt = put(*b, t, table), dtok = put_raw(*b, tokens), out(*b, gathered.size() * dtype_bytes(t));
    b->embed(t, dt.data(), dtok.as<int>(), out.data(), rows, n);
    CHECK(get(*b, t, out, gathered.size()) == gathered);
    // Added into what the gradient held: once, then again.
    const Buffer grad = put_raw(*b, std::vector<float>(table.size(), 1.0f));
    b->embed_backward(t, put(*b, t, dy).data(), dtok.as<int>(), grad.as<float>(), rows, n);
    std::vector<double> plus_one(dtable);
    for (double& x : plus_one) x += 1.0;
    check_close(widen(get_raw<float>(*b, grad, table.size())), plus_one, 1e-6);
  }
}

TEST_CASE("kernels: residual sums, biases added to rows, and a bias's gradient") {
  auto b = test_backend();
  const int rows = 4, n = 6;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<double> x = random_values(static_cast<std::size_t>(rows * n), 2.0, 44, t);
    const std::vector<double> y = random_values(x.size(), 2.0, 45, t);
    const std::vector<double> bias = random_values(static_cast<std::size_t>(n), 1.0, 46, t);
    std::vector<double> sum(x.size()), biased(x.size()), dbias(static_cast<std::size_t>(n), 0.5);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < n; ++i) {
        sum[r * n + i] = quantize(t, x[r * n + i] + y[r * n + i]);
        biased[r * n + i] = quantize(t, x[r * n + i] + bias[i]);
        dbias[i] += y[r * n + i];
      }
    }
    const Buffer dx = put(*b, t, x), dy = put(*b, t, y), db = put(*b, t, bias), dx2 = put(*b, t, x);
    b->add(t, dx.data(), dy.data(), x.size());
    CHECK(get(*b, t, dx, x.size()) == sum);
    b->add_bias(t, dx2.data(), db.data(), rows, n);
    CHECK(get(*b, t, dx2, x.size()) == biased);
    const Buffer grad = put_raw(*b, std::vector<float>(static_cast<std::size_t>(n), 0.5f));
    b->bias_backward(t, dy.data(), grad.as<float>(), rows, n);
    check_close(widen(get_raw<float>(*b, grad, static_cast<std::size_t>(n))), dbias, 1e-6);
  }
}

TEST_CASE("kernels: sampling is the argmax at temperature 0 and follows the softmax above it") {
  auto b = test_backend();
  const int vocab = 6;
  const std::vector<double> row{0.5, 2.0, -1.0, 1.0, 2.5, 0.0};
  const int rows = 4000;
  std::vector<double> logits;
  std::vector<int> sequences, positions;
  for (int r = 0; r < rows; ++r) {
    logits.insert(logits.end(), row.begin(), row.end());
    sequences.push_back(r % 40);
    positions.push_back(r / 40);
  }
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const Buffer dl = put(*b, t, logits), ds = put_raw(*b, sequences), dp = put_raw(*b, positions);
    const Buffer tokens(*b, rows * sizeof(int));
    b->sample(t, dl.data(), rows, vocab, 0.0f, 7, ds.as<int>(), dp.as<int>(), tokens.as<int>());
    CHECK(get_raw<int>(*b, tokens, rows) == std::vector<int>(rows, 4));

    // At temperature 2 the draws' frequencies are those of softmax(logits / 2).
    b->sample(t, dl.data(), rows, vocab, 2.0f, 7, ds.as<int>(), dp.as<int>(), tokens.as<int>());
    const std::vector<int> drawn = get_raw<int>(*b, tokens, rows);
    std::vector<double> p(vocab);
    double total = 0;
    for (int i = 0; i < vocab; ++i) total += (p[i] = std::exp(quantize(t, row[i]) / 2));
    for (int i = 0; i < vocab; ++i) {
      CAPTURE(i);
      const double share = static_cast<double>(std::count(drawn.begin(), drawn.end(), i)) / rows;
      // Five standard deviations of a binomial share.
      CHECK(std::abs(share - p[i] / total) <= 5 * std::sqrt(p[i] / total * (1 - p[i] / total) / rows));
    }

    // A row's draw depends on its sequence and position, not on where it sits in the batch.
    std::vector<int> reversed_sequences(sequences.rbegin(), sequences.rend());
    std::vector<int> reversed_positions(positions.rbegin(), positions.rend());
    const Buffer rs = put_raw(*b, reversed_sequences), rp = put_raw(*b, reversed_positions);
    b->sample(t, dl.data(), rows, vocab, 2.0f, 7, rs.as<int>(), rp.as<int>(), tokens.as<int>());
    const std::vector<int> again = get_raw<int>(*b, tokens, rows);
    CHECK(std::vector<int>(again.rbegin(), again.rend()) == drawn);
    // Another seed draws otherwise.
    b->sample(t, dl.data(), rows, vocab, 2.0f, 8, ds.as<int>(), dp.as<int>(), tokens.as<int>());
    CHECK(get_raw<int>(*b, tokens, rows) != drawn);
  }
}

TEST_CASE("kernels: cross-entropy's gradient weighted per row against finite differences") {
  auto b = test_backend();
  const int rows = 3, vocab = 17;
  const std::vector<int> targets{4, 16, 0};
  const std::vector<float> weights{1.5f, -0.75f, 0.0f};
  const float dloss = 2.0f;
  const auto reference = [&](const std::vector<double>& logits, int r) {
    double total = 0;
    for (int i = 0; i < vocab; ++i) total += std::exp(logits[r * vocab + i]);
    return std::log(total) - logits[r * vocab + targets[r]];
  };
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<double> logits = random_values(static_cast<std::size_t>(rows * vocab), 2.0, 47, t);
    const Buffer dl = put(*b, t, logits), dt = put_raw(*b, targets), dw = put_raw(*b, weights);
    const Buffer losses(*b, rows * sizeof(float)), grad(*b, logits.size() * dtype_bytes(t));
    b->cross_entropy(t, dl.data(), dt.as<int>(), losses.as<float>(), grad.data(), rows, vocab, dloss, dw.as<float>());
    const auto loss = [&](const std::vector<double>& z) {
      double s = 0;
      for (int r = 0; r < rows; ++r) s += dloss * weights[r] * reference(z, r);
      return s;
    };
    check_close(get(*b, t, grad, logits.size()), numeric_gradient(loss, logits), 4 * precision(t) + 1e-5);
  }
}

}  // namespace
}  // namespace hetrl::device
