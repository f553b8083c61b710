#include <doctest/doctest.h>

#include "approx.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/units.h"
#include "cost/shape.h"
#include "io/catalog_io.h"

using namespace hetrl;

namespace {
const io::Catalogs& catalogs() { return io::builtin_catalogs(); }
}  // namespace

TEST_CASE("the GPU catalogue has every type the planners are promised, each with a source") {
  for (const char* name : {"H200", "H100-SXM", "H100-PCIe", "A100-SXM-80G", "A100-SXM-40G", "L40S",
                           "L40", "A10G", "A10", "L4", "V100-SXM-32G", "T4", "RTX-4090"}) {
    CAPTURE(name);
    const hw::GpuSpec* spec = catalogs().hardware.find_gpu(name);
    REQUIRE(spec != nullptr);
    CHECK(!spec->source.empty());
    CHECK(spec->memory > 0);
    CHECK(spec->tensor_flops() > spec->fp32_flops / 2);
    CHECK_NOTHROW(hw::validate_gpu_spec(*spec));
    if (spec->price_per_hour) CHECK(!spec->price_source.empty());
  }
}

TEST_CASE("datasheet figures are read in SI units") {
  const hw::GpuSpec& a100 = catalogs().hardware.gpu("A100-SXM-80G", "");
  CHECK(a100.memory == 80 * core::kGiB);
  CHECK(a100.memory_bandwidth == hetrl::testing::approx(2039e9));
  CHECK(a100.tensor_flops() == hetrl::testing::approx(312e12));
  CHECK(a100.intra_node.name == "nvlink3");
  CHECK(a100.intra_node.bandwidth == hetrl::testing::approx(300e9));
  // The V100 has no BF16: its tensor peak is the FP16 one.
  const hw::GpuSpec& v100 = catalogs().hardware.gpu("V100-SXM-32G", "");
  CHECK(v100.bf16_flops == 0);
  CHECK(v100.tensor_flops() == hetrl::testing::approx(125e12));
}

TEST_CASE("efficiencies come from the calibration measurements where there are some") {
  // Vidur's A100 profile: the layer's 202.4M-parameter GEMMs at 2048 tokens take 3.815 ms.
  const double flops = 2.0 * 202.4e6 * 2048;
  const double achieved = flops / 3.815e-3;
  const hw::GpuSpec& a100 = catalogs().hardware.gpu("A100-SXM-80G", "");
  CHECK(a100.efficiency.gemm_large == hetrl::testing::approx(achieved / 312e12).epsilon(0.02));
  // The H100 at 2048 tokens: 1.084 ms.
  const hw::GpuSpec& h100 = catalogs().hardware.gpu("H100-SXM", "");
  CHECK(h100.efficiency.gemm_large == hetrl::testing::approx(flops / 1.084e-3 / 989.5e12).epsilon(0.02));
  // A type without measurements gets the documented defaults.
  const hw::GpuSpec& l4 = catalogs().hardware.gpu("L4", "");
  CHECK(l4.efficiency.gemm_large == catalogs().hardware.default_efficiency.gemm_large);
}

TEST_CASE("instance and network presets") {
  const hw::InstancePreset& p4de = catalogs().hardware.instance("p4de.24xlarge", "");
  CHECK(p4de.gpu == "A100-SXM-80G");
  CHECK(p4de.gpus_per_node == 8);
  CHECK(p4de.nic_bandwidth == hetrl::testing::approx(400 * core::kGbps));
  for (const char* name : {"p5.48xlarge", "p4de.24xlarge", "g6e.48xlarge", "g6.48xlarge",
                           "g5.48xlarge"}) {
    CHECK_NOTHROW(catalogs().hardware.instance(name, ""));
  }
  for (const char* name : {"same-zone", "cross-zone", "cross-region"}) {
    const hw::NetworkPreset& preset = catalogs().hardware.network(name, "");
    CHECK(!preset.source.empty());
    CHECK(preset.link.bandwidth > 0);
  }
  CHECK(catalogs().hardware.network("cross-region", "").link.latency >
        catalogs().hardware.network("cross-zone", "").link.latency);
  CHECK_THROWS_WITH_AS(catalogs().hardware.instance("p5.48xl", "--preset-node"),
                       "--preset-node: unknown instance type \"p5.48xl\" (did you mean "
                       "\"p5.48xlarge\"?)",
                       core::InputError);
}

TEST_CASE("Llama-3.1-8B's parameter count, by hand") {
  // embeddings 128256 x 4096, untied head of the same size, final norm 4096;
  // per layer: q 4096x4096, k and v 4096x1024, o 4096x4096, MLP 3 x 4096x14336, norms 2x4096.
  const std::int64_t per_layer = 4096LL * 4096 + 2 * 4096LL * 1024 + 4096LL * 4096 +
                                 3 * 4096LL * 14336 + 2 * 4096;
  const std::int64_t total = 2 * 128256LL * 4096 + 32 * per_layer + 4096;
  const workload::ModelArch& m = catalogs().models.get("Llama-3.1-8B", "");
  CHECK(m.params_per_layer() == per_layer);
  CHECK(m.parameter_count() == total);
  CHECK(total == 8030261248LL);  // safetensors metadata of meta-llama/Llama-3.1-8B
}

TEST_CASE("a user's model: a plain MLP counts two projections, implausible shapes are refused") {
  const std::string text = R"({"schema": "hetrl.models/v1", "models": {
      "GPT-1.7B": {"layers": 24, "hidden": 2048, "heads": 16, "kv_heads": 16, "head_dim": 128,
                   "ffn_hidden": 8192, "gated_mlp": false, "vocab": 131072, "tied_embeddings": true,
                   "qkv_bias": false, "qk_norm": false}}})";
  const workload::ModelCatalog own = io::parse_model_catalog(text, "own.json", true);
  const workload::ModelArch& m = own.get("GPT-1.7B", "");
  // q, k, v, o 4 x 2048^2; up and down 2 x 2048 x 8192; two norms: 12 h^2 + 2h, the GPT layer.
  CHECK(m.params_per_layer() == 12LL * 2048 * 2048 + 2 * 2048);
  CHECK(m.parameter_count() == 131072LL * 2048 + 24 * m.params_per_layer() + 2048);
  const cost::ModelShape shape(m);
  CHECK(shape.layer_linear_params == hetrl::testing::approx(12.0 * 2048 * 2048));
  // The built-in catalogue must say where its counts come from; a user's file need not.
  CHECK_THROWS_WITH_AS(io::parse_model_catalog(text, "models.json"),
                       doctest::Contains("/models/GPT-1.7B: missing required field \"published_params\""),
                       core::InputError);
  std::string wide = text;
  const std::string narrow = "\"head_dim\": 128";
  wide.replace(wide.find(narrow), narrow.size(), "\"head_dim\": 1024");
  CHECK_THROWS_WITH_AS(io::parse_model_catalog(wide, "own.json", true),
                       doctest::Contains("own.json: /models/GPT-1.7B: model \"GPT-1.7B\": implausible architecture: "
                                         "heads x head_dim (16 x 1024 = 16384) should be within 4x of hidden (2048)"),
                       core::InputError);
}

TEST_CASE("every built-in model names the repository its weights are published in") {
  for (const workload::ModelArch& m : catalogs().models.models) {
    CAPTURE(m.name);
    // "Org/Name", the name the catalogue gives it, and the repository its source cites.
    const std::size_t slash = m.repository.find('/');
    REQUIRE(slash != std::string::npos);
    CHECK(m.repository.substr(slash + 1) == m.name);
    CHECK(m.source.starts_with(m.repository + " "));
  }
  // A user's catalogue need not say.
  const std::string own = R"({"schema": "hetrl.models/v1", "models": {
      "M": {"layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 8, "head_dim": 128, "ffn_hidden": 4096,
            "vocab": 32000, "tied_embeddings": true, "qkv_bias": false, "qk_norm": false}}})";
  CHECK(io::parse_model_catalog(own, "own.json", true).get("M", "").repository.empty());
}

TEST_CASE("every model's count from its shape matches the published count within 1%") {
  // Published counts, as stated by the publishers (model cards, safetensors metadata).
  const std::vector<std::pair<const char*, double>> published = {
      {"Llama-3.1-8B", 8.03e9},  {"Llama-3.1-70B", 70.6e9}, {"Qwen2.5-0.5B", 0.49e9},
      {"Qwen2.5-1.5B", 1.54e9},  {"Qwen2.5-3B", 3.09e9},    {"Qwen2.5-7B", 7.61e9},
      {"Qwen2.5-14B", 14.7e9},   {"Qwen2.5-32B", 32.5e9},   {"Qwen2.5-72B", 72.7e9},
      {"Qwen3-8B", 8.2e9},       {"Qwen3-32B", 32.8e9}};
  for (const auto& [name, count] : published) {
    CAPTURE(name);
    const workload::ModelArch& m = catalogs().models.get(name, "");
    const double computed = static_cast<double>(m.parameter_count());
    CHECK(std::abs(computed / count - 1) < 0.01);
    CHECK(std::abs(computed / static_cast<double>(m.published_params) - 1) < 0.01);
  }
  // Tied embeddings count once: Qwen2.5-0.5B's exact count.
  CHECK(catalogs().models.get("Qwen2.5-0.5B", "").parameter_count() == 494032768);
}

TEST_CASE("broken catalogues are rejected with the place of the fault") {
  const std::string instances(io::builtin_file("instances.json"));
  const std::string networks(io::builtin_file("networks.json"));
  const std::string gpus = R"({"schema": "hetrl.gpus/v1",
    "intra_node_links": {"pcie4": {"bandwidth_gb_per_s": 32, "hop_latency_us": 2, "source": "s"}},
    "default_efficiency": {"gemm_large": 0.7, "gemm_small": 0.5, "memory": 0.75,
                           "collective": 0.6, "source": "s"},
    "gpus": {"X": {"memory_gib": 24, "memory_bandwidth_gb_per_s": 300, "fp16_dense_tflops": 100,
                   "fp32_tflops": 30, "intra_node_link": "pcie4", "source": "s", "colour": "red"}}})";
  CHECK_THROWS_WITH_AS(io::parse_hardware_catalog(gpus, instances, networks),
                       "gpus.json: /gpus/X/colour: unknown field \"colour\"", core::InputError);
  // A link's step latency is a duration: not negative.
  std::string negative_hop = gpus;
  negative_hop.replace(negative_hop.find("\"hop_latency_us\": 2"), 19, "\"hop_latency_us\": -1");
  try {
    io::parse_hardware_catalog(negative_hop, instances, networks);
    FAIL("a negative hop latency was accepted");
  } catch (const core::InputError& e) {
    CHECK(std::string(e.what()).starts_with("gpus.json: /intra_node_links/pcie4/hop_latency_us: "));
  }
  const std::string models = R"({"schema": "hetrl.models/v1", "models": {"M": {"layers": 2,
    "hidden": 64, "heads": 6, "kv_heads": 4, "head_dim": 16, "ffn_hidden": 128, "vocab": 100,
    "tied_embeddings": true, "qkv_bias": false, "qk_norm": false, "published_params": 1,
    "repository": "o/M", "source": "s"}}})";
  CHECK_THROWS_WITH_AS(io::parse_model_catalog(models, "models.json"),
                       "models.json: /models/M: model \"M\": heads (6) must be a multiple of "
                       "kv_heads (4)",
                       core::InputError);
}
