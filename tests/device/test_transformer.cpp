// The transformer hetrl-exec runs, on a model small enough to follow in double precision:
// scoring against a straightforward reference of the same block (every parameter drawn at
// random, biases and norms included), the KV cache (prefill then decode steps give the
// logits of scoring the whole sequence), and batching (a sequence's outputs do not depend on
// what it is batched with). Built into the cpu unit tests and the gpu-labelled tests.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "device_test_backend.h"
#include "tiny_model.h"
#include "exec/generate.h"
#include "exec/transformer.h"

namespace hetrl::exec {
namespace {

using device::DType;

// Every parameter redrawn uniform in [-0.5, 0.5) (norm scales around 1), so that each one
// matters to the output, and read back as doubles by name.
std::map<std::string, std::vector<double>> randomise(device::Backend& b, Transformer& model, DType t) {
  std::map<std::string, std::vector<double>> host;
  unsigned long long seed = 11;
  for (const Transformer::Tensor& p : model.parameters()) {
    const bool norm = p.name.find("norm") != std::string::npos;
    b.fill_uniform(t, p.buffer->data(), device::whole(p.count), norm ? 0.5f : -0.5f, norm ? 1.5f : 0.5f, ++seed);
    host[p.name] = device::get(b, t, *p.buffer, p.count);
  }
  return host;
}

using Matrix = std::vector<double>;  // row-major

// y[r][o] = sum_i x[r][i] w[o][i]
Matrix linear(const Matrix& x, const std::vector<double>& w, int rows, int in, int out) {
  Matrix y(static_cast<std::size_t>(rows * out), 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  }
  return y;
}

Matrix rmsnorm(const Matrix& x, const std::vector<double>& w, int rows, int n, double eps) {
  Matrix y(x.size());
  for (int r = 0; r < rows; ++r) {
    double squares = 0;
    for (int i = 0; i < n; ++i) squares += x[r * n + i] * x[r * n + i];
    const double scale = 1 / std::sqrt(squares / n + eps);
    for (int i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * scale * w[i];
  }
  return y;
}

void rope(Matrix& x, int length, int heads, int head_dim, double theta) {
  for (int p = 0; p < length; ++p) {
    for (int h = 0; h < heads; ++h) {
      double* head = &x[(p * heads + h) * head_dim];
      for (int i = 0; i < head_dim / 2; ++i) {
        const double angle = p * std::pow(theta, -2.0 * i / head_dim);
        const double a = head[i], c = head[i + head_dim / 2];
        head[i] = a * std::cos(angle) - c * std::sin(angle);
        head[i + head_dim / 2] = a * std::sin(angle) + c * std::cos(angle);
      }
    }
  }
}

// One sequence through the model in double: the final hidden states [length][hidden].
Matrix reference_states(const workload::ModelArch& a, std::map<std::string, std::vector<double>>& w,
                        const std::vector<int>& tokens, double theta, double eps) {
  const int n = static_cast<int>(tokens.size()), hidden = a.hidden, hd = a.head_dim;
  const int qw = a.heads * hd, kw = a.kv_heads * hd, group = a.heads / a.kv_heads;
  Matrix x;
  for (int token : tokens) {
    x.insert(x.end(), w["embedding"].begin() + token * hidden, w["embedding"].begin() + (token + 1) * hidden);
  }
  for (int l = 0; l < a.layers; ++l) {
    const std::string p = "layer." + std::to_string(l) + ".";
    const Matrix h = rmsnorm(x, w[p + "attn_norm"], n, hidden, eps);
    Matrix q = linear(h, w[p + "wq"], n, hidden, qw), k = linear(h, w[p + "wk"], n, hidden, kw),
           v = linear(h, w[p + "wv"], n, hidden, kw);
    if (a.qkv_bias) {
      for (int r = 0; r < n; ++r) {
        for (int i = 0; i < qw; ++i) q[r * qw + i] += w[p + "bq"][i];
        for (int i = 0; i < kw; ++i) {
          k[r * kw + i] += w[p + "bk"][i];
          v[r * kw + i] += w[p + "bv"][i];
        }
      }
    }
    if (a.qk_norm) {
      q = rmsnorm(q, w[p + "q_norm"], n * a.heads, hd, eps);
      k = rmsnorm(k, w[p + "k_norm"], n * a.kv_heads, hd, eps);
    }
    rope(q, n, a.heads, hd, theta);
    rope(k, n, a.kv_heads, hd, theta);
    Matrix o(static_cast<std::size_t>(n * qw), 0.0);
    for (int t = 0; t < n; ++t) {
      for (int head = 0; head < a.heads; ++head) {
        const int kvh = head / group;
        std::vector<double> scores(static_cast<std::size_t>(t + 1));
        double most = -1e300, total = 0;
        for (int j = 0; j <= t; ++j) {
          double s = 0;
          for (int d = 0; d < hd; ++d) s += q[(t * a.heads + head) * hd + d] * k[(j * a.kv_heads + kvh) * hd + d];
          scores[j] = s / std::sqrt(hd);
          most = std::max(most, scores[j]);
        }
        for (double& s : scores) total += (s = std::exp(s - most));
        for (int d = 0; d < hd; ++d) {
          double s = 0;
          for (int j = 0; j <= t; ++j) s += scores[j] * v[(j * a.kv_heads + kvh) * hd + d];
          o[(t * a.heads + head) * hd + d] = s / total;
        }
      }
    }
    const Matrix attn = linear(o, w[p + "wo"], n, qw, hidden);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += attn[i];
    const Matrix h2 = rmsnorm(x, w[p + "mlp_norm"], n, hidden, eps);
    const Matrix g = linear(h2, w[p + "w_gate"], n, hidden, a.ffn_hidden), u = linear(h2, w[p + "w_up"], n, hidden, a.ffn_hidden);
    Matrix act(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) act[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    const Matrix down = linear(act, w[p + "w_down"], n, a.ffn_hidden, hidden);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  return rmsnorm(x, w["final_norm"], n, hidden, eps);
}

std::vector<int> some_tokens(int count, int vocab, int salt) {
  std::vector<int> t;
  for (int i = 0; i < count; ++i) t.push_back((i * 97 + salt * 31 + 7) % vocab);
  return t;
}

TEST_CASE("transformer: scoring matches a double-precision reference of the block, both heads") {
  auto b = device::test_backend();
  for (const bool variant : {false, true}) {
    CAPTURE(variant);
    // Qwen3-like (qk norm, untied) and Qwen2.5-like (qkv bias, tied embeddings).
    const workload::ModelArch a = tiny(!variant, variant, variant);
    TransformerOptions o;
    o.dtype = DType::kF32;
    for (const Head head : {Head::kLanguage, Head::kScalar}) {
      Transformer model(*b, a, head, o);
      auto w = randomise(*b, model, o.dtype);
      const int batch = 2, length = 7;
      std::vector<int> tokens = some_tokens(length, a.vocab, 1);
      const std::vector<int> second = some_tokens(length, a.vocab, 2);
      tokens.insert(tokens.end(), second.begin(), second.end());
      const std::vector<float> found = model.score(tokens, batch, length);
      std::vector<double> expected;
      for (int s = 0; s < batch; ++s) {
        const std::vector<int> seq(tokens.begin() + s * length, tokens.begin() + (s + 1) * length);
        const Matrix states = reference_states(a, w, seq, o.rope_theta, o.norm_eps);
        if (head == Head::kScalar) {
          const Matrix values = linear(states, w["head"], length, a.hidden, 1);
          expected.insert(expected.end(), values.begin(), values.end());
          continue;
        }
        const Matrix logits = linear(states, a.tied_embeddings ? w["embedding"] : w["head"], length, a.hidden, a.vocab);
        for (int p = 0; p + 1 < length; ++p) {
          double most = -1e300, total = 0;
          for (int i = 0; i < a.vocab; ++i) most = std::max(most, logits[p * a.vocab + i]);
          for (int i = 0; i < a.vocab; ++i) total += std::exp(logits[p * a.vocab + i] - most);
          expected.push_back(logits[p * a.vocab + seq[p + 1]] - most - std::log(total));
        }
      }
      REQUIRE(found.size() == expected.size());
      for (std::size_t i = 0; i < found.size(); ++i) {
        CAPTURE(i);
        CHECK(found[i] == doctest::Approx(expected[i]).epsilon(1e-4).scale(1.0));
      }
    }
  }
}

TEST_CASE("transformer: prefill and decode steps over the cache give the logits of scoring each prefix") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(true, false, false);
  for (const DType t : {DType::kF32, DType::kBf16}) {
    CAPTURE(device::dtype_name(t));
    TransformerOptions o;
    o.dtype = t;
    Transformer model(*b, a, Head::kLanguage, o);
    randomise(*b, model, t);
    const std::vector<int> tokens = some_tokens(9, a.vocab, 3);
    Transformer::Cache cache = model.make_cache(3, 12);
    // Slot 2: a 4-token prompt, then five decode steps, each compared with prefilling the
    // whole prefix into slot 0.
    const std::vector<int> prompt(tokens.begin(), tokens.begin() + 4);
    std::vector<double> stepped = device::get(*b, t, model.prefill(cache, 2, prompt), static_cast<std::size_t>(a.vocab));
    for (int p = 4; p <= 8; ++p) {
      const std::vector<int> prefix(tokens.begin(), tokens.begin() + p);
      if (p > 4) {
        stepped = device::get(*b, t, model.decode(cache, {2}, {tokens[p - 1]}, {p - 1}), static_cast<std::size_t>(a.vocab));
      }
      const std::vector<double> whole = device::get(*b, t, model.prefill(cache, 0, prefix), static_cast<std::size_t>(a.vocab));
      for (int i = 0; i < a.vocab; ++i) {
        CAPTURE(p);
        CAPTURE(i);
        CHECK(stepped[i] == doctest::Approx(whole[i]).epsilon(t == DType::kF32 ? 1e-5 : 3e-2).scale(1.0));
      }
    }
  }
}

TEST_CASE("transformer: a prefill's and a decode step's rows do not depend on what they are batched with") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(true, false, false);
  TransformerOptions o;
  o.dtype = DType::kF32;
  Transformer model(*b, a, Head::kLanguage, o);
  randomise(*b, model, o.dtype);
  const std::size_t v = static_cast<std::size_t>(a.vocab);
  // Prompts prefilled together give each one's logits and cache as prefilled alone.
  {
    const std::vector<int> first = some_tokens(5, a.vocab, 6), second = some_tokens(5, a.vocab, 7);
    std::vector<int> both = first;
    both.insert(both.end(), second.begin(), second.end());
    // Slots 3 and 0 together in one cache, each alone in another (the GEMMs of two prompts
    // and of one may add up in another order).
    Transformer::Cache together = model.make_cache(4, 8), alone = model.make_cache(4, 8);
    const std::vector<double> batched = device::get(*b, o.dtype, model.prefill(together, {3, 0}, both, 5), 2 * v);
    const std::vector<double> one = device::get(*b, o.dtype, model.prefill(alone, 3, first), v);
    const std::vector<double> two = device::get(*b, o.dtype, model.prefill(alone, 0, second), v);
    for (std::size_t i = 0; i < v; ++i) {
      CAPTURE(i);
      CHECK(batched[i] == doctest::Approx(one[i]).epsilon(1e-5).scale(1.0));
      CHECK(batched[v + i] == doctest::Approx(two[i]).epsilon(1e-5).scale(1.0));
    }
    // The caches hold the same keys and values: a decode step over both slots agrees.
    const std::vector<double> next = device::get(*b, o.dtype, model.decode(together, {0, 3}, {1, 2}, {5, 5}), 2 * v);
    const std::vector<double> expected = device::get(*b, o.dtype, model.decode(alone, {0, 3}, {1, 2}, {5, 5}), 2 * v);
    for (std::size_t i = 0; i < 2 * v; ++i) CHECK(next[i] == doctest::Approx(expected[i]).epsilon(1e-5).scale(1.0));
    // Prompts that are not `length` each, a slot twice or outside the cache, prompts longer than
    // its slots: refused.
    CHECK_THROWS_AS(model.prefill(together, {1, 2}, first, 5), core::InputError);
    CHECK_THROWS_AS(model.prefill(together, {1, 1}, both, 5), core::InputError);
    CHECK_THROWS_AS(model.prefill(together, {1, 4}, both, 5), core::InputError);
    CHECK_THROWS_AS(model.prefill(together, {1, 2}, std::vector<int>(18, 1), 9), core::InputError);  // 8 positions
  }
  // A decode step's rows, with another sequence and alone.
  Transformer::Cache cache = model.make_cache(4, 10);
  model.prefill(cache, 1, some_tokens(3, a.vocab, 4));
  model.prefill(cache, 3, some_tokens(6, a.vocab, 5));
  const std::vector<double> both = device::get(*b, o.dtype, model.decode(cache, {3, 1}, {5, 6}, {6, 3}), 2 * v);
  const std::vector<double> alone = device::get(*b, o.dtype, model.decode(cache, {1}, {6}, {3}), v);
  // Within rounding: cuBLAS may add a GEMM of two rows in another order than one of one row.
  for (std::size_t i = 0; i < v; ++i) CHECK(both[v + i] == doctest::Approx(alone[i]).epsilon(1e-5).scale(1.0));
  // Greedy sampling takes each row's largest logit.
  const std::vector<int> next = model.sample(model.decode(cache, {3, 1}, {5, 6}, {6, 3}), 2, 0.0f, 1, {0, 1}, {7, 4});
  for (int r = 0; r < 2; ++r) {
    const auto row = std::vector<double>(both.begin() + r * a.vocab, both.begin() + (r + 1) * a.vocab);
    CHECK(next[static_cast<std::size_t>(r)] == std::max_element(row.begin(), row.end()) - row.begin());
  }
}

// sum_r c_r * output_r in double: next-token log-probabilities or scalars, as score gives them.
double reference_loss(const workload::ModelArch& a, Head head, std::map<std::string, std::vector<double>>& w,
                      const std::vector<int>& tokens, int batch, int length, const std::vector<double>& c,
                      const TransformerOptions& o) {
  double loss = 0;
  std::size_t out = 0;
  for (int s = 0; s < batch; ++s) {
    const std::vector<int> seq(tokens.begin() + s * length, tokens.begin() + (s + 1) * length);
    const Matrix states = reference_states(a, w, seq, o.rope_theta, o.norm_eps);
    if (head == Head::kScalar) {
      const Matrix values = linear(states, w["head"], length, a.hidden, 1);
      for (double value : values) loss += c[out++] * value;
      continue;
    }
    const Matrix logits = linear(states, a.tied_embeddings ? w["embedding"] : w["head"], length, a.hidden, a.vocab);
    for (int p = 0; p + 1 < length; ++p) {
      double most = -1e300, total = 0;
      for (int i = 0; i < a.vocab; ++i) most = std::max(most, logits[p * a.vocab + i]);
      for (int i = 0; i < a.vocab; ++i) total += std::exp(logits[p * a.vocab + i] - most);
      loss += c[out++] * (logits[p * a.vocab + seq[p + 1]] - most - std::log(total));
    }
  }
  return loss;
}

TEST_CASE("transformer: every parameter's gradient matches finite differences of the reference, both heads") {
  auto b = device::test_backend();
  for (const bool variant : {false, true}) {
    CAPTURE(variant);
    const workload::ModelArch a = tiny(!variant, variant, variant);
    TransformerOptions o;
    o.dtype = DType::kF32;
    for (const Head head : {Head::kLanguage, Head::kScalar}) {
      CAPTURE(head == Head::kScalar);
      Transformer model(*b, a, head, o);
      auto w = randomise(*b, model, o.dtype);
      const int batch = 2, length = 5;
      std::vector<int> tokens = some_tokens(length, a.vocab, 6);
      const std::vector<int> second = some_tokens(length, a.vocab, 7);
      tokens.insert(tokens.end(), second.begin(), second.end());
      const std::vector<float> outputs = model.forward(tokens, batch, length);
      std::vector<double> c;
      std::vector<float> dout;
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        c.push_back(std::sin(1.0 + static_cast<double>(i)));
        dout.push_back(static_cast<float>(c.back()));
      }
      model.backward(dout);
      for (const Transformer::Tensor& p : model.parameters()) {
        CAPTURE(p.name);
        const std::vector<float> found = model.gradient(p.name);
        REQUIRE(found.size() == p.count);
        std::vector<double>& values = w[p.name];
        for (std::size_t i = 0; i < p.count; i += std::max<std::size_t>(1, p.count / 5)) {
          CAPTURE(i);
          const double keep = values[i], h = 1e-4;
          values[i] = keep + h;
          const double up = reference_loss(a, head, w, tokens, batch, length, c, o);
          values[i] = keep - h;
          const double down = reference_loss(a, head, w, tokens, batch, length, c, o);
          values[i] = keep;
          const double expected = (up - down) / (2 * h);
          CHECK(found[i] == doctest::Approx(expected).epsilon(2e-3).scale(0.02));
        }
      }
    }
  }
}

TEST_CASE("transformer: sequences run to their own ends give the whole sequences' outputs there and the same "
          "gradients, both heads; the language head scores the responses only") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(false, true, false);
  TransformerOptions o;
  o.dtype = DType::kF32;
  // Responses from position 3 on; the first sequence ends a token early (padding after it, which
  // the model never runs: the sequences are packed).
  const int batch = 2, length = 6, first = 2;
  const std::vector<int> ends{5, 6};
  std::vector<int> tokens = some_tokens(length, a.vocab, 8);
  const std::vector<int> second = some_tokens(length, a.vocab, 9);
  tokens.insert(tokens.end(), second.begin(), second.end());
  for (const Head head : {Head::kLanguage, Head::kScalar}) {
    const bool language = head == Head::kLanguage;
    CAPTURE(language);
    Transformer whole(*b, a, head, o), responses(*b, a, head, o);
    randomise(*b, whole, o.dtype);
    randomise(*b, responses, o.dtype);
    const std::vector<float> all = whole.score(tokens, batch, length);
    const std::vector<float> scored = responses.score(tokens, batch, length, first, ends);
    REQUIRE(scored.size() == all.size());
    const int row = language ? length - 1 : length;
    std::vector<float> dout(all.size(), 0.0f);
    int counted = 0;
    for (int s = 0; s < batch; ++s) {
      for (int p = 0; p < row; ++p) {
        CAPTURE(s);
        CAPTURE(p);
        const auto i = static_cast<std::size_t>(s * row + p);
        const int end = ends[static_cast<std::size_t>(s)];
        if (language ? p < first || p + 1 >= end : p >= end) {
          CHECK(scored[i] == 0.0f);
        } else {
          CHECK(scored[i] == doctest::Approx(all[i]).epsilon(1e-5));
          if (language) CHECK(scored[i] < 0.0f);
          dout[i] = static_cast<float>(std::sin(1.0 + static_cast<double>(i)));
          ++counted;
        }
      }
    }
    CHECK(counted == (language ? 2 + 3 : 5 + 6));
    // The loss reads the outputs the sequences have: the gradients of every parameter agree.
    whole.forward(tokens, batch, length);
    whole.backward(dout);
    responses.forward(tokens, batch, length, first, ends);
    responses.backward(dout);
    for (const Transformer::Tensor& p : whole.parameters()) {
      CAPTURE(p.name);
      const std::vector<float> expected = whole.gradient(p.name), found = responses.gradient(p.name);
      REQUIRE(found.size() == expected.size());
      double largest = 0;
      for (const float g : expected) largest = std::max(largest, static_cast<double>(std::abs(g)));
      CHECK(largest > 0);
      for (std::size_t i = 0; i < found.size(); ++i) CHECK(found[i] == doctest::Approx(expected[i]).scale(largest).epsilon(1e-5));
    }
    CHECK_THROWS_AS(responses.score(tokens, batch, length, first, {5}), core::InputError);
    CHECK_THROWS_AS(responses.score(tokens, batch, length, first, {0, 0}), core::InputError);
  }
}

TEST_CASE("transformer: training lowers the loss of a fixed language-modelling task, in fp32 and bf16") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(true, false, false);
  for (const DType t : {DType::kF32, DType::kBf16}) {
    CAPTURE(device::dtype_name(t));
    TransformerOptions o;
    o.dtype = t;
    Transformer model(*b, a, Head::kLanguage, o);
    const int batch = 4, length = 12;
    std::vector<int> tokens;
    for (int s = 0; s < batch; ++s) {
      const std::vector<int> seq = some_tokens(length, a.vocab, s);
      tokens.insert(tokens.end(), seq.begin(), seq.end());
    }
    device::AdamW adam;
    adam.lr = 1e-2f;
    adam.weight_decay = 0.0f;
    const auto mean_loss = [](const std::vector<float>& logp) {
      double sum = 0;
      for (float x : logp) sum -= x;
      return sum / static_cast<double>(logp.size());
    };
    const double first = mean_loss(model.score(tokens, batch, length));
    for (int step = 0; step < 30; ++step) {
      const std::vector<float> logp = model.forward(tokens, batch, length);
      // Two micro-batches' worth of the same gradient: d(mean -log p)/d log p = -1/N, twice.
      model.backward(std::vector<float>(logp.size(), -1.0f / static_cast<float>(logp.size())));
      model.forward(tokens, batch, length);
      model.backward(std::vector<float>(logp.size(), -1.0f / static_cast<float>(logp.size())));
      model.step(adam);
    }
    const double last = mean_loss(model.score(tokens, batch, length));
    CAPTURE(first);
    CAPTURE(last);
    CHECK(first > 5.0);          // about log(300) from random weights
    CHECK(last < 0.2 * first);   // memorised
    CHECK(model.gradient("embedding") == std::vector<float>(static_cast<std::size_t>(a.vocab * a.hidden), 0.0f));
    CHECK_THROWS_AS(model.backward({}), std::logic_error);  // no forward before it
  }
}

TEST_CASE("ZeRO's stretches: updating each in turn is one step") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(true, true, false);
  TransformerOptions o;
  o.dtype = DType::kF32;
  Transformer stepped(*b, a, Head::kLanguage, o), in_parts(*b, a, Head::kLanguage, o);
  const std::size_t count = in_parts.parameter_count();
  std::size_t listed = 0;
  for (const Transformer::Tensor& p : in_parts.parameters()) listed += p.count;
  CHECK(count == listed);
  // Three parts of ceil(count / 3), the last shorter, together the whole.
  const std::size_t chunk = (count + 2) / 3;
  for (int part = 0; part < 3; ++part) {
    const Transformer::Stretch s = in_parts.partition(part, 3);
    CHECK(s.first == chunk * static_cast<std::size_t>(part));
    CHECK(s.last == std::min(count, s.first + chunk));
  }
  const int batch = 2, length = 6;
  std::vector<int> tokens = some_tokens(length, a.vocab, 3);
  const std::vector<int> second = some_tokens(length, a.vocab, 4);
  tokens.insert(tokens.end(), second.begin(), second.end());
  const std::vector<float> dout(static_cast<std::size_t>(batch * (length - 1)), -0.1f);
  device::AdamW adam;
  adam.lr = 1e-2f;
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    for (Transformer* m : {&stepped, &in_parts}) {
      m->forward(tokens, batch, length);
      m->backward(dout);
    }
    stepped.step(adam);
    in_parts.begin_step();
    for (const int part : {2, 0, 1}) in_parts.update(adam, in_parts.partition(part, 3));
    in_parts.end_step();
    const std::vector<Transformer::Tensor> expected = stepped.parameters(), found = in_parts.parameters();
    for (std::size_t t = 0; t < found.size(); ++t) {
      CAPTURE(found[t].name);
      std::vector<float> x(found[t].count), y(expected[t].count);
      b->download(x.data(), found[t].buffer->data(), x.size() * sizeof(float));
      b->download(y.data(), expected[t].buffer->data(), y.size() * sizeof(float));
      CHECK(x == y);
    }
  }
}

TEST_CASE("flat gradients and weights: what was there moves into one buffer each in parameter order, the passes "
          "add into it and the steps update it, as the model kept apart") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(true, true, false);
  TransformerOptions o;
  o.dtype = DType::kF32;
  Transformer apart(*b, a, Head::kLanguage, o), flat(*b, a, Head::kLanguage, o);
  const std::size_t count = flat.parameter_count(), padded = count + 5;
  const int batch = 1, length = 6;
  const std::vector<float> dout(static_cast<std::size_t>(batch * (length - 1)), -0.1f);
  const auto all_gradients = [&](Transformer& m) {
    std::vector<float> all;
    for (const Transformer::Tensor& p : m.parameters()) {
      const std::vector<float> g = m.gradient(p.name);
      all.insert(all.end(), g.begin(), g.end());
    }
    return all;
  };
  const auto read = [&](const float* data, std::size_t n) {
    std::vector<float> out(n);
    b->download(out.data(), data, n * sizeof(float));
    return out;
  };
  device::AdamW adam;
  adam.lr = 1e-2f;
  const float* weights = static_cast<const float*>(flat.flat_weights(padded));
  const auto all_weights = [&](Transformer& m) {
    std::vector<float> all;
    for (const Transformer::Tensor& p : m.parameters()) {
      std::vector<float> w(p.count);
      b->download(w.data(), p.buffer->data(), p.count * sizeof(float));
      all.insert(all.end(), w.begin(), w.end());
    }
    all.resize(padded, 0.0f);
    return all;
  };
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    for (int pass = 0; pass < 2; ++pass) {
      for (Transformer* m : {&apart, &flat}) {
        m->forward(some_tokens(length, a.vocab, 3 + pass), batch, length);
        m->backward(dout);
      }
      // Taken after the first pass of the first step (gradients to move), then again (views).
      const float* data = flat.flat_gradients(padded);
      std::vector<float> expected = all_gradients(apart);
      REQUIRE(expected.size() == count);
      CHECK(std::any_of(expected.begin(), expected.end(), [](float g) { return g != 0.0f; }));
      expected.resize(padded, 0.0f);
      CHECK(read(data, padded) == expected);
      CHECK(all_gradients(flat) == all_gradients(apart));
    }
    apart.step(adam);
    flat.step(adam);
    CHECK(read(flat.flat_gradients(padded), padded) == std::vector<float>(padded, 0.0f));
    CHECK(flat.flat_weights(padded) == weights);
    CHECK(read(weights, padded) == all_weights(apart));
    CHECK(all_weights(flat) == all_weights(apart));
  }
  // A longer buffer keeps what was accumulated; a shorter one than the parameters is refused.
  flat.forward(some_tokens(length, a.vocab, 9), batch, length);
  flat.backward(dout);
  const std::vector<float> before = all_gradients(flat);
  const float* longer = flat.flat_gradients(padded + 64);
  std::vector<float> moved = read(longer, count);
  CHECK(moved == before);
  CHECK(all_gradients(flat) == before);
  CHECK_THROWS_AS(flat.flat_gradients(count - 1), std::logic_error);
}

TEST_CASE("tensor parallelism: two shards in one process give one shard's outputs, gradients and training") {
  auto b = device::test_backend();
  for (const bool variant : {false, true}) {
    CAPTURE(variant);
    const workload::ModelArch a = tiny(!variant, variant, variant);
    for (const DType t : {DType::kF32, DType::kBf16}) {
      CAPTURE(device::dtype_name(t));
      const double tolerance = t == DType::kF32 ? 1e-5 : 2e-2;
      TransformerOptions one, two;
      one.dtype = two.dtype = t;
      two.tp.size = 2;
      for (const Head head : {Head::kLanguage, Head::kScalar}) {
        CAPTURE(head == Head::kScalar);
        Transformer whole(*b, a, head, one), split(*b, a, head, two);
        // The shards hold the slices of the whole model's weights.
        std::map<std::string, std::size_t> counts;
        for (const Transformer::Tensor& p : split.parameters()) counts[p.name] = p.count;
        CHECK(counts.at("layer.0.wq/1") * 2 == static_cast<std::size_t>(a.heads * a.head_dim * a.hidden));
        CHECK(counts.at("layer.1.w_down/0") * 2 == static_cast<std::size_t>(a.hidden * a.ffn_hidden));
        CHECK(counts.count("layer.0.wq") == 0);
        const int batch = 2, length = 6;
        std::vector<int> tokens = some_tokens(length, a.vocab, 8);
        const std::vector<int> second = some_tokens(length, a.vocab, 9);
        tokens.insert(tokens.end(), second.begin(), second.end());
        const std::vector<float> expected = whole.score(tokens, batch, length);
        const std::vector<float> found = split.score(tokens, batch, length);
        REQUIRE(found.size() == expected.size());
        for (std::size_t i = 0; i < found.size(); ++i) {
          CAPTURE(i);
          CHECK(found[i] == doctest::Approx(expected[i]).epsilon(tolerance).scale(1.0));
        }
        // Gradients: a shard's are its slice of the whole model's; a whole tensor's are equal.
        std::vector<float> dout;
        for (std::size_t i = 0; i < expected.size(); ++i) dout.push_back(static_cast<float>(std::cos(0.3 * static_cast<double>(i))));
        whole.forward(tokens, batch, length);
        whole.backward(dout);
        split.forward(tokens, batch, length);
        split.backward(dout);
        const auto close = [&](const std::vector<float>& x, const std::vector<float>& y) {
          REQUIRE(x.size() == y.size());
          double most = 0;
          for (float v : y) most = std::max(most, std::abs(static_cast<double>(v)));
          for (std::size_t i = 0; i < x.size(); ++i) {
            CAPTURE(i);
            CHECK(std::abs(static_cast<double>(x[i]) - y[i]) <= 4 * tolerance * std::max(most, 1e-3));
          }
        };
        close(split.gradient("layer.1.attn_norm"), whole.gradient("layer.1.attn_norm"));
        close(split.gradient("embedding"), whole.gradient("embedding"));
        const std::vector<float> wq = whole.gradient("layer.0.wq");
        const std::size_t half = wq.size() / 2;
        close(split.gradient("layer.0.wq/1"), std::vector<float>(wq.begin() + static_cast<long>(half), wq.end()));
        // w_down [hidden][ffn]: shard 0 has the first half of every row.
        const std::vector<float> down = whole.gradient("layer.0.w_down");
        std::vector<float> first_columns;
        const std::size_t ffn = static_cast<std::size_t>(a.ffn_hidden);
        for (std::size_t r = 0; r < static_cast<std::size_t>(a.hidden); ++r) {
          first_columns.insert(first_columns.end(), down.begin() + static_cast<long>(r * ffn),
                               down.begin() + static_cast<long>(r * ffn + ffn / 2));
        }
        close(split.gradient("layer.0.w_down/0"), first_columns);
        // One AdamW step each: the same model after it.
        device::AdamW adam;
        adam.lr = 1e-2f;
        whole.step(adam);
        split.step(adam);
        const std::vector<float> after = whole.score(tokens, batch, length);
        const std::vector<float> split_after = split.score(tokens, batch, length);
        for (std::size_t i = 0; i < after.size(); ++i) {
          CAPTURE(i);
          CHECK(split_after[i] == doctest::Approx(after[i]).epsilon(4 * tolerance).scale(1.0));
        }
        // The reshard: another seed's models, in the other layout, take the trained weights.
        TransformerOptions other_one = one, other_two = two;
        other_one.seed = other_two.seed = 99;
        Transformer gathered(*b, a, head, other_one), spread(*b, a, head, other_two);
        CHECK(gathered.score(tokens, batch, length) != split_after);
        gathered.load(split);
        spread.load(whole);
        const std::vector<float> g = gathered.score(tokens, batch, length), sp = spread.score(tokens, batch, length);
        for (std::size_t i = 0; i < after.size(); ++i) {
          CAPTURE(i);
          CHECK(g[i] == doctest::Approx(after[i]).epsilon(4 * tolerance).scale(1.0));
          CHECK(sp[i] == doctest::Approx(split_after[i]).epsilon(4 * tolerance).scale(1.0));
        }
      }
      // Decode over a cache, sharded by kv head.
      Transformer whole(*b, a, Head::kLanguage, one), split(*b, a, Head::kLanguage, two);
      Transformer::Cache c1 = whole.make_cache(2, 10), c2 = split.make_cache(2, 10);
      whole.prefill(c1, 1, some_tokens(4, a.vocab, 10));
      split.prefill(c2, 1, some_tokens(4, a.vocab, 10));
      const std::size_t v = static_cast<std::size_t>(a.vocab);
      const std::vector<double> x = device::get(*b, t, whole.decode(c1, {1}, {7}, {4}), v);
      const std::vector<double> y = device::get(*b, t, split.decode(c2, {1}, {7}, {4}), v);
      for (std::size_t i = 0; i < v; ++i) CHECK(y[i] == doctest::Approx(x[i]).epsilon(tolerance).scale(1.0));
    }
  }
  workload::ModelArch odd = tiny(true, false, false);
  TransformerOptions three;
  three.tp.size = 3;
  CHECK_THROWS_AS(Transformer(*b, odd, Head::kLanguage, three), core::InputError);  // 4 heads
}

TEST_CASE("tensor parallelism: more shards than kv heads copy each kv head, and train as one") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(false, true, false);  // 4 heads, 2 kv heads, qkv biases
  TransformerOptions one, four;
  one.dtype = four.dtype = DType::kF32;
  four.tp.size = 4;
  Transformer whole(*b, a, Head::kLanguage, one), split(*b, a, Head::kLanguage, four);
  const int batch = 2, length = 5;
  std::vector<int> tokens = some_tokens(length, a.vocab, 11);
  const std::vector<int> second = some_tokens(length, a.vocab, 12);
  tokens.insert(tokens.end(), second.begin(), second.end());
  const auto same = [&](const std::vector<float>& x, const std::vector<float>& y) {
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      CAPTURE(i);
      CHECK(x[i] == doctest::Approx(y[i]).epsilon(1e-4).scale(1.0));
    }
  };
  same(split.score(tokens, batch, length), whole.score(tokens, batch, length));
  // Shards 0 and 1 hold copies of kv head 0: after steps their copies still agree, and the
  // model still equals the unsplit one.
  device::AdamW adam;
  adam.lr = 5e-2f;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> dout(static_cast<std::size_t>(batch * (length - 1)), -0.1f);
    whole.forward(tokens, batch, length);
    whole.backward(dout);
    split.forward(tokens, batch, length);
    split.backward(dout);
    whole.step(adam);
    split.step(adam);
  }
  std::map<std::string, std::vector<double>> held;
  for (const Transformer::Tensor& p : split.parameters()) held[p.name] = device::get(*b, DType::kF32, *p.buffer, p.count);
  CHECK(held.at("layer.1.wk/0") == held.at("layer.1.wk/1"));
  CHECK(held.at("layer.1.bv/2") == held.at("layer.1.bv/3"));
  CHECK(held.at("layer.1.wk/1") != held.at("layer.1.wk/2"));
  same(split.score(tokens, batch, length), whole.score(tokens, batch, length));
}

TEST_CASE("the reshard pair by pair (what the weight sync sends between processes) gives what load gives") {
  auto b = device::test_backend();
  const DType t = DType::kBf16;
  for (const bool variant : {false, true}) {
    const workload::ModelArch a = tiny(variant, variant, !variant);  // 4 heads, 2 kv heads
    for (const Head head : {Head::kLanguage, Head::kScalar}) {
      for (const int from_tp : {1, 2, 4}) {
        for (const int to_tp : {1, 2, 4}) {
          CAPTURE(variant);
          CAPTURE(from_tp);
          CAPTURE(to_tp);
          TransformerOptions from_options, to_options;
          from_options.dtype = to_options.dtype = t;
          from_options.tp.size = from_tp;
          to_options.tp.size = to_tp;
          to_options.seed = 99;
          Transformer trained(*b, a, head, from_options);
          randomise(*b, trained, t);  // every tensor its own values, norms and biases too
          Transformer expected(*b, a, head, to_options), packed(*b, a, head, to_options), copied(*b, a, head, to_options);
          expected.load(trained);
          // The pieces on their way, as a pair of processes would pass them.
          std::deque<std::vector<char>> wire;
          std::size_t moved = 0;
          // Between equal splits every piece is a whole tensor, sent from the trained shard's
          // own memory and received into the engine's, with no packed copy on either side.
          const std::vector<Transformer::Tensor> sent_from = trained.parameters(), received_into = packed.parameters();
          const auto inside = [](const std::vector<Transformer::Tensor>& tensors, const void* data, std::size_t bytes) {
            const char* p = static_cast<const char*>(data);
            return std::any_of(tensors.begin(), tensors.end(), [&](const Transformer::Tensor& x) {
              const char* begin = static_cast<const char*>(x.buffer->data());
              return p >= begin && p + bytes <= begin + x.buffer->bytes();
            });
          };
          for (int d = 0; d < to_tp; ++d) {
            // The whole tensors from a shard other than the first where there is one.
            const int whole_from = (d + 1) % from_tp;
            for (int s = 0; s < from_tp; ++s) {
              trained.send_shard(s, to_tp, d, s == whole_from, packed.layers(), [&](const void* data, std::size_t bytes) {
                if (from_tp == to_tp) CHECK(inside(sent_from, data, bytes));
                std::vector<char>& piece = wire.emplace_back(bytes);
                b->download(piece.data(), data, bytes);
                moved += bytes;
              });
              packed.receive_shard(from_tp, s, trained.layers(), d, s == whole_from, [&](void* data, std::size_t bytes) {
                if (from_tp == to_tp) CHECK(inside(received_into, data, bytes));
                REQUIRE(!wire.empty());
                REQUIRE(wire.front().size() == bytes);
                b->upload(data, wire.front().data(), bytes);
                wire.pop_front();
              });
              CHECK(wire.empty());
              copied.load_shard(trained, s, d, s == whole_from);
            }
          }
          // Each shard of the new layout received its own bytes once: the model's, plus the
          // copies of the tensors every shard holds whole (and of kv heads shared by shards).
          CHECK(moved >= expected.parameter_bytes());
          std::vector<Transformer::Tensor> want = expected.parameters(), got = packed.parameters(),
                                           got_copied = copied.parameters();
          REQUIRE(got.size() == want.size());
          for (std::size_t i = 0; i < want.size(); ++i) {
            CAPTURE(want[i].name);
            const std::vector<double> w = device::get(*b, t, *want[i].buffer, want[i].count);
            CHECK(device::get(*b, t, *got[i].buffer, got[i].count) == w);
            CHECK(device::get(*b, t, *got_copied[i].buffer, got_copied[i].count) == w);
          }
        }
      }
    }
  }
  // Without the whole tensors the embedding, norms and head keep their own seed's values.
  const workload::ModelArch a = tiny(true, false, false);
  TransformerOptions two;
  two.dtype = t;
  two.tp.size = 2;
  two.seed = 5;
  Transformer trained(*b, a, Head::kLanguage, two);
  randomise(*b, trained, t);
  TransformerOptions one;
  one.dtype = t;
  Transformer engine(*b, a, Head::kLanguage, one);
  for (int s = 0; s < 2; ++s) engine.load_shard(trained, s, 0, false);
  const std::vector<Transformer::Tensor> from = trained.parameters(), to = engine.parameters();
  CHECK(device::get(*b, t, *to.front().buffer, to.front().count) !=
        device::get(*b, t, *from.front().buffer, from.front().count));  // the embedding
  CHECK_THROWS_AS(engine.load_shard(trained, 0, 1, true), std::logic_error);  // a shard it does not hold
}

// Two pipeline stages in one process, their hooks joined by queues on the host: what a
// stage hands on, the next takes, in order.
struct Joined {
  explicit Joined(device::Backend& backend) : b(backend) {}
  device::Backend& b;
  std::deque<std::vector<char>> activations, gradients;
  std::deque<std::vector<int>> tokens;
  float* tied = nullptr;  // the first stage's embedding gradient, until the last's comes
  std::size_t tied_count = 0;

  static void put(device::Backend& b, std::deque<std::vector<char>>& q, const void* data, std::size_t bytes) {
    b.download(q.emplace_back(bytes).data(), data, bytes);
  }
  static void take(device::Backend& b, std::deque<std::vector<char>>& q, void* data, std::size_t bytes) {
    REQUIRE(!q.empty());
    REQUIRE(q.front().size() == bytes);
    b.upload(data, q.front().data(), bytes);
    q.pop_front();
  }
  // Stage `index` of two, from `first_layer`, holding `layers`.
  PipelineParallel stage(int index, int first_layer, int layers) {
    PipelineParallel pp;
    pp.first_layer = first_layer;
    pp.layers = layers;
    if (index == 1) {
      pp.receive_activations = [this](void* d, std::size_t n) { take(b, activations, d, n); };
      pp.send_gradients = [this](const void* d, std::size_t n) { put(b, gradients, d, n); };
      pp.share_tokens = [this](int* t, std::size_t n) { tokens.emplace_back(t, t + n); };
    } else {
      pp.send_activations = [this](const void* d, std::size_t n) { put(b, activations, d, n); };
      pp.receive_gradients = [this](void* d, std::size_t n) { take(b, gradients, d, n); };
      pp.share_tokens = [this](int* t, std::size_t n) {
        REQUIRE(!tokens.empty());
        REQUIRE(tokens.front().size() == n);
        std::copy(tokens.front().begin(), tokens.front().end(), t);
        tokens.pop_front();
      };
    }
    pp.sum_tied_embedding = [this](float* g, std::size_t n) {
      if (!tied) {
        tied = g;
        tied_count = n;
        return;
      }
      REQUIRE(tied_count == n);
      b.add(DType::kF32, g, tied, n);
      b.copy(tied, g, n * sizeof(float));
      tied = nullptr;
    };
    return pp;
  }
};

TEST_CASE("pipeline parallelism: two stages hand on their rows and give the whole model's outputs, gradients, "
          "training and tokens") {
  auto b = device::test_backend();
  for (const bool tied : {false, true}) {
    workload::ModelArch a = tiny(tied, !tied, tied);
    a.layers = 3;
    for (const Head head : {Head::kLanguage, Head::kScalar}) {
      CAPTURE(tied);
      CAPTURE(head == Head::kScalar);
      TransformerOptions whole_options;
      whole_options.dtype = DType::kF32;
      Joined join{*b};
      TransformerOptions first_options = whole_options, last_options = whole_options;
      first_options.pp = join.stage(0, 0, 2);
      last_options.pp = join.stage(1, 2, 0);
      Transformer whole(*b, a, head, whole_options), first(*b, a, head, first_options), last(*b, a, head, last_options);
      CHECK(first.first_stage());
      CHECK(!first.last_stage());
      CHECK(last.layers().first == 2);
      CHECK(last.layers().count == 1);
      // Each stage holds the whole model's tensors there, by their names in it.
      std::map<std::string, std::vector<double>> weights;
      for (const Transformer::Tensor& p : whole.parameters()) weights[p.name] = device::get(*b, DType::kF32, *p.buffer, p.count);
      std::map<std::string, int> holders;
      for (Transformer* stage : {&first, &last}) {
        for (const Transformer::Tensor& p : stage->parameters()) {
          CAPTURE(p.name);
          ++holders[p.name];
          CHECK(device::get(*b, DType::kF32, *p.buffer, p.count) == weights.at(p.name));
        }
      }
      CHECK(holders.size() == weights.size());
      CHECK(holders.at("layer.1.wq") == 1);
      CHECK(holders.at("layer.2.wq") == 1);
      CHECK(holders.at("embedding") == (tied && head == Head::kLanguage ? 2 : 1));
      const std::size_t copy = tied && head == Head::kLanguage ? static_cast<std::size_t>(a.vocab * a.hidden) * sizeof(float) : 0;
      CHECK(first.parameter_bytes() + last.parameter_bytes() == whole.parameter_bytes() + copy);

      const int batch = 2, length = 6;
      std::vector<int> tokens = some_tokens(length, a.vocab, 21);
      const std::vector<int> second = some_tokens(length, a.vocab, 22);
      tokens.insert(tokens.end(), second.begin(), second.end());
      CHECK(first.score(tokens, batch, length).empty());
      CHECK(join.activations.size() == 1);
      const std::vector<float> expected = whole.score(tokens, batch, length);
      CHECK(last.score(tokens, batch, length) == expected);
      CHECK(join.activations.empty());

      // Two micro-batches: the first stage's forwards, the last's forwards and backwards, the
      // first's backwards (a pipeline's order); the whole model one micro-batch at a time.
      const std::vector<int> other = some_tokens(batch * length, a.vocab, 23);
      std::vector<float> dout;
      for (std::size_t i = 0; i < expected.size(); ++i) dout.push_back(static_cast<float>(std::sin(0.7 * static_cast<double>(i))));
      const std::vector<int> ends = {length, length - 2};
      whole.forward(tokens, batch, length, 1);
      whole.backward(dout);
      whole.forward(other, batch, length, 0, ends);
      whole.backward(dout);
      first.forward(tokens, batch, length, 1);
      first.forward(other, batch, length, 0, ends);
      CHECK(last.forward(tokens, batch, length, 1).size() == expected.size());
      CHECK(last.forward(other, batch, length, 0, ends).size() == expected.size());
      last.backward(dout);
      last.backward(dout);
      CHECK_THROWS_AS(first.backward(dout), core::InputError);  // a stage before the last takes none
      first.backward({});
      first.backward({});
      CHECK(join.gradients.empty());
      CHECK_THROWS_AS(first.backward({}), std::logic_error);  // no forward waits
      // The gradients, the tied embedding's once both stages' are summed; the norm over the
      // stages counts that embedding once.
      whole.begin_step();
      first.begin_step();
      last.begin_step();
      // Within fp32 rounding of the tensor's largest value (a tied embedding's two gradients
      // are summed in another order).
      const auto close = [&](const std::vector<float>& x, const std::vector<float>& y) {
        REQUIRE(x.size() == y.size());
        double most = 1e-3;
        for (float v : y) most = std::max(most, std::abs(static_cast<double>(v)));
        for (std::size_t i = 0; i < x.size(); ++i) {
          CAPTURE(i);
          CHECK(std::abs(static_cast<double>(x[i]) - y[i]) <= 1e-5 * most);
        }
      };
      for (Transformer* stage : {&first, &last}) {
        for (const Transformer::Tensor& p : stage->parameters()) {
          CAPTURE(p.name);
          close(stage->gradient(p.name), whole.gradient(p.name));
        }
      }
      const double w = whole.gradient_norm(), f = first.gradient_norm(), l = last.gradient_norm();
      CHECK(std::sqrt(f * f + l * l) == doctest::Approx(w).epsilon(1e-5));
      device::AdamW adam;
      adam.lr = 1e-2f;
      for (Transformer* m : {&whole, &first, &last}) {
        m->update(adam, m->partition(0, 1));
        m->end_step();
      }
      first.score(tokens, batch, length);
      const std::vector<float> trained = last.score(tokens, batch, length);
      close(trained, whole.score(tokens, batch, length));
      CHECK(trained != expected);

      // The reshard into stages of other boundaries: each takes the layers it holds.
      TransformerOptions to_first = whole_options, to_last = whole_options;
      to_first.seed = to_last.seed = 77;
      Joined other_join{*b};
      to_first.pp = other_join.stage(0, 0, 1);
      to_last.pp = other_join.stage(1, 1, 0);
      Transformer engine_first(*b, a, head, to_first), engine_last(*b, a, head, to_last);
      engine_first.load(whole);
      // The last stage's pieces from the two trained stages, as processes pass them.
      std::deque<std::vector<char>> wire;
      for (Transformer* from : {&first, &last}) {
        from->send_shard(0, 1, 0, true, engine_last.layers(),
                         [&](const void* data, std::size_t bytes) { Joined::put(*b, wire, data, bytes); });
        engine_last.receive_shard(1, 0, from->layers(), 0, true,
                                  [&](void* data, std::size_t bytes) { Joined::take(*b, wire, data, bytes); });
        CHECK(wire.empty());
      }
      engine_first.score(tokens, batch, length);
      close(engine_last.score(tokens, batch, length), trained);

      if (head == Head::kScalar) continue;
      // Decode over the stages' caches: the last stage's logits and tokens, which the first
      // stage takes.
      Transformer::Cache c0 = whole.make_cache(2, 10), c1 = first.make_cache(2, 10), c2 = last.make_cache(2, 10);
      const std::vector<int> prompt = some_tokens(4, a.vocab, 24);
      whole.prefill(c0, 1, prompt);
      CHECK(first.prefill(c1, 1, prompt).bytes() == 0);
      last.prefill(c2, 1, prompt);
      const std::size_t v = static_cast<std::size_t>(a.vocab);
      const std::vector<double> x = device::get(*b, DType::kF32, whole.decode(c0, {1}, {7}, {4}), v);
      first.decode(c1, {1}, {7}, {4});
      const device::Buffer& logits = last.decode(c2, {1}, {7}, {4});
      const std::vector<double> y = device::get(*b, DType::kF32, logits, v);
      for (std::size_t i = 0; i < v; ++i) CHECK(y[i] == doctest::Approx(x[i]).epsilon(1e-4).scale(1.0));
      const std::vector<int> drawn = last.sample(logits, 1, 1.0f, 5, {3}, {5});
      CHECK(first.sample(logits, 1, 1.0f, 5, {3}, {5}) == drawn);
      CHECK(join.tokens.empty());
    }
  }
  workload::ModelArch a = tiny(false, false, false);
  TransformerOptions beyond;
  beyond.pp.first_layer = 1;
  beyond.pp.layers = 2;
  CHECK_THROWS_AS(Transformer(*b, a, Head::kLanguage, beyond), core::InputError);  // layers 1 and 2 of 2
}

TEST_CASE("generation: continuous batching gives each prompt its response length, the same tokens at any concurrency and prefill chunk") {
  auto b = device::test_backend();
  const workload::ModelArch a = tiny(true, false, false);
  TransformerOptions o;
  o.dtype = DType::kF32;
  Transformer model(*b, a, Head::kLanguage, o);
  randomise(*b, model, o.dtype);
  GenerationRequest request;
  const std::vector<int> lengths{5, 1, 9, 3, 2, 7, 1, 4};
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    request.prompts.push_back(some_tokens(3 + static_cast<int>(i % 3), a.vocab, static_cast<int>(i) + 10));
  }
  request.response_lengths = lengths;
  request.seed = 5;
  request.first_sequence = 100;
  long long prompt_tokens = 0, response_tokens = 0, longest = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    prompt_tokens += static_cast<long long>(request.prompts[i].size());
    response_tokens += lengths[i];
    longest = std::max<long long>(longest, lengths[i]);
  }
  for (const float temperature : {0.0f, 1.0f}) {
    CAPTURE(temperature);
    request.temperature = temperature;
    std::vector<std::vector<int>> first;
    for (const int concurrency : {1, 3, 8}) {
      CAPTURE(concurrency);
      request.concurrency = concurrency;
      request.prefill_chunk_tokens = 0;
      const GenerationResult r = generate(model, request);
      REQUIRE(r.responses.size() == lengths.size());
      for (std::size_t i = 0; i < lengths.size(); ++i) CHECK(static_cast<int>(r.responses[i].size()) == lengths[i]);
      CHECK(r.prefill_tokens == prompt_tokens);
      CHECK(r.generated_tokens == response_tokens);
      // The two one-token responses end at their prefill and never decode.
      CHECK(r.largest_batch == std::min(concurrency, 6));
      if (concurrency == 1) CHECK(r.decode_steps == response_tokens - static_cast<long long>(lengths.size()));
      // All at once: as many steps as the longest response less its first token.
      if (concurrency == 8) CHECK(r.decode_steps == longest - 1);
      if (first.empty()) {
        first = r.responses;
      } else {
        CHECK(r.responses == first);
      }
      // Prefill passes within a chunk of 4 tokens: a prompt of 3 to 5 tokens a pass, the same
      // responses; unchunked, the 8 prompts admitted at once take a pass for each of their 3
      // lengths.
      request.prefill_chunk_tokens = 4;
      const GenerationResult chunked = generate(model, request);
      CHECK(chunked.responses == first);
      CHECK(chunked.prefill_passes == static_cast<long long>(lengths.size()));
      CHECK(chunked.decode_steps == r.decode_steps);
      if (concurrency == 8) CHECK(r.prefill_passes == 3);
    }
    if (temperature == 0.0f) {
      // Greedy: each response token is the most likely continuation of what came before, so
      // scoring prompt and response gives each response token at least the log-probability of
      // any other single token choice there (checked against the prefill of each prefix).
      const std::vector<int>& prompt = request.prompts[2];
      std::vector<int> seq = prompt;
      Transformer::Cache cache = model.make_cache(1, 32);
      for (const int token : first[2]) {
        const std::vector<double> logits =
            device::get(*b, o.dtype, model.prefill(cache, 0, seq), static_cast<std::size_t>(a.vocab));
        CHECK(token == std::max_element(logits.begin(), logits.end()) - logits.begin());
        seq.push_back(token);
      }
    }
  }
  request.prefill_chunk_tokens = -1;
  CHECK_THROWS_AS(generate(model, request), core::InputError);
  request.prefill_chunk_tokens = 0;
  request.response_lengths[3] = 0;
  CHECK_THROWS_AS(generate(model, request), core::InputError);
}

TEST_CASE("transformer: scaling a catalogue model keeps its proportions, and refuses what cannot apply") {
  workload::ModelArch qwen = tiny(true, false, false);
  qwen.name = "Qwen3-8B-like";
  qwen.layers = 36;
  qwen.hidden = 4096;
  qwen.heads = 32;
  qwen.kv_heads = 8;
  qwen.head_dim = 128;
  qwen.ffn_hidden = 12288;
  qwen.vocab = 151936;
  const workload::ModelArch s = scaled(qwen, Scale{2, 1024, 4096});
  CHECK(s.layers == 2);
  CHECK(s.hidden == 1024);
  CHECK(s.kv_heads == 2);
  CHECK(s.heads == 8);  // the 4:1 grouping kept
  CHECK(s.head_dim == 128);
  CHECK(s.ffn_hidden == 3072);
  CHECK(s.vocab == 4096);
  CHECK(scaled(qwen, Scale{}).name == qwen.name);
  CHECK_THROWS_AS(scaled(qwen, Scale{40, 0, 0}), core::InputError);
  CHECK_THROWS_AS(scaled(qwen, Scale{0, 8192, 0}), core::InputError);
  CHECK_THROWS_AS(scaled(qwen, Scale{0, 0, 100}), core::InputError);  // a vocabulary under 256
}

}  // namespace
}  // namespace hetrl::exec
