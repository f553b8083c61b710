// Device profiles: measuring with a fake clock, fitting the figures the cost model uses, the
// v2 file, a device failing mid-run, and how a profile becomes a GPU type.

#include <doctest/doctest.h>

#include "approx.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "cost/shape.h"
#include "device/backend.h"
#include "device/comm.h"
#include "fixtures.h"
#include "hw/profile.h"
#include "io/profile_io.h"
#include "profile/measure.h"
#include "profile/report.h"

namespace hetrl {
namespace {

hw::TimeSpread spread(double seconds) { return hw::TimeSpread{seconds, seconds * 0.9, seconds * 1.2, 3}; }

// GEMMs taking `seconds` for `tokens` x width x width.
hw::GemmMeasurement gemm(const char* dtype, int tokens, int width, double tflops) {
  const double flops = 2.0 * tokens * width * width;
  return hw::GemmMeasurement{dtype, tokens, width, width, spread(flops / (tflops * 1e12))};
}

profile::ProfileParams tiny_params() {
  profile::ProfileParams p;
  p.passes = 2;
  p.repeats = 2;
  p.repeat_seconds = 1e-3;
  p.point_seconds = 1.0;
  p.widths = {32, 64};
  p.tokens = {1, 8};
  p.pass_attention = {{1, 16}, {2, 32}};
  p.largest_buffer = 4.0 * (1 << 20);
  return p;
}

// A backend that fails on its n-th operation, as a device that falls off the bus mid-run.
class FailingBackend final : public device::Backend {
 public:
  explicit FailingBackend(int fail_at) : cpu_(device::make_cpu_backend()), left_(fail_at) {}
  const device::DeviceInfo& info() const override { return cpu_->info(); }
  void* allocate(std::size_t bytes) override { return cpu_->allocate(bytes); }
  void release(void* p) noexcept override { cpu_->release(p); }
  void upload(void* d, const void* h, std::size_t n) override { tick(), cpu_->upload(d, h, n); }
  void download(void* h, const void* d, std::size_t n) override { tick(), cpu_->download(h, d, n); }
  void copy(void* t, const void* f, std::size_t n) override { tick(), cpu_->copy(t, f, n); }
  void synchronize() override { tick(); }
  void fill_zero(void* p, std::size_t n) override { tick(), cpu_->fill_zero(p, n); }
  void read_all(const void* p, std::size_t n, float* s) override { tick(), cpu_->read_all(p, n, s); }
  void gemm(const device::Gemm& g, const void* a, const void* b, void* c) override { tick(), cpu_->gemm(g, a, b, c); }
  void rmsnorm(device::DType, const void*, const void*, void*, int, int, float) override { tick(); }
  void rmsnorm_backward(device::DType, const void*, const void*, const void*, void*, float*, int, int, float) override {
    tick();
  }
  void rope(device::DType, void*, int, int, int, int, float, bool) override { tick(); }
  void swiglu(device::DType, const void*, const void*, void*, std::size_t) override { tick(); }
  void swiglu_backward(device::DType, const void*, const void*, const void*, void*, void*, std::size_t) override {
    tick();
  }
  void decode_attention(const device::DecodeAttention& a, const void* q, const void* k, const void* v, const int* l,
                        void* o) override {
    tick(), cpu_->decode_attention(a, q, k, v, l, o);
  }
  void attention(const device::Attention&, const void*, const void*, const void*, const int*, const int*, void*,
                 float*) override {
    tick();
  }
  void attention_backward(const device::Attention&, const void*, const void*, const void*, const int*, const void*,
                          const void*, const float*, float*, void*, void*, void*) override {
    tick();
  }
  void packed_attention(const device::PackedAttention&, const void*, const void*, const void*, const int*, void*,
                        float*) override {
    tick();
  }
  void packed_attention_backward(const device::PackedAttention&, const void*, const void*, const void*, const int*,
                                 const void*, const void*, const float*, float*, void*, void*, void*) override {
    tick();
  }
  void rope_at(device::DType, void*, const int*, int, int, int, float, bool) override { tick(); }
  void embed(device::DType, const void*, const int*, void*, int, int) override { tick(); }
  void embed_backward(device::DType, const void*, const int*, float*, int, int) override { tick(); }
  void scatter(device::DType, const void*, const int*, void*, int, int) override { tick(); }
  void fill_uniform(device::DType, void*, const device::Block&, float, float, unsigned long long) override { tick(); }
  void fill_value(device::DType, void*, std::size_t, float) override { tick(); }
  void copy_2d(void*, std::size_t, const void*, std::size_t, std::size_t, std::size_t) override { tick(); }
  void add(device::DType, void*, const void*, std::size_t) override { tick(); }
  void add_bias(device::DType, void*, const void*, int, int) override { tick(); }
  void bias_backward(device::DType, const void*, float*, int, int) override { tick(); }
  void sample(device::DType, const void*, int, int, float, unsigned long long, const int*, const int*, int*) override {
    tick();
  }
  void softmax(device::DType, void*, int, int) override { tick(); }
  void cross_entropy(device::DType, const void*, const int*, float*, void*, int, int, float, const float*) override {
    tick();
  }
  void adamw(device::DType, float*, float*, float*, const float*, void*, std::size_t, const device::AdamW&) override {
    tick();
  }
  double sum_squares(const float* x, std::size_t n) override { return tick(), cpu_->sum_squares(x, n); }
  void cast(device::DType f, const void* x, device::DType t, void* y, std::size_t n) override {
    tick(), cpu_->cast(f, x, t, y, n);
  }

 private:
  void tick() {
    if (--left_ == 0) throw device::DeviceError("cuda: an illegal memory access was encountered");
  }
  std::unique_ptr<device::Backend> cpu_;
  int left_;
};

// Rank 0 of two processes whose peer answers at once: records the large messages it sends.
class RecordingCommunicator final : public device::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string transport() const override { return "mpi"; }
  void all_reduce(device::DType t, const void* data, void*, std::size_t count) override {
    reduced.push_back({t, static_cast<const std::byte*>(data), count});
  }
  void all_gather(device::DType, const void*, void*, std::size_t) override {}
  void reduce_scatter(device::DType, const void*, void*, std::size_t) override {}
  void broadcast(device::DType, void*, std::size_t, int) override {}
  void send(device::DType t, const void* data, std::size_t count, int) override {
    if (count > 1) sent.push_back({static_cast<const std::byte*>(data), count * device::dtype_bytes(t)});
  }
  void recv(device::DType, void*, std::size_t, int) override {}
  void exchange(device::DType, const void*, std::size_t, void*, std::size_t, int) override {}
  void barrier() override {}
  double max(double x) override { return x; }
  void broadcast_host(void*, std::size_t, int) override {}
  void post(device::HostBytes, int, int) override {}
  void take(void*, std::size_t, int, int) override {}
  void finish_posted() override {}
  [[noreturn]] void abort(int code) override { throw std::runtime_error("abort " + std::to_string(code)); }
  std::unique_ptr<device::Communicator> split(int, int) override { throw std::logic_error("not split here"); }

  std::vector<std::pair<const std::byte*, std::size_t>> sent;  // large messages: where from, bytes
  struct Reduced {
    device::DType type;
    const std::byte* data;
    std::size_t count;
  };
  std::vector<Reduced> reduced;  // every all-reduce
};

TEST_CASE("profile: measuring with a fake clock covers every section and fits every figure") {
  const auto backend = device::make_cpu_backend();
  const core::FakeClock clock(2e-3);  // each repeat "lasts" 2 ms: one call a repeat
  std::vector<std::string> steps;
  const auto alone = device::make_single_communicator(*backend);
  const hw::GpuProfile p = profile::measure(*backend, *alone, clock, tiny_params(),
                                            [&](const std::string& step, double) { steps.push_back(step); });
  // launch, memory, optimizer, two widths, the two shapes between them, the weight gradient,
  // fp32, decode and pass attention, transfers; two passes
  REQUIRE(steps.size() == 22);
  CHECK(steps[2] == "optimizer step, pass 1 of 2");
  CHECK(steps[5] == "GEMM bf16 shapes 32 x 64, pass 1 of 2");
  CHECK(steps[6] == "GEMM weight gradient width 64, pass 1 of 2");
  CHECK(steps[11] == "launch overhead, pass 2 of 2");
  REQUIRE(p.device);
  CHECK(p.device->backend == "cpu");
  CHECK(p.launch);
  // 2 widths x 2 token counts in bf16, the 2 shapes between them at both, the weight gradient's 2
  // at width 64 (the one nearest the reference width), one fp32 point.
  CHECK(p.gemms.size() == 11);
  for (const auto& [n, k] : {std::pair{64, 32}, std::pair{32, 64}}) {
    CHECK(std::count_if(p.gemms.begin(), p.gemms.end(), [&](const hw::GemmMeasurement& g) {
            return !g.weight_gradient && g.dtype == "bf16" && g.n == n && g.k == k;
          }) == 2);
  }
  // Every call "lasts" as long: each GEMM's rate its FLOPs', the two shapes alike, so that the
  // width's two dimensions count alike.
  REQUIRE(p.gemm_reduction_share);
  CHECK(*p.gemm_reduction_share == hetrl::testing::approx(0.5));
  CHECK(std::count_if(p.gemms.begin(), p.gemms.end(), [](const hw::GemmMeasurement& g) {
          return g.weight_gradient && g.dtype == "bf16" && g.n == 64 && g.k == 64;
        }) == 2);
  REQUIRE(p.weight_gradient_curve.size() == 2);
  CHECK(p.weight_gradient_curve.back().first == 8);
  for (const hw::GemmMeasurement& g : p.gemms) CHECK(g.seconds.repeats == 4);  // 2 repeats in each of 2 passes
  // The fp32 point at the listed width nearest 1024, not the narrowest.
  CHECK(std::count_if(p.gemms.begin(), p.gemms.end(), [](const hw::GemmMeasurement& g) {
          return g.dtype == "fp32" && g.n == 64 && g.k == 64;
        }) == 1);
  CHECK(p.bandwidths.size() >= 5);  // read, write, copy at 1 MiB and 4 MiB; transfers
  CHECK(!p.attention.empty());
  // 64 Ki and 256 Ki parameters fit the 4 MiB budget (18 bytes each held, bf16); 30 moved.
  REQUIRE(p.optimizer_steps.size() == 2);
  CHECK(p.optimizer_steps.back().parameters == 256.0 * 1024);
  CHECK(p.optimizer_steps.back().bytes == 30.0 * 256 * 1024);
  CHECK(p.optimizer_bandwidth.value_or(0) > 0);
  REQUIRE(p.gemm_curve.size() == 2);
  CHECK(p.gemm_curve.front().first == 1);
  CHECK(p.gemm_large_flops.value_or(0) > 0);
  CHECK(p.gemm_small_flops.value_or(0) > 0);
  CHECK(p.fp32_flops.value_or(0) > 0);
  CHECK(p.memory_bandwidth.value_or(0) > 0);
  CHECK(p.host_to_device_bandwidth.value_or(0) > 0);
  CHECK(p.decode_attention_bandwidth.value_or(0) > 0);
  // Decode attention at both group sizes, at the same points; every call as long, so the
  // compute rate is the wide group's largest point's FLOPs over 2 ms.
  const auto at_group = [&](int group) {
    std::vector<std::pair<int, int>> points;
    for (const hw::AttentionMeasurement& a : p.attention) {
      if (a.group() == group) points.emplace_back(a.batch, a.length);
    }
    return points;
  };
  CHECK(at_group(4).size() >= 2);
  CHECK(at_group(16) == at_group(4));
  CHECK(at_group(4).size() * 2 == p.attention.size());
  double most_flops = 0;
  for (const hw::AttentionMeasurement& a : p.attention) most_flops = std::max(most_flops, a.flops());
  REQUIRE(p.decode_attention_flops);
  CHECK(*p.decode_attention_flops == hetrl::testing::approx(most_flops / 2e-3));
  // A pass's attention: the first two points whatever they cost; the rate at the most tokens,
  // forward and backward each 2 ms, in the cost model's FLOPs of both.
  REQUIRE(p.pass_attention.size() >= 2);
  const hw::PassAttentionMeasurement& last = p.pass_attention.back();
  CHECK(last.forward.repeats == 4);
  CHECK(last.backward.repeats == 4);
  CHECK(*p.attention_flops == hetrl::testing::approx(3.5 * last.flops() / 4e-3));
  // The FLOPs the cost model counts for the same attention: each token at half the length.
  cost::ModelShape shape;
  shape.q_dim = last.heads * last.head_dim;
  CHECK(last.flops() ==
        hetrl::testing::approx(last.sequences * last.length * shape.attention_flops(1, last.length / 2.0)));
}

// A clock on a shared machine: each repeat lasts `step`, or ten times as long while another
// tenant's burst of load is on.
class LoadedClock final : public core::Clock {
 public:
  explicit LoadedClock(double step) : step_(step) {}
  double seconds() const override { return now_ += burst ? 10 * step_ : step_; }
  bool burst = false;

 private:
  double step_;
  mutable double now_ = 0;
};

TEST_CASE("profile: a burst of load during one pass leaves every point's median as it was") {
  const auto backend = device::make_cpu_backend();
  const auto alone = device::make_single_communicator(*backend);
  LoadedClock clock(2e-3);
  profile::ProfileParams params = tiny_params();
  params.passes = 3;
  params.repeats = 1;
  // The burst covers the second pass: each point's second repeat, whose time the median of
  // three leaves out. Repeats back to back would put all of a point's repeats in the burst.
  const hw::GpuProfile p = profile::measure(*backend, *alone, clock, params, [&](const std::string& step, double) {
    clock.burst = step.find("pass 2 of 3") != std::string::npos;
  });
  std::vector<hw::TimeSpread> spreads;
  for (const hw::GemmMeasurement& g : p.gemms) spreads.push_back(g.seconds);
  for (const hw::BandwidthMeasurement& b : p.bandwidths) spreads.push_back(b.seconds);
  for (const hw::AttentionMeasurement& a : p.attention) spreads.push_back(a.seconds);
  REQUIRE(p.launch);
  spreads.push_back(*p.launch);
  REQUIRE(spreads.size() > 10);
  for (const hw::TimeSpread& s : spreads) {
    CHECK(s.repeats == 3);
    CHECK(s.median == hetrl::testing::approx(2e-3));  // one call a repeat: calls a repeat come from the first pass
    CHECK(s.max == hetrl::testing::approx(2e-2));     // the burst is seen, and kept out of the median
  }
}

TEST_CASE("profile: a GEMM curve gets a point at each row count where the device's GEMM changes algorithm") {
  device::DeviceInfo info;
  info.gemm_row_limits = {14, 100};
  // Inside the listed range only (past the most tokens there is no curve to break), once.
  CHECK(profile::gemm_tokens({1, 8, 16, 64}, info) == std::vector<int>{1, 8, 14, 16, 64});
  CHECK(profile::gemm_tokens({1, 14, 16}, info) == std::vector<int>{1, 14, 16});
  CHECK(profile::gemm_tokens({1, 8}, info) == std::vector<int>{1, 8});
  CHECK(profile::gemm_tokens({}, info).empty());

  // The CPU's few-row loop ends at a row count the listed tokens lack: the forward's curves and
  // the weight gradient's are measured there.
  const auto backend = device::make_cpu_backend();
  const std::vector<int>& limits = backend->info().gemm_row_limits;
  REQUIRE(!limits.empty());
  const int limit = limits.front();
  const core::FakeClock clock(2e-3);
  const auto alone = device::make_single_communicator(*backend);
  profile::ProfileParams params = tiny_params();
  params.tokens = {1, 2 * limit};
  params.passes = 1;
  const hw::GpuProfile p = profile::measure(*backend, *alone, clock, params);
  std::map<bool, std::set<int>> widths_at_limit;  // weight gradient? -> widths measured at the limit
  for (const hw::GemmMeasurement& g : p.gemms) {
    if (g.tokens == limit) widths_at_limit[g.weight_gradient].insert(g.n);
  }
  CHECK(widths_at_limit[false] == std::set<int>{32, 64});
  CHECK(widths_at_limit[true] == std::set<int>{64});
  std::vector<double> curve;
  for (const auto& [tokens, rate] : p.gemm_curve) curve.push_back(tokens);
  CHECK(curve == std::vector<double>{1.0, static_cast<double>(limit), 2.0 * limit});
}

TEST_CASE("profile: a device that fails mid-run ends the measurement with its error") {
  FailingBackend backend(40);
  const core::FakeClock clock(2e-3);  // each repeat "lasts" 2 ms: one call a repeat
  const auto alone = device::make_single_communicator(backend);
  CHECK_THROWS_WITH_AS(profile::measure(backend, *alone, clock, tiny_params()),
                       "cuda: an illegal memory access was encountered", device::DeviceError);
}

TEST_CASE("profile: fitting takes the reference width per token count, 256 tokens between points, the best large GEMM") {
  hw::GpuProfile p;
  p.gemms = {gemm("bf16", 64, 1024, 10), gemm("bf16", 64, 4096, 20), gemm("bf16", 1024, 4096, 80),
             gemm("bf16", 2048, 1024, 90), gemm("bf16", 2048, 4096, 100), gemm("fp32", 2048, 1024, 30),
             gemm("bf16", 2048, 8192, 110)};
  p.bandwidths = {{"read", 1 << 20, spread(1e-3)}, {"read", 1 << 30, spread(0.5)}, {"copy", 1 << 30, spread(0.1)},
                  {"host_to_device", 1 << 20, spread(1e-4)}, {"host_to_device", 1 << 16, spread(1e-6)}};
  p.attention = {{"bf16", 8, 1024, 32, 8, 128, 1e9, spread(1e-3)}, {"bf16", 8, 4096, 32, 8, 128, 4e9, spread(2e-3)}};
  p.launch = spread(5e-6);
  profile::fit(p);
  REQUIRE(p.gemm_curve.size() == 3);
  CHECK(p.gemm_curve[0].second == hetrl::testing::approx(20e12));   // width 4096 over 1024
  CHECK(p.gemm_curve[2].second == hetrl::testing::approx(100e12));  // width 4096 over 1024 and 8192
  // 256 tokens read off the curve as the cost model reads it, the time linear in the tokens
  // from 64 at 20 TFLOP/s to 1024 at 80: 256 / (64 / 20 + (1024 / 80 - 64 / 20) * 192 / 960).
  CHECK(*p.gemm_small_flops == hetrl::testing::approx(50e12));
  CHECK(*p.gemm_large_flops == hetrl::testing::approx(110e12));  // the best at 2048 tokens or more, any width
  CHECK(*p.fp32_flops == hetrl::testing::approx(30e12));
  CHECK(*p.memory_bandwidth == hetrl::testing::approx((1 << 30) / 0.5));  // the largest read
  CHECK(*p.host_to_device_bandwidth == hetrl::testing::approx((1 << 20) / 1e-4));  // the largest, not the fastest
  CHECK(*p.decode_attention_bandwidth == hetrl::testing::approx(2e12));
  CHECK_FALSE(p.decode_attention_flops);  // one group size: compute and the cache's read not told apart
  CHECK(*p.launch_overhead == hetrl::testing::approx(5e-6));
}

TEST_CASE("profile: decode attention at two group sizes, the compute side of its roofline") {
  // 8 sequences of 4096 cached positions, 8 KV heads of 128, the cache read given as 1 GB.
  const auto at = [](int heads, double seconds) {
    return hw::AttentionMeasurement{"bf16", 8, 4096, heads, 8, 128, 1e9, spread(seconds)};
  };
  const double flops4 = 4.0 * 8 * 4096 * 32 * 128;  // 4 query heads a KV head
  // Bound by the cache's read: the wider group's four times the FLOPs in the same time.
  hw::GpuProfile read;
  read.attention = {at(32, 1e-3), at(128, 1e-3)};
  profile::fit(read);
  REQUIRE(read.decode_attention_flops);
  CHECK(*read.decode_attention_flops == hetrl::testing::approx(4 * flops4 / 1e-3));
  CHECK(*read.decode_attention_bandwidth == hetrl::testing::approx(1e12));
  // Bound by compute: four times as long; the rate is either group's, the read the narrower's.
  hw::GpuProfile compute;
  compute.attention = {at(32, 1e-2), at(128, 4e-2)};
  profile::fit(compute);
  REQUIRE(compute.decode_attention_flops);
  CHECK(*compute.decode_attention_flops == hetrl::testing::approx(flops4 / 1e-2));
  CHECK(*compute.decode_attention_bandwidth == hetrl::testing::approx(1e11));
  // The FLOPs the cost model counts for the same step.
  cost::ModelShape shape;
  shape.q_dim = 32 * 128;
  CHECK(at(32, 1).flops() == hetrl::testing::approx(8 * shape.attention_flops(1, 4096)));
}

TEST_CASE("profile: the GEMM width half from two widths: none where the wider is no faster, solved where it is") {
  const auto half = [](double narrow, double wide) {
    hw::GpuProfile p;
    // The most tokens measured at both widths decide; fewer tokens and fp32 do not.
    p.gemms = {gemm("bf16", 16, 1024, 1), gemm("bf16", 16, 4096, 50), gemm("bf16", 64, 1024, narrow),
               gemm("bf16", 64, 4096, wide), gemm("fp32", 2048, 1024, 30), gemm("bf16", 1024, 1024, 90)};
    profile::fit(p);
    REQUIRE(p.gemm_width_half);
    return *p.gemm_width_half;
  };
  // Twice as fast at four times the width: w / (w + d) doubles from 1024 to 4096 at d = 2048.
  CHECK(half(10, 20) == hetrl::testing::approx(2048));
  CHECK(half(10, 9) == 0.0);
  CHECK(half(10, 10) == 0.0);
  CHECK(half(10, 41) == hetrl::testing::approx(16.0 * 4096));  // as much faster as wider: the cap
  // One width only: nothing to fit.
  hw::GpuProfile one;
  one.gemms = {gemm("bf16", 64, 1024, 10), gemm("bf16", 2048, 1024, 90)};
  profile::fit(one);
  CHECK_FALSE(one.gemm_width_half);
}

TEST_CASE("profile: the GEMM reduction share from one weight's two shapes between two widths") {
  // At each token count: the squares of 512 and 4096 at ra and rb TFLOP/s, the weight of 512
  // outputs of 4096 inputs (the wide reduction) at kw, of 4096 outputs of 512 inputs at nw.
  struct Point {
    int tokens;
    double ra, rb, kw, nw;
  };
  const auto share = [](const std::vector<Point>& points, bool with_fp32 = false) {
    hw::GpuProfile p;
    const auto shape = [](const char* dtype, int tokens, int n, int k, double tflops) {
      return hw::GemmMeasurement{dtype, tokens, n, k, spread(2.0 * tokens * n * k / (tflops * 1e12))};
    };
    for (const Point& x : points) {
      p.gemms.push_back(gemm("bf16", x.tokens, 512, x.ra));
      p.gemms.push_back(gemm("bf16", x.tokens, 4096, x.rb));
      if (x.kw > 0) p.gemms.push_back(shape("bf16", x.tokens, 512, 4096, x.kw));
      if (x.nw > 0) p.gemms.push_back(shape("bf16", x.tokens, 4096, 512, x.nw));
      // fp32 beside half precision is the fp32 peak's alone, not a shape's.
      if (with_fp32) p.gemms.push_back(shape("fp32", x.tokens, 4096, 512, 1000));
    }
    profile::fit(p);
    return p.gemm_reduction_share;
  };
  // 1.75 times as fast at the wide width; the wide reduction 4/3 as fast as the wide output:
  // the shapes' widths (2s - 1) log 8 apart on the squares' line.
  const std::optional<double> between = share({{8, 40, 70, 60, 45}});
  REQUIRE(between);
  CHECK(*between == hetrl::testing::approx(0.5 + std::log(60.0 / 45) / (2 * std::log(70.0 / 40))));
  CHECK(*share({{8, 40, 70, 60, 45}}, true) == hetrl::testing::approx(*between));
  // Each shape as fast as the square of its inputs: 1; of its outputs: 0; wider slower alike.
  CHECK(*share({{1, 8, 16, 16, 8}}) == hetrl::testing::approx(1.0));
  CHECK(*share({{1, 8, 16, 8, 16}}) == hetrl::testing::approx(0.0));
  CHECK(*share({{64, 80, 60, 60, 80}}) == hetrl::testing::approx(1.0));
  // Past the squares' ends, held within [0, 1].
  CHECK(*share({{4, 10, 20, 80, 10}}) == 1.0);
  CHECK(*share({{4, 10, 20, 10, 80}}) == 0.0);
  // The median over the token counts.
  CHECK(*share({{1, 8, 16, 8, 16}, {8, 40, 70, 60, 45}, {64, 80, 60, 60, 80}}) == hetrl::testing::approx(*between));
  // Nothing to fit: the squares within 10% of each other (the width hardly moves the rate), a
  // shape missing, no shapes.
  CHECK_FALSE(share({{1024, 100, 105, 50, 200}}));
  CHECK_FALSE(share({{8, 40, 70, 60, 0}}));
  CHECK_FALSE(share({{8, 40, 70, 0, 0}}));
  // Beside an uninformative point, the informative one.
  CHECK(*share({{8, 40, 70, 60, 45}, {1024, 100, 105, 50, 200}}) == hetrl::testing::approx(*between));
}

TEST_CASE("profile: the GEMM reduction share read, written, adopted, shown") {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 16.0 * (1 << 30), 4, "Linux 6", "OpenBLAS 0.3"};
  p.gemms = {gemm("bf16", 8, 512, 40), gemm("bf16", 8, 4096, 70), gemm("bf16", 2048, 4096, 90),
             hw::GemmMeasurement{"bf16", 8, 512, 4096, spread(2.0 * 8 * 512 * 4096 / 70e12)},
             hw::GemmMeasurement{"bf16", 8, 4096, 512, spread(2.0 * 8 * 512 * 4096 / 40e12)}};
  p.memory_bandwidth = 3e10;
  profile::fit(p);
  REQUIRE(p.gemm_reduction_share);
  CHECK(*p.gemm_reduction_share == hetrl::testing::approx(1.0));
  // The shapes are no width's: the curves' points are the squares'.
  REQUIRE(p.gemm_curves.size() == 2);
  CHECK(p.gemm_curves[0].curve.size() == 1);
  CHECK(p.gemm_curve.front().second == hetrl::testing::approx(70e12));
  const std::string json = io::profile_to_json(p);
  CHECK(json.find("\"gemm_reduction_share\": 1") != std::string::npos);
  const hw::GpuProfile q = io::parse_profile(json, "p.json");
  REQUIRE(q.gemm_reduction_share);
  CHECK(*q.gemm_reduction_share == 1.0);
  CHECK(io::profile_to_json(q) == json);
  const hw::GpuSpec spec =
      hw::apply_override(testing::catalogs().hardware, hw::override_from_profile(q, testing::catalogs().hardware, "p.json"));
  REQUIRE(spec.efficiency.gemm_reduction_share);
  CHECK(*spec.efficiency.gemm_reduction_share == 1.0);
  CHECK(hw::datasheet_profile(spec).gemm_reduction_share == spec.efficiency.gemm_reduction_share);
  // Shown with the shapes it was fitted on.
  const std::string shown = profile::format_profile_table(q);
  CHECK(shown.find("GEMM reduction share") != std::string::npos);
  CHECK(shown.find("512 x 4096") != std::string::npos);
  CHECK(shown.find("4096 x 512") != std::string::npos);
  // Out of [0, 1] in a profile file: the field's JSON pointer.
  std::string bad = json;
  bad.replace(bad.find("\"gemm_reduction_share\": 1"), 26, "\"gemm_reduction_share\": 1.5");
  CHECK_THROWS_WITH_AS(io::parse_profile(bad, "p.json"), doctest::Contains("gemm_reduction_share"), core::InputError);
}

TEST_CASE("profile: each width's GEMMs make a curve of their own where two widths were measured, read, written, adopted") {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 16.0 * (1 << 30), 4, "Linux 6", "OpenBLAS 0.3"};
  // The narrow GEMMs faster at a few rows (a CPU's caches), as fast at many; 1024 rows only at
  // the narrow width; fp32 and a GEMM not square are no width's.
  p.gemms = {gemm("bf16", 1, 1024, 2), gemm("bf16", 1, 4096, 1), gemm("bf16", 64, 1024, 30), gemm("bf16", 64, 4096, 20),
             gemm("bf16", 1024, 1024, 40), gemm("fp32", 2048, 1024, 35)};
  hw::GemmMeasurement oblong = gemm("bf16", 64, 1024, 90);
  oblong.k = 4096;
  p.gemms.push_back(oblong);
  p.memory_bandwidth = 3e10;
  profile::fit(p);
  REQUIRE(p.gemm_curves.size() == 2);
  CHECK(p.gemm_curves[0].width == 1024);
  REQUIRE(p.gemm_curves[0].curve.size() == 3);
  CHECK(p.gemm_curves[0].curve[0].second == hetrl::testing::approx(2e12));
  CHECK(p.gemm_curves[0].curve[2].first == 1024);
  REQUIRE(p.gemm_curves[1].curve.size() == 2);
  CHECK(p.gemm_curves[1].curve[1].second == hetrl::testing::approx(20e12));
  // Written and read back as they were.
  const std::string json = io::profile_to_json(p);
  const hw::GpuProfile q = io::parse_profile(json, "p.json");
  CHECK(io::profile_to_json(q) == json);
  REQUIRE(q.gemm_curves.size() == 2);
  CHECK(q.gemm_curves[1].curve == p.gemm_curves[1].curve);
  // Adopted as fractions of the large-GEMM rate (40 TFLOP/s): the cost model's width ratio.
  const hw::GpuSpec spec =
      hw::apply_override(testing::catalogs().hardware, hw::override_from_profile(q, testing::catalogs().hardware, "p.json"));
  REQUIRE(spec.efficiency.gemm_curves.size() == 2);
  CHECK(spec.efficiency.gemm_curves[0].curve[0].second == hetrl::testing::approx(2.0 / 40));
  CHECK(hw::gemm_width_ratio(spec.efficiency.gemm_curves, 1, 1024, 4096) == hetrl::testing::approx(2.0));
  CHECK(hw::gemm_width_ratio(spec.efficiency.gemm_curves, 64, 1024, 4096) == hetrl::testing::approx(1.5));
  // And written again with the type's figures (hetrl-exec --fit-profile's profile).
  const hw::GpuProfile again = hw::datasheet_profile(spec);
  REQUIRE(again.gemm_curves.size() == 2);
  CHECK(again.gemm_curves[0].curve[0].second == hetrl::testing::approx(2e12));
  // One width only: no curves of its own (the reference curve says it all).
  hw::GpuProfile one;
  one.gemms = {gemm("bf16", 1, 1024, 2), gemm("bf16", 64, 1024, 30)};
  profile::fit(one);
  CHECK(one.gemm_curves.empty());
  CHECK(io::profile_to_json(one).find("gemm_curves") == std::string::npos);
}

TEST_CASE("profile: the weight-gradient GEMMs make a curve of their own, kept, adopted, and leave the forward's") {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 16.0 * (1 << 30), 4, "Linux 6", "OpenBLAS 0.3"};
  const auto gradient = [](int tokens, double tflops) {
    hw::GemmMeasurement g = gemm("bf16", tokens, 4096, tflops);
    g.weight_gradient = true;
    return g;
  };
  // The forward at 16 and 2048 tokens; the weight gradient faster at 16, as fast at 2048, and
  // a slower repeat of 16 that the best leaves out.
  p.gemms = {gemm("bf16", 16, 4096, 10), gemm("bf16", 2048, 4096, 40), gradient(16, 30), gradient(16, 25),
             gradient(2048, 40)};
  p.memory_bandwidth = 3e10;
  profile::fit(p);
  // The forward's figures as without the gradients (they would set 256 tokens' rate and the
  // curve's first point).
  REQUIRE(p.gemm_curve.size() == 2);
  CHECK(p.gemm_curve[0].second == hetrl::testing::approx(10e12));
  CHECK(*p.gemm_large_flops == hetrl::testing::approx(40e12));
  REQUIRE(p.weight_gradient_curve.size() == 2);
  CHECK(p.weight_gradient_curve[0].second == hetrl::testing::approx(30e12));
  CHECK(p.weight_gradient_curve[1].second == hetrl::testing::approx(40e12));
  // Written and read back as they were, the raw rows with their operation.
  const std::string json = io::profile_to_json(p);
  CHECK(json.find("\"op\": \"weight_gradient\"") != std::string::npos);
  const hw::GpuProfile q = io::parse_profile(json, "p.json");
  CHECK(io::profile_to_json(q) == json);
  CHECK(std::count_if(q.gemms.begin(), q.gemms.end(),
                      [](const hw::GemmMeasurement& g) { return g.weight_gradient; }) == 3);
  // Adopted as fractions of the large-GEMM rate, kept in a cluster file, and written again with
  // the type's figures.
  const hw::GpuTypeOverride o = hw::override_from_profile(q, testing::catalogs().hardware, "p.json");
  const hw::GpuSpec spec = hw::apply_override(testing::catalogs().hardware, o);
  REQUIRE(spec.efficiency.weight_gradient_curve.size() == 2);
  CHECK(spec.efficiency.weight_gradient_curve[0].second == hetrl::testing::approx(30.0 / 40));
  const hw::GpuProfile again = hw::datasheet_profile(spec);
  REQUIRE(again.weight_gradient_curve.size() == 2);
  CHECK(again.weight_gradient_curve[0].second == hetrl::testing::approx(30e12));
  // Without weight-gradient rows, none.
  hw::GpuProfile plain;
  plain.gemms = {gemm("bf16", 16, 4096, 10), gemm("bf16", 2048, 4096, 40)};
  profile::fit(plain);
  CHECK(plain.weight_gradient_curve.empty());
  CHECK(io::profile_to_json(plain).find("weight_gradient_curve") == std::string::npos);
}

TEST_CASE("profile: figures fitted on a run are read, written and adopted as the type's") {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 16.0 * (1 << 30), 4, "Linux 6", "OpenBLAS 0.3"};
  p.gemm_large_flops = 2e11;
  p.memory_bandwidth = 3e10;
  p.gemm_width_half = 0.0;
  p.pass_efficiency = 0.6;
  p.optimizer_efficiency = 0.2;
  p.decode_step_overhead = 4e-3;
  p.decode_allreduce = 0.35e-3;
  p.tp_wait = 0.06;
  p.calibration = hw::GpuProfile::Calibration{"plan.json", 5, 2, {{"generate", 1.5, 0.7, 1.4}, {"actor_train", 2.0, 1.0, 1.9}}};
  const std::string json = io::profile_to_json(p);
  const hw::GpuProfile q = io::parse_profile(json, "p.json");
  CHECK(io::profile_to_json(q) == json);
  REQUIRE(q.calibration);
  CHECK(q.calibration->tasks.size() == 2);
  CHECK(q.calibration->tasks[1].after == hetrl::testing::approx(1.9));
  CHECK(*q.decode_step_overhead == hetrl::testing::approx(4e-3));
  REQUIRE(q.decode_allreduce);
  CHECK(*q.decode_allreduce == hetrl::testing::approx(0.35e-3));
  REQUIRE(q.tp_wait);
  CHECK(*q.tp_wait == hetrl::testing::approx(0.06));
  for (const char* type : {"cpu-test", "L4"}) {
    CAPTURE(type);
    hw::GpuProfile typed = q;
    typed.gpu_type = type;
    if (std::string(type) == "L4") typed.gemm_large_flops = 1e14;  // below the L4's peak
    const hw::GpuSpec spec = hw::apply_override(testing::catalogs().hardware,
                                                hw::override_from_profile(typed, testing::catalogs().hardware, "p.json"));
    CHECK(spec.efficiency.training == hetrl::testing::approx(0.6));
    CHECK(spec.efficiency.optimizer == hetrl::testing::approx(0.2));
    REQUIRE(spec.efficiency.decode_step_overhead);
    CHECK(*spec.efficiency.decode_step_overhead == hetrl::testing::approx(4e-3));
    REQUIRE(spec.efficiency.decode_allreduce);
    CHECK(*spec.efficiency.decode_allreduce == hetrl::testing::approx(0.35e-3));
    REQUIRE(spec.efficiency.tp_wait);
    CHECK(*spec.efficiency.tp_wait == hetrl::testing::approx(0.06));
    REQUIRE(spec.efficiency.gemm_width_half);
    CHECK(*spec.efficiency.gemm_width_half == 0.0);
  }
  // Out of range: named.
  const auto refused = [&](auto set, const char* message) {
    hw::GpuProfile bad = q;
    set(bad);
    CHECK_THROWS_WITH_AS(hw::override_from_profile(bad, testing::catalogs().hardware, "p.json"),
                         doctest::Contains(message), core::InputError);
  };
  refused([](hw::GpuProfile& b) { b.pass_efficiency = 1.5; }, "pass efficiency must be in (0, 1]");
  refused([](hw::GpuProfile& b) { b.decode_allreduce = 2e3; }, "decode all-reduce must be between 0 and 1000 s");
  refused([](hw::GpuProfile& b) { b.tp_wait = 10; }, "TP wait must be at least 0 and below 10");
  // An optimizer step's share counts its reads and writes: past 1, not past 2.
  hw::GpuProfile beside = q;
  beside.optimizer_efficiency = 1.6;
  CHECK(hw::override_from_profile(beside, testing::catalogs().hardware, "p.json").optimizer_efficiency == 1.6);
  CHECK(io::parse_profile(io::profile_to_json(beside), "p.json").optimizer_efficiency == 1.6);
  refused([](hw::GpuProfile& b) { b.optimizer_efficiency = 2.5; }, "optimizer efficiency must be in (0, 2]");
  std::string text = json;
  text.replace(text.find("\"optimizer_efficiency\": 0.2"), 27, "\"optimizer_efficiency\": 0.0");
  CHECK_THROWS_WITH_AS(io::parse_profile(text, "p.json"), doctest::Contains("p.json: /fitted/optimizer_efficiency"),
                       core::InputError);
}

TEST_CASE("profile: between devices, the median pair's largest transfer and smallest transfer's time") {
  hw::GpuProfile p;
  // Three pairs: 10, 20 and 40 GB/s at 64 MiB; 5, 9 and 30 us for 4 bytes.
  const double large = 64.0 * (1 << 20);
  p.transfers = {{"device0", "device1", 4, spread(5e-6)},   {"device0", "device1", large, spread(large / 10e9)},
                 {"device1", "device0", large, spread(large / 40e9)}, {"device1", "device0", 4, spread(30e-6)},
                 {"device0", "device2", 4, spread(9e-6)},   {"device0", "device2", large, spread(large / 20e9)}};
  p.collectives = {{"all_reduce", "bf16", 3, 1 << 20, spread(1e-3), 2e9},
                   {"all_reduce", "bf16", 3, 1 << 24, spread(4e-3), 7e9},
                   {"all_reduce", "bf16", 3, 1 << 26, spread(16e-3), 6e9},
                   {"all_reduce", "fp32", 3, 1 << 24, spread(4e-3), 8e9},
                   {"reduce_scatter", "fp32", 3, 1 << 20, spread(1e-3), 5e9},
                   {"reduce_scatter", "fp32", 3, 1 << 26, spread(16e-3), 3e9},
                   {"broadcast", "bf16", 3, 1 << 24, spread(4e-3), 9e9}};
  profile::fit(p);
  CHECK(*p.intra_node_bandwidth == hetrl::testing::approx(20e9));
  CHECK(*p.intra_node_latency == hetrl::testing::approx(9e-6));
  // The 16-bit all-reduce's best, not fp32's nor broadcast's.
  CHECK(*p.allreduce_bus_bandwidth == hetrl::testing::approx(7e9));
  // Each collective and type at its largest message; no broadcast.
  std::map<std::string, double> rates;
  for (const auto& r : p.collective_rates) rates[r.op + " " + r.dtype] = r.bus_bandwidth;
  CHECK(rates == std::map<std::string, double>{{"all_reduce bf16", 6e9}, {"all_reduce fp32", 8e9}, {"reduce_scatter fp32", 3e9}});
  profile::fit(p);  // again: the same, not twice
  CHECK(p.collective_rates.size() == 3);
  // A gradient's all-reduce in buckets: the all-reduce's rate in its type, though at a smaller
  // bucket and a slower rate than the largest at once; not the 16-bit best.
  hw::CollectiveMeasurement bucketed{"all_reduce", "fp32", 3, 1 << 26, spread(20e-3), 5e9, 1 << 22};
  p.collectives.push_back(bucketed);
  bucketed.dtype = "bf16";
  bucketed.bus_bandwidth = 9e9;
  p.collectives.push_back(bucketed);
  profile::fit(p);
  rates.clear();
  for (const auto& r : p.collective_rates) rates[r.op + " " + r.dtype] = r.bus_bandwidth;
  CHECK(rates ==
        std::map<std::string, double>{{"all_reduce bf16", 9e9}, {"all_reduce fp32", 5e9}, {"reduce_scatter fp32", 3e9}});
  CHECK(*p.allreduce_bus_bandwidth == hetrl::testing::approx(7e9));
  // Written and read back with its bucket.
  p.gpu_type = "cpu-test";
  const std::string json = io::profile_to_json(p);
  CHECK(json.find("\"bucket_bytes\": 4194304") != std::string::npos);
  const hw::GpuProfile q = io::parse_profile(json, "p.json");
  CHECK(io::profile_to_json(q) == json);
  CHECK(q.collectives.back().bucket == 1 << 22);
}

TEST_CASE("profile: each collective's measured rate becomes its share of the link, the others keep the all-reduce's") {
  // A CPU-backend profile (a type of its own): link 10 GB/s, all-reduce 4 GB/s at its best.
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 8.0 * (1 << 30), 4, "", ""};
  p.memory_bandwidth = 30e9;
  p.gemm_large_flops = 1e11;
  p.gemm_small_flops = 1e11;
  p.fp32_flops = 1e11;
  p.intra_node_bandwidth = 10e9;
  p.allreduce_bus_bandwidth = 4e9;
  p.collective_rates = {{"all_reduce", "bf16", 3.5e9}, {"all_reduce", "fp32", 5e9}, {"reduce_scatter", "fp32", 2e9},
                        {"all_gather", "bf16", 6e9}};
  const hw::GpuTypeOverride o = hw::override_from_profile(p, testing::catalogs().hardware, "p.json");
  REQUIRE(o.collectives);
  const auto share = [&](hw::Collective op, int fp32) { return (*o.collectives)[static_cast<int>(op)][fp32]; };
  CHECK(*o.collective == hetrl::testing::approx(0.4));
  CHECK(share(hw::Collective::kAllReduce, 1) == hetrl::testing::approx(0.5));
  CHECK(share(hw::Collective::kReduceScatter, 1) == hetrl::testing::approx(0.2));
  CHECK(share(hw::Collective::kAllGather, 0) == hetrl::testing::approx(0.6));
  CHECK(share(hw::Collective::kAllReduce, 0) == 0);  // `collective` is it
  CHECK(share(hw::Collective::kReduceScatter, 0) == 0);
  const hw::GpuSpec spec = hw::apply_override(testing::catalogs().hardware, o);
  CHECK(spec.efficiency.collective_share(hw::Collective::kReduceScatter, true) == hetrl::testing::approx(0.2));
  CHECK(spec.efficiency.collective_share(hw::Collective::kReduceScatter, false) == hetrl::testing::approx(0.4));
  // A profile written from the type (hetrl-exec --fit-profile starts from one) keeps them.
  const hw::GpuProfile sheet = hw::datasheet_profile(spec);
  CHECK(sheet.collective_rates.size() == 3);
  // A datasheet type takes them as shares of its link; above it, an error.
  hw::GpuProfile a100 = hw::datasheet_profile(testing::catalogs().hardware.gpu("A100-SXM-80G", ""));
  a100.collective_rates = {{"reduce_scatter", "bf16", 100e9}};
  const hw::GpuTypeOverride known = hw::override_from_profile(a100, testing::catalogs().hardware, "a.json");
  REQUIRE(known.collectives);
  CHECK((*known.collectives)[static_cast<int>(hw::Collective::kReduceScatter)][0] ==
        hetrl::testing::approx(100e9 / *a100.intra_node_bandwidth));
  a100.collective_rates = {{"all_gather", "fp32", 2 * *a100.intra_node_bandwidth}};
  CHECK_THROWS_WITH_AS(hw::override_from_profile(a100, testing::catalogs().hardware, "a.json"),
                       doctest::Contains("measured fp32 all_gather bus bandwidth"), core::InputError);
}

TEST_CASE("profile: v2 files round-trip every measurement and fitted figure") {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.host = "bench-1";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 8.0 * (1 << 30), 4, "Linux 6", "OpenBLAS 0.3"};
  p.settings = hw::ProfileSettings{true, "bf16", 3, 3};
  p.gemms = {gemm("bf16", 64, 1024, 10), gemm("bf16", 2048, 1024, 90)};
  p.bandwidths = {{"read", 1 << 20, spread(1e-3)}, {"host_to_device", 4, spread(2e-6)}};
  p.attention = {{"fp16", 8, 1024, 32, 8, 128, 1e9, spread(1e-3)}, {"fp16", 8, 1024, 128, 8, 128, 1e9, spread(2e-3)}};
  p.pass_attention = {{"fp16", 1, 128, 8, 2, 128, spread(1e-3), spread(3e-3)}, {"fp16", 4, 1024, 8, 2, 128, spread(2e-2), spread(5e-2)}};
  p.collectives = {{"all_reduce", "bf16", 2, 1 << 20, spread(1e-3), 2e9}, {"reduce_scatter", "fp32", 2, 1 << 20, spread(1e-3), 1e9}};
  p.transfers = {{"device0", "device1", 4, spread(3e-6)}, {"device0", "device1", 1 << 24, spread(2e-3)}};
  p.optimizer_steps = {{"bf16", 1 << 20, 30.0 * (1 << 20), spread(1e-3)}};
  p.launch = spread(5e-6);
  profile::fit(p);
  p.provenance.tool = "hetrl-profile";
  p.provenance.version = "1.0";
  const std::string json = io::profile_to_json(p);
  const hw::GpuProfile q = io::parse_profile(json, "p.json");
  CHECK(io::profile_to_json(q) == json);
  CHECK(q.gemms.size() == 2);
  REQUIRE(q.settings);
  CHECK(q.settings->passes == 3);
  CHECK(q.attention.front().dtype == "fp16");
  CHECK(q.attention.back().group() == 16);
  // Decode attention's compute rate: the wider group's 4 x 8 x 1024 x 128 x 128 FLOPs in 2 ms.
  REQUIRE(q.decode_attention_flops);
  CHECK(*q.decode_attention_flops == hetrl::testing::approx(4.0 * 8 * 1024 * 128 * 128 / 2e-3));
  CHECK(q.collectives.front().bus_bandwidth == hetrl::testing::approx(2e9));
  CHECK(*q.allreduce_bus_bandwidth == hetrl::testing::approx(2e9));
  CHECK(q.collectives.back().dtype == "fp32");
  REQUIRE(q.collective_rates.size() == 2);
  CHECK(q.collective_rates.back().op == "reduce_scatter");
  CHECK(q.collective_rates.back().bus_bandwidth == hetrl::testing::approx(1e9));
  // A file from before collectives had types: in the settings' type.
  std::string untyped = json;
  const std::size_t typed = untyped.find("\"dtype\": \"fp32\",", untyped.find("\"collectives\""));
  REQUIRE(typed != std::string::npos);
  untyped.erase(typed, std::string("\"dtype\": \"fp32\",").size());
  CHECK(io::parse_profile(untyped, "p.json").collectives.back().dtype == "bf16");
  CHECK(q.device->memory == hetrl::testing::approx(8.0 * (1 << 30)));
  REQUIRE(q.transfers.size() == 2);
  CHECK(q.transfers.back().to == "device1");
  CHECK(*q.intra_node_latency == hetrl::testing::approx(3e-6));
  CHECK(*q.intra_node_bandwidth == hetrl::testing::approx((1 << 24) / 2e-3));
  REQUIRE(q.optimizer_steps.size() == 1);
  CHECK(q.optimizer_steps.front().parameters == 1 << 20);
  CHECK(*q.optimizer_bandwidth == hetrl::testing::approx(30.0 * (1 << 20) / 1e-3));
  REQUIRE(q.pass_attention.size() == 2);
  CHECK(q.pass_attention.back().backward.median == hetrl::testing::approx(5e-2));
  CHECK(q.pass_attention.back().sequences == 4);
  // At the most tokens: 3.5 x 2 x 4 x 8 x 128 x 1024^2 FLOPs in 70 ms.
  CHECK(*q.attention_flops == hetrl::testing::approx(3.5 * 2.0 * 4 * 8 * 128 * 1024.0 * 1024 / 7e-2));
}

// A new type's profile with the figures every new type needs: 200 GFLOP/s of large GEMMs
// (its peak), 100 of fp32, 30 GB/s of memory read.
hw::GpuProfile new_type_profile() {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 8.0 * (1 << 30), 4, "", ""};
  p.memory_bandwidth = 30e9;
  p.gemm_large_flops = 2e11;
  p.fp32_flops = 1e11;
  return p;
}

TEST_CASE("profile: the measured attention rate becomes the type's attention efficiency, none above the peak") {
  // A new type: of its own large-GEMM rate.
  hw::GpuProfile p = new_type_profile();
  p.attention_flops = 2e9;
  const hw::GpuSpec own = hw::apply_override(testing::catalogs().hardware,
                                             hw::override_from_profile(p, testing::catalogs().hardware, "p.json"));
  CHECK(own.efficiency.attention == hetrl::testing::approx(0.01));
  // A catalogue type: of its tensor peak; the datasheet profile gives the catalogue's back.
  const hw::GpuSpec& a100 = testing::catalogs().hardware.gpu("A100-SXM-80G", "");
  hw::GpuProfile sheet = hw::datasheet_profile(a100);
  CHECK(*sheet.attention_flops == hetrl::testing::approx(a100.tensor_flops() * a100.efficiency.attention));
  sheet.attention_flops = 0.1 * a100.tensor_flops();
  const hw::GpuTypeOverride measured = hw::override_from_profile(sheet, testing::catalogs().hardware, "a.json");
  CHECK(*measured.attention == hetrl::testing::approx(0.1));
  sheet.attention_flops = 1.1 * a100.tensor_flops();
  CHECK_THROWS_WITH_AS(hw::override_from_profile(sheet, testing::catalogs().hardware, "a.json"),
                       doctest::Contains("measured attention rate"), core::InputError);
}

TEST_CASE("profile: the measured decode attention rate becomes the type's decode attention efficiency") {
  hw::GpuProfile p = new_type_profile();
  CHECK_FALSE(hw::apply_override(testing::catalogs().hardware, hw::override_from_profile(p, testing::catalogs().hardware, "p.json"))
                  .efficiency.decode_attention);
  p.decode_attention_flops = 4e9;
  const hw::GpuSpec own = hw::apply_override(testing::catalogs().hardware,
                                             hw::override_from_profile(p, testing::catalogs().hardware, "p.json"));
  REQUIRE(own.efficiency.decode_attention);
  CHECK(*own.efficiency.decode_attention == hetrl::testing::approx(0.02));
  CHECK(*hw::datasheet_profile(own).decode_attention_flops == hetrl::testing::approx(4e9));
  // A catalogue type: none of its own; a measured one of its tensor peak, none above it.
  const hw::GpuSpec& a100 = testing::catalogs().hardware.gpu("A100-SXM-80G", "");
  hw::GpuProfile sheet = hw::datasheet_profile(a100);
  CHECK_FALSE(sheet.decode_attention_flops);
  sheet.decode_attention_flops = 0.25 * a100.tensor_flops();
  CHECK(*hw::override_from_profile(sheet, testing::catalogs().hardware, "a.json").decode_attention ==
        hetrl::testing::approx(0.25));
  sheet.decode_attention_flops = 1.5 * a100.tensor_flops();
  CHECK_THROWS_WITH_AS(hw::override_from_profile(sheet, testing::catalogs().hardware, "a.json"),
                       doctest::Contains("measured decode attention rate"), core::InputError);
}

TEST_CASE("profile: the optimizer step's rate over the most parameters and the largest copy's become the type's efficiencies") {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 16.0 * (1 << 30), 4, "Linux 6", "OpenBLAS 0.3"};
  p.gemm_large_flops = 2e11;
  // A copy counts what it reads and what it writes; the small one stays in a cache.
  p.bandwidths = {{"read", 1 << 30, spread((1 << 30) / 20e9)},
                  {"copy", 2.0 * (1 << 20), spread(2.0 * (1 << 20) / 80e9)},
                  {"copy", 2.0 * (1 << 30), spread(2.0 * (1 << 30) / 12e9)}};
  // The smaller step stays in a cache and runs faster; the larger one is the figure.
  p.optimizer_steps = {{"bf16", 1 << 16, 30.0 * (1 << 16), spread(30.0 * (1 << 16) / 40e9)},
                       {"bf16", 1 << 24, 30.0 * (1 << 24), spread(30.0 * (1 << 24) / 15e9)}};
  profile::fit(p);
  REQUIRE(p.optimizer_bandwidth);
  CHECK(*p.optimizer_bandwidth == hetrl::testing::approx(15e9));
  const hw::Catalog& catalog = testing::catalogs().hardware;
  const auto adopted = [&](const hw::GpuProfile& profile) {
    return hw::apply_override(catalog, hw::override_from_profile(profile, catalog, "p.json"));
  };
  // A new type: of its measured read rate.
  CHECK(adopted(p).efficiency.optimizer == hetrl::testing::approx(0.75));
  // A step faster than one stream of reads (its writes beside them) is priced so, up to twice it.
  hw::GpuProfile fast = p;
  fast.optimizer_bandwidth = 25e9;
  CHECK(adopted(fast).efficiency.optimizer == hetrl::testing::approx(1.25));
  fast.optimizer_bandwidth = 50e9;
  CHECK(adopted(fast).efficiency.optimizer == hw::kMostReadWriteShare);
  // A figure fitted on a run replaces the measured one.
  hw::GpuProfile fitted = p;
  fitted.optimizer_efficiency = 0.4;
  CHECK(adopted(fitted).efficiency.optimizer == hetrl::testing::approx(0.4));
  // A known type: of its datasheet bandwidth, which the step cannot pass.
  const hw::GpuSpec& l4 = catalog.gpu("L4", "");
  hw::GpuProfile known;
  known.gpu_type = "L4";
  known.optimizer_bandwidth = 0.5 * l4.memory_bandwidth;
  CHECK(adopted(known).efficiency.optimizer == hetrl::testing::approx(0.5));
  known.optimizer_bandwidth = 1.2 * l4.memory_bandwidth;
  CHECK_THROWS_WITH_AS(adopted(known), doctest::Contains("measured optimizer step rate"), core::InputError);
  // What the catalogue expects, for comparison: the memory bandwidth at the type's optimizer
  // efficiency, or at its memory efficiency where it has none.
  CHECK(*hw::datasheet_profile(l4).optimizer_bandwidth == hetrl::testing::approx(l4.memory_bandwidth * l4.efficiency.memory));

  // The copy likewise: of the read rate for a new type, replaced by a run's fitted figure,
  // written and read back; of the datasheet bandwidth for a known type.
  REQUIRE(p.copy_bandwidth);
  CHECK(*p.copy_bandwidth == hetrl::testing::approx(12e9));
  CHECK(adopted(p).efficiency.copy == hetrl::testing::approx(0.6));
  fitted.copy_efficiency = 0.3;
  CHECK(adopted(fitted).efficiency.copy == hetrl::testing::approx(0.3));
  const hw::GpuProfile q = io::parse_profile(io::profile_to_json(fitted), "p.json");
  CHECK(*q.copy_bandwidth == hetrl::testing::approx(12e9));
  CHECK(*q.copy_efficiency == hetrl::testing::approx(0.3));
  known.optimizer_bandwidth.reset();
  known.copy_bandwidth = 0.7 * l4.memory_bandwidth;
  CHECK(adopted(known).efficiency.copy == hetrl::testing::approx(0.7));
  CHECK(*hw::datasheet_profile(l4).copy_bandwidth == hetrl::testing::approx(l4.memory_bandwidth * l4.efficiency.memory));
}

TEST_CASE("profile: a v2 file with a range out of order or a curve not ascending names where") {
  const std::string head = R"({"schema": "hetrl.profile/v2", "gpu_type": "L4", )";
  CHECK_THROWS_WITH_AS(io::parse_profile(head + R"("measurements": {"launch": {"median_us": 5, "min_us": 6,
      "max_us": 7, "repeats": 3}}})", "p.json"), "p.json: /measurements/launch: expected min <= median <= max",
                       core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_profile(head + R"("fitted": {"gemm_curve": [{"tokens": 8, "tflops": 1},
      {"tokens": 4, "tflops": 2}]}})", "p.json"), "p.json: /fitted/gemm_curve/1/tokens: expected tokens in ascending order",
                       core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_profile(head + R"("fitted": {"gemm_curves": [
      {"width": 4096, "gemm_curve": [{"tokens": 1, "tflops": 1}]},
      {"width": 1024, "gemm_curve": [{"tokens": 1, "tflops": 2}]}]}})", "p.json"),
      "p.json: /fitted/gemm_curves/1/width: expected widths in ascending order", core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_profile(head + R"("fitted": {"gemm_curves": [{"width": 1024}]}})", "p.json"),
                       "p.json: /fitted/gemm_curves/0: missing required field \"gemm_curve\"", core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_profile(head + R"("fitted": {"gemm_curves": [{"width": 1024, "gemm_curve": [
      {"tokens": 4, "tflops": 1}, {"tokens": 2, "tflops": 1}]}]}})", "p.json"),
      "p.json: /fitted/gemm_curves/0/gemm_curve/1/tokens: expected tokens in ascending order", core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_profile(head + R"("settings": {"dtype": "bf16", "repeats": 2, "passes": 3}})", "p.json"),
                       doctest::Contains("p.json: /settings/passes"), core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_profile(head + R"("fitted": {"gemm_large_tflop": 5}})", "p.json"),
                       doctest::Contains("unknown field \"gemm_large_tflop\""), core::InputError);
}

TEST_CASE("profile: a device the catalogue lacks becomes a type whose peaks are the measured rates") {
  hw::GpuProfile p;
  p.gpu_type = "cpu-test";
  p.device = hw::DeviceDescription{"cpu", "Test CPU", 1, 16.0 * (1 << 30), 4, "", ""};
  p.gemm_large_flops = 2e11;
  p.gemm_small_flops = 5e10;
  p.fp32_flops = 2.2e11;
  p.memory_bandwidth = 3e10;
  const hw::GpuSpec spec = hw::apply_override(testing::catalogs().hardware, hw::override_from_profile(p, testing::catalogs().hardware, "p.json"));
  CHECK(spec.name == "cpu-test");
  CHECK(spec.memory == hetrl::testing::approx(16.0 * (1 << 30)));
  CHECK(spec.tensor_flops() == hetrl::testing::approx(2e11));
  CHECK(spec.fp32_flops == hetrl::testing::approx(2.2e11));
  CHECK(spec.efficiency.gemm(hw::kGemmLargeTokens) == hetrl::testing::approx(1.0));
  CHECK(spec.efficiency.gemm(hw::kGemmSmallTokens) == hetrl::testing::approx(0.25));
  CHECK(spec.memory_bandwidth * spec.efficiency.memory == hetrl::testing::approx(3e10));
  // The cpu backend's device memory is the host's; a new CUDA device's is its own.
  CHECK(spec.memory_is_host);
  p.device->backend = "cuda";
  const hw::Catalog& catalog = testing::catalogs().hardware;
  CHECK_FALSE(hw::apply_override(catalog, hw::override_from_profile(p, catalog, "p.json")).memory_is_host);
  p.device->backend = "cpu";
  // With a measured curve, GEMMs follow it (relative to the large rate), and with a measured
  // link and all-reduce, collectives reach the measured share of the link.
  p.gemm_curve = {{1, 2e9}, {64, 5e10}, {2048, 2e11}};
  p.intra_node_bandwidth = 1e10;
  p.allreduce_bus_bandwidth = 4e9;
  const hw::GpuSpec curved = hw::apply_override(testing::catalogs().hardware, hw::override_from_profile(p, testing::catalogs().hardware, "p.json"));
  CHECK(curved.efficiency.gemm(1) == hetrl::testing::approx(0.01));
  // At 8 tokens the time is linear in the tokens from 1 to 64, in rows at the peak rate: from
  // 1 / 0.01 to 64 / 0.25.
  CHECK(curved.efficiency.gemm(8) == hetrl::testing::approx(8 / (100 + (256 - 100) * 7.0 / 63)));
  CHECK(curved.efficiency.gemm(4096) == hetrl::testing::approx(1.0));
  CHECK(curved.intra_node.bandwidth == hetrl::testing::approx(1e10));
  CHECK(curved.efficiency.collective == hetrl::testing::approx(0.4));
  // Without the device's memory it is an unknown type, with the closest name.
  p.device.reset();
  p.gpu_type = "L4S";
  CHECK_THROWS_WITH_AS(hw::override_from_profile(p, testing::catalogs().hardware, "p.json"),
                       doctest::Contains("unknown GPU type \"L4S\""), core::InputError);
}

TEST_CASE("profile: a CUDA device's name and memory pick its catalogue type") {
  const hw::Catalog& catalog = testing::catalogs().hardware;
  const auto info = [&](const char* name, const char* type) {
    device::DeviceInfo d;
    d.backend = "cuda";
    d.name = name;
    d.memory = catalog.gpu(type, "").memory;
    return d;
  };
  CHECK(profile::match_gpu_type(info("NVIDIA H100 PCIe", "H100-PCIe"), catalog) == "H100-PCIe");
  // SXM boards' names need not say so; nvidia-smi's name of an H100 SXM5 (700 W).
  CHECK(profile::match_gpu_type(info("NVIDIA H100 80GB HBM3", "H100-SXM"), catalog) == "H100-SXM");
  CHECK(profile::match_gpu_type(info("NVIDIA H200", "H200"), catalog) == "H200");
  CHECK(profile::match_gpu_type(info("NVIDIA A100-SXM4-80GB", "A100-SXM-80G"), catalog) == "A100-SXM-80G");
  CHECK(profile::match_gpu_type(info("NVIDIA L40S", "L40S"), catalog) == "L40S");
  CHECK(profile::match_gpu_type(info("NVIDIA L4", "L4"), catalog) == "L4");
  device::DeviceInfo unknown = info("NVIDIA GeForce RTX 5090", "RTX-4090");
  CHECK(profile::match_gpu_type(unknown, catalog).empty());
  CHECK(profile::new_type_name(unknown) == "gpu-nvidia-geforce-rtx-5090");
  device::DeviceInfo cpu;
  cpu.backend = "cpu";
  cpu.name = "AMD EPYC 7B13 (2 threads)";
  CHECK(profile::match_gpu_type(cpu, catalog).empty());
  CHECK(profile::new_type_name(cpu) == "cpu-amd-epyc-7b13");
}

}  // namespace
TEST_CASE("profile: a known GPU's measured GEMM curve becomes its efficiency at each token count, none above the peak") {
  const hw::Catalog& catalog = testing::catalogs().hardware;
  const hw::GpuSpec& l4 = catalog.gpu("L4", "");
  const double peak = l4.tensor_flops();
  hw::GpuProfile p;
  p.gpu_type = "L4";
  p.gemm_curve = {{16, 0.1 * peak}, {256, 0.4 * peak}, {4096, 0.6 * peak}};
  const hw::GpuSpec spec = hw::apply_override(catalog, hw::override_from_profile(p, catalog, "p.json"));
  CHECK(spec.efficiency.gemm(1) == hetrl::testing::approx(0.1));
  CHECK(spec.efficiency.gemm(64) == hetrl::testing::approx(0.25));  // halfway from 16 to 256 in log2
  CHECK(spec.efficiency.gemm(256) == hetrl::testing::approx(0.4));
  CHECK(spec.efficiency.gemm(1 << 20) == hetrl::testing::approx(0.6));
  p.gemm_curve.back().second = 1.2 * peak;
  CHECK_THROWS_WITH_AS(hw::override_from_profile(p, catalog, "p.json"),
                       doctest::Contains("measured GEMM rate at 4096 tokens"), core::InputError);
}


TEST_CASE("profile: a gradient's all-reduce is timed in buckets one after another, and its rate is the all-reduce's") {
  const auto backend = device::make_cpu_backend();
  const core::FakeClock clock(2e-3);
  RecordingCommunicator comm;
  profile::ProfileParams params = tiny_params();
  // Four buckets of 1.5 MiB, as far as the 4 MiB buffer goes: 1.5, 1.5 and 1 MiB.
  params.gradient_bucket = 3 << 19;
  const hw::GpuProfile p = profile::measure(*backend, comm, clock, params);
  std::vector<const hw::CollectiveMeasurement*> bucketed;
  for (const hw::CollectiveMeasurement& c : p.collectives) {
    if (c.bucket > 0) bucketed.push_back(&c);
  }
  REQUIRE(bucketed.size() == 2);  // bf16 and fp32
  for (const hw::CollectiveMeasurement* c : bucketed) {
    CHECK(c->op == "all_reduce");
    CHECK(c->bucket == 3 << 19);
    CHECK(c->bytes == 4 << 20);
  }
  CHECK(bucketed.back()->dtype == "fp32");
  // The fp32 one's pieces, a call's each after the one before, then the rest of the buffer.
  std::vector<const RecordingCommunicator::Reduced*> pieces;
  for (const auto& r : comm.reduced) {
    if (r.type == device::DType::kF32 && (r.count == (3u << 19) / 4 || r.count == (1u << 20) / 4)) pieces.push_back(&r);
  }
  const auto first = std::find_if(pieces.begin(), pieces.end(), [](auto* r) { return r->count == (3u << 19) / 4; });
  REQUIRE(pieces.end() - first >= 3);
  CHECK(first[1]->count == (3u << 19) / 4);
  CHECK(first[1]->data - first[0]->data == 3 << 19);
  CHECK(first[2]->count == (1u << 20) / 4);
  CHECK(first[2]->data - first[1]->data == 3 << 19);
  // Its rate is the type's all-reduce rate.
  bool found = false;
  for (const auto& r : p.collective_rates) {
    if (r.op == "all_reduce" && r.dtype == "fp32") {
      found = true;
      CHECK(r.bus_bandwidth == hetrl::testing::approx(bucketed.back()->bus_bandwidth));
    }
  }
  CHECK(found);
}

TEST_CASE("profile: the large transfers between processes stream from memory, not from one cached buffer") {
  const auto backend = device::make_cpu_backend();
  const core::FakeClock clock(2e-3);
  RecordingCommunicator comm;
  const hw::GpuProfile p = profile::measure(*backend, comm, clock, tiny_params());
  CHECK(p.intra_node_bandwidth.value_or(0) > 0);
  REQUIRE(comm.sent.size() >= 4);
  // Each message from the slice after the one before, wrapping around a buffer of several; each
  // pass through the measurements allocates its buffer anew, which may be another block.
  const std::size_t bytes = comm.sent.front().second;
  std::vector<std::set<const std::byte*>> buffers(1);
  for (std::size_t i = 0; i < comm.sent.size(); ++i) {
    CHECK(comm.sent[i].second == bytes);
    if (i > 0) {
      const std::ptrdiff_t step = comm.sent[i].first - comm.sent[i - 1].first;
      CHECK(step != 0);
      if (std::abs(step) % static_cast<std::ptrdiff_t>(bytes) != 0) buffers.emplace_back();  // the next pass's
    }
    buffers.back().insert(comm.sent[i].first);
  }
  CHECK(buffers.size() <= static_cast<std::size_t>(tiny_params().passes));
  CHECK(std::max_element(buffers.begin(), buffers.end(), [](const auto& x, const auto& y) {
          return x.size() < y.size();
        })->size() >= 4);
}

}  // namespace hetrl
