#include <doctest/doctest.h>

#include "approx.h"

#include <limits>
#include <set>
#include <string>

#include "core/error.h"
#include "core/units.h"
#include "hw/cluster_builder.h"
#include "hw/cluster_report.h"
#include "hw/profile.h"
#include "io/catalog_io.h"
#include "io/cluster_io.h"

using namespace hetrl;

namespace {

const hw::Catalog& catalog() { return io::builtin_catalogs().hardware; }

// A cluster file of one node of L4s whose type has the efficiency object `efficiency`.
std::string l4_cluster(const std::string& efficiency) {
  return R"({"schema": "hetrl.cluster/v1", "name": "x", "regions": [{"name": "r", "zones": ["z"]}],
      "network": {"intra_zone": {"bandwidth_gbps": 400, "latency_ms": 0.01}},
      "nodes": [{"name": "n", "zone": "z", "gpu": "L4", "gpus": 8, "nic_gbps": 100}],
      "gpu_types": {"L4": {"efficiency": )" + efficiency + "}}}";
}

hw::Cluster build(const std::vector<std::string>& nodes, const std::vector<std::string>& links = {}) {
  hw::ClusterBuildParams params = hw::default_build_params(catalog());
  for (const std::string& spec : nodes) {
    params.node_groups.push_back(spec.find(".") != std::string::npos
                                     ? hw::parse_preset_node_spec(spec, catalog())
                                     : hw::parse_node_spec(spec, catalog()));
  }
  for (const std::string& spec : links) params.links.push_back(hw::parse_link_spec(spec, catalog()));
  return hw::build_cluster(params, catalog());
}

}  // namespace

TEST_CASE("node specs give node and GPU counts, the GPU type and options") {
  const hw::NodeGroup g = hw::parse_node_spec("us-east-1a:2x8xA100-SXM-80G", catalog());
  CHECK(g.zone == "us-east-1a");
  CHECK(g.node_count == 2);
  CHECK(g.gpus_per_node == 8);
  CHECK(g.gpu == "A100-SXM-80G");
  CHECK(g.nic_bandwidth == hetrl::testing::approx(hw::kDefaultNicGbps * core::kGbps));
  const hw::NodeGroup one = hw::parse_node_spec("z:4xL4:nic_gbps=50,price_per_hour_usd=3", catalog());
  CHECK(one.node_count == 1);
  CHECK(one.gpus_per_node == 4);
  CHECK(one.nic_bandwidth == hetrl::testing::approx(50 * core::kGbps));
  CHECK(one.price_per_hour == hetrl::testing::approx(3));
  // Instance presets bring their GPU, NIC and price.
  const hw::NodeGroup p = hw::parse_preset_node_spec("us-west-2a:4xg6e.48xlarge", catalog());
  CHECK(p.node_count == 4);
  CHECK(p.gpus_per_node == 8);
  CHECK(p.gpu == "L40S");
  CHECK(p.nic_bandwidth == hetrl::testing::approx(400 * core::kGbps));
  CHECK(p.price_per_hour == hetrl::testing::approx(30.131));
}

TEST_CASE("link and network specs") {
  const hw::LinkRequest link = hw::parse_link_spec("a,b:gbps=10,latency_ms=60", catalog());
  CHECK(link.zone_a == "a");
  CHECK(link.zone_b == "b");
  CHECK(link.link.bandwidth == hetrl::testing::approx(10 * core::kGbps));
  CHECK(link.link.latency == hetrl::testing::approx(0.060));
  const hw::LinkRequest preset = hw::parse_link_spec("a,b:cross-region", catalog());
  CHECK(preset.link.bandwidth == catalog().network("cross-region", "").link.bandwidth);
  CHECK_THROWS_WITH_AS(hw::parse_link_spec("a,b:gbps=10,latency=5", catalog()),
                       "--link \"a,b:gbps=10,latency=5\": unknown key \"latency\" (did you mean "
                       "\"latency_ms\"?)",
                       core::InputError);
}

TEST_CASE("regions come from zone names unless given") {
  CHECK(hw::region_of_zone("us-east-1a") == "us-east-1");
  CHECK(hw::region_of_zone("us-central1-a") == "us-central1");
  CHECK(hw::region_of_zone("lab") == "lab");
  CHECK(hw::region_of_zone("rack7") == "rack7");
}

TEST_CASE("a built cluster: names, zones, regions and paths") {
  const hw::Cluster c = build({"us-east-1a:2x8xA100-SXM-80G", "us-east-1b:g6e.48xlarge",
                               "us-west-2a:1x8xH100-SXM"},
                              {"us-east-1a,us-west-2a:gbps=20,latency_ms=30"});
  REQUIRE(c.nodes.size() == 4);
  CHECK(c.nodes[0].name == "us-east-1a-a100-sxm-80g-0");
  CHECK(c.nodes[1].name == "us-east-1a-a100-sxm-80g-1");
  CHECK(c.nodes[2].name == "us-east-1b-g6e.48xlarge-0");
  CHECK(c.total_gpus() == 32);
  REQUIRE(c.regions.size() == 2);
  CHECK(c.zones[c.nodes[0].zone].region == c.zones[c.nodes[2].zone].region);
  const int a = c.find_zone("us-east-1a");
  const int b = c.find_zone("us-east-1b");
  const int w = c.find_zone("us-west-2a");
  CHECK(c.zone_path(a, a).kind == hw::PathKind::kSameZone);
  CHECK(c.zone_path(a, b).kind == hw::PathKind::kCrossZone);
  CHECK(c.zone_path(w, a).kind == hw::PathKind::kExplicitLink);
  CHECK(c.zone_path(w, a).link.bandwidth == hetrl::testing::approx(20 * core::kGbps));
  CHECK(c.zone_path(b, w).kind == hw::PathKind::kCrossRegion);
  // Price: 2 x 8 x 5.12 (A100) + 30.131 (g6e node) + 8 x 12.29 (H100).
  REQUIRE(c.price_per_hour());
  CHECK(*c.price_per_hour() == hetrl::testing::approx(16 * 5.12 + 30.131 + 8 * 12.29));
  CHECK(hw::cluster_summary(c) == "32 GPUs in 4 nodes, 3 zones, 2 regions");
}

TEST_CASE("a cluster without prices for some GPU says so") {
  const hw::Cluster c = build({"a:8xL40", "a:8xL4"});
  CHECK_FALSE(c.price_per_hour().has_value());
  CHECK(hw::format_cluster_table(c).find("n/a") != std::string::npos);
}

TEST_CASE("the cluster table shows a link slower than 1 Gbps as it is, not rounded to units") {
  const hw::Cluster c = build({"a-1a:8xL4", "b-1a:8xL4"}, {"a-1a,b-1a:gbps=0.9,latency_ms=60"});
  const std::string table = hw::format_cluster_table(c);
  CHECK(table.find("     0.9      60.000  link") != std::string::npos);
}

TEST_CASE("validate finds what is wrong") {
  hw::Cluster c = build({"a:8xL4"});
  c.nodes.push_back(c.nodes[0]);
  CHECK_THROWS_WITH_AS(c.validate(), "node \"a-l4-0\" is defined twice", core::InputError);
  c.nodes.pop_back();
  c.nodes[0].gpu_count = 0;
  CHECK_THROWS_WITH_AS(c.validate(), "node \"a-l4-0\": GPU count must be at least 1, found 0",
                       core::InputError);
  c.nodes[0].gpu_count = 8;
  c.network.intra_zone.bandwidth = 0;
  CHECK_THROWS_AS(c.validate(), core::InputError);
}

TEST_CASE("a figure that is not finite is never written: the write fails naming where") {
  hw::Cluster c = build({"us-east-1a:8xL4", "us-east-1a:8xL4"}, {});
  c.nodes[1].nic_bandwidth = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(io::cluster_to_json(c), "internal error: the output would hold a non-finite number at /nodes/1/nic_gbps",
                       core::JobError);
  c.nodes[1].nic_bandwidth = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(io::cluster_to_json(c), core::JobError);
  c.nodes[1].nic_bandwidth = 100e9;
  CHECK_NOTHROW(io::cluster_to_json(c));
}

TEST_CASE("a cluster file reads back what was written, byte for byte") {
  const hw::Cluster c = build({"us-east-1a:2xp4de.24xlarge", "eu-west-1a:3x4xL40S:link=pcie5"},
                              {"us-east-1a,eu-west-1a:gbps=5,latency_ms=40"});
  const std::string json = io::cluster_to_json(c);
  const hw::Cluster back = io::parse_cluster(json, "c.json", catalog());
  CHECK(io::cluster_to_json(back) == json);
  REQUIRE(back.nodes.size() == 5);
  CHECK(back.nodes[2].intra_node.name == "pcie5");
  CHECK(back.nodes[2].intra_node.bandwidth == hetrl::testing::approx(64e9));
  CHECK(back.network.links[0].link.latency == hetrl::testing::approx(0.040));
  CHECK(json.find("\"latency_ms\": 0.015") != std::string::npos);  // no 0.015000000000000001
}

TEST_CASE("the test cluster file parses with its overrides applied") {
  const hw::Cluster c = io::read_cluster(std::string(HETRL_TEST_DATA) + "/valid.json", catalog());
  const hw::GpuSpec& l40s = c.gpu_types[c.find_gpu_type("L40S")];
  CHECK(l40s.price_per_hour == hetrl::testing::approx(2.5));
  CHECK(l40s.efficiency.gemm_large == hetrl::testing::approx(0.6));
  // Untouched fields keep the catalogue's values.
  CHECK(l40s.efficiency.memory == catalog().gpu("L40S", "").efficiency.memory);
  CHECK(l40s.memory_bandwidth == catalog().gpu("L40S", "").memory_bandwidth);
  // 8 x 8 A100 at 5.12, 4 L40S at 2.5, and an H100 node priced 60 per hour.
  CHECK(*c.price_per_hour() == hetrl::testing::approx(16 * 5.12 + 4 * 2.5 + 60));
}

TEST_CASE("a new GPU type can be defined in the cluster file") {
  const std::string text = R"({"schema": "hetrl.cluster/v1", "name": "x",
    "regions": [{"name": "r", "zones": ["z"]}],
    "network": {"intra_zone": {"bandwidth_gbps": 400, "latency_ms": 0.01}},
    "nodes": [{"name": "n", "zone": "z", "gpu": "MI300X", "gpus": 8, "nic_gbps": 400}],
    "gpu_types": {"MI300X": {"memory_gib": 192, "memory_bandwidth_gb_per_s": 5300,
                             "bf16_dense_tflops": 1307, "fp16_dense_tflops": 1307,
                             "fp32_tflops": 163, "intra_node_link": "nvlink4",
                             "source": "AMD Instinct MI300X datasheet"}}})";
  const hw::Cluster c = io::parse_cluster(text, "x.json", catalog());
  const hw::GpuSpec& mi = c.gpu_types[c.nodes[0].gpu_type];
  CHECK(mi.memory == 192 * core::kGiB);
  CHECK(mi.efficiency.gemm_large == catalog().default_efficiency.gemm_large);
  CHECK(mi.source == "AMD Instinct MI300X datasheet");
}

TEST_CASE("a GPU type whose memory is its host's is read, written back and checked") {
  const auto cluster_with = [](const std::string& value) {
    return R"({"schema": "hetrl.cluster/v1", "name": "x",
    "regions": [{"name": "r", "zones": ["z"]}],
    "network": {"intra_zone": {"bandwidth_gbps": 400, "latency_ms": 0.01}},
    "nodes": [{"name": "n", "zone": "z", "gpu": "cpu-x", "gpus": 2, "nic_gbps": 100}],
    "gpu_types": {"cpu-x": {"memory_gib": 12, "memory_bandwidth_gb_per_s": 30, "bf16_dense_tflops": 0.1,
                            "fp16_dense_tflops": 0.1, "fp32_tflops": 0.1, "intra_node_link": "pcie4",
                            "memory_is_host": )" + value + "}}}";
  };
  const hw::Cluster c = io::parse_cluster(cluster_with("true"), "x.json", catalog());
  CHECK(c.gpu_types[c.nodes[0].gpu_type].memory_is_host);
  const hw::Cluster again = io::parse_cluster(io::cluster_to_json(c), "y.json", catalog());
  CHECK(again.gpu_types[again.nodes[0].gpu_type].memory_is_host);
  const hw::Cluster own = io::parse_cluster(cluster_with("false"), "x.json", catalog());
  CHECK_FALSE(own.gpu_types[own.nodes[0].gpu_type].memory_is_host);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with("1"), "x.json", catalog()),
                       doctest::Contains("/gpu_types/cpu-x/memory_is_host"), core::InputError);
}

TEST_CASE("a GPU type's GEMM curve in a cluster file is read, checked and written back") {
  const auto cluster_with = [](const std::string& curve) { return l4_cluster(R"({"gemm_curve": )" + curve + "}"); };
  const hw::Cluster c = io::parse_cluster(
      cluster_with(R"([{"tokens": 1, "efficiency": 0.02}, {"tokens": 4096, "efficiency": 0.5}])"), "x.json", catalog());
  const hw::GpuSpec& l4 = c.gpu_types[c.nodes[0].gpu_type];
  // A GEMM's time is linear in its tokens between points: 1 / 0.02 at 1 token, 4096 / 0.5 at
  // 4096, in rows at the peak rate.
  CHECK(l4.efficiency.gemm(64) == hetrl::testing::approx(64 / (50 + (8192 - 50) * 63.0 / 4095)));
  CHECK(l4.efficiency.gemm(1) == hetrl::testing::approx(0.02));
  const hw::Cluster again = io::parse_cluster(io::cluster_to_json(c), "y.json", catalog());
  CHECK(again.gpu_types[again.nodes[0].gpu_type].efficiency.gemm_curve == l4.efficiency.gemm_curve);
  // A point slower than a larger token count's (1 token in 50 row-times, 4 in 40) takes that
  // count's time: fewer rows never cost more; the file keeps what was measured.
  const hw::Cluster dip = io::parse_cluster(
      cluster_with(R"([{"tokens": 1, "efficiency": 0.02}, {"tokens": 4, "efficiency": 0.1},
                      {"tokens": 4096, "efficiency": 0.5}])"), "x.json", catalog());
  const hw::Efficiency& e = dip.gpu_types[dip.nodes[0].gpu_type].efficiency;
  CHECK(e.gemm(1) == hetrl::testing::approx(1.0 / 40));
  CHECK(e.gemm(2) == hetrl::testing::approx(2.0 / 40));
  CHECK(e.gemm(4) == hetrl::testing::approx(0.1));
  for (double tokens = 1; tokens < 4096; tokens *= 1.5) CHECK(tokens / e.gemm(tokens) <= 1.5 * tokens / e.gemm(1.5 * tokens));
  CHECK(io::cluster_to_json(dip).find(R"("efficiency": 0.02)") != std::string::npos);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"tokens": 64, "efficiency": 0.2},
      {"tokens": 16, "efficiency": 0.1}])"), "x.json", catalog()),
      "x.json: /gpu_types/L4/efficiency/gemm_curve/1/tokens: expected tokens in ascending order", core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"tokens": 64, "efficiency": 1.5}])"), "x.json", catalog()),
                       doctest::Contains("gemm_curve/0/efficiency"), core::InputError);
}

TEST_CASE("a GPU type's weight-gradient GEMM curve in a cluster file is read, checked and written back") {
  const auto cluster_with = [](const std::string& curve) {
    return l4_cluster(R"({"weight_gradient_curve": )" + curve + "}");
  };
  const hw::Cluster c = io::parse_cluster(
      cluster_with(R"([{"tokens": 1, "efficiency": 0.01}, {"tokens": 8, "efficiency": 0.1},
                      {"tokens": 64, "efficiency": 0.6}])"),
      "x.json", catalog());
  const hw::GemmCurve& curve = c.gpu_types[c.nodes[0].gpu_type].efficiency.weight_gradient_curve;
  REQUIRE(curve.size() == 3);
  CHECK(curve[0].second == hetrl::testing::approx(1.0 / 80));  // through the envelope, as the forward's
  const hw::Cluster again = io::parse_cluster(io::cluster_to_json(c), "y.json", catalog());
  CHECK(again.gpu_types[again.nodes[0].gpu_type].efficiency.weight_gradient_curve == curve);
  CHECK(io::cluster_to_json(c).find(R"("efficiency": 0.01)") != std::string::npos);  // as measured
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"tokens": 64, "efficiency": 0.2},
      {"tokens": 16, "efficiency": 0.1}])"), "x.json", catalog()),
      "x.json: /gpu_types/L4/efficiency/weight_gradient_curve/1/tokens: expected tokens in ascending order",
      core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"tokens": 64, "efficiency": 0}])"), "x.json", catalog()),
                       doctest::Contains("weight_gradient_curve/0/efficiency"), core::InputError);
}

TEST_CASE("a GPU type's GEMM curves by width in a cluster file are read, checked and written back") {
  const auto cluster_with = [](const std::string& curves) { return l4_cluster(R"({"gemm_curves": )" + curves + "}"); };
  const hw::Cluster c = io::parse_cluster(cluster_with(R"([
      {"width": 1024, "gemm_curve": [{"tokens": 1, "efficiency": 0.04}, {"tokens": 64, "efficiency": 0.1}]},
      {"width": 4096, "gemm_curve": [{"tokens": 1, "efficiency": 0.01}, {"tokens": 8, "efficiency": 0.1},
                                     {"tokens": 64, "efficiency": 0.2}]}])"),
                                          "x.json", catalog());
  const hw::WidthCurves& curves = c.gpu_types[c.nodes[0].gpu_type].efficiency.gemm_curves;
  REQUIRE(curves.size() == 2);
  CHECK(curves[0].width == 1024);
  CHECK(curves[1].curve.size() == 3);
  // Through the envelope: 1 token at 4096 takes 100 row-times, 8 tokens 80: 1 token takes 80.
  CHECK(curves[1].curve[0].second == hetrl::testing::approx(1.0 / 80));
  // Four times as fast at a quarter of the width at 1 token, half as fast at 64.
  CHECK(hw::gemm_width_ratio(curves, 1, 1024, 4096) == hetrl::testing::approx(0.04 * 80));
  CHECK(hw::gemm_width_ratio(curves, 64, 1024, 4096) == hetrl::testing::approx(0.5));
  const hw::Cluster again = io::parse_cluster(io::cluster_to_json(c), "y.json", catalog());
  const hw::WidthCurves& read_back = again.gpu_types[again.nodes[0].gpu_type].efficiency.gemm_curves;
  REQUIRE(read_back.size() == 2);
  CHECK(read_back[1].curve == curves[1].curve);
  CHECK(io::cluster_to_json(c).find(R"("efficiency": 0.01)") != std::string::npos);  // as measured
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"width": 4096, "gemm_curve": [{"tokens": 1, "efficiency": 0.1}]},
      {"width": 1024, "gemm_curve": [{"tokens": 1, "efficiency": 0.1}]}])"), "x.json", catalog()),
      "x.json: /gpu_types/L4/efficiency/gemm_curves/1/width: expected widths in ascending order", core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"width": 1024, "gemm_curve": []}])"), "x.json", catalog()),
                       doctest::Contains("gemm_curves/0/gemm_curve"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"width": 1024}])"), "x.json", catalog()),
                       doctest::Contains("gemm_curves/0: missing required field \"gemm_curve\""), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"width": -2, "gemm_curve": [{"tokens": 1, "efficiency": 0.1}]}])"),
                                         "x.json", catalog()),
                       doctest::Contains("gemm_curves/0/width"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"width": 1024, "gemm_curve": [{"tokens": 1, "efficiency": 1.5}]}])"),
                                         "x.json", catalog()),
                       doctest::Contains("gemm_curves/0/gemm_curve/0/efficiency"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"([{"width": 1024, "gemm_curve": [{"tokens": 1, "efficiency": 0.1}],
      "bandwidth": 3}])"), "x.json", catalog()),
                       doctest::Contains("gemm_curves/0/bandwidth"), core::InputError);
}

TEST_CASE("the ratio of GEMM rates between widths: interpolated in the logarithms, none where one width reaches") {
  const hw::WidthCurves curves{{1024, {{1, 0.04}, {4096, 0.8}}}, {4096, {{1, 0.01}, {64, 0.2}}}, {8192, {{1, 0.005}, {64, 0.1}}}};
  CHECK(hw::gemm_width_ratio(curves, 1, 4096, 4096) == hetrl::testing::approx(1.0));
  CHECK(hw::gemm_width_ratio(curves, 1, 1024, 4096) == hetrl::testing::approx(4.0));
  // Half way between 1024 and 4096 in the logarithm: half way in the rate's, twice.
  CHECK(hw::gemm_width_ratio(curves, 1, 2048, 4096) == hetrl::testing::approx(2.0));
  CHECK(hw::gemm_width_ratio(curves, 1, 512, 4096) == hetrl::testing::approx(4.0));     // the narrowest's beyond it
  CHECK(hw::gemm_width_ratio(curves, 1, 16384, 4096) == hetrl::testing::approx(0.5));   // the widest's beyond it
  // Against the measured width closest to the reference: 8192 for 6000, 4096 for 3000.
  CHECK(hw::gemm_width_ratio(curves, 1, 1024, 6000) == hetrl::testing::approx(8.0));
  CHECK(hw::gemm_width_ratio(curves, 1, 1024, 3000) == hetrl::testing::approx(4.0));
  // 128 tokens: only 1024 reaches so far: nothing said about the width.
  CHECK(hw::gemm_width_ratio(curves, 128, 1024, 4096) == 1.0);
  CHECK(hw::gemm_width_ratio({}, 1, 1024, 4096) == 1.0);
}

TEST_CASE("a GPU type's fitted figures in a cluster file are read, checked and written back") {
  const auto cluster_with = l4_cluster;
  const hw::Cluster c = io::parse_cluster(cluster_with(R"({"training": 0.5, "attention": 0.3, "optimizer": 0.2,
      "gemm_width_half": 0, "gemm_reduction_share": 0.9, "decode_attention": 0.02, "decode_step_overhead_ms": 2.5, "decode_allreduce_ms": 0.4, "tp_wait": 0.07,
      "collectives": {"reduce_scatter": {"fp32": 0.25}, "all_gather": {"bf16": 0.6, "fp32": 0.55}}})"), "x.json", catalog());
  const hw::Efficiency& e = c.gpu_types[c.nodes[0].gpu_type].efficiency;
  CHECK(e.collective_share(hw::Collective::kReduceScatter, true) == hetrl::testing::approx(0.25));
  CHECK(e.collective_share(hw::Collective::kAllGather, false) == hetrl::testing::approx(0.6));
  CHECK(e.collective_share(hw::Collective::kAllGather, true) == hetrl::testing::approx(0.55));
  CHECK(e.collective_share(hw::Collective::kReduceScatter, false) == e.collective);
  CHECK(e.training == hetrl::testing::approx(0.5));
  CHECK(e.attention == hetrl::testing::approx(0.3));
  CHECK(e.optimizer == hetrl::testing::approx(0.2));
  REQUIRE(e.gemm_width_half);
  CHECK(*e.gemm_width_half == 0.0);
  REQUIRE(e.gemm_reduction_share);
  CHECK(*e.gemm_reduction_share == hetrl::testing::approx(0.9));
  REQUIRE(e.decode_attention);
  CHECK(*e.decode_attention == hetrl::testing::approx(0.02));
  REQUIRE(e.decode_step_overhead);
  CHECK(*e.decode_step_overhead == hetrl::testing::approx(2.5e-3));
  REQUIRE(e.decode_allreduce);
  CHECK(*e.decode_allreduce == hetrl::testing::approx(0.4e-3));
  REQUIRE(e.tp_wait);
  CHECK(*e.tp_wait == hetrl::testing::approx(0.07));
  const std::string json = io::cluster_to_json(c);
  CHECK(io::cluster_to_json(io::parse_cluster(json, "y.json", catalog())) == json);
  // Without them, the catalogue's (no optimizer figure of its own, the params' width half and overhead).
  const hw::Cluster plain = io::parse_cluster(cluster_with("{}"), "x.json", catalog());
  const hw::Efficiency& p = plain.gpu_types[plain.nodes[0].gpu_type].efficiency;
  CHECK(p.optimizer == 0.0);
  CHECK_FALSE(p.gemm_width_half);
  CHECK_FALSE(p.gemm_reduction_share);
  CHECK_FALSE(p.decode_attention);
  CHECK_FALSE(p.decode_step_overhead);
  CHECK_FALSE(p.decode_allreduce);
  CHECK_FALSE(p.tp_wait);
  CHECK(p.collective_share(hw::Collective::kReduceScatter, true) == p.collective);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"collectives": {"all_gather": {"bf16": 1.5}}})"), "x.json", catalog()),
                       doctest::Contains("/gpu_types/L4/efficiency/collectives/all_gather/bf16"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"collectives": {"broadcast": {"bf16": 0.5}}})"), "x.json", catalog()),
                       doctest::Contains("broadcast"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"collectives": {"all_gather": {"fp16": 0.5}}})"), "x.json", catalog()),
                       doctest::Contains("fp16"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"decode_allreduce_ms": -0.5})"), "x.json", catalog()),
                       doctest::Contains("/gpu_types/L4/efficiency/decode_allreduce_ms"), core::InputError);
  for (const char* share : {"0", "1.5"}) {
    CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(std::string(R"({"decode_attention": )") + share + "}"), "x.json", catalog()),
                         doctest::Contains("/gpu_types/L4/efficiency/decode_attention"), core::InputError);
  }
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"tp_wait": -0.1})"), "x.json", catalog()),
                       doctest::Contains("/gpu_types/L4/efficiency/tp_wait"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"tp_wait": 12})"), "x.json", catalog()),
                       doctest::Contains("tp_wait must be at least 0 and below 10"), core::InputError);
  // The optimizer step's and a copy's shares count reads and writes: up to twice a read stream.
  const hw::Cluster fast = io::parse_cluster(cluster_with(R"({"optimizer": 1.5, "copy": 1.25})"), "x.json", catalog());
  CHECK(fast.gpu_types[fast.nodes[0].gpu_type].efficiency.optimizer == hetrl::testing::approx(1.5));
  CHECK(fast.gpu_types[fast.nodes[0].gpu_type].efficiency.copy == hetrl::testing::approx(1.25));
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"optimizer": 2.5})"), "x.json", catalog()),
                       doctest::Contains("efficiency optimizer must be in (0, 2]"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"copy": 0})"), "x.json", catalog()),
                       doctest::Contains("/gpu_types/L4/efficiency/copy"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"decode_step_overhead_ms": -1})"), "x.json", catalog()),
                       doctest::Contains("/gpu_types/L4/efficiency/decode_step_overhead_ms"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(R"({"gemm_width_half": -3})"), "x.json", catalog()),
                       doctest::Contains("/gpu_types/L4/efficiency/gemm_width_half"), core::InputError);
  // The share of a GEMM's width its inputs set: 0 and 1 are shares, past them none.
  for (const char* share : {"0", "1"}) {
    const hw::Cluster edge = io::parse_cluster(
        cluster_with(std::string(R"({"gemm_reduction_share": )") + share + "}"), "x.json", catalog());
    CHECK(edge.gpu_types[edge.nodes[0].gpu_type].efficiency.gemm_reduction_share == std::stod(share));
  }
  for (const char* share : {"-0.1", "1.01", "\"most\""}) {
    CHECK_THROWS_WITH_AS(io::parse_cluster(cluster_with(std::string(R"({"gemm_reduction_share": )") + share + "}"),
                                           "x.json", catalog()),
                         doctest::Contains("/gpu_types/L4/efficiency/gemm_reduction_share"), core::InputError);
  }
}

TEST_CASE("a profile turns measured rates into efficiencies") {
  hw::GpuProfile profile;
  profile.gpu_type = "H100-SXM";
  profile.gemm_large_flops = 700e12;
  profile.memory_bandwidth = 2680e9;
  profile.intra_node_bandwidth = 360e9;
  profile.allreduce_bus_bandwidth = 270e9;
  const hw::GpuTypeOverride o = hw::override_from_profile(profile, catalog(), "p.json");
  CHECK(*o.gemm_large == hetrl::testing::approx(700.0 / 989.5));
  CHECK(*o.memory_efficiency == hetrl::testing::approx(2680.0 / 3350));
  CHECK(*o.intra_node_bandwidth == hetrl::testing::approx(360e9));
  CHECK(*o.collective == hetrl::testing::approx(270.0 / 360));  // of the measured link
  CHECK_FALSE(o.gemm_small.has_value());
  const hw::GpuSpec spec = hw::apply_override(catalog(), o);
  CHECK(spec.efficiency.gemm_small == catalog().gpu("H100-SXM", "").efficiency.gemm_small);
  CHECK(spec.intra_node.bandwidth == hetrl::testing::approx(360e9));
  profile.gemm_large_flops = 1200e12;  // above the 989.5 peak: not an H100
  CHECK_THROWS_AS(hw::override_from_profile(profile, catalog(), "p.json"), core::InputError);
}

TEST_CASE("node classes: nodes no planner can tell apart, a different price or NIC sets one apart") {
  const hw::Cluster cluster = build({"us-east-1a:2x8xA100-SXM-80G", "us-east-1a:8xA100-SXM-80G:price_per_hour_usd=30",
                                     "us-east-1a:8xA100-SXM-80G:nic_gbps=50", "us-east-1b:8xA100-SXM-80G",
                                     "us-east-1a:8xL40S"});
  const hw::NodeClasses classes = cluster.node_classes();
  REQUIRE(classes.members.size() == 5);
  CHECK(classes.members[0] == std::vector<int>{0, 1});  // the two alike, in node order
  CHECK(classes.members[1] == std::vector<int>{2});     // priced apart
  CHECK(classes.members[2] == std::vector<int>{3});     // a slower NIC
  CHECK(classes.members[3] == std::vector<int>{4});     // another zone
  CHECK(classes.members[4] == std::vector<int>{5});     // another GPU type
  CHECK(classes.of_node == std::vector<int>{0, 0, 1, 2, 3, 4});
}

TEST_CASE("the table of every zone pair's path agrees with the path of each pair: links, cross-zone, cross-region") {
  const hw::Cluster cluster =
      build({"us-east-1a:8xL4", "us-east-1b:8xL4", "us-east-1c:8xL4", "us-west-2a:8xL4", "eu-west-1a:8xL4"},
            {"us-east-1a,us-west-2a:gbps=7,latency_ms=31", "us-east-1c,us-east-1b:gbps=3,latency_ms=2"});
  const hw::ZonePaths paths(cluster);
  const std::size_t zones = cluster.zones.size();
  std::set<hw::PathKind> kinds;
  for (std::size_t a = 0; a < zones; ++a) {
    for (std::size_t b = 0; b < zones; ++b) {
      const hw::Path expected = cluster.zone_path(static_cast<int>(a), static_cast<int>(b));
      const hw::Path& got = paths(static_cast<int>(a), static_cast<int>(b));
      CHECK(got.kind == expected.kind);
      CHECK(got.link.bandwidth == expected.link.bandwidth);
      CHECK(got.link.latency == expected.link.latency);
      kinds.insert(got.kind);
    }
  }
  CHECK(kinds.size() == 4);  // every kind of path was compared
}

TEST_CASE("a cluster without some nodes, or with more: names past those taken, types kept, zones it has") {
  const hw::Cluster c = build({"us-east-1a:2x8xA100-SXM-80G:price_per_hour_usd=30", "us-east-1b:1x8xL40S"});
  const hw::Cluster less = c.without_nodes({"us-east-1a-a100-sxm-80g-0"});
  REQUIRE(less.nodes.size() == 2);
  CHECK(less.nodes[0].name == "us-east-1a-a100-sxm-80g-1");
  CHECK(less.total_gpus() == 16);
  CHECK(less.zones.size() == c.zones.size());
  CHECK_THROWS_WITH_AS(c.without_nodes({"us-east-1a-a100-sxm-80g-7"}),
                       doctest::Contains("has no node \"us-east-1a-a100-sxm-80g-7\" (did you mean"), core::InputError);
  CHECK_THROWS_WITH_AS(c.without_nodes({"us-east-1b-l40s-0", "us-east-1b-l40s-0"}), doctest::Contains("named twice"),
                       core::InputError);
  CHECK_THROWS_WITH_AS(c.without_nodes({"us-east-1a-a100-sxm-80g-0", "us-east-1a-a100-sxm-80g-1", "us-east-1b-l40s-0"}),
                       doctest::Contains("every node"), core::InputError);

  // A node of a type the cluster has, in the zone whose first name the lost node left free:
  // the names taken are skipped, the type's spec (here the catalogue's) is the cluster's own.
  const hw::Cluster more = hw::with_nodes(less, {hw::parse_node_spec("us-east-1a:2x8xA100-SXM-80G", catalog()),
                                                 hw::parse_node_spec("us-east-1b:1x4xL4", catalog())},
                                          catalog());
  REQUIRE(more.nodes.size() == 5);
  CHECK(more.nodes[2].name == "us-east-1a-a100-sxm-80g-0");
  CHECK(more.nodes[3].name == "us-east-1a-a100-sxm-80g-2");
  CHECK(more.nodes[4].name == "us-east-1b-l4-0");
  CHECK(more.nodes[2].gpu_type == less.nodes[0].gpu_type);
  CHECK(more.gpu_types.size() == less.gpu_types.size() + 1);
  CHECK(more.gpu_types[static_cast<std::size_t>(more.nodes[4].gpu_type)].name == "L4");
  CHECK(more.nodes[0].name == less.nodes[0].name);  // the nodes it had keep their place
  CHECK_THROWS_WITH_AS(hw::with_nodes(less, {hw::parse_node_spec("eu-west-1a:1x8xL4", catalog())}, catalog()),
                       doctest::Contains("has no zone \"eu-west-1a\""), core::InputError);
}
