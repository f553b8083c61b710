// The cost model against hand calculations written here, published kernel measurements
// (copied below with their source) and published memory figures.

#include <doctest/doctest.h>

#include "approx.h"

#include <cmath>

#include "core/units.h"
#include "cost/cost_model.h"
#include "cost/queue.h"
#include "fixtures.h"

using namespace hetrl;
using namespace hetrl::testing;

namespace {

double term(const cost::Breakdown& b, const std::string& name) {
  for (const auto& t : b.terms()) {
    if (name == t.name) return t.seconds;
  }
  FAIL("no term " << name);
  return 0;
}

double term_or_zero(const cost::Breakdown& b, const std::string& name) {
  for (const auto& t : b.terms()) {
    if (name == t.name) return t.seconds;
  }
  return 0;
}

}  // namespace

TEST_CASE("all-reduce times match the published A100 NCCL table within 20%") {
  // Vidur's public profiling data, data/profiling/network/a100_dgx/all_reduce.csv: one
  // 8-GPU A100 node, NVLink. Columns: GPUs, bytes, mean milliseconds.
  const double table[][3] = {{2, 1048576, 0.0523},  {2, 4194304, 0.0637},  {8, 1048576, 0.0640},
                             {8, 4194304, 0.0987},  {8, 52428800, 0.5970}, {8, 67108864, 0.6753}};
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 8, 64, 64, 1));
  for (const auto& row : table) {
    CAPTURE(row[0]);
    CAPTURE(row[1]);
    const double predicted = f.model.node_allreduce_seconds(0, static_cast<int>(row[0]), row[1]);
    // Within 15% but for 1 MiB over two GPUs, which the model puts 19% under the table (the
    // check read 15% and, through doctest's scale, accepted 30%).
    CHECK(predicted / (row[2] * 1e-3) == hetrl::testing::approx(1.0).epsilon(row[0] == 2 && row[1] == 1048576 ? 0.20 : 0.15));
  }
  CHECK(f.model.node_allreduce_seconds(0, 1, 1e9) == 0);
}

TEST_CASE("GEMM and weight-streaming rates match the published Llama-2-7B layer timings") {
  // Vidur's public profiling data (mlp.csv, TP=1): the four GEMMs of one Llama-2-7B layer.
  // Their parameters by hand: QKV 4096 x 12288, O 4096 x 4096, gate+up 4096 x 22016,
  // down 11008 x 4096.
  const double params = 4096.0 * 12288 + 4096.0 * 4096 + 4096.0 * 22016 + 11008.0 * 4096;
  workload::ModelArch llama2;
  llama2.name = "Llama-2-7B";
  llama2.layers = 32;
  llama2.hidden = 4096;
  llama2.heads = llama2.kv_heads = 32;
  llama2.head_dim = 128;
  llama2.ffn_hidden = 11008;
  llama2.vocab = 32000;
  const cost::ModelShape shape(llama2);
  CHECK(shape.layer_linear_params == params);
  CHECK(shape.layer_flops(1, 0) == 2 * params);
  struct Row {
    const char* gpu;
    double tokens;
    double ms;
  };
  for (const Row& row : {Row{"A100-SXM-80G", 2048, 3.815}, Row{"A100-SXM-80G", 4096, 7.298},
                         Row{"A100-SXM-80G", 1, 0.266}, Row{"H100-SXM", 2048, 1.084},
                         Row{"H100-SXM", 1, 0.156}}) {
    CAPTURE(row.gpu);
    CAPTURE(row.tokens);
    const hw::GpuSpec& g = catalogs().hardware.gpu(row.gpu, "");
    const double compute = row.tokens * 2 * params / (g.tensor_flops() * g.efficiency.gemm_large);
    const double memory = 2 * params / (g.memory_bandwidth * g.efficiency.memory);
    CHECK(std::max(compute, memory) / (row.ms * 1e-3) == hetrl::testing::approx(1.0).epsilon(0.05));
  }
}

TEST_CASE("mixed-precision Adam holds 16 bytes per parameter, sharded by ZeRO, and 18 with fp32 gradients held") {
  for (const char* name : {"Qwen2.5-7B", "Llama-3.1-8B"}) {
    CAPTURE(name);
    const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo(name, 8, 64, 64, 1));
    const int train = f.task("actor_train");
    const double params = static_cast<double>(catalogs().models.get(name, "").parameter_count());
    const std::vector<cost::Stage> one{{0, 1, catalogs().models.get(name, "").layers}};
    cost::TrainOptions none{0, cost::Recompute::kNone};
    const cost::StageMemory full = f.model.stage_memory(train, one, 0, 8, none);
    // 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master, momentum, variance).
    CHECK(full.resident() == hetrl::testing::approx(16 * params));
    CHECK(full.weights == hetrl::testing::approx(2 * params));
    // ZeRO-3 over 8 replicas: everything / 8; ZeRO-1: only the optimizer state.
    CHECK(f.model.stage_memory(train, one, 0, 8, {3, cost::Recompute::kNone}).resident() == hetrl::testing::approx(2 * params));
    CHECK(f.model.stage_memory(train, one, 0, 8, {1, cost::Recompute::kNone}).resident() ==
          hetrl::testing::approx((4 + 12.0 / 8) * params));
    // TP 2 halves every part.
    const std::vector<cost::Stage> tp2{{0, 2, catalogs().models.get(name, "").layers}};
    CHECK(f.model.stage_memory(train, tp2, 0, 8, none).resident() == hetrl::testing::approx(8 * params));
    // A trainer holding fp32 gradients (Megatron's main gradients, hetrl-exec's): 4 bytes of
    // them, 18 in all, sharded from ZeRO-2 on; the floor over any layout counts them too.
    cost::CostParams fp32_held;
    fp32_held.gradient_bytes_held = 4;
    const Fixture g(make_cluster({"a:8xA100-SXM-80G"}), ppo(name, 8, 64, 64, 1), fp32_held);
    const cost::StageMemory megatron = g.model.stage_memory(train, one, 0, 8, none);
    CHECK(megatron.gradients == hetrl::testing::approx(4 * params));
    CHECK(megatron.resident() == hetrl::testing::approx(18 * params));
    CHECK(g.model.stage_memory(train, one, 0, 8, {2, cost::Recompute::kNone}).gradients ==
          hetrl::testing::approx(4 * params / 8));
    const std::vector<int> trained{train};
    CHECK(g.model.least_resident_bytes(trained) == hetrl::testing::approx(18 * params));
    CHECK(f.model.least_resident_bytes(trained) == hetrl::testing::approx(16 * params));
  }
}

TEST_CASE("decode at batch 1 streams the weights and the growing KV cache, by hand") {
  // One sequence: 512 prompt tokens, exactly 512 response tokens, Qwen2.5-7B on one A100.
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-7B", 1, 512, 512, 1));
  const int generate = f.task("generate");
  const std::vector<cost::Stage> one{{0, 1, 28}};
  const std::vector<double> budget{60 * core::kGiB};
  cost::Breakdown b(true);
  f.model.replica_seconds(generate, one, 1.0, 1, {}, budget, b);
  // Weights: 7,615,616,512 parameters in bf16. KV per token: 28 layers x K and V x 4 KV heads
  // x 128 x 2 bytes. Prefill gives the first token, so 511 decode steps follow; step k reads
  // the weights and (512 + k) tokens of cache; over k in [1, 512) the mean context is 768.5.
  const double weights = 2.0 * 7615616512.0;
  const double kv_per_token = 28 * 2 * 4 * 128 * 2.0;
  const double bandwidth = 2039e9 * 0.75;
  CHECK(term(b, cost::kDecodeMemoryTerm) ==
        hetrl::testing::approx(511 * (weights + 768.5 * kv_per_token) / bandwidth).epsilon(1e-9));
  // Prefill of 512 tokens: the GEMMs at the small-GEMM efficiency interpolated at 512 tokens
  // (log2 512 = 9: a third of the way from 256 to 2048), scaled for a hidden size of 3584
  // ((3584 / 4608) / (4096 / 5120)), longer than streaming the weights once; the attention at
  // its own efficiency; the element-wise bytes at the memory bandwidth; 0.2 ms a layer of fixed
  // cost.
  const double linear = 3584.0 * 3584 * 2 + 3584.0 * 512 * 2 + 3 * 3584.0 * 18944;
  const double gemm_flops = 512 * 28 * 2 * linear + 2 * 3584.0 * 152064;
  const double attention_flops = 512 * 28 * 4 * 3584.0 * 256;
  const double efficiency = (0.66 + (0.70 - 0.66) / 3) * (3584.0 / 4608) / (4096.0 / 5120);
  const double elementwise = 512 * 28 * 2.0 * (10 * 3584 + 2 * (3584 + 512) + 3 * 18944);
  CHECK(gemm_flops / (312e12 * efficiency) > weights / bandwidth);
  CHECK(term(b, "prefill compute") == hetrl::testing::approx(gemm_flops / (312e12 * efficiency) +
                                                      attention_flops / (312e12 * 0.6) + elementwise / bandwidth +
                                                      28 * 0.2e-3)
                                          .epsilon(1e-9));
}

TEST_CASE("a decode step runs its kernels in turn: the GEMMs at their bound, then the attention over the cache at its own") {
  // Qwen2.5-7B on one A100, 256 sequences of 2048 tokens of context each: the GEMMs of 256 rows
  // bound by their compute, the attention by reading its cache (28 layers x K and V x 4 KV
  // heads x 128 x 2 bytes a token) at the memory's rate. The step is their sum, not the larger
  // of all compute and all reads.
  hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
  const auto step = [&](double context) {
    const Fixture f(cluster, ppo("Qwen2.5-7B", 256, 512, 512, 1));
    cost::CostModel::DecodeStages stages;
    f.model.decode_stages(f.task("generate"), std::vector<cost::Stage>{{0, 1, 28}}, stages);
    return f.model.decode_step(stages, 256, 256 * context);
  };
  const double kv_per_token = 28 * 2 * 4 * 128 * 2.0;
  const double bandwidth = 2039e9 * 0.75;
  const cost::CostModel::StepCost gemms = step(0);
  CHECK(gemms.memory == 0);
  CHECK(gemms.compute > 2.0 * 7615616512.0 / bandwidth);  // past the weights' read
  const cost::CostModel::StepCost both = step(2048);
  CHECK(both.compute == hetrl::testing::approx(gemms.compute).epsilon(1e-12));
  CHECK(both.memory == hetrl::testing::approx(256 * 2048 * kv_per_token / bandwidth).epsilon(1e-12));
  // A type whose decode attention computes at a thousandth of its peak: bound by that.
  const double attention_flops = 256 * 2048 * 28 * 4 * 3584.0;
  cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency.decode_attention = 1e-3;
  const cost::CostModel::StepCost slow = step(2048);
  CHECK(slow.memory == 0);
  CHECK(slow.compute == hetrl::testing::approx(gemms.compute + attention_flops / (312e12 * 1e-3)).epsilon(1e-12));
  // The drain prices the same: every sequence of exactly 512 tokens runs all 511 decode
  // steps at a context from 513 to 1023 (768.5 on average), its attention at its own rate.
  const auto decode_compute = [&](double share) {
    cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency.decode_attention = share;
    const Fixture f(cluster, ppo("Qwen2.5-7B", 64, 512, 512, 1));
    cost::Breakdown b(true);
    f.model.replica_seconds(f.task("generate"), std::vector<cost::Stage>{{0, 1, 28}}, 64, 1, {},
                            std::vector<double>{60 * core::kGiB}, b);
    return term(b, cost::kDecodeComputeTerm);
  };
  CHECK(decode_compute(1e-3) - decode_compute(2e-3) ==
        hetrl::testing::approx(511 * 64 * 768.5 * 28 * 4 * 3584.0 / (312e12 * 2e-3)).epsilon(1e-9));
}

TEST_CASE("each generation replica drains to the iteration's expected longest response") {
  // 64 prompts with long-tailed responses; a replica with one of them still runs until the
  // longest of all 64 is expected to end, as the slowest replica does.
  const workload::Workload w = long_tailed(ppo("Qwen2.5-7B", 64, 512, 512, 1), 1000, 8192);
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), w);
  const std::vector<cost::Stage> one{{0, 1, 28}};
  const std::vector<double> budget{60 * core::kGiB};
  cost::Breakdown b(true);
  f.model.replica_seconds(f.task("generate"), one, 1.0, 64, {}, budget, b);
  // One sequence: every step is batch 1 and memory-bound; the drain's L - 1 decode steps (the
  // first token is prefill's) run from context 513 to 512 + L, 512 + (L + 1) / 2 on average.
  const double longest = f.model.expected_max_length(64);
  CHECK(longest > 1.5 * f.model.expected_max_length(1));
  const double weights = 2.0 * 7615616512.0;
  const double kv_per_token = 28 * 2 * 4 * 128 * 2.0;
  const double bandwidth = 2039e9 * 0.75;
  CHECK(term(b, cost::kDecodeMemoryTerm) ==
        hetrl::testing::approx((longest - 1) * (weights + (512 + (longest + 1) / 2) * kv_per_token) / bandwidth)
            .epsilon(1e-9));
}

TEST_CASE("the generation floor is the weights streamed once per step of the longest response") {
  const workload::Workload w = long_tailed(ppo("Qwen2.5-7B", 256, 512, 1024, 1), 1000, 8192);
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), w);
  const int generate = f.task("generate");
  const double weights = 2.0 * 7615616512.0;
  const double bandwidth = 2039e9 * 0.75;
  const double longest = f.model.expected_max_length(256);
  const std::vector<cost::Stage> one{{0, 1, 28}};
  // Each decode step (all the longest's tokens but prefill's first) also pays the engine's
  // fixed cost (3 ms, vLLM's).
  CHECK(f.model.generation_floor(generate, one) ==
        hetrl::testing::approx((longest - 1) * (weights / bandwidth + 3e-3)).epsilon(1e-9));
  // Under every replica's time, whatever its share and cache; TP and PP replicas pay their
  // collectives' and sends' fixed costs too, and the floor stays under them.
  const std::vector<std::vector<cost::Stage>> layouts{
      one, {{0, 2, 28}}, {{0, 4, 28}}, {{0, 1, 14}, {0, 1, 14}}, {{0, 2, 14}, {0, 2, 14}}};
  for (const auto& stages : layouts) {
    const double floor = f.model.generation_floor(generate, stages);
    CHECK(floor > 0);
    for (double samples : {1.0, 7.0, 64.0, 256.0}) {
      for (double gib = 0.5; gib <= 70; gib *= 1.7) {
        const std::vector<double> budget(stages.size(), gib * core::kGiB);
        cost::Breakdown b;
        CAPTURE(samples);
        CAPTURE(gib);
        CHECK(floor <= f.model.replica_seconds(generate, stages, samples, 1, {}, budget, b));
      }
    }
  }
}

TEST_CASE("a training pass: micro-batches, compute and the optimizer step, by hand") {
  // Qwen2.5-0.5B, 64 samples of 512 + 512 tokens, 2 mini-batches, on one A100 (TP 1, PP 1).
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 512, 2));
  const int train = f.task("actor_train");
  const std::vector<cost::Stage> one{{0, 1, 24}};
  cost::Breakdown b(true);
  f.model.replica_seconds(train, one, 64, 1, {1, cost::Recompute::kNone}, {}, b);
  // A mini-batch: 32 x 1024 tokens = 4 micro-batches of 8192 tokens. GEMMs (3 passes) at the
  // large-GEMM efficiency scaled for a hidden size of 896 ((896 / 1920) / (4096 / 5120)),
  // attention at context 512 (3.5 passes: its backward recomputes the scores) at its own, the
  // element-wise bytes (3 passes) at the memory bandwidth.
  const double linear = 896.0 * 896 * 2 + 896.0 * 128 * 2 + 3 * 896.0 * 4864;
  const double gemm = 8192 * 24 * 2 * linear + 4096 * 2 * 896.0 * 151936;  // LM head: response tokens
  const double attention = 8192 * 24 * 4 * 896.0 * 512;
  const double elementwise = 8192 * 24 * 2.0 * (10 * 896 + 2 * (896 + 128) + 3 * 4864);
  // An FSDP-style trainer reaches 0.93 of the A100's kernel rates.
  const double per_micro = 3 * gemm / (312e12 * 0.93 * 0.70 * (896.0 / 1920) / (4096.0 / 5120)) +
                           3.5 * attention / (312e12 * 0.93 * 0.6) + 3 * elementwise / (2039e9 * 0.75);
  const double compute = 2 /* mini-batches */ * 4 /* micro */ * per_micro;
  CHECK(term(b, "forward + backward compute") == hetrl::testing::approx(compute).epsilon(1e-9));
  const double params = 494032768.0;
  // Each of the 2 steps: the gradients' norm (4 bytes a parameter read), Adam (30) and the
  // gradients zeroed (4 written).
  CHECK(term(b, "optimizer step") == hetrl::testing::approx(2 * params * (4 + 30 + 4) / (2039e9 * 0.75)).epsilon(1e-9));
}

TEST_CASE("selective recompute: every second GEMM and the element-wise work again, by hand") {
  // Same pass as above; torchtitan's per-op policy keeps the fused attention's output and
  // alternate GEMM outputs, so the backward reruns half the GEMMs and all element-wise work.
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 512, 2));
  const int train = f.task("actor_train");
  const std::vector<cost::Stage> one{{0, 1, 24}};
  cost::Breakdown none(true), selective(true), full(true);
  f.model.replica_seconds(train, one, 64, 1, {1, cost::Recompute::kNone}, {}, none);
  f.model.replica_seconds(train, one, 64, 1, {1, cost::Recompute::kSelective}, {}, selective);
  f.model.replica_seconds(train, one, 64, 1, {1, cost::Recompute::kFull}, {}, full);
  const double linear = 896.0 * 896 * 2 + 896.0 * 128 * 2 + 3 * 896.0 * 4864;
  const double gemm = 8192 * 24 * 2 * linear + 4096 * 2 * 896.0 * 151936;
  const double attention = 8192 * 24 * 4 * 896.0 * 512;
  const double elementwise = 8192 * 24 * 2.0 * (10 * 896 + 2 * (896 + 128) + 3 * 4864);
  const double gemm_rate = 312e12 * 0.93 * 0.70 * (896.0 / 1920) / (4096.0 / 5120);
  const double per_micro = 3.5 * gemm / gemm_rate + 3.5 * attention / (312e12 * 0.93 * 0.6) +
                           4 * elementwise / (2039e9 * 0.75);
  CHECK(term(selective, "forward + backward compute") == hetrl::testing::approx(2 * 4 * per_micro).epsilon(1e-9));
  CHECK(term(none, "forward + backward compute") < term(selective, "forward + backward compute"));
  CHECK(term(selective, "forward + backward compute") < term(full, "forward + backward compute"));

  // Memory: per token and layer the layer's input (896), the attention output (896) and half
  // of the GEMM outputs q 896, k 128, v 128, o 896, gate 4864, up 4864, down 896, in bf16;
  // plus one layer's whole activations (34 x hidden) while it is recomputed, and the logits.
  const auto memory = [&](cost::Recompute r) { return f.model.stage_memory(train, one, 0, 1, {1, r}).activations; };
  const double kept = 2.0 * (896 + 896 + (896 + 128 + 128 + 896 + 4864 + 4864 + 896) / 2.0);
  const double selective_bytes = memory(cost::Recompute::kSelective);
  const double full_bytes = memory(cost::Recompute::kFull);
  // Full keeps 2 x hidden per token and layer; the difference is the kept tensors only.
  CHECK(selective_bytes - full_bytes == hetrl::testing::approx(8192 * 24 * (kept - 2 * 896)).epsilon(1e-9));
  CHECK(selective_bytes < memory(cost::Recompute::kNone));
}

TEST_CASE("eager trainer kernels read and write memory once per PyTorch operator, by hand") {
  // The pass of "a training pass ... by hand" with the element-wise work run eagerly: the GEMMs
  // and attention are the same; norms, rotary embedding and the gated MLP's activation move
  // 84 x hidden + 24 x (q + kv) + 10 x ffn bytes per token and layer instead of the fused 20, 4, 6.
  workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 2);
  const Fixture fused(make_cluster({"a:8xA100-SXM-80G"}), w);
  w.trainer_kernels = workload::TrainerKernels::kEager;
  const Fixture eager(make_cluster({"a:8xA100-SXM-80G"}), w);
  const std::vector<cost::Stage> one{{0, 1, 24}};
  cost::Breakdown a(true), b(true);
  fused.model.replica_seconds(fused.task("actor_train"), one, 64, 1, {1, cost::Recompute::kNone}, {}, a);
  eager.model.replica_seconds(eager.task("actor_train"), one, 64, 1, {1, cost::Recompute::kNone}, {}, b);
  const double fused_bytes = 8192 * 24 * (20.0 * 896 + 4.0 * (896 + 128) + 6.0 * 4864);
  const double eager_bytes = 8192 * 24 * (84.0 * 896 + 24.0 * (896 + 128) + 10.0 * 4864);
  const double extra = 2 /* mini-batches */ * 4 /* micro */ * 3 * (eager_bytes - fused_bytes) / (2039e9 * 0.75);
  CHECK(term(b, "forward + backward compute") - term(a, "forward + backward compute") ==
        hetrl::testing::approx(extra).epsilon(1e-9));
  // Generation is the inference engine's and fuses either way.
  cost::Breakdown g1(true), g2(true);
  const std::vector<double> budget{40 * core::kGiB};
  CHECK(fused.model.replica_seconds(fused.task("generate"), one, 64, 1, {}, budget, g1) ==
        eager.model.replica_seconds(eager.task("generate"), one, 64, 1, {}, budget, g2));
}

TEST_CASE("pipeline bubble and TP all-reduces") {
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-7B", 64, 512, 512, 1));
  const int forward = f.task("ref_logprob");
  // 64 x 1024 tokens = 8 micro-batches of 8192; 2 stages of 14 layers, TP 2.
  const std::vector<cost::Stage> two{{0, 2, 14}, {0, 2, 14}};
  cost::Breakdown b(true);
  f.model.replica_seconds(forward, two, 64, 1, {}, {}, b);
  // The terms are the slowest stage's (the last: the language head); the bubble is one
  // micro-batch of the other stage, the same layers without the head: a little less.
  const double per_micro_stage = (term(b, "forward compute") + term(b, "TP all-reduce") +
                                  term_or_zero(b, "pipeline sends")) / 8;
  CHECK(term(b, "pipeline bubble") < per_micro_stage);
  CHECK(term(b, "pipeline bubble") > 0.8 * per_micro_stage);
  // Uneven stages: the slowest paces the micro-batches, the bubble is the other's one
  // micro-batch, a quarter of the layers (not the slowest's, three times as long).
  cost::Breakdown uneven(true);
  f.model.replica_seconds(forward, std::vector<cost::Stage>{{0, 2, 7}, {0, 2, 21}}, 64, 1, {}, {}, uneven);
  const double slowest = (term(uneven, "forward compute") + term(uneven, "TP all-reduce")) / 8;
  CHECK(term(uneven, "pipeline bubble") < 0.4 * slowest);
  CHECK(term(uneven, "pipeline bubble") > 0.25 * slowest);
  // 2 all-reduces per layer, 14 layers, of 8192 x 3584 bf16 values over NVLink 3: NCCL's
  // large-message protocol beats the small one at 59 MB.
  const double bytes = 8192 * 3584 * 2.0;
  const double one = 160e-6 + 2.0 * 1 / 2 * bytes / (300e9 * 0.78);
  CHECK(one < 40e-6 + bytes / (300e9 * 0.42));
  CHECK(term(b, "TP all-reduce") == hetrl::testing::approx(8 * 2 * 14 * one).epsilon(1e-9));
}

TEST_CASE("tied embeddings over pipeline stages: the embedding's gradient to the last stage and the sum back, every step") {
  // Two A100 nodes in two regions (10 Gbps, 32 ms between them); Qwen2.5-0.5B ties its
  // embedding and head, Qwen2.5-7B does not.
  const auto priced = [](const std::string& model, const char* task, std::vector<cost::Stage> stages) {
    const Fixture f(make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400", "us-west-2a:8xA100-SXM-80G:nic_gbps=400"}),
                    ppo(model, 64, 512, 512, 2));
    cost::Breakdown b(true);
    f.model.replica_seconds(f.task(task), stages, 64, 1, {1, cost::Recompute::kNone}, {}, b);
    return term_or_zero(b, cost::kTiedEmbeddingTerm);
  };
  // Two mini-batches, two steps, each sending 151936 x 896 fp32 values each way at the
  // region link's 1.25 GB/s, with its latency.
  const double bytes = 4.0 * 151936 * 896;
  const double across = priced("Qwen2.5-0.5B", "actor_train", {{0, 1, 12}, {1, 1, 12}});
  CHECK(across == hetrl::testing::approx(2 * 2 * (bytes / 1.25e9 + 32e-3)).epsilon(1e-9));
  // At TP 2 each shard pair sends half (the vocabulary split) and the two pairs share the link.
  CHECK(priced("Qwen2.5-0.5B", "actor_train", {{0, 2, 12}, {1, 2, 12}}) ==
        hetrl::testing::approx(2 * 2 * (bytes / 2 / (1.25e9 / 2) + 32e-3)).epsilon(1e-9));
  // Inside a node: its own link, no zone latency.
  CHECK(priced("Qwen2.5-0.5B", "actor_train", {{0, 1, 12}, {0, 1, 12}}) < across / 10);
  // None for one stage, a forward pass, a scalar head or an untied model.
  CHECK(priced("Qwen2.5-0.5B", "actor_train", {{0, 1, 24}}) == 0);
  CHECK(priced("Qwen2.5-0.5B", "ref_logprob", {{0, 1, 12}, {1, 1, 12}}) == 0);
  CHECK(priced("Qwen2.5-0.5B", "critic_train", {{0, 1, 12}, {1, 1, 12}}) == 0);
  CHECK(priced("Qwen2.5-7B", "actor_train", {{0, 1, 14}, {1, 1, 14}}) == 0);
}

TEST_CASE("a pipeline stage's activations cross at the slower node's NIC share per GPU, or the zone link split over the ranks") {
  // Two A100 nodes in one zone, one behind a 100 Gbps NIC, and a third in another region
  // (10 Gbps between the regions). A decode step sends each sequence's hidden state (bf16,
  // split over the TP ranks) from stage to stage.
  const Fixture f(make_cluster({"a:8xA100-SXM-80G:nic_gbps=400", "a:8xA100-SXM-80G:nic_gbps=100",
                                "us-west-2a:8xA100-SXM-80G:nic_gbps=400"}),
                  ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  const int generate = f.task("generate");
  const double hidden_bytes = 2.0 * f.model.shape(generate).hidden;
  const auto p2p = [&](std::vector<cost::Stage> stages) {
    cost::CostModel::DecodeStages out;
    f.model.decode_stages(generate, stages, out);
    return out.at(1).p2p_per_sequence;
  };
  // As a bandwidth: doctest's Approx takes 1e-5 as a difference of zero around values as small
  // as these seconds.
  const auto bandwidth = [&](std::vector<cost::Stage> stages) { return hidden_bytes / stages.front().tp / p2p(stages); };
  // Per GPU 400/8 and 100/8 Gbps: the slower binds, either way.
  CHECK(bandwidth({{0, 1, 12}, {1, 1, 12}}) == hetrl::testing::approx(100e9 / 8 / 8));
  CHECK(bandwidth({{1, 1, 12}, {0, 1, 12}}) == hetrl::testing::approx(100e9 / 8 / 8));
  // Inside a node: its own link.
  CHECK(bandwidth({{0, 1, 12}, {0, 1, 12}}) == hetrl::testing::approx(f.cluster.nodes[0].intra_node.bandwidth));
  // Across the regions eight TP ranks share the 10 Gbps link, each with an eighth of the state.
  CHECK(bandwidth({{0, 8, 12}, {2, 8, 12}}) == hetrl::testing::approx(10e9 / 8 / 8));
}

TEST_CASE("with the trainer's overlap a step's gradient sync runs behind its last micro-batch's backward and its first forward") {
  const workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 2);
  cost::CostParams one_micro_batch;
  one_micro_batch.micro_batch_tokens = 1e9;  // a step's samples in one micro-batch
  cost::CostParams overlapped = one_micro_batch;
  overlapped.dp_overlap = true;
  // Across regions (10 Gbps) the sync is far longer than the compute; inside a node far shorter.
  const hw::Cluster regions = make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400",
                                            "us-west-2a:8xA100-SXM-80G:nic_gbps=400"});
  const hw::Cluster node = make_cluster({"us-east-1a:8xA100-SXM-80G"});
  const Fixture plain(regions, w, one_micro_batch), over(regions, w, overlapped);
  const Fixture plain_node(node, w, one_micro_batch), over_node(node, w, overlapped);
  const int train = over.task("actor_train");
  const double samples = w.samples_per_iteration() / 2.0;
  const double steps = 2;  // mini-batches
  const std::vector<cost::Stage> a{{0, 8, 24}}, b{{1, 8, 24}};
  const std::vector<std::span<const cost::Stage>> across{a, b};
  const std::vector<cost::Stage> left{{0, 4, 24}}, right{{0, 4, 24}};
  const std::vector<std::span<const cost::Stage>> inside{left, right};
  const cost::TrainOptions zero0{0, cost::Recompute::kNone}, zero1{1, cost::Recompute::kNone};

  // Without the overlap nothing hides it.
  const cost::SyncOverlap none = plain.model.gradient_sync_overlap(train, a, samples, zero1);
  CHECK(none.forward == 0);
  CHECK(none.backward == 0);
  // With it: the step's one micro-batch, its forward and the rest of its training pass.
  const cost::SyncOverlap hidden = over.model.gradient_sync_overlap(train, a, samples, zero1);
  cost::Breakdown pass(true);
  over.model.replica_seconds(train, a, samples, 1, zero1, {}, pass);
  CHECK(hidden.forward + hidden.backward == hetrl::testing::approx(term(pass, "forward + backward compute") / steps));
  CHECK(hidden.backward > 1.5 * hidden.forward);
  CHECK(hidden.backward < 3.0 * hidden.forward);

  // ZeRO-0's all-reduce across regions: what the backward does not cover, each step.
  cost::Breakdown b0(true), b1(true);
  const double all_reduce = plain.model.gradient_sync_seconds(train, across, zero0, b0);
  const double exposed = over.model.gradient_sync_seconds(train, across, zero0, b1, hidden);
  REQUIRE(all_reduce / steps > hidden.backward);
  CHECK(exposed == hetrl::testing::approx(steps * (all_reduce / steps - hidden.backward)).epsilon(1e-9));
  // ZeRO-1's reduce-scatter and all-gather: each covers no more than its own window.
  cost::Breakdown c0(true), c1(true);
  const double sync = plain.model.gradient_sync_seconds(train, across, zero1, c0);
  const double sync_exposed = over.model.gradient_sync_seconds(train, across, zero1, c1, hidden);
  CHECK(sync_exposed < sync);
  CHECK(sync_exposed >= sync - steps * (hidden.forward + hidden.backward) - 1e-12);
  // Inside a node the compute covers it all.
  const cost::SyncOverlap hidden_node = over_node.model.gradient_sync_overlap(train, left, samples, zero1);
  cost::Breakdown d0(true), d1(true);
  CHECK(plain_node.model.gradient_sync_seconds(train, inside, zero1, d0) > 0);
  CHECK(over_node.model.gradient_sync_seconds(train, inside, zero1, d1, hidden_node) == 0);
}

TEST_CASE("DP gradient sync crosses the slowest link, and transfers share zone links") {
  // Two A100 nodes in different regions joined by the 10 Gbps, 32 ms cross-region default.
  const Fixture f(make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400",
                                "us-west-2a:8xA100-SXM-80G:nic_gbps=400"}),
                  ppo("Qwen2.5-0.5B", 64, 512, 512, 2));
  const int train = f.task("actor_train");
  const std::vector<cost::Stage> a{{0, 8, 24}}, b{{1, 8, 24}};
  const std::vector<std::span<const cost::Stage>> replicas{a, b};
  cost::Breakdown sync(true);
  f.model.gradient_sync_seconds(train, replicas, {1, cost::Recompute::kNone}, sync);
  const double grads_per_gpu = 4.0 * 494032768.0 / 8;  // fp32; one stage holds the whole model
  const double ring = std::min(400e9 / 8, 10e9 / 8) / 8;  // 8 rings share the NIC and link
  // ZeRO-1: the gradients reduce-scattered, the bf16 weights (half their bytes) all-gathered.
  const double hops = cost::CostParams{}.collective_latency + 2 * 0.032;
  const double per_step = hops + 1.0 / 2 * 1.5 * grads_per_gpu / (ring * 0.8);
  CHECK(term(sync, "DP gradient reduce-scatter + weight all-gather") == hetrl::testing::approx(2 * per_step).epsilon(1e-9));
  // ZeRO-0 all-reduces them: a reduce-scatter and an all-gather of the gradients.
  cost::Breakdown all_reduce(true);
  f.model.gradient_sync_seconds(train, replicas, {0, cost::Recompute::kNone}, all_reduce);
  CHECK(term(all_reduce, "DP gradient all-reduce") ==
        hetrl::testing::approx(2 * (hops + 2.0 / 2 * grads_per_gpu / (ring * 0.8))).epsilon(1e-9));
  // Reduced in bf16, ZeRO-1's gradients and weights cross at 2 bytes each: an all-reduce's bytes.
  workload::Workload bf16 = f.workload;
  bf16.gradient_reduce = workload::GradientReduce::kBf16;
  const cost::CostModel halved(f.cluster, bf16, f.graph, hetrl::testing::catalogs().models);
  cost::Breakdown sync_bf16(true);
  halved.gradient_sync_seconds(train, replicas, {1, cost::Recompute::kNone}, sync_bf16);
  CHECK(term(sync_bf16, "DP gradient reduce-scatter + weight all-gather") ==
        hetrl::testing::approx(2 * (hops + 2.0 / 2 * grads_per_gpu / 2 / (ring * 0.8))).epsilon(1e-9));

  // 1 GB from node 0's GPUs to node 1's: the cross-region link (10 Gbps) binds, plus 32 ms.
  cost::CostModel::GpuSet from, to;
  const std::vector<int> on_a{8, 0}, on_b{0, 8};
  f.model.describe_gpu_set(on_a, from);
  f.model.describe_gpu_set(on_b, to);
  CHECK(f.model.transfer_seconds(1e9, from, to) == hetrl::testing::approx(1e9 / (10e9 / 8) + 0.032));
  // Eight TP-1 replicas on one node and eight on another in the same zone: seven hops over
  // NVLink (at 0.78 of it), one over the NICs (400 Gbps for one ring, at 0.8 of it): the NIC binds.
  const Fixture same(make_cluster({"a:8xA100-SXM-80G:nic_gbps=400", "a:8xA100-SXM-80G:nic_gbps=400"}),
                     ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  std::vector<std::vector<cost::Stage>> sixteen;
  for (int n = 0; n < 2; ++n) {
    for (int d = 0; d < 8; ++d) sixteen.push_back({{n, 1, 24}});
  }
  const std::vector<std::span<const cost::Stage>> spans(sixteen.begin(), sixteen.end());
  cost::Breakdown dp16(true);
  same.model.gradient_sync_seconds(same.task("actor_train"), spans, {1, cost::Recompute::kNone}, dp16);
  const double full = 4.0 * 494032768.0;  // fp32 gradients
  CHECK(term(dp16, "DP gradient reduce-scatter + weight all-gather") ==
        hetrl::testing::approx(cost::CostParams{}.collective_latency + 2 * 15.0 * 0.015e-3 + 1.5 * 15 / 16 * full / (400e9 / 8 * 0.8)).epsilon(1e-9));
}

TEST_CASE("a transfer between GPUs of one node crosses its GPU links, the rest its NICs") {
  // Two A100 nodes in one zone, 400 Gbps NICs.
  const Fixture f(make_cluster({"a:8xA100-SXM-80G:nic_gbps=400", "a:8xA100-SXM-80G:nic_gbps=400"}),
                  ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  const hw::IntraNodeLink& nvlink = f.model.cluster().nodes[0].intra_node;
  REQUIRE(nvlink.bandwidth > 400e9 / 8);
  auto set = [&](std::vector<int> per_node) {
    cost::CostModel::GpuSet out;
    f.model.describe_gpu_set(per_node, out);
    return out;
  };
  // Node 0 split four and four: four GPUs' links at once, not the NIC.
  const auto left = set({4, 0}), right = set({4, 0});
  CHECK(f.model.transfer_seconds(1e9, left, right) == hetrl::testing::approx(1e9 / (4 * nvlink.bandwidth) + nvlink.hop_latency));
  // Two GPUs to six: two links bind.
  CHECK(f.model.transfer_seconds(1e9, set({2, 0}), set({6, 0})) ==
        hetrl::testing::approx(1e9 / (2 * nvlink.bandwidth) + nvlink.hop_latency));
  // Four on node 0 to four there and eight on node 1: a third stays on node 0; two thirds leave
  // over the four GPUs' half of node 0's NIC, which binds.
  const auto spread = set({4, 8});
  const double nic_half = 400e9 / 8 / 2;
  CHECK(f.model.transfer_seconds(1e9, left, spread) == hetrl::testing::approx(2.0 / 3 * 1e9 / nic_half + 0.015e-3));
  // Across nodes only: the NICs, as before.
  CHECK(f.model.transfer_seconds(1e9, left, set({0, 8})) == hetrl::testing::approx(1e9 / nic_half + 0.015e-3));
}

TEST_CASE("a data-parallel ring inside a node prices each collective at its type's measured rate for it") {
  // Two TP-1 replicas on one A100 node; the type measured its fp32 reduce-scatter at 0.3 of
  // the link, its bf16 all-gather at 0.6 and its fp32 all-reduce at 0.9 (a profile's, as an
  // MPI transport's differ); its bf16 all-reduce is `collective`.
  Fixture f(make_cluster({"a:8xA100-SXM-80G", "a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  hw::Cluster measured = f.cluster;
  hw::Efficiency& e = measured.gpu_types[0].efficiency;
  e.collectives[static_cast<int>(hw::Collective::kReduceScatter)][1] = 0.3;
  e.collectives[static_cast<int>(hw::Collective::kAllGather)][0] = 0.6;
  e.collectives[static_cast<int>(hw::Collective::kAllReduce)][1] = 0.9;
  const cost::CostModel model(measured, f.workload, f.graph, hetrl::testing::catalogs().models);
  const int train = f.task("actor_train");
  const std::vector<cost::Stage> a{{0, 1, 24}}, b{{0, 1, 24}};
  const std::vector<std::span<const cost::Stage>> replicas{a, b};
  const double link = measured.nodes[0].intra_node.bandwidth;
  const cost::DataParallel ring = model.data_parallel(replicas);
  CHECK(ring.bandwidth_of(hw::Collective::kReduceScatter, true) == hetrl::testing::approx(0.3 * link));
  CHECK(ring.bandwidth_of(hw::Collective::kAllGather, false) == hetrl::testing::approx(0.6 * link));
  CHECK(ring.bandwidth_of(hw::Collective::kAllReduce, true) == hetrl::testing::approx(0.9 * link));
  // Those not measured: the bf16 all-reduce's.
  CHECK(ring.bandwidth_of(hw::Collective::kReduceScatter, false) == hetrl::testing::approx(e.collective * link));
  CHECK(ring.bandwidth_of(hw::Collective::kAllReduce, false) == hetrl::testing::approx(e.collective * link));
  // ZeRO-1's sync: the fp32 gradients reduce-scattered at 0.3, the bf16 weights gathered at 0.6.
  const double grads = 4.0 * 494032768.0;  // fp32, the whole model on each replica
  const double fixed = cost::CostParams{}.collective_latency / 2;
  cost::Breakdown zero1(true), zero0(true);
  model.gradient_sync_seconds(train, replicas, {1, cost::Recompute::kNone}, zero1);
  CHECK(term(zero1, "DP gradient reduce-scatter + weight all-gather") ==
        hetrl::testing::approx(2 * fixed + 0.5 * grads / (0.3 * link) + 0.5 * grads / 2 / (0.6 * link)).epsilon(1e-9));
  // ZeRO-0's all-reduce: two passes at the fp32 all-reduce's rate.
  model.gradient_sync_seconds(train, replicas, {0, cost::Recompute::kNone}, zero0);
  CHECK(term(zero0, "DP gradient all-reduce") == hetrl::testing::approx(2 * (fixed + 0.5 * grads / (0.9 * link))).epsilon(1e-9));
  // Between nodes the NICs bind, whatever the operation.
  const std::vector<cost::Stage> c{{1, 1, 24}};
  const std::vector<std::span<const cost::Stage>> across{a, c};
  const cost::DataParallel apart = model.data_parallel(across);
  CHECK(apart.bandwidth_of(hw::Collective::kReduceScatter, true) == apart.bandwidth_of(hw::Collective::kAllReduce, false));
  CHECK(apart.bandwidth_of(hw::Collective::kAllGather, false) < 0.3 * link);
}

TEST_CASE("data-parallel rings of pipelined replicas share each node's NIC only among the replica's GPUs there") {
  // Four A100 nodes in one zone, 400 Gbps NICs; two replicas of two TP-8 stages, one node a
  // stage: 16 rings, 8 of them through each node's NIC.
  const Fixture f(make_cluster({"a:8xA100-SXM-80G:nic_gbps=400", "a:8xA100-SXM-80G:nic_gbps=400",
                                "a:8xA100-SXM-80G:nic_gbps=400", "a:8xA100-SXM-80G:nic_gbps=400"}),
                  ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  const double nic_efficiency = cost::CostParams{}.nic_efficiency;
  const std::vector<cost::Stage> a{{0, 8, 12}, {1, 8, 12}}, b{{2, 8, 12}, {3, 8, 12}};
  const std::vector<std::span<const cost::Stage>> pipelined{a, b};
  CHECK(f.model.data_parallel(pipelined).bandwidth_of(hw::Collective::kAllReduce, true) == hetrl::testing::approx(400e9 / 8 / 8 * nic_efficiency));
  // Both TP-4 stages of each replica on one node: all 8 rings through its NIC.
  const std::vector<cost::Stage> c{{0, 4, 12}, {0, 4, 12}}, d{{2, 4, 12}, {2, 4, 12}};
  const std::vector<std::span<const cost::Stage>> packed{c, d};
  CHECK(f.model.data_parallel(packed).bandwidth_of(hw::Collective::kReduceScatter, false) == hetrl::testing::approx(400e9 / 8 / 8 * nic_efficiency));
}

TEST_CASE("ZeRO-3 gathers each layer's weights for every micro-batch, hidden behind the compute where they are shorter") {
  // Two A100 nodes in different regions (10 Gbps, 32 ms), one TP-8 replica on each.
  const Fixture f(make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400",
                                "us-west-2a:8xA100-SXM-80G:nic_gbps=400"}),
                  ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  const int train = f.task("actor_train");
  const std::vector<cost::Stage> a{{0, 8, 24}}, b{{1, 8, 24}};
  const std::vector<std::span<const cost::Stage>> replicas{a, b};
  const cost::DataParallel ring = f.model.data_parallel(replicas);
  CHECK(ring.replicas == 2);
  // 8 rings share the 10 Gbps link, whatever the collective.
  const double link_share = ring.bandwidth_of(hw::Collective::kAllGather, false);
  CHECK(link_share == hetrl::testing::approx(10e9 / 8 / 8 * 0.8));
  CHECK(ring.bandwidth_of(hw::Collective::kReduceScatter, true) == link_share);
  CHECK(ring.hop_latency == hetrl::testing::approx(0.032));
  const cost::TrainOptions zero3{3, cost::Recompute::kNone};
  auto gathers = [&](double samples, const cost::DataParallel& dp) {
    cost::Breakdown out(true);
    f.model.replica_seconds(train, a, samples, dp, zero3, {}, out);
    return std::pair{term_or_zero(out, "ZeRO-3 gathers beyond the compute"), term(out, "forward + backward compute")};
  };
  // 32 samples of 1024 tokens: 4 micro-batches; 64: 8. Each gathers the 24 layers' bf16
  // weights twice (forward, backward) and reduce-scatters their fp32 gradients, 1/2 of each
  // layer's shard over the ring.
  const auto [four, compute4] = gathers(32, ring);
  const auto [eight, compute8] = gathers(64, ring);
  const double layer = 2.0 * f.model.shape(train).stage_params(24, true, true) / 8 / 24;
  const double hop = cost::CostParams{}.collective_latency + 0.032;
  const double per_micro = 24 * (2 * (hop + 0.5 * layer / link_share) + hop + 0.5 * 2 * layer / link_share);
  CHECK(four == hetrl::testing::approx(4 * per_micro - compute4).epsilon(1e-9));
  CHECK(eight == hetrl::testing::approx(2 * four).epsilon(1e-9));
  // Run in line with each layer's compute (hetrl-exec's one stream), none of them is hidden.
  cost::CostParams in_line;
  in_line.zero3_prefetch = false;
  const cost::CostModel unprefetched(f.cluster, f.workload, f.graph, hetrl::testing::catalogs().models, in_line);
  cost::Breakdown exposed(true);
  unprefetched.replica_seconds(train, a, 32, ring, zero3, {}, exposed);
  CHECK(term(exposed, "ZeRO-3 gathers beyond the compute") == hetrl::testing::approx(4 * per_micro).epsilon(1e-9));
  // After the last step the weights are gathered whole once more, a layer at a time (half of
  // each layer's shard over the ring), however many the micro-batches; hidden behind nothing.
  const auto final_gather = [&](double samples, const cost::TrainOptions& options) {
    cost::Breakdown out(true);
    f.model.replica_seconds(train, a, samples, ring, options, {}, out);
    return term_or_zero(out, cost::kZero3FinalGatherTerm);
  };
  CHECK(final_gather(32, zero3) == hetrl::testing::approx(24 * (hop + 0.5 * layer / link_share)).epsilon(1e-9));
  CHECK(final_gather(64, zero3) == final_gather(32, zero3));
  CHECK(final_gather(64, {2, cost::Recompute::kNone}) == 0);  // ZeRO-2 keeps its weights whole
  // ZeRO-1 all-reduces once per optimizer step, whatever the micro-batches.
  cost::Breakdown sync1(true), sync3(true);
  f.model.gradient_sync_seconds(train, replicas, {1, cost::Recompute::kNone}, sync1);
  f.model.gradient_sync_seconds(train, replicas, zero3, sync3);
  CHECK(sync1.total() > 0);
  CHECK(sync3.total() == 0);  // its reduce-scatters are in the passes
  // On links that cost nothing, or one replica, the gathers hide behind the compute.
  CHECK(gathers(64, cost::DataParallel(2)).first == 0);
  CHECK(gathers(64, cost::DataParallel(1)).first == 0);
  // Memory: a ZeRO-3 shard serves no forward pass, and holds two whole layers while it runs.
  const cost::StageMemory m3 = f.model.stage_memory(train, a, 0, 2, zero3);
  const cost::StageMemory m1 = f.model.stage_memory(train, a, 0, 2, {1, cost::Recompute::kNone});
  CHECK((m3.layout & cost::kShardedLayout) != 0);
  CHECK((m1.layout & cost::kShardedLayout) == 0);
  CHECK(m3.activations - m1.activations == hetrl::testing::approx(2 * 2.0 * f.model.shape(train).layer_params / 8));
}

TEST_CASE("a forward pass reads the trained weights only in the trainer's own, unsharded layout") {
  const std::uint64_t tp2 = cost::layout_key(2, 1, 0, 28), tp1 = cost::layout_key(1, 1, 0, 28);
  cost::StageMemory train{2, 2, 12, 5, 0, tp2};
  cost::StageMemory generate{3, 0, 0, 0, 6, cost::layout_key(4, 1, 0, 28)};
  cost::StageMemory same{2, 0, 0, 1, 0, tp2};
  cost::StageMemory other{4, 0, 0, 1, 0, tp1};
  cost::RoleMemory reads;
  reads.add(workload::TaskKind::kTrain, train);
  reads.add(workload::TaskKind::kGenerate, generate);
  reads.add(workload::TaskKind::kForward, same);
  CHECK(reads.weights() == 2 + 3);
  cost::RoleMemory copies;
  copies.add(workload::TaskKind::kForward, other);  // added before the training pass
  copies.add(workload::TaskKind::kTrain, train);
  CHECK(copies.weights() == 2 + 4);
  copies.add(workload::TaskKind::kGenerate, generate);
  CHECK(copies.weights() == 2 + 4);  // one inference copy: the larger layout
  cost::StageMemory sharded = train;
  sharded.layout |= cost::kShardedLayout;
  cost::RoleMemory zero3;
  zero3.add(workload::TaskKind::kTrain, sharded);
  zero3.add(workload::TaskKind::kForward, same);
  CHECK(zero3.weights() == 2 + 2);
  // Marked trained before its layout is known, a forward pass counts nothing yet: a floor.
  cost::RoleMemory marked;
  marked.trained = true;
  marked.add(workload::TaskKind::kForward, other);
  CHECK(marked.weights() == 0);
  marked.add(workload::TaskKind::kTrain, train);
  CHECK(marked.weights() == copies.weights() - 0);
}

TEST_CASE("response lengths: the expected longest grows with the batch") {
  const workload::Workload w = long_tailed(ppo("Qwen2.5-0.5B", 64, 512, 512, 1), 1000, 8192);
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), w);
  const double one = f.model.expected_max_length(1);
  const double many = f.model.expected_max_length(1000);
  CHECK(one == hetrl::testing::approx(w.response.mean()).epsilon(1e-3));  // one draw: the mean
  CHECK(many > f.model.expected_max_length(100));
  CHECK(many <= 8192);
  CHECK(f.model.survival(0) == 1.0);
  CHECK(f.model.survival(8192) == 0.0);
  CHECK(f.model.survival(w.response.quantile(0.5)) == hetrl::testing::approx(0.5).epsilon(0.01));
}

TEST_CASE("response lengths: the expected longest of n is the mean of the largest draw") {
  // Two lengths, half each: the longest of n is 900 unless every draw is 100, so its mean is
  // 900 - 800 / 2^n (the n/(n + 1) quantile said 900 from n = 2 on).
  workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 1);
  w.response.kind = workload::LengthKind::kTrace;
  w.response.trace = {100, 900};
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), w);
  for (int n : {1, 3, 7, 15}) {
    CAPTURE(n);
    CHECK(f.model.expected_max_length(n) == hetrl::testing::approx(900 - 800 / std::ldexp(1.0, n)).epsilon(1e-3));
  }
  // A fixed length is its own longest, exactly.
  const Fixture fixed(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 700, 1));
  for (double n : {1.0, 10.0, 1e6}) CHECK(fixed.model.expected_max_length(n) == hetrl::testing::approx(700).epsilon(1e-12));
}

TEST_CASE("the queue table: fixed lengths run in whole waves and a part-full last one") {
  // Responses of 257 tokens (256 decode steps, two a cell), 1,024 in the iteration: at 2.5
  // waves two full waves, then half the slots for one response's steps.
  const auto survival = [](double x) { return x < 257 ? 1.0 : 0.0; };
  const cost::QueueTable table(survival, 257, 100, 1024, 4);
  REQUIRE(!table.empty());
  const cost::QueueTable::Bracket b = table.bracket(2.5);
  REQUIRE(b.lower == 24);
  CHECK(b.weight == 0);
  const cost::QueueShape shape = table.shape(24);
  CHECK(shape.full_steps == hetrl::testing::approx(512));
  CHECK(shape.tail_steps == hetrl::testing::approx(256));
  for (double share : shape.share) CHECK(share == hetrl::testing::approx(0.5));
  // A full step's sequences are at every age of their 256 steps (context 100 + 1 + 127.5 on
  // average); the tail's at the midpoints of its four parts of 64 steps (prompt, first token
  // and 31.5 steps in the first).
  CHECK(shape.full_context == hetrl::testing::approx(101 + 127.5));
  CHECK(shape.context[0] == hetrl::testing::approx(101 + 31.5));
  CHECK(shape.context[3] == hetrl::testing::approx(101 + 223.5));
  CHECK(table.min_steps() == hetrl::testing::approx(256 + 256));
  // Beyond the grid: whole waves of 256 full steps each.
  const cost::QueueTable::Bracket far = table.bracket(40.5);
  CHECK(far.lower == (31.5 - 1) * cost::QueueTable::kPerWave);  // 9 waves down
  CHECK(far.extra_steps == hetrl::testing::approx(256 * 9));
  // No decode step when every response is one token long.
  CHECK(cost::QueueTable([](double x) { return x < 1 ? 1.0 : 0.0; }, 1, 100, 1024, 4).empty());
}

TEST_CASE("GEMM efficiency: the measured figures at 256 and 2048 tokens, log-linear between") {
  CHECK(hw::gemm_efficiency(0.4, 0.8, 1) == 0.4);
  CHECK(hw::gemm_efficiency(0.4, 0.8, 256) == 0.4);
  CHECK(hw::gemm_efficiency(0.4, 0.8, 2048) == 0.8);
  CHECK(hw::gemm_efficiency(0.4, 0.8, 1e6) == 0.8);
  // 512 tokens is a third of the way from 2^8 to 2^11.
  CHECK(hw::gemm_efficiency(0.4, 0.8, 512) == hetrl::testing::approx(0.4 + 0.4 / 3));
  hw::Efficiency e;
  e.gemm_small = 0.5;
  e.gemm_large = 0.7;
  CHECK(e.gemm(1024) == hetrl::testing::approx(0.5 + 0.2 * 2 / 3));
}

TEST_CASE("a measured GEMM curve prices GEMMs in place of the two-point line, in training and in decode") {
  // Qwen2.5-7B PPO, 64 prompts of 512 + 512 tokens, on one A100: the actor's training pass
  // and generation with 64 sequences at once (decode at 64 rows a GEMM, prefill at 512 a prompt).
  hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
  const workload::Workload w = ppo("Qwen2.5-7B", 64, 512, 512, 1);
  const auto seconds = [&](const hw::Cluster& c, const char* task_name) {
    const Fixture f(c, w);
    const std::vector<cost::Stage> one{{0, 1, 28}};
    const std::vector<double> budget{60 * core::kGiB};
    cost::Breakdown b(true);
    return f.model.replica_seconds(f.task(task_name), one, 64, 1, {1, cost::Recompute::kNone}, budget, b);
  };
  const double train = seconds(cluster, "actor_train"), generate = seconds(cluster, "generate");
  hw::Efficiency& e = cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency;
  // The same line as points: the same prices.
  e.gemm_curve = {{hw::kGemmSmallTokens, e.gemm_small}, {hw::kGemmLargeTokens, e.gemm_large}};
  CHECK(seconds(cluster, "actor_train") == hetrl::testing::approx(train).epsilon(1e-12));
  CHECK(seconds(cluster, "generate") == hetrl::testing::approx(generate).epsilon(1e-12));
  // A tenth of the rate below 64 tokens, the same from 256: decode's GEMMs of 64 rows and
  // fewer become compute-bound and slower, training's large GEMMs keep their price.
  e.gemm_curve = {{64, e.gemm_small / 10}, {hw::kGemmSmallTokens, e.gemm_small}, {hw::kGemmLargeTokens, e.gemm_large}};
  CHECK(seconds(cluster, "actor_train") == hetrl::testing::approx(train).epsilon(1e-12));
  CHECK(seconds(cluster, "generate") > 1.2 * generate);
}

TEST_CASE("a measured weight-gradient curve prices one of a training pass's three GEMM passes at its rate") {
  // Qwen2.5-7B PPO on one A100 of a type with a measured GEMM curve: the actor's training pass
  // (its micro-batches of thousands of tokens), its scoring pass and generation.
  const hw::GemmCurve forward{{16, 0.05}, {256, 0.4}, {hw::kGemmLargeTokens, 0.8}};
  const workload::Workload w = ppo("Qwen2.5-7B", 64, 512, 512, 1);
  const auto priced = [&](const hw::GemmCurve& gradient, cost::Recompute recompute) {
    hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
    hw::Efficiency& e = cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency;
    e.gemm_curve = forward;
    e.weight_gradient_curve = gradient;
    const Fixture f(cluster, w);
    const std::vector<cost::Stage> one{{0, 1, 28}};
    const std::vector<double> budget{60 * core::kGiB};
    std::vector<double> out;
    for (const char* task : {"actor_train", "actor_logprob", "generate"}) {
      cost::Breakdown b(true);
      out.push_back(f.model.replica_seconds(f.task(task), one, 64, 1, {1, recompute}, budget, b));
    }
    return out;
  };
  // The gradient's curve at `ratio` times the forward's rate at every point.
  const auto times = [&](double ratio) {
    hw::GemmCurve curve = forward;
    for (auto& point : curve) point.second = std::min(1.0, point.second * ratio);
    return curve;
  };
  const std::vector<double> none = priced({}, cost::Recompute::kNone);
  // As fast as the forward: the prices without a curve, to the last digit.
  const std::vector<double> same = priced(forward, cost::Recompute::kNone);
  for (std::size_t i = 0; i < none.size(); ++i) CHECK(same[i] == hetrl::testing::approx(none[i]).epsilon(1e-12));
  // The training pass's time is its other parts plus one GEMM pass over the ratio r: what
  // r = 1.1 saves (1 - 1 / 1.1 of that pass) is 1.1 times what 1.1 * 1.1 saves beyond it.
  const std::vector<double> faster = priced(times(1.1), cost::Recompute::kNone);
  const std::vector<double> more = priced(times(1.1 * 1.1), cost::Recompute::kNone);
  CHECK(faster[0] < none[0]);
  const double saved = none[0] - faster[0], further = faster[0] - more[0];
  CHECK(saved / further == hetrl::testing::approx(1.1).epsilon(1e-9));
  // Of the three GEMM passes (forward, input gradient, weight gradient), one: the same rate
  // gain on the forward's curve, which all three follow without a gradient curve of its own,
  // saves three times as much.
  hw::GemmCurve quicker = times(1.1);
  const auto priced_forward = [&](const hw::GemmCurve& curve, cost::Recompute recompute) {
    hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
    cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency.gemm_curve = curve;
    const Fixture f(cluster, w);
    const std::vector<cost::Stage> one{{0, 1, 28}};
    const std::vector<double> budget{60 * core::kGiB};
    cost::Breakdown b(true);
    return f.model.replica_seconds(f.task("actor_train"), one, 64, 1, {1, recompute}, budget, b);
  };
  CHECK(none[0] - priced_forward(quicker, cost::Recompute::kNone) == hetrl::testing::approx(3 * saved).epsilon(1e-9));
  // Scoring and generation run no backward: as before.
  CHECK(faster[1] == hetrl::testing::approx(none[1]).epsilon(1e-12));
  CHECK(faster[2] == hetrl::testing::approx(none[2]).epsilon(1e-12));
  // Full recompute runs the forward again, not the weight gradient: the same saving.
  const double full_saved = priced({}, cost::Recompute::kFull)[0] - priced(times(1.1), cost::Recompute::kFull)[0];
  CHECK(full_saved == hetrl::testing::approx(saved).epsilon(1e-9));
  const double full = priced({}, cost::Recompute::kFull)[0];
  CHECK(full - priced_forward(quicker, cost::Recompute::kFull) == hetrl::testing::approx(4 * saved).epsilon(1e-9));
  // Past a curve's last point the weight gradient runs at that point's efficiency, or at the
  // forward's where it is higher: a curve up to 16 tokens says nothing of the micro-batches'
  // thousands, where the forward's curve runs faster; one up to 2048 whose last point is
  // faster than the forward's there holds that point's efficiency.
  const std::vector<double> short_curve = priced({{16, 0.05 * 1.1}}, cost::Recompute::kNone);
  CHECK(short_curve[0] == hetrl::testing::approx(none[0]).epsilon(1e-12));
  const std::vector<double> held = priced({{hw::kGemmLargeTokens, 0.8 * 1.1}}, cost::Recompute::kNone);
  CHECK(held[0] == hetrl::testing::approx(faster[0]).epsilon(1e-9));
}

TEST_CASE("a layer's GEMMs on a shard: each shape's FLOPs a token, outputs and inputs, k and v split by whole heads") {
  // Qwen2.5-0.5B: hidden 896, q 14 x 64, k and v 2 heads of 64, a gated MLP of 4864.
  const cost::ModelShape shape(catalogs().models.get("Qwen2.5-0.5B", ""));
  const auto one = shape.shard_layer_gemms(1);
  const auto check_gemm = [](const cost::ModelShape::ShardGemm& g, double flops, double n, double k) {
    CHECK(g.flops == hetrl::testing::approx(flops));
    CHECK(g.n == hetrl::testing::approx(n));
    CHECK(g.k == hetrl::testing::approx(k));
  };
  check_gemm(one[0], 2.0 * 896 * 896, 896, 896);        // q
  check_gemm(one[1], 2.0 * 2 * 896 * 128, 128, 896);   // k and v
  check_gemm(one[2], 2.0 * 896 * 896, 896, 896);        // o
  check_gemm(one[3], 2.0 * 2 * 896 * 4864, 4864, 896);  // gate and up
  check_gemm(one[4], 2.0 * 896 * 4864, 896, 4864);      // down
  // Together the layer's linear FLOPs.
  double flops = 0;
  for (const auto& g : one) flops += g.flops;
  CHECK(flops == hetrl::testing::approx(2 * shape.layer_linear_params));
  // Four shards: the column-parallel GEMMs' outputs split four ways (k and v's two: each of its
  // two heads on two shards), the row-parallel ones' inputs.
  const auto four = shape.shard_layer_gemms(4);
  check_gemm(four[0], one[0].flops / 4, 224, 896);
  check_gemm(four[1], one[1].flops / 2, 64, 896);
  check_gemm(four[2], one[2].flops / 4, 896, 224);
  check_gemm(four[3], one[3].flops / 4, 1216, 896);
  check_gemm(four[4], one[4].flops / 4, 896, 1216);
  // The width: the geometric mean at a share of one half, the inputs' alone at 1, the
  // outputs' at 0, and between them k^s n^(1 - s).
  CHECK(four[3].width(0.5) == hetrl::testing::approx(std::sqrt(1216.0 * 896)));
  CHECK(four[3].width(1.0) == hetrl::testing::approx(896));
  CHECK(four[3].width(0.0) == hetrl::testing::approx(1216));
  CHECK(four[3].width(0.8) == hetrl::testing::approx(std::pow(896.0, 0.8) * std::pow(1216.0, 0.2)));
  CHECK(four[4].width(0.8) == hetrl::testing::approx(std::pow(1216.0, 0.8) * std::pow(896.0, 0.2)));
  // The head: its vocabulary split, or whole on every shard without vocab_parallel.
  check_gemm(shape.head_gemm(4), 2.0 * 896 * 151936 / 4, 151936 / 4.0, 896);
  cost::ModelShape whole = shape;
  whole.vocab_parallel = false;
  check_gemm(whole.head_gemm(4), 2.0 * 896 * 151936, 151936, 896);
}

TEST_CASE("a GPU type measured at several widths prices each of a model's GEMMs at its own width") {
  // PPO on one A100 of a type measured at widths 1024 and 1400 (slow: decode's GEMMs bound by
  // their compute): GEMMs of a few rows twice as fast at 1024 as at 1400 and wider (a CPU's
  // caches), of thousands of rows an eighth faster.
  const hw::GemmCurve wide{{1, 0.0005}, {64, 0.025}, {hw::kGemmLargeTokens, 0.8}};
  const hw::GemmCurve narrow{{1, 0.001}, {64, 0.05}, {hw::kGemmLargeTokens, 0.9}};
  const auto cluster_of = [&](const hw::GemmCurve& curve, const hw::WidthCurves& curves) {
    hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
    hw::Efficiency& e = cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency;
    e.gemm_curve = curve;
    e.gemm_curves = curves;
    e.gemm_width_half = 0.0;
    e.decode_step_overhead = 0.0;  // the steps' kernels alone
    return cluster;
  };
  const auto priced = [&](const char* model, int layers, int tp, const hw::GemmCurve& curve, const hw::WidthCurves& curves) {
    const Fixture f(cluster_of(curve, curves), ppo(model, 64, 512, 512, 2));
    const std::vector<cost::Stage> stages{{0, tp, layers}};
    const std::vector<double> budget{60 * core::kGiB};
    std::vector<double> out;
    for (const char* task : {"generate", "actor_train"}) {
      cost::Breakdown b(true);
      out.push_back(f.model.replica_seconds(f.task(task), stages, 64, 1, {1, cost::Recompute::kNone}, budget, b));
    }
    return out;
  };
  const hw::WidthCurves measured{{1024, narrow}, {1400, wide}};
  // Qwen2.5-0.5B (hidden 896, q 896, k and v 128, MLP 4864, vocabulary 151936): at TP 1 its q,
  // o, k and v GEMMs are 896 and 339 wide (the narrow rate), the MLP's 2088 and the head's
  // 11667 (the wide rate); at TP 2 634, 240, 1476 and 8250. A decode step's GEMMs of 64
  // sequences take each GEMM's FLOPs over its width's rate.
  const double layer_narrow = 2.0 * (2 * 896.0 * 896 + 2 * 896.0 * 128);
  const double layer_wide = 2.0 * 3 * 896.0 * 4864;
  const double head = 2.0 * 896 * 151936;
  for (int tp : {1, 2}) {
    CAPTURE(tp);
    const Fixture f(cluster_of(wide, measured), ppo("Qwen2.5-0.5B", 64, 512, 512, 2));
    cost::CostModel::DecodeStages stages;
    f.model.decode_stages(f.task("generate"), std::vector<cost::Stage>{{0, tp, 24}}, stages);
    const cost::CostModel::StepCost step = f.model.decode_step(stages, 64, 0);
    const double expected = 64 * (24 * (layer_narrow / 0.05 + layer_wide / 0.025) + head / 0.025) / (tp * f.model.peak_flops(0));
    CHECK(step.memory == 0);  // bound by its compute
    CHECK(step.compute == hetrl::testing::approx(expected).epsilon(1e-9));
    // Generation and training between the type's two rates (training by a little: a tenth of
    // its FLOPs, the narrow ones, an eighth faster).
    const std::vector<double> by_width = priced("Qwen2.5-0.5B", 24, tp, wide, measured);
    const std::vector<double> as_narrow = priced("Qwen2.5-0.5B", 24, tp, narrow, {});
    const std::vector<double> as_wide = priced("Qwen2.5-0.5B", 24, tp, wide, {});
    for (std::size_t task : {0, 1}) {
      CAPTURE(task);
      CHECK(by_width[task] > 1.02 * as_narrow[task]);
      CHECK(by_width[task] < 0.995 * as_wide[task]);
    }
  }
  // Training's micro-batches of thousands of rows: only q, o, k and v run faster than the
  // rest (0.9 of the peak against 0.8), the head's GEMM at its own width with the MLP's. Of
  // the time the narrow rate saves on all GEMMs (one head row for two layer rows: half the
  // tokens are responses), their share of the FLOPs.
  {
    const std::vector<double> by_width = priced("Qwen2.5-0.5B", 24, 1, wide, measured);
    const std::vector<double> as_narrow = priced("Qwen2.5-0.5B", 24, 1, narrow, {});
    const std::vector<double> as_wide = priced("Qwen2.5-0.5B", 24, 1, wide, {});
    const double share = 24 * layer_narrow / (24 * (layer_narrow + layer_wide) + 0.5 * head);
    CHECK((as_wide[1] - by_width[1]) / (as_wide[1] - as_narrow[1]) == hetrl::testing::approx(share).epsilon(1e-6));
  }
  // Qwen2.5-32B (hidden 5120; a stage of 8 of its layers at TP 1): every GEMM wider than 1400,
  // at the wide curve, which is the type's.
  const std::vector<double> big = priced("Qwen2.5-32B", 8, 1, wide, measured);
  const std::vector<double> big_plain = priced("Qwen2.5-32B", 8, 1, wide, {});
  CHECK(big[0] == hetrl::testing::approx(big_plain[0]).epsilon(1e-9));
  CHECK(big[1] == hetrl::testing::approx(big_plain[1]).epsilon(1e-9));
  // The same curve at every width: the model's GEMMs together at that curve's rate.
  const std::vector<double> same = priced("Qwen2.5-0.5B", 24, 1, wide, {{1024, wide}, {1400, wide}});
  const std::vector<double> same_plain = priced("Qwen2.5-0.5B", 24, 1, wide, {});
  CHECK(same[0] == hetrl::testing::approx(same_plain[0]).epsilon(1e-9));
  CHECK(same[1] == hetrl::testing::approx(same_plain[1]).epsilon(1e-9));
  // One width measured says nothing about the width: the type's curve and its width half.
  const std::vector<double> single = priced("Qwen2.5-0.5B", 24, 1, wide, {{1024, narrow}});
  const std::vector<double> plain = priced("Qwen2.5-0.5B", 24, 1, wide, {});
  CHECK(single[0] == hetrl::testing::approx(plain[0]).epsilon(1e-12));
}

TEST_CASE("a GPU type's reduction share: each GEMM at the width its inputs and outputs make, k^s n^(1 - s)") {
  // The type of the test above (few rows twice as fast at 1024 as at 1400 and wider) with the
  // share of the GEMMs' width their inputs set. A decode step of Qwen2.5-0.5B's 24 layers over
  // 64 sequences: at a share of 1 q, k, v, o, gate and up read 896 inputs (narrow), down 4864
  // (wide at TP 1 and 2432 at TP 2, wide still; o's 448 at TP 2 narrow) and the head 896; at 0
  // their outputs decide: q and o 896, k and v 128, down 896 (narrow), gate and up 4864 and
  // the head 151936 (wide).
  const hw::GemmCurve wide{{1, 0.0005}, {64, 0.025}, {hw::kGemmLargeTokens, 0.8}};
  const hw::GemmCurve narrow{{1, 0.001}, {64, 0.05}, {hw::kGemmLargeTokens, 0.9}};
  const auto step_compute = [&](std::optional<double> share, int tp) {
    hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
    hw::Efficiency& e = cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency;
    e.gemm_curve = wide;
    e.gemm_curves = {{1024, narrow}, {1400, wide}};
    e.gemm_width_half = 0.0;
    e.decode_step_overhead = 0.0;
    e.gemm_reduction_share = share;
    const Fixture f(cluster, ppo("Qwen2.5-0.5B", 64, 512, 512, 2));
    cost::CostModel::DecodeStages stages;
    f.model.decode_stages(f.task("generate"), std::vector<cost::Stage>{{0, tp, 24}}, stages);
    const cost::CostModel::StepCost step = f.model.decode_step(stages, 64, 0);
    CHECK(step.memory == 0);  // bound by its compute
    return step.compute * tp * f.model.peak_flops(0) / 64;  // a sequence's FLOPs over its rate
  };
  const double q = 2.0 * 896 * 896, kv = 2.0 * 2 * 896 * 128, mlp_in = 2.0 * 2 * 896 * 4864, down = 2.0 * 896 * 4864;
  const double head = 2.0 * 896 * 151936;
  CHECK(step_compute(1.0, 1) == hetrl::testing::approx(24 * ((2 * q + kv + mlp_in) / 0.05 + down / 0.025) + head / 0.05).epsilon(1e-9));
  CHECK(step_compute(1.0, 2) == hetrl::testing::approx(24 * ((2 * q + kv + mlp_in) / 0.05 + down / 0.025) + head / 0.05).epsilon(1e-9));
  CHECK(step_compute(0.0, 1) == hetrl::testing::approx(24 * ((2 * q + kv + down) / 0.05 + mlp_in / 0.025) + head / 0.025).epsilon(1e-9));
  // Unset: the geometric mean, as a share of one half.
  CHECK(step_compute(std::nullopt, 1) == hetrl::testing::approx(step_compute(0.5, 1)).epsilon(1e-12));
  CHECK(step_compute(std::nullopt, 1) ==
        hetrl::testing::approx(24 * ((2 * q + kv) / 0.05 + (mlp_in + down) / 0.025) + head / 0.025).epsilon(1e-9));
}

TEST_CASE("a GPU type's own figures: its width half, its measured best GEMM as the cap, optimizer, decode overhead and prefill") {
  // Qwen2.5-0.5B (hidden 896) PPO on one A100: the actor's training pass and generation.
  hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
  const workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 2);
  const auto priced = [&](const hw::Cluster& c, const char* task_name) {
    const Fixture f(c, w);
    const std::vector<cost::Stage> one{{0, 1, 24}};
    const std::vector<double> budget{60 * core::kGiB};
    cost::Breakdown b(true);
    f.model.replica_seconds(f.task(task_name), one, 64, 1, {1, cost::Recompute::kNone}, budget, b);
    return b;
  };
  const cost::Breakdown train = priced(cluster, "actor_train"), generate = priced(cluster, "generate");
  hw::Efficiency& e = cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency;
  // No width dependence: the 896-wide GEMMs at the large-GEMM efficiency itself, not scaled
  // by (896 / 1920) / (4096 / 5120).
  e.gemm_width_half = 0.0;
  const double scale = (896.0 / 1920) / (4096.0 / 5120);
  const double gemm_before = term(train, "forward + backward compute");
  const double gemm_after = term(priced(cluster, "actor_train"), "forward + backward compute");
  CHECK(gemm_after < gemm_before);
  CHECK(gemm_after > gemm_before * scale * 0.99);
  // A type measured above the default cap keeps its measured rate: 0.95 at every size.
  e.gemm_curve = {{1, 0.95}, {8192, 0.95}};
  e.gemm_large = e.gemm_small = 0.95;
  const double capped = term(priced(cluster, "actor_train"), "forward + backward compute");
  e.gemm_curve = {{1, 0.85}, {8192, 0.85}};
  e.gemm_large = e.gemm_small = 0.85;
  CHECK(term(priced(cluster, "actor_train"), "forward + backward compute") > capped * 1.05);
  // The update at its own share of the memory bandwidth: a third of 0.75 triples it; the norm
  // and the zeroing around it (8 of its 38 bytes a parameter) stream at the memory's share.
  e.optimizer = 0.25;
  CHECK(term(priced(cluster, "actor_train"), "optimizer step") ==
        hetrl::testing::approx((3 * 30 + 8) / 38.0 * term(train, "optimizer step")).epsilon(1e-9));
  // The type's decode step overhead in place of the params' 3 ms: 4 times as much.
  const char* overhead = "decode steps' engine overhead (scheduling, sampling)";
  e.decode_step_overhead = 12e-3;
  CHECK(term(priced(cluster, "generate"), overhead) == hetrl::testing::approx(4 * term(generate, overhead)).epsilon(1e-9));
  // The engine's prefill at half the kernel rates: its GEMMs and attention take twice as long,
  // its element-wise work and fixed costs do not.
  const double prefill_before = term(priced(cluster, "generate"), cost::kPrefillComputeTerm);
  e.prefill = 0.5;
  const double prefill_after = term(priced(cluster, "generate"), cost::kPrefillComputeTerm);
  CHECK(prefill_after > 1.5 * prefill_before);
  CHECK(prefill_after < 2.0 * prefill_before);
}

TEST_CASE("a GPU type's measured decode all-reduce: each of a decode step's 2 x layers TP all-reduces at its seconds") {
  // Qwen2.5-0.5B (24 layers) PPO, generation at TP 2 and TP 1 on an A100 node.
  hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
  const workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 2);
  const auto priced = [&](int tp) {
    const Fixture f(cluster, w);
    const std::vector<cost::Stage> stages{{0, tp, 24}};
    const std::vector<double> budget{60 * core::kGiB};
    cost::Breakdown b(true);
    const double seconds =
        f.model.replica_seconds(f.task("generate"), stages, 64, 1, {1, cost::Recompute::kNone}, budget, b);
    return std::pair{seconds, b};
  };
  const auto [tp2, before] = priced(2);
  const double default_term = term(before, cost::kDecodeAllReduceTerm);
  REQUIRE(default_term > 0);
  hw::Efficiency& e = cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency;
  std::vector<double> terms, totals;
  for (const double ms : {1.0, 2.0, 4.0}) {
    e.decode_allreduce = ms * core::kMillisecond;
    const auto [seconds, b] = priced(2);
    terms.push_back(term(b, cost::kDecodeAllReduceTerm));
    totals.push_back(seconds);
  }
  // Far above NCCL's latency: more than the default; linear in the figure, 48 all-reduces a
  // step over the iteration's decode steps (at least one, fewer than the 512 tokens' most).
  CHECK(terms[0] > default_term);
  const double per_ms = terms[1] - terms[0];
  CHECK(terms[2] - terms[1] == hetrl::testing::approx(2 * per_ms).epsilon(1e-9));
  const double steps = per_ms / (2.0 * 24 * core::kMillisecond);
  CHECK(steps >= 1);
  CHECK(steps < 512);
  // The rest of the step stays: the totals move by the term alone.
  CHECK(totals[1] - totals[0] == hetrl::testing::approx(per_ms).epsilon(1e-9));
  CHECK(totals[0] - tp2 == hetrl::testing::approx(terms[0] - default_term).epsilon(1e-9));
  // TP 1 has no all-reduce to price.
  CHECK(term_or_zero(priced(1).second, cost::kDecodeAllReduceTerm) == 0);
}

TEST_CASE("a GPU type's measured TP wait: a share of a tensor-parallel pass's compute, at TP 2 and not at TP 1") {
  // Qwen2.5-0.5B (24 layers) PPO on an A100 node: the actor's training, the reference's
  // scoring and generation's prefill.
  hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
  const workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 2);
  const auto priced = [&](const char* task, int tp) {
    const Fixture f(cluster, w);
    const std::vector<cost::Stage> stages{{0, tp, 24}};
    const std::vector<double> budget{60 * core::kGiB};
    cost::Breakdown b(true);
    const double seconds =
        f.model.replica_seconds(f.task(task), stages, 64, 1, {1, cost::Recompute::kNone}, budget, b);
    return std::pair{seconds, b};
  };
  const auto [train_before, train_b0] = priced("actor_train", 2);
  const auto [score_before, score_b0] = priced("ref_logprob", 2);
  const auto [generate_before, generate_b0] = priced("generate", 2);
  CHECK(term_or_zero(train_b0, cost::kTpWaitTerm) == 0);  // none without the figure
  hw::Efficiency& e = cluster.gpu_types[cluster.nodes[0].gpu_type].efficiency;
  const double share = 0.08;
  e.tp_wait = share;
  const auto [train, train_b] = priced("actor_train", 2);
  const auto [score, score_b] = priced("ref_logprob", 2);
  const auto [generate, generate_b] = priced("generate", 2);
  // The passes: the share of their compute, a term of its own beside the all-reduces' transfer,
  // which stays; the totals move by it alone.
  const double train_wait = term(train_b, cost::kTpWaitTerm);
  CHECK(train_wait == hetrl::testing::approx(share * term(train_b, "forward + backward compute")).epsilon(1e-9));
  CHECK(term(train_b, cost::kPassAllReduceTerm) == hetrl::testing::approx(term(train_b0, cost::kPassAllReduceTerm)).epsilon(1e-12));
  CHECK(train - train_before == hetrl::testing::approx(train_wait).epsilon(1e-9));
  const double score_wait = term(score_b, cost::kTpWaitTerm);
  CHECK(score_wait == hetrl::testing::approx(share * term(score_b, "forward compute")).epsilon(1e-9));
  CHECK(score - score_before == hetrl::testing::approx(score_wait).epsilon(1e-9));
  // The prefill, a forward pass too: its all-reduce term takes the share of its compute.
  CHECK(term(generate_b, cost::kPrefillAllReduceTerm) - term(generate_b0, cost::kPrefillAllReduceTerm) ==
        hetrl::testing::approx(share * term(generate_b, cost::kPrefillComputeTerm)).epsilon(1e-9));
  CHECK(generate > generate_before);
  // TP 1 has no shard to wait for.
  CHECK(term_or_zero(priced("actor_train", 1).second, cost::kTpWaitTerm) == 0);
  CHECK(term_or_zero(priced("ref_logprob", 1).second, cost::kTpWaitTerm) == 0);
  CHECK(term_or_zero(priced("generate", 1).second, cost::kPrefillAllReduceTerm) == 0);
}

TEST_CASE("what roles keep on a shared GPU: a trained role its state and generation layout, others the larger layout") {
  cost::StageMemory train{2, 2, 12, 5, 0};
  cost::StageMemory forward{4, 0, 0, 1, 0};
  cost::StageMemory generate{3, 0, 0, 0, 6};
  cost::RoleMemory actor;
  actor.add(workload::TaskKind::kGenerate, generate);
  actor.add(workload::TaskKind::kForward, forward);
  CHECK(actor.resident() == 4);  // not yet trained: the larger of the forward and generation weights
  actor.add(workload::TaskKind::kTrain, train);
  CHECK(actor.trained);
  CHECK(actor.weights() == 2 + 3);  // forward passes reuse the trained weights
  CHECK(actor.resident() == 2 + 3 + 2 + 12);
  cost::RoleMemory reference;
  reference.add(workload::TaskKind::kForward, forward);
  CHECK(reference.resident() == 4);
  // Marked trained up front, every partial sum stays below the whole.
  cost::RoleMemory marked;
  marked.trained = true;
  marked.add(workload::TaskKind::kForward, forward);
  CHECK(marked.resident() == 0);
  marked.add(workload::TaskKind::kGenerate, generate);
  CHECK(marked.resident() == 3);
  marked.add(workload::TaskKind::kTrain, train);
  CHECK(marked.resident() == actor.resident());
  // Added to several GPUs at once, the same rule.
  std::vector<cost::RoleMemory> cells(6);
  const std::vector<int> slots{0, 2};
  cost::RoleMemory::add(workload::TaskKind::kTrain, train, cells.data(), slots, 2);
  CHECK(cells[0].resident() == 16);
  CHECK(cells[4].resident() == 16);
  CHECK(cells[2].resident() == 0);
}

TEST_CASE("weights to another group: the transfer across, or the broadcast inside the generation group") {
  const Fixture f(make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400", "us-west-2a:8xH100-SXM:nic_gbps=400",
                                "us-west-2a:8xH100-SXM:nic_gbps=100"}),
                  ppo("Qwen2.5-7B", 64, 512, 512, 1));
  const cost::CostModel& m = f.model;
  const double bytes = 15e9;
  cost::CostModel::GpuSet trainer, one, two;
  m.describe_gpu_set(std::vector<int>{8, 0, 0}, trainer);
  m.describe_gpu_set(std::vector<int>{0, 8, 0}, one);
  m.describe_gpu_set(std::vector<int>{0, 8, 8}, two);
  CHECK(two.nodes == 2);
  CHECK(two.slowest_nic == hetrl::testing::approx(100 * core::kGbps));
  cost::Breakdown alone(true);
  CHECK(m.weight_transfer_seconds(bytes, trainer, one, alone) == m.transfer_seconds(bytes, trainer, one));
  CHECK(term(alone, "(waits for the weight transfer to the generation group)") > 0);
  // Two generation nodes: the slower NIC must pass every byte once more.
  cost::Breakdown both(true);
  const double seconds = m.weight_transfer_seconds(bytes, trainer, two, both);
  CHECK(seconds == hetrl::testing::approx(std::max(m.transfer_seconds(bytes, trainer, two), bytes / (100 * core::kGbps))));
}

TEST_CASE("weights at generation's host: each GPU loads its shard at the host rate, a device whose memory is the host's none") {
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-7B", 64, 512, 512, 1));
  const int generate = f.task("generate");
  const cost::ModelShape& shape = f.model.shape(generate);
  // Two replicas, TP 2 and TP 1: the TP-1 replica's whole model is the largest shard.
  const std::vector<cost::Stage> tp2{{0, 2, shape.layers}}, tp1{{0, 1, shape.layers}};
  const std::vector<std::span<const cost::Stage>> replicas{tp2, tp1};
  cost::Breakdown loaded(true);
  f.model.weight_load_seconds(generate, replicas, loaded);
  CHECK(term(loaded, "weight load from host memory") ==
        hetrl::testing::approx(2.0 * shape.total_params() / f.model.params().host_bandwidth));
  hw::Cluster host = f.cluster;
  host.gpu_types[0].memory_is_host = true;
  const cost::CostModel on_host(host, f.workload, f.graph, catalogs().models);
  cost::Breakdown none(true);
  CHECK(on_host.weight_load_seconds(generate, replicas, none) == 0);
  CHECK(term_or_zero(none, "weight load from host memory") == 0);
}

TEST_CASE("a weight sync inside a group copies what the GPU's training shard holds and gathers the rest, by hand") {
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-7B", 64, 512, 512, 1));
  const cost::CostModel& m = f.model;
  const int generate = f.task("generate");
  const cost::ModelShape& shape = m.shape(generate);
  const hw::GpuSpec& a100 = f.cluster.gpu_types[0];
  const double copy_rate = a100.memory_bandwidth * a100.efficiency.memory;  // no copy figure of its own
  const double link = f.cluster.nodes[0].intra_node.bandwidth;
  const int layers = shape.layers;
  const double ends = shape.stage_params(layers, true, true) - layers * shape.layer_params;
  REQUIRE(a100.efficiency.copy == 0);

  // The slices by hand: TP 2's second shard holds half of every layer and of the ends.
  const cost::WeightSlice whole{0, layers, 1, 0, 1}, second{0, layers, 2, 1, 1};
  CHECK(shape.slice_params(whole) == hetrl::testing::approx(shape.total_params()));
  CHECK(shape.held_params(second, whole) == hetrl::testing::approx(shape.total_params() / 2));
  CHECK(shape.held_params(whole, second) == hetrl::testing::approx(shape.total_params() / 2));
  CHECK(shape.held_params(second, cost::WeightSlice{0, layers, 2, 0, 1}) == 0);
  // A pipeline stage of the first half of the layers holds those and the embedding.
  const cost::WeightSlice front{0, layers / 2, 1, 0, 1};
  CHECK(shape.held_params(whole, front) ==
        hetrl::testing::approx(layers / 2 * shape.layer_params + shape.stage_params(0, true, false)));
  // ZeRO-3 over 4 replicas keeps a quarter of it.
  CHECK(shape.held_params(whole, cost::WeightSlice{0, layers, 1, 0, 4}) ==
        hetrl::testing::approx(shape.total_params() / 4));
  CHECK(ends > 0);

  const auto sync = [&](std::vector<cost::CostModel::ReshardGpu> gpus) {
    cost::Breakdown out(true);
    m.reshard_seconds(generate, gpus, out);
    return out;
  };
  // The same layout: each GPU reads and writes its shard on the device, nothing crosses a link.
  const double shard = 2.0 * shape.total_params() / 2;  // bf16 bytes of a TP-2 shard
  const cost::Breakdown same = sync({{0, second, second}, {0, {0, layers, 2, 0, 1}, {0, layers, 2, 0, 1}}});
  CHECK(term(same, cost::kWeightCopyTerm) == hetrl::testing::approx(2 * shard / copy_rate));
  CHECK(term_or_zero(same, cost::kWeightGatherTerm) == 0);
  // Trained at TP 2, generating at TP 1 on each GPU: half is on the GPU, half comes over the link.
  const cost::Breakdown wider = sync({{0, whole, second}});
  CHECK(term(wider, cost::kWeightCopyTerm) == hetrl::testing::approx(2 * shard / copy_rate));
  CHECK(term(wider, cost::kWeightGatherTerm) == hetrl::testing::approx(shard / link));
  // A GPU that trains nothing gathers its whole shard; ZeRO-3's shards gather most of it.
  CHECK(sync({{0, whole, {}}}).total() == hetrl::testing::approx(2 * shape.total_params() / link));
  const cost::Breakdown zero3 = sync({{0, whole, {0, layers, 1, 0, 4}}});
  CHECK(term(zero3, cost::kWeightGatherTerm) == hetrl::testing::approx(0.75 * 2 * shape.total_params() / link));
  // The slowest GPU sets the time; a copy figure of the type's own replaces the memory's.
  CHECK(sync({{0, second, second}, {0, whole, {}}}).total() == hetrl::testing::approx(2 * shape.total_params() / link));
  hw::Cluster slow_copy = f.cluster;
  slow_copy.gpu_types[0].efficiency.copy = a100.efficiency.memory / 4;
  const cost::CostModel quarter(slow_copy, f.workload, f.graph, catalogs().models);
  cost::Breakdown out(true);
  quarter.reshard_seconds(generate, std::vector<cost::CostModel::ReshardGpu>{{0, second, second}}, out);
  CHECK(out.total() == hetrl::testing::approx(4 * same.total()));
}

TEST_CASE("precision: FP16 at its own peak where a GPU has no BF16, a BF16 workload does not run there") {
  workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 1);
  const hw::Cluster cluster = make_cluster({"a:4xT4", "a:8xA100-SXM-80G"});
  const hw::GpuSpec& t4 = cluster.gpu_types[cluster.nodes[0].gpu_type];
  const hw::GpuSpec& a100 = cluster.gpu_types[cluster.nodes[1].gpu_type];
  REQUIRE(t4.bf16_flops == 0);
  REQUIRE(t4.fp16_flops == hetrl::testing::approx(65e12));
  for (const workload::Precision p : {workload::Precision::kAuto, workload::Precision::kFp16}) {
    w.precision = p;
    const Fixture f(cluster, w);
    CHECK(f.model.runs_precision(0));
    CHECK(f.model.peak_flops(0) == t4.fp16_flops);
    CHECK(std::string(f.model.dtype(0)) == "fp16");
    CHECK(f.model.peak_flops(1) == (p == workload::Precision::kAuto ? a100.bf16_flops : a100.fp16_flops));
    CHECK(std::string(f.model.dtype(1)) == (p == workload::Precision::kAuto ? "bf16" : "fp16"));
  }
  w.precision = workload::Precision::kBf16;
  const Fixture f(cluster, w);
  CHECK_FALSE(f.model.runs_precision(0));
  CHECK(f.model.runs_precision(1));
  // A forward pass on the T4 takes the same under auto and fp16 (both FP16 there), and more
  // than on an A100 (BF16 at a higher peak).
  auto forward = [&](workload::Precision p, int node) {
    w.precision = p;
    const Fixture x(cluster, w);
    const std::vector<cost::Stage> stage{{node, 1, 24}};
    cost::Breakdown b(true);
    x.model.replica_seconds(x.task("ref_logprob"), stage, 8, 1, {}, {}, b);
    return term(b, "forward compute");
  };
  CHECK(forward(workload::Precision::kAuto, 0) > 0);
  CHECK(forward(workload::Precision::kAuto, 0) == forward(workload::Precision::kFp16, 0));
  CHECK(forward(workload::Precision::kAuto, 0) > 3 * forward(workload::Precision::kAuto, 1));
}

TEST_CASE("SFT scores every token with the LM head, RL training only the response") {
  workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 1);
  const Fixture rl(make_cluster({"a:8xA100-SXM-80G"}), w);
  w.algorithm = "sft";
  for (workload::Role r : {workload::Role::kCritic, workload::Role::kReference, workload::Role::kReward}) {
    w.role(r) = {};
  }
  w.validate(catalogs().algorithms, catalogs().models);
  const Fixture sft(make_cluster({"a:8xA100-SXM-80G"}), w);
  const std::vector<cost::Stage> one{{0, 1, 24}};
  cost::Breakdown a(true), b(true);
  rl.model.replica_seconds(rl.task("actor_train"), one, 64, 1, {1, cost::Recompute::kNone}, {}, a);
  sft.model.replica_seconds(sft.task("train"), one, 64, 1, {1, cost::Recompute::kNone}, {}, b);
  // The difference is the head over the 512 prompt tokens of each of the 64 sequences, x3, at
  // the GEMM efficiency for a hidden size of 896 ((896 / 1920) / (4096 / 5120) of 0.70).
  const double head = 3 * 64 * 512 * rl.model.shape(rl.task("actor_train")).head_flops() /
                      (312e12 * 0.93 * 0.70 * (896.0 / 1920) / (4096.0 / 5120));
  CHECK(term(b, "forward + backward compute") - term(a, "forward + backward compute") ==
        hetrl::testing::approx(head).epsilon(1e-9));
}

TEST_CASE("a Megatron-style trainer reaches the GPU's training efficiency as an FSDP one does and with TP overlap hides the all-reduces behind the GEMMs") {
  const workload::Workload w = ppo("Qwen2.5-7B", 64, 512, 512, 1);
  const hw::Cluster cluster = make_cluster({"a:8xH100-SXM"});
  const std::vector<cost::Stage> tp4{{0, 4, 28}};
  auto train = [&](bool megatron, bool overlap) {
    cost::CostParams params;
    params.trainer = megatron ? cost::Trainer::kMegatron : cost::Trainer::kFsdp;
    params.tp_overlap = overlap;
    const workload::TaskGraph graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
    const cost::CostModel m(cluster, w, graph, catalogs().models, params);
    cost::Breakdown b(true);
    m.replica_seconds(graph.find("actor_train"), tp4, 64, 1, {1, cost::Recompute::kNone}, {}, b);
    return std::pair{term(b, "forward + backward compute"), term_or_zero(b, "TP all-reduce")};
  };
  const auto [fsdp_compute, fsdp_tp] = train(false, false);
  const auto [megatron_compute, megatron_tp] = train(true, false);
  const auto [overlap_compute, overlap_tp] = train(true, true);
  // The H100's sustained share of its kernel rates in a training loop is the GPU's: Megatron's
  // rows on H100 need the FSDP rows' 0.73 as well.
  CHECK(megatron_compute == fsdp_compute);
  CHECK(cost::trainer_rate_fraction(cost::Trainer::kMegatron, 0.73) == 0.73);
  CHECK(megatron_tp == fsdp_tp);
  CHECK(megatron_tp > 0);
  CHECK(overlap_compute == megatron_compute);
  CHECK(overlap_tp == hetrl::testing::approx(std::max(0.0, megatron_tp - megatron_compute)));
  CHECK(overlap_tp < megatron_tp);
}

TEST_CASE("DeepSpeed's trainer reaches a fitted share of the FSDP-style rate on GEMMs and attention, not on element-wise work") {
  const workload::Workload w = ppo("Qwen2.5-7B", 64, 512, 512, 1);
  const hw::Cluster cluster = make_cluster({"a:8xH100-SXM"});
  // The same GPU at its whole kernel rates in training: GEMMs and attention at 1 / 0.73 the speed.
  hw::Cluster whole = cluster;
  whole.gpu_types[0].efficiency.training = 1.0;
  const std::vector<cost::Stage> tp1{{0, 1, 28}};
  auto compute = [&](const hw::Cluster& c, cost::Trainer trainer) {
    cost::CostParams params;
    params.trainer = trainer;
    const workload::TaskGraph graph = workload::build_task_graph(w, catalogs().algorithms, catalogs().models);
    const cost::CostModel m(c, w, graph, catalogs().models, params);
    cost::Breakdown b(true);
    m.replica_seconds(graph.find("actor_train"), tp1, 8, 1, {1, cost::Recompute::kNone}, {}, b);
    return term(b, "forward + backward compute");
  };
  // At the kernel rates: G + E, FSDP: G / e + E, DeepSpeed: G / (0.39 e) + E, with G the GEMMs
  // and attention at the kernel rates, E the element-wise work and e the H100's 0.73.
  const double kernel = compute(whole, cost::Trainer::kFsdp);
  const double fsdp = compute(cluster, cost::Trainer::kFsdp);
  const double deepspeed = compute(cluster, cost::Trainer::kDeepSpeed);
  const double e = 0.73, f = cost::kDeepSpeedTrainingFraction;
  CHECK(f == 0.39);
  CHECK(kernel < fsdp);
  CHECK((deepspeed - fsdp) / (fsdp - kernel) == hetrl::testing::approx((1 / f - 1) / (1 - e)).epsilon(1e-9));
  CHECK(cost::trainer_rate_fraction(cost::Trainer::kDeepSpeed, e) == hetrl::testing::approx(f * e));
}

TEST_CASE("a small all-reduce pays a fixed cost and a step latency for each of its ring's steps: more over PCIe than over NVLink") {
  const Fixture f(make_cluster({"a:8xA10G", "a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 8, 64, 64, 1));
  const double fixed = cost::CostParams{}.collective_latency;
  // A10G: PCIe 4, 2.3 us a step; A100: NVLink 3, 0.5 us a step (cost_models/gpus.json).
  CHECK(f.model.small_allreduce_latency(0, 8) == hetrl::testing::approx(fixed + 14 * 2.3e-6));
  CHECK(f.model.small_allreduce_latency(0, 4) == hetrl::testing::approx(fixed + 6 * 2.3e-6));
  CHECK(f.model.small_allreduce_latency(1, 8) == hetrl::testing::approx(fixed + 14 * 0.5e-6));
  // 8 KB (one token's hidden state of a 4096-wide model) over 8 A10Gs: the low-latency protocol,
  // 2 x 7 / 8 of the bytes at 0.42 of PCIe 4's 32 GB/s.
  const double bytes = 8192;
  CHECK(f.model.node_allreduce_seconds(0, 8, bytes) ==
        hetrl::testing::approx(fixed + 14 * 2.3e-6 + 2.0 * 7 / 8 * bytes / (32e9 * 0.42)));
  // Decode at TP 8 pays it twice a layer a step.
  const int generate = f.task("generate");
  const std::vector<cost::Stage> tp8{{0, 8, 24}};
  cost::Breakdown b(true);
  const std::vector<double> roomy{20 * core::kGiB};
  f.model.replica_seconds(generate, tp8, 1, 1, {}, roomy, b);
  const double steps = 63;  // one sequence of 64 fixed-length tokens, the first from prefill
  CHECK(term(b, "decode TP all-reduce") ==
        hetrl::testing::approx(steps * 2 * 24 * (fixed + 14 * 2.3e-6 + 2.0 * 7 / 8 * 896 * 2 / (32e9 * 0.42))).epsilon(1e-6));
}

TEST_CASE("generation holds an engine workspace beside its KV cache: the reserve and one prefill chunk's activations through a layer") {
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-7B", 64, 512, 512, 1));
  const int generate = f.task("generate");
  const std::vector<cost::Stage> tp2{{0, 2, 28}};
  const cost::CostParams params;
  // 8192 tokens x 34 x hidden (3584) bytes, split by TP 2, and 1 GiB.
  const double workspace = 1.0 * core::kGiB + 8192.0 * 34 * 3584 / 2;
  CHECK(f.model.generation_workspace(generate, tp2[0]) == hetrl::testing::approx(workspace));
  CHECK(params.engine_reserve == 1.0 * core::kGiB);
  const cost::StageMemory m = f.model.stage_memory(generate, tp2, 0, 1, {});
  const double per_token = 28 * f.model.shape(generate).kv_bytes_per_token_layer(2);
  CHECK(m.kv_cache_min == hetrl::testing::approx(workspace + 1024 * per_token));
  // The cache gets what the workspace leaves: none when the workspace takes it all.
  const std::vector<double> budget{workspace + 1e6 * per_token};
  CHECK(f.model.kv_capacity_tokens(generate, tp2, budget) == hetrl::testing::approx(1e6));
  const std::vector<double> only_workspace{0.5 * workspace};
  CHECK(f.model.kv_capacity_tokens(generate, tp2, only_workspace) == 0);
}

TEST_CASE("an optimizer offloaded to the host frees the GPU of Adam's state and runs its step over PCIe and the node's memory, by hand") {
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-7B", 64, 512, 512, 1));
  const int train = f.task("actor_train");
  const std::vector<cost::Stage> tp2{{0, 2, 28}};
  const cost::TrainOptions on_gpu{1, cost::Recompute::kNone, false};
  const cost::TrainOptions on_host{1, cost::Recompute::kNone, true};
  // Four TP-2 replicas, ZeRO-1: each GPU holds an eighth of the Adam state, or none.
  const double params = f.model.shape(train).stage_params(28, true, true) / 2;
  const cost::StageMemory gpu = f.model.stage_memory(train, tp2, 0, 4, on_gpu);
  const cost::StageMemory host = f.model.stage_memory(train, tp2, 0, 4, on_host);
  CHECK(gpu.optimizer == hetrl::testing::approx(12.0 * params / 4));
  CHECK(host.optimizer == 0);
  CHECK(host.weights == gpu.weights);
  CHECK(host.gradients == gpu.gradients);
  // The step of a GPU's shard: bf16 gradients out and weights back at 25 GB/s, 30 bytes a
  // parameter through the node's 200 GB/s of host memory shared by its 8 GPUs; on the GPU
  // either way, the norm of its shard's fp32 gradients and the zeroing of all it holds (ZeRO-1:
  // the TP shard's whole), at the memory's streaming share of its bandwidth.
  auto step = [&](const cost::TrainOptions& options, const char* name) {
    cost::Breakdown b(true);
    f.model.replica_seconds(train, tp2, 16, 4, options, {}, b);
    return term(b, name);
  };
  const double shard = params / 4;
  const double around = (shard * 4 + params * 4) / (2039e9 * 0.75);
  CHECK(step(on_host, "optimizer step on the CPU (gradients out, Adam, weights back)") ==
        hetrl::testing::approx(around + 2 * 2 * shard / 25e9 + shard * 30 / (200e9 / 8)).epsilon(1e-9));
  CHECK(step(on_gpu, "optimizer step") == hetrl::testing::approx(around + shard * 30 / (2039e9 * 0.75)).epsilon(1e-9));
}

TEST_CASE("the language head's logits computed again in the backward (hetrl-exec's): only the actor's training pays") {
  cost::CostParams again;
  again.head_recompute = true;
  const Fixture kept(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  const Fixture recomputed(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 512, 1), again);
  const auto compute = [](const Fixture& f, const char* task) {
    cost::Breakdown out(true);
    const std::vector<cost::Stage> stages{{0, 1, 24}};
    f.model.replica_seconds(f.task(task), stages, 64, 1, {0, cost::Recompute::kNone}, {}, out);
    return term_or_zero(out, "forward + backward compute") + term_or_zero(out, "forward compute");
  };
  // The head's GEMMs four times a step instead of three: more, by less than a third of the
  // whole pass (the layers are not run again).
  const double a = compute(kept, "actor_train"), b = compute(recomputed, "actor_train");
  CHECK(b > 1.01 * a);
  CHECK(b < a * 4.0 / 3.0);
  // A value head has no logits; scoring has no backward.
  CHECK(compute(recomputed, "critic_train") == compute(kept, "critic_train"));
  CHECK(compute(recomputed, "actor_logprob") == compute(kept, "actor_logprob"));
  CHECK(compute(kept, "actor_logprob") > 0);
}

TEST_CASE("without sequence parallelism every TP shard does the norms and residual adds for every token (hetrl-exec's), by hand") {
  cost::CostParams whole_params;
  whole_params.sequence_parallel = false;
  const hw::Cluster cluster = make_cluster({"a:8xA100-SXM-80G"});
  const workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 1);
  const Fixture split(cluster, w);
  const Fixture whole(cluster, w, whole_params);
  const int actor = split.task("actor_train"), reference = split.task("ref_logprob");
  // Qwen2.5-0.5B: hidden 896, 14 heads and 2 kv heads of 64, ffn 4864, gated. Fused, bf16:
  // norms and residual adds 10 x 896 elements, rotary 2 x (896 + 128), the activation 3 x 4864.
  const cost::ModelShape& shape = whole.model.shape(actor);
  const double hidden_bytes = 2.0 * 10 * 896, rest = 2.0 * (2 * (896 + 128) + 3 * 4864);
  CHECK(shape.elementwise_bytes == hetrl::testing::approx(hidden_bytes + rest));
  CHECK(shape.shard_elementwise_bytes(false, 1) == hetrl::testing::approx(hidden_bytes + rest));
  CHECK(shape.shard_elementwise_bytes(false, 2) == hetrl::testing::approx(hidden_bytes + rest / 2));
  CHECK(split.model.shape(actor).shard_elementwise_bytes(false, 2) == hetrl::testing::approx((hidden_bytes + rest) / 2));
  // Eager: RMSNorm's 36 bytes an element twice and the residual adds' 6 twice stay whole.
  CHECK(shape.shard_elementwise_bytes(true, 4) ==
        hetrl::testing::approx(84 * 896 + (shape.eager_elementwise_bytes - 84 * 896) / 4));

  const auto compute = [](const Fixture& f, int task, int tp, const char* name) {
    cost::Breakdown out(true);
    const std::vector<cost::Stage> stages{{0, tp, 24}};
    f.model.replica_seconds(task, stages, 64, 1, {0, cost::Recompute::kNone}, {}, out);
    return term(out, name);
  };
  // At TP 1 nothing differs. At TP 2 the passes' compute grows by the hidden-wide half each
  // shard no longer splits: 64 x 1024 tokens x 24 layers, forward only (scoring) or forward,
  // backward and its twice (training, 3x), at the A100's memory bandwidth and efficiency.
  const hw::GpuSpec& g = cluster.gpu_types[cluster.nodes[0].gpu_type];
  const double bandwidth = g.memory_bandwidth * g.efficiency.memory;
  const double extra = 64.0 * 1024 * 24 * hidden_bytes / 2 / bandwidth;
  CHECK(compute(whole, reference, 1, "forward compute") == compute(split, reference, 1, "forward compute"));
  CHECK(compute(whole, reference, 2, "forward compute") - compute(split, reference, 2, "forward compute") ==
        hetrl::testing::approx(extra).epsilon(1e-9));
  CHECK(compute(whole, actor, 2, "forward + backward compute") - compute(split, actor, 2, "forward + backward compute") ==
        hetrl::testing::approx(3 * extra).epsilon(1e-9));
}

TEST_CASE("TP splits the embedding and the LM head over the vocabulary, or every shard holds them whole (hetrl-exec's)") {
  cost::CostParams whole_params;
  whole_params.vocab_parallel = false;
  const Fixture split(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 512, 1));
  const Fixture whole(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 512, 512, 1), whole_params);
  const int actor = split.task("actor_train"), critic = split.task("critic_train");
  const cost::ModelShape& a = split.model.shape(actor);
  const cost::ModelShape& b = whole.model.shape(actor);
  const double layers = 24 * a.layer_params, ends = a.stage_params(24, true, true) - layers;
  REQUIRE(ends > 0);
  CHECK(a.shard_params(24, true, true, 1) == a.stage_params(24, true, true));
  CHECK(b.shard_params(24, true, true, 1) == a.stage_params(24, true, true));
  CHECK(a.shard_params(24, true, true, 2) == hetrl::testing::approx((layers + ends) / 2));
  CHECK(b.shard_params(24, true, true, 2) == hetrl::testing::approx(layers / 2 + ends));
  // A pipeline stage without the ends is split alike.
  CHECK(b.shard_params(12, false, false, 2) == hetrl::testing::approx(6 * a.layer_params));

  const auto terms = [](const Fixture& f, int task, int tp) {
    cost::Breakdown out(true);
    const std::vector<cost::Stage> stages{{0, tp, 24}};
    f.model.replica_seconds(task, stages, 64, 1, {0, cost::Recompute::kNone}, {}, out);
    return out;
  };
  // At TP 1 nothing differs; at TP 2 the actor's step moves the whole ends on each shard and its
  // passes run the whole language head; the critic's passes (a scalar head) are the same.
  CHECK(terms(whole, actor, 1).total() == terms(split, actor, 1).total());
  CHECK(term(terms(whole, actor, 2), "optimizer step") ==
        hetrl::testing::approx(term(terms(split, actor, 2), "optimizer step") * (layers / 2 + ends) /
                               ((layers + ends) / 2)));
  CHECK(term(terms(whole, actor, 2), "forward + backward compute") >
        1.05 * term(terms(split, actor, 2), "forward + backward compute"));
  CHECK(term(terms(whole, critic, 2), "forward + backward compute") ==
        term(terms(split, critic, 2), "forward + backward compute"));
  // Generation streams the whole head on each shard every decode step.
  const int generate = split.task("generate");
  const std::vector<cost::Stage> tp2{{0, 2, 24}};
  const std::vector<double> budget{20e9, 20e9};
  cost::Breakdown g_split, g_whole;
  CHECK(whole.model.replica_seconds(generate, tp2, 64, 1, {}, budget, g_whole) >
        split.model.replica_seconds(generate, tp2, 64, 1, {}, budget, g_split));
}

TEST_CASE("sequences decoding at once: the KV cache's room in whole blocks, capped by max_num_seqs") {
  // 100 prompt tokens and 100 response tokens take 13 blocks of 16 tokens (208 tokens).
  const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), ppo("Qwen2.5-0.5B", 64, 100, 100, 1));
  const int generate = f.task("generate");
  const std::vector<cost::Stage> one{{0, 1, 24}};
  const double per_token = 24 * f.model.shape(generate).kv_bytes_per_token_layer(1);
  // The room beyond the engine's workspace.
  const std::vector<double> room_for_50{50 * 208 * per_token + f.model.generation_workspace(generate, one[0])};
  CHECK(f.model.concurrent_sequences(generate, one, room_for_50) == hetrl::testing::approx(50));
  // The budget that holds 50 is that room, at TP 2 too (half the heads' cache a GPU).
  CHECK(f.model.kv_budget_holding(generate, one[0], 50) == hetrl::testing::approx(room_for_50[0]));
  const std::vector<cost::Stage> tp2{{0, 2, 24}};
  const std::vector<double> holds_70{f.model.kv_budget_holding(generate, tp2[0], 70)};
  CHECK(f.model.concurrent_sequences(generate, tp2, holds_70) == hetrl::testing::approx(70));
  const std::vector<double> huge{1e15};
  CHECK(f.model.concurrent_sequences(generate, one, huge) == hetrl::testing::approx(1024));  // verl's max_num_seqs
  const std::vector<double> none{0};
  CHECK(f.model.concurrent_sequences(generate, one, none) == 1);
}

TEST_CASE("a workload's micro-batch tokens set how its passes are cut") {
  workload::Workload w = ppo("Qwen2.5-0.5B", 64, 512, 512, 1);
  const std::vector<cost::Stage> two{{0, 1, 12}, {0, 1, 12}};
  auto bubble = [&](int tokens) {
    w.micro_batch_tokens = tokens;
    const Fixture f(make_cluster({"a:8xA100-SXM-80G"}), w);
    cost::Breakdown b(true);
    f.model.replica_seconds(f.task("ref_logprob"), two, 64, 1, {}, {}, b);
    return std::pair{term(b, "pipeline bubble"), term(b, "forward compute")};
  };
  // 64 x 1024 tokens: 8 micro-batches of 8192 (the default), or 128 of 512: the bubble is one
  // micro-batch's time, far shorter.
  const auto [default_bubble, default_compute] = bubble(0);
  const auto [small_bubble, small_compute] = bubble(512);
  CHECK(default_bubble == hetrl::testing::approx(bubble(8192).first));
  CHECK(small_bubble < 0.5 * default_bubble);
  CHECK(small_compute > default_compute);  // GEMMs of 512 tokens run less efficiently
}

TEST_CASE("an all-reduce over nodes in two regions pays the cross-region latency twice per hop of its ring") {
  // Four A100 nodes, two in us-east-1a and two in us-west-2a (the 32 ms cross-region default):
  // a ring all-reduce of a small message takes 2 (n - 1) hops of reduce-scatter and all-gather,
  // each as slow as the slowest link, 6 x 32 ms, plus well under a millisecond of transfer.
  const Fixture f(make_cluster({"us-east-1a:8xA100-SXM-80G:nic_gbps=400", "us-west-2a:8xA100-SXM-80G:nic_gbps=400",
                                "us-east-1a:8xA100-SXM-80G:nic_gbps=400", "us-west-2a:8xA100-SXM-80G:nic_gbps=400"}),
                  ppo("Qwen2.5-0.5B", 8, 64, 64, 1));
  const double t = f.model.allreduce_seconds(4, 8, 1024.0);
  CHECK(t > 6 * 0.032);
  CHECK(t < 6 * 0.032 + 1e-3);
  // Two nodes: one hop each way.
  const double two = f.model.allreduce_seconds(2, 8, 1024.0);
  CHECK(two > 2 * 0.032);
  CHECK(two < 2 * 0.032 + 1e-3);
}
