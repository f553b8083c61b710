// Tensor parallelism across processes: under mpirun each process holds one shard of the
// model (its rank's) and the shards' partial sums travel through the communicator's
// all-reduce; every process also holds the unsplit model and checks that the split one gives
// its outputs, its shard's slice of the gradients and, after an AdamW step, its outputs again.
// Alone (no launcher), the one process holds every shard and checks the same. ZeRO's sharded
// optimiser likewise: each process updates its stretch of the weights and gathers the others',
// which is the unsharded step over every process's data.

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "device_test_backend.h"
#include "exec/transformer.h"
#include "exec/zero.h"
#include "tiny_model.h"

namespace hetrl::exec {
namespace {

using device::DType;

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
    const std::vector<Transformer::Tensor> expected = whole.parameters(), found = mine.parameters();
    REQUIRE(found.size() == expected.size());
    for (std::size_t t = 0; t < found.size(); ++t) {
      CAPTURE(found[t].name);
      std::vector<float> x(found[t].count), y(expected[t].count);
      b->download(x.data(), found[t].buffer->data(), x.size() * sizeof(float));
      b->download(y.data(), expected[t].buffer->data(), y.size() * sizeof(float));
      for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == doctest::Approx(y[i]).epsilon(1e-5).scale(1.0));
    }
  }
}

}  // namespace
}  // namespace hetrl::exec
