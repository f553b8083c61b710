#include "io/catalog_io.h"

#include <fmt/format.h>

#include <array>
#include <cassert>

#include "core/error.h"
#include "core/units.h"
#include "io/embedded_data.h"
#include "io/json_reader.h"

namespace hetrl::io {
namespace {

using detail::ObjectReader;
using detail::Range;

hw::Efficiency read_efficiency(ObjectReader& r, const hw::Efficiency& base) {
  hw::Efficiency e = base;
  if (auto v = r.optional_number("gemm_large", Range::kFraction)) e.gemm_large = *v;
  if (auto v = r.optional_number("gemm_small", Range::kFraction)) e.gemm_small = *v;
  if (auto v = r.optional_number("memory", Range::kFraction)) e.memory = *v;
  if (auto v = r.optional_number("collective", Range::kFraction)) e.collective = *v;
  if (auto v = r.optional_number("attention", Range::kFraction)) e.attention = *v;
  if (auto v = r.optional_number("training", Range::kFraction)) e.training = *v;
  e.source = r.string("source");
  r.finish();
  return e;
}

// A catalogue file of presets: its schema, optional notes, and `read(name, reader)` for each
// entry of the object `key`.
template <class Read>
void read_presets(std::string_view text, const char* file, const char* schema, const char* key, Read&& read) {
  const detail::Json json = detail::parse_json(text, file);
  ObjectReader root(json, file, "");
  detail::check_schema(root, schema);
  root.has("notes");
  for (auto& [name, r] : root.object_map(key)) {
    read(name, r);
    r.finish();
  }
  root.finish();
}

}  // namespace

hw::Catalog parse_hardware_catalog(std::string_view gpus_json, std::string_view instances_json,
                                   std::string_view networks_json) {
  hw::Catalog catalog;
  {
    const detail::Json json = detail::parse_json(gpus_json, "gpus.json");
    ObjectReader root(json, "gpus.json", "");
    detail::check_schema(root, "hetrl.gpus/v1");
    root.has("notes");
    for (auto& [name, r] : root.object_map("intra_node_links")) {
      hw::IntraNodeLink link;
      link.name = name;
      link.bandwidth = r.number("bandwidth_gb_per_s", Range::kPositive) * core::kGBps;
      link.nvls = r.optional_boolean("nvls").value_or(false);
      link.hop_latency = r.number("hop_latency_us", Range::kNonNegative) * 1e-6;
      link.source = r.string("source");
      catalog.intra_node_links.push_back(std::move(link));
      r.finish();
    }
    ObjectReader defaults = root.object("default_efficiency");
    hw::Efficiency ones;
    ones.gemm_large = ones.gemm_small = ones.memory = ones.collective = ones.attention = ones.training = 1;
    catalog.default_efficiency = read_efficiency(defaults, ones);
    for (auto& [name, r] : root.object_map("gpus")) {
      hw::GpuSpec spec;
      spec.name = name;
      spec.memory = r.number("memory_gib", Range::kPositive) * core::kGiB;
      spec.memory_bandwidth = r.number("memory_bandwidth_gb_per_s", Range::kPositive) * core::kGBps;
      spec.bf16_flops = r.optional_number("bf16_dense_tflops", Range::kPositive).value_or(0) * core::kTflops;
      spec.fp16_flops = r.number("fp16_dense_tflops", Range::kPositive) * core::kTflops;
      spec.fp32_flops = r.number("fp32_tflops", Range::kPositive) * core::kTflops;
      spec.intra_node = catalog.intra_node_link(r.string("intra_node_link"), r.where("intra_node_link"));
      spec.price_per_hour = r.optional_number("price_per_gpu_hour_usd", Range::kNonNegative);
      if (spec.price_per_hour) spec.price_source = r.string("price_source");
      spec.efficiency = catalog.default_efficiency;
      if (auto e = r.optional_object("efficiency")) {
        spec.efficiency = read_efficiency(*e, catalog.default_efficiency);
      }
      spec.source = r.string("source");
      r.finish();
      catalog.gpus.push_back(std::move(spec));
    }
    root.finish();
  }
  read_presets(instances_json, "instances.json", "hetrl.instances/v1", "instances",
               [&](const std::string& name, ObjectReader& r) {
                 catalog.instances.push_back({name, catalog.gpu(r.string("gpu"), r.where("gpu")).name,
                                              static_cast<int>(r.integer("gpus_per_node", 1, 1024)),
                                              r.number("nic_gbps", Range::kPositive) * core::kGbps,
                                              r.optional_number("price_per_hour_usd", Range::kNonNegative),
                                              r.string("source")});
               });
  read_presets(networks_json, "networks.json", "hetrl.networks/v1", "networks",
               [&](const std::string& name, ObjectReader& r) {
                 const hw::LinkSpec link{r.number("bandwidth_gbps", Range::kPositive) * core::kGbps,
                                         r.number("latency_ms", Range::kNonNegative) * core::kMillisecond};
                 catalog.networks.push_back({name, link, r.string("source")});
               });
  return catalog;
}

workload::ModelCatalog parse_model_catalog(std::string_view text, std::string_view file, bool user) {
  const detail::Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.models/v1");
  root.has("notes");
  workload::ModelCatalog catalog;
  for (auto& [name, r] : root.object_map("models")) {
    workload::ModelArch m;
    m.name = name;
    constexpr long long kBig = 1LL << 30;
    m.layers = static_cast<int>(r.integer("layers", 1, 100000));
    m.hidden = static_cast<int>(r.integer("hidden", 1, kBig));
    m.heads = static_cast<int>(r.integer("heads", 1, 100000));
    m.kv_heads = static_cast<int>(r.integer("kv_heads", 1, 100000));
    m.head_dim = static_cast<int>(r.integer("head_dim", 1, 100000));
    m.ffn_hidden = static_cast<int>(r.integer("ffn_hidden", 1, kBig));
    m.vocab = static_cast<int>(r.integer("vocab", 1, kBig));
    m.tied_embeddings = r.boolean("tied_embeddings");
    m.qkv_bias = r.boolean("qkv_bias");
    m.qk_norm = r.boolean("qk_norm");
    m.gated_mlp = r.optional_boolean("gated_mlp").value_or(true);
    // The built-in catalogue states every count and source; a user's file may not.
    if (user) {
      m.published_params = r.optional_integer("published_params", 1, 1LL << 50).value_or(0);
      m.source = r.optional_string("source").value_or("");
      m.repository = r.optional_string("repository").value_or("");
    } else {
      m.published_params = r.integer("published_params", 1, 1LL << 50);
      m.source = r.string("source");
      m.repository = r.string("repository");
    }
    r.finish();
    try {
      m.validate();
    } catch (const core::InputError& e) {
      throw core::InputError(core::located(r.where(), e.what()));
    }
    catalog.models.push_back(std::move(m));
  }
  root.finish();
  return catalog;
}

workload::AlgorithmCatalog parse_algorithm_catalog(std::string_view text, std::string_view file) {
  using namespace workload;
  const detail::Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.algorithms/v1");
  root.has("notes");
  AlgorithmCatalog catalog;
  for (auto& [name, r] : root.object_map("payloads")) {
    PayloadSpec p;
    p.name = name;
    p.bytes_per_token = r.optional_number("bytes_per_token", Range::kPositive).value_or(0);
    if (p.bytes_per_token > 0) {
      const std::string tokens = r.string("tokens");
      if (tokens == "response") {
        p.tokens = TokenSpan::kResponse;
      } else if (tokens == "prompt_and_response") {
        p.tokens = TokenSpan::kPromptAndResponse;
      } else {
        constexpr std::array<std::string_view, 2> spans{"response", "prompt_and_response"};
        r.fail_choice("tokens", spans, tokens);
      }
    }
    p.bytes_per_sample = r.optional_number("bytes_per_sample", Range::kPositive).value_or(0);
    p.bytes_per_parameter = r.optional_number("bytes_per_parameter", Range::kPositive).value_or(0);
    p.source = r.string("source");
    r.finish();
    catalog.payloads.push_back(std::move(p));
  }
  for (auto& [name, r] : root.object_map("algorithms")) {
    AlgorithmSpec spec;
    spec.name = name;
    spec.description = r.string("description");
    spec.source = r.string("source");
    spec.min_samples_per_prompt =
        static_cast<int>(r.optional_integer("min_samples_per_prompt", 1, 1 << 20).value_or(1));
    ObjectReader roles = r.object("roles");
    for (Role role : kRoles) {
      const std::string need = roles.string(role_name(role));
      const auto parsed = role_need_from_name(need);
      if (!parsed) roles.fail(role_name(role), "unknown role need " + core::quoted(need));
      spec.roles[static_cast<int>(role)] = *parsed;
    }
    roles.finish();
    for (ObjectReader& t : r.object_array("tasks", false)) {
      TaskTemplate task;
      task.name = t.string("name");
      if (auto role = t.optional_string("role")) {
        task.role = role_from_name(*role);
        if (!task.role) t.fail("role", "unknown role " + core::quoted(*role));
      }
      const std::string kind = t.string("kind");
      const auto parsed_kind = task_kind_from_name(kind);
      if (!parsed_kind) t.fail("kind", "unknown task kind " + core::quoted(kind));
      task.kind = *parsed_kind;
      if (auto rule_kind = t.optional_string("kind_with_rule")) {
        task.kind_with_rule = task_kind_from_name(*rule_kind);
        if (!task.kind_with_rule) t.fail("kind_with_rule", "unknown task kind " + core::quoted(*rule_kind));
      }
      task.op = t.optional_string("op").value_or("");
      for (ObjectReader& in : t.object_array("inputs", true)) {
        TaskInput input;
        input.from = in.string("from");
        input.payload = in.string("payload");
        input.previous_iteration = in.optional_boolean("previous_iteration").value_or(false);
        in.finish();
        task.inputs.push_back(std::move(input));
      }
      t.finish();
      spec.tasks.push_back(std::move(task));
    }
    r.finish();
    catalog.algorithms.push_back(std::move(spec));
  }
  root.finish();
  try {
    catalog.validate();
  } catch (const core::InputError& e) {
    throw core::InputError(core::located(file, e.what()));
  }
  return catalog;
}

std::string_view builtin_file(std::string_view name) {
  const std::optional<std::string_view> text = embedded_file(name);
  assert(text && "every catalogue file is embedded by CMake");
  return text.value_or(std::string_view());
}

const Catalogs& builtin_catalogs() {
  static const Catalogs catalogs = [] {
    Catalogs c;
    c.hardware = parse_hardware_catalog(builtin_file("gpus.json"), builtin_file("instances.json"),
                                        builtin_file("networks.json"));
    c.models = parse_model_catalog(builtin_file("models.json"), "models.json");
    c.algorithms = parse_algorithm_catalog(builtin_file("algorithms.json"), "algorithms.json");
    return c;
  }();
  return catalogs;
}

}  // namespace hetrl::io
