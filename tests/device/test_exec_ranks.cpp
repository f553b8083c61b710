// Tensor parallelism across processes: under mpirun each process holds one shard of the
// model (its rank's) and the shards' partial sums travel through the communicator's
// all-reduce; every process also holds the unsplit model and checks that the split one gives
// its outputs, its shard's slice of the gradients and, after an AdamW step, its outputs again.
// Alone (no launcher), the one process holds every shard and checks the same. ZeRO's sharded
// optimiser likewise: each process updates its stretch of the weights and gathers the others',
// which is the unsharded step over every process's data.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "device_test_backend.h"
#include "exec/transformer.h"
#include "exec/zero.h"
#include "tiny_model.h"

namespace hetrl::exec {
namespace {

using device::DType;

// Every fp32 weight of `found` against the same of `want`: close(found's, want's).
void check_weights(device::Backend& b, Transformer& found, Transformer& want, const std::function<bool(float, float)>& close) {
  const std::vector<Transformer::Tensor> x_tensors = found.parameters(), y_tensors = want.parameters();
  REQUIRE(x_tensors.size() == y_tensors.size());
  for (std::size_t t = 0; t < x_tensors.size(); ++t) {
    CAPTURE(x_tensors[t].name);
    REQUIRE(x_tensors[t].count == y_tensors[t].count);
    std::vector<float> x(x_tensors[t].count), y(y_tensors[t].count);
    b.download(x.data(), x_tensors[t].buffer->data(), x.size() * sizeof(float));
    b.download(y.data(), y_tensors[t].buffer->data(), y.size() * sizeof(float));
    for (std::size_t i = 0; i < x.size(); ++i) CHECK_MESSAGE(close(x[i], y[i]), x[i] << " against " << y[i]);
  }
}

TEST_CASE("tensor parallelism across processes: a shard a process gives the unsplit model's outputs and training") {
  auto b = device::test_backend();
  auto comm = device::test_communicator(*b);
  const int ranks = comm->size();
  const workload::ModelArch a = tiny(true, false, false);
  REQUIRE(a.kv_heads % std::max(ranks, 2) == 0);  // run alone or by 2 processes
  TransformerOptions one, split_options;
  one.dtype = split_options.dtype = DType::kF32;
  split_options.tp.size = std::max(ranks, 2);
  if (ranks > 1) {
    split_options.tp.local = {comm->rank()};
    split_options.tp.all_reduce = [&](DType t, void* data, std::size_t count) { comm->all_reduce(t, data, data, count); };
  }
  for (const Head head : {Head::kLanguage, Head::kScalar}) {
    CAPTURE(head == Head::kScalar);
    Transformer whole(*b, a, head, one), split(*b, a, head, split_options);
    const int batch = 2, length = 6;
    std::vector<int> tokens;
    for (int i = 0; i < batch * length; ++i) tokens.push_back((i * 37 + 5) % a.vocab);
    const auto same = [&](const std::vector<float>& x, const std::vector<float>& y) {
      REQUIRE(x.size() == y.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        CAPTURE(i);
        CHECK(x[i] == doctest::Approx(y[i]).epsilon(1e-4).scale(1.0));
      }
    };
    same(split.score(tokens, batch, length), whole.score(tokens, batch, length));
    std::vector<float> dout;
    const std::size_t outputs = head == Head::kScalar ? tokens.size() : static_cast<std::size_t>(batch * (length - 1));
    for (std::size_t i = 0; i < outputs; ++i) dout.push_back(static_cast<float>(std::sin(0.7 * static_cast<double>(i))));
    whole.forward(tokens, batch, length);
    whole.backward(dout);
    split.forward(tokens, batch, length);
    split.backward(dout);
    // This process's shard of wq: its rows of the whole gradient.
    const int shard = ranks > 1 ? comm->rank() : 1;
    const std::vector<float> full = whole.gradient("layer.1.wq");
    const std::size_t part = full.size() / static_cast<std::size_t>(split_options.tp.size);
    const std::vector<float> mine = split.gradient("layer.1.wq/" + std::to_string(shard));
    same(mine, std::vector<float>(full.begin() + static_cast<long>(part * static_cast<std::size_t>(shard)),
                                  full.begin() + static_cast<long>(part * static_cast<std::size_t>(shard + 1))));
    device::AdamW adam;
    adam.lr = 5e-2f;
    whole.step(adam);
    split.step(adam);
    same(split.score(tokens, batch, length), whole.score(tokens, batch, length));
  }
}


TEST_CASE("ZeRO across processes: each process's stretch updated, the others' gathered, is the step over all the data") {
  auto b = device::test_backend();
  auto comm = device::test_communicator(*b);
  const int ranks = comm->size();
  const workload::ModelArch a = tiny(true, true, false);
  TransformerOptions o;
  o.dtype = DType::kF32;
  Transformer whole(*b, a, Head::kLanguage, o), mine(*b, a, Head::kLanguage, o);
  const int batch = 2, length = 6;
  const auto data = [&](int rank, int step) {
    std::vector<int> tokens;
    for (int i = 0; i < batch * length; ++i) tokens.push_back((i * 37 + rank * 11 + step * 5 + 3) % a.vocab);
    return tokens;
  };
  std::vector<float> dout;
  for (int i = 0; i < batch * (length - 1); ++i) dout.push_back(static_cast<float>(std::cos(0.3 * i)));
  device::AdamW adam;
  adam.lr = 5e-2f;
  ShardedOptimizer zero(*b, mine, *comm);
  CHECK(zero.own().first == mine.partition(comm->rank(), ranks).first);
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    // The reference sums every process's micro-batch; each process runs its own.
    for (int r = 0; r < ranks; ++r) {
      whole.forward(data(r, step), batch, length);
      whole.backward(dout);
    }
    mine.forward(data(comm->rank(), step), batch, length);
    mine.backward(dout);
    whole.begin_step();
    mine.begin_step();
    zero.reduce_scatter_gradients();
    CHECK(zero.gradient_norm() == doctest::Approx(whole.gradient_norm()).epsilon(1e-5));
    whole.update(adam, whole.partition(0, 1));
    whole.end_step();
    zero.update(adam);
    zero.gather_weights();
    mine.end_step();
    check_weights(*b, mine, whole, [](float x, float y) { return x == doctest::Approx(y).epsilon(1e-5).scale(1.0); });
  }
}

TEST_CASE("ZeRO-3 across processes: layers gathered in the passes, gradients reduce-scattered, idle passes for "
          "the fewer micro-batches, is the step over all the data") {
  auto b = device::test_backend();
  auto comm = device::test_communicator(*b);
  const int ranks = comm->size(), rank = comm->rank();
  const int batch = 2, length = 6;
  for (const bool tied : {false, true}) {
    for (const Head head : {Head::kLanguage, Head::kScalar}) {
      CAPTURE(tied);
      CAPTURE(head == Head::kScalar);
      // TP 4 in this process over 2 kv heads (each copied to two shards, whose gradients sum
      // in each layer before they leave), qk norms and biases.
      const workload::ModelArch a = tiny(true, true, tied);
      TransformerOptions o;
      o.dtype = DType::kF32;
      o.tp.size = 4;
      Transformer whole(*b, a, head, o), mine(*b, a, head, o);
      const auto data = [&](int r, int step, int micro) {
        std::vector<int> tokens;
        for (int i = 0; i < batch * length; ++i) tokens.push_back((i * 37 + r * 11 + step * 5 + micro * 7 + 3) % a.vocab);
        return tokens;
      };
      const std::size_t outputs = head == Head::kScalar ? static_cast<std::size_t>(batch * length)
                                                        : static_cast<std::size_t>(batch * (length - 1));
      std::vector<float> dout;
      for (std::size_t i = 0; i < outputs; ++i) dout.push_back(static_cast<float>(std::cos(0.3 * static_cast<double>(i))));
      Transformer::WeightSharding sharding;
      sharding.rank = rank;
      sharding.size = ranks;
      sharding.all_gather = [&](DType t, const void* send, void* recv, std::size_t count) { comm->all_gather(t, send, recv, count); };
      sharding.reduce_scatter = [&](DType t, const void* send, void* recv, std::size_t count) {
        comm->reduce_scatter(t, send, recv, count);
      };
      sharding.sum = [&](double* values, int count) {
        for (int i = 0; i < count; ++i) values[i] = sum_over(*comm, values[i]);
      };
      const std::size_t tensors = mine.parameters().size();
      mine.shard_weights(sharding);
      // Between passes a process holds no tensor whole.
      CHECK(mine.weights_sharded());
      CHECK(mine.parameters().empty());
      device::AdamW adam;
      adam.lr = 5e-2f;
      for (int step = 0; step < 2; ++step) {
        CAPTURE(step);
        // Process r runs r + 1 micro-batches, the others idle passes up to the most.
        for (int r = 0; r < ranks; ++r) {
          for (int micro = 0; micro <= r; ++micro) {
            whole.forward(data(r, step, micro), batch, length);
            whole.backward(dout);
          }
        }
        for (int micro = 0; micro < ranks; ++micro) {
          if (micro <= rank) {
            const std::vector<float> out = mine.forward(data(rank, step, micro), batch, length);
            CHECK(mine.parameters().empty());
            mine.backward(dout);
          } else {
            mine.idle_forward();
            mine.idle_backward();
          }
        }
        CHECK(mine.parameters().empty());
        whole.begin_step();
        mine.begin_step();
        CHECK(mine.gradient_norm() == doctest::Approx(whole.gradient_norm()).epsilon(1e-5));
        whole.update(adam, whole.partition(0, 1));
        whole.end_step();
        mine.update_shards(adam);
        mine.end_step();
      }
      // The same outputs sharded (every process scoring, the layers gathered in turn), and
      // the same weights whole again.
      const std::vector<int> tokens = data(0, 9, 0);
      const std::vector<float> sharded = mine.score(tokens, batch, length), expected = whole.score(tokens, batch, length);
      REQUIRE(sharded.size() == expected.size());
      for (std::size_t i = 0; i < sharded.size(); ++i) CHECK(sharded[i] == doctest::Approx(expected[i]).epsilon(1e-5).scale(1.0));
      mine.gather_weights();
      CHECK_FALSE(mine.weights_sharded());
      REQUIRE(mine.parameters().size() == tensors);
      // Within 2% of a step (AdamW moves each weight by about lr; where a gradient is near 0
      // the sums' order, the reduce-scatter's against one process's, shows in its last digits).
      check_weights(*b, mine, whole, [&](float x, float y) { return std::abs(x - y) <= 0.02f * adam.lr; });
      // Whole operations refuse sharded weights.
      mine.shard_weights(sharding);
      Transformer other(*b, a, head, o);
      CHECK_THROWS_AS(other.load(mine), std::logic_error);
      mine.gather_weights();
    }
  }
}

TEST_CASE("gradients crossing in bf16: every process's cast to bf16, summed in fp32 and rounded, cast back") {
  auto b = device::test_backend();
  auto comm = device::test_communicator(*b);
  const int ranks = comm->size();
  // Values bf16 cannot hold, different on each process; a bucket smaller than the count, so
  // that the pieces go one after another.
  const std::size_t count = 1000, bucket = 300;
  const auto value = [](int rank, std::size_t i) {
    return static_cast<float>(std::sin(0.01 * static_cast<double>(i) + rank) * (1.0 + 1e-3 * static_cast<double>(i)));
  };
  const auto round = [](float x) { return device::to_float(device::to_bf16(x)); };
  for (const DType type : {DType::kF32, DType::kBf16}) {
    CAPTURE(device::dtype_name(type));
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = value(comm->rank(), i);
    device::Buffer data(*b, count * sizeof(float)), scratch;
    b->upload(data.data(), host.data(), count * sizeof(float));
    all_reduce_gradients(*b, *comm, type, data.as<float>(), count, bucket, scratch);
    b->download(host.data(), data.data(), count * sizeof(float));
    int inexact = 0;
    for (std::size_t i = 0; i < count; ++i) {
      double exact = 0;
      float rounded = 0;
      for (int r = 0; r < ranks; ++r) {
        exact += value(r, i);
        rounded = r == 0 ? round(value(r, i)) : round(rounded + round(value(r, i)));
      }
      if (type == DType::kF32) {
        CHECK(host[i] == doctest::Approx(exact).epsilon(1e-6).scale(1.0));
      } else if (ranks <= 2) {
        CHECK(host[i] == rounded);  // one sum of two: the order cannot matter
      } else {
        CHECK(host[i] == doctest::Approx(exact).epsilon(1e-2).scale(1.0));
      }
      inexact += host[i] != static_cast<float>(exact);
    }
    // In bf16 most sums lose digits fp32 keeps.
    if (type == DType::kBf16) CHECK(inexact > static_cast<int>(count) / 2);
  }
}

TEST_CASE("ZeRO with the gradients in bf16: the stretch's sums are the bf16 sums, the step near fp32's") {
  auto b = device::test_backend();
  auto comm = device::test_communicator(*b);
  const int ranks = comm->size();
  const workload::ModelArch a = tiny(true, true, false);
  TransformerOptions o;
  o.dtype = DType::kF32;
  Transformer exact(*b, a, Head::kLanguage, o), halved(*b, a, Head::kLanguage, o);
  const int batch = 2, length = 6;
  std::vector<int> tokens;
  for (int i = 0; i < batch * length; ++i) tokens.push_back((i * 37 + comm->rank() * 11 + 3) % a.vocab);
  std::vector<float> dout;
  for (int i = 0; i < batch * (length - 1); ++i) dout.push_back(static_cast<float>(std::cos(0.3 * i)));
  ShardedOptimizer fp32(*b, exact, *comm), bf16(*b, halved, *comm, DType::kBf16);
  for (Transformer* m : {&exact, &halved}) {
    m->forward(tokens, batch, length);
    m->backward(dout);
    m->begin_step();
  }
  fp32.reduce_scatter_gradients();
  bf16.reduce_scatter_gradients();
  // The same stretch of both: the bf16 one's sums hold no more than bf16's digits, and come
  // within bf16's rounding of the fp32 sums (of the addends', which may cancel: measured
  // against the stretch's largest).
  const Transformer::Stretch own = fp32.own();
  const std::size_t n = own.last - own.first, whole = exact.partition(0, ranks).last * static_cast<std::size_t>(ranks);
  std::vector<float> x(n), y(n);
  b->download(x.data(), exact.flat_gradients(whole) + own.first, n * sizeof(float));
  b->download(y.data(), halved.flat_gradients(whole) + own.first, n * sizeof(float));
  float largest = 0;
  for (const float v : x) largest = std::max(largest, std::abs(v));
  REQUIRE(largest > 0);
  int differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(y[i] == device::to_float(device::to_bf16(y[i])));
    CHECK(std::abs(y[i] - x[i]) <= 1e-2f * static_cast<float>(ranks) * largest);
    differ += x[i] != y[i];
  }
  CHECK(differ > 0);
}

}  // namespace
}  // namespace hetrl::exec
