#include "profile/measure.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace hetrl::profile {
namespace {

using device::Backend;
using device::Buffer;
using device::DType;

// Llama-3-8B's attention layout (32 query heads, 8 KV heads of 128), the most common one.
constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128;
// Decode attention is measured again with sixteen query heads a KV head, twice the largest
// group of a catalogue model (8): over the same cache, four times the FLOPs. Where the step's
// time follows its FLOPs, the kernel is bound by its compute; where it stays, by the cache's
// read, and the FLOPs rate it shows there is one no model's group needs more of.
constexpr int kWideGroupHeads = 16 * kKvHeads;
// A pass's attention is measured over fewer heads (the same four query heads a kv head): its
// cost grows with the square of the length, and a CPU's first points must stay short.
constexpr int kPassHeads = 8, kPassKvHeads = 2;
// The fp32 GEMM point's width (the fp32 peak a new type needs).
constexpr int kFp32Width = 1024;
// Buckets of a gradient's all-reduce timed together: more than a CPU's last-level cache holds.
constexpr std::size_t kGradientBuckets = 4;

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// What the first pass through a section of measurements decided, which the later passes
// replay, and every point's timings so far.
struct Passes {
  bool recorded = false;                     // the first pass is over: replay it
  std::vector<bool> affordable;              // each affordable() answer, in order
  std::vector<long> calls;                   // each point's calls a repeat, in order
  std::vector<std::vector<double>> seconds;  // each point's seconds a call, every pass so far
};

class Timer {
 public:
  Timer(Backend& backend, const core::Clock& clock, const ProfileParams& params, Passes& passes)
      : backend_(backend), clock_(clock), params_(params), passes_(passes) {}

  // Times an operation every process runs together (a collective, or a transfer between two of
  // them): each repeat starts after a barrier and lasts as long as the slowest process's, so
  // every process takes the same decisions and calls the operation equally often.
  Timer(Backend& backend, const core::Clock& clock, const ProfileParams& params, Passes& passes,
        device::Communicator& together)
      : backend_(backend), clock_(clock), params_(params), passes_(passes), together_(&together) {}

  // The seconds one call of `op` takes over this pass's repeats and the earlier passes': a
  // warm-up call, then repeats of as many calls as make a repeat last params.repeat_seconds
  // (found in the first pass, kept in the others).
  hw::TimeSpread time(const std::function<void()>& op) {
    op();
    backend_.synchronize();
    const std::size_t point = next_point_++;
    if (!passes_.recorded) {
      passes_.calls.push_back(calls_per_repeat(op));
      passes_.seconds.emplace_back();
    } else if (point >= passes_.calls.size()) {
      throw std::logic_error("profile: a pass measured more points than the first");
    }
    const long count = passes_.calls[point];
    std::vector<double>& per_call = passes_.seconds[point];
    for (int r = 0; r < params_.repeats; ++r) per_call.push_back(run(op, count) / static_cast<double>(count));
    hw::TimeSpread s;
    s.median = median_of(per_call);
    s.min = *std::min_element(per_call.begin(), per_call.end());
    s.max = *std::max_element(per_call.begin(), per_call.end());
    s.repeats = static_cast<int>(per_call.size());
    return s;
  }

  // Whether a curve's next point, whose one call is predicted to take `seconds`, fits the
  // point budget over every pass; the first kLeastPoints of a curve are always measured, so
  // that every curve has a shape however slow the device. Later passes repeat the first's
  // answers.
  bool affordable(double seconds, std::size_t measured) {
    if (passes_.recorded) {
      if (next_answer_ >= passes_.affordable.size()) throw std::logic_error("profile: a pass asked more than the first");
      return passes_.affordable[next_answer_++];
    }
    // Each pass a warm-up call and the repeats; the first pass also finds the calls a repeat.
    const int repeats_in_all = params_.passes * (params_.repeats + 1) + 1;
    const bool answer = measured < kLeastPoints ||
                        std::max(seconds, params_.repeat_seconds) * repeats_in_all <= params_.point_seconds;
    passes_.affordable.push_back(answer);
    return answer;
  }
  static constexpr std::size_t kLeastPoints = 2;

 private:
  long calls_per_repeat(const std::function<void()>& op) {
    long count = 1;
    for (;;) {
      const double seconds = run(op, count);
      if (seconds >= params_.repeat_seconds || count >= (1L << 24)) return count;
      const double wanted = seconds > 0 ? 1.2 * params_.repeat_seconds / seconds * static_cast<double>(count) : 16.0 * static_cast<double>(count);
      count = std::max(count + 1, std::min(16 * count, static_cast<long>(std::ceil(wanted))));
    }
  }

  double run(const std::function<void()>& op, long count) {
    if (together_) together_->barrier();
    const double start = clock_.seconds();
    for (long i = 0; i < count; ++i) op();
    backend_.synchronize();
    const double seconds = clock_.seconds() - start;
    return together_ ? together_->max(seconds) : seconds;
  }

  Backend& backend_;
  const core::Clock& clock_;
  const ProfileParams& params_;
  Passes& passes_;
  device::Communicator* together_ = nullptr;
  std::size_t next_point_ = 0, next_answer_ = 0;
};

// Fills a buffer with small random values of type t (a GEMM of zeros may run faster).
void randomize(Backend& b, DType t, const Buffer& buffer, std::size_t count) {
  std::vector<float> host(count);
  unsigned state = 12345;
  for (float& x : host) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  Buffer wide(b, count * sizeof(float));
  b.upload(wide.data(), host.data(), wide.bytes());
  b.cast(DType::kF32, wide.data(), t, buffer.data(), count);
  b.synchronize();
}

std::string lowercase_words(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

struct Steps {
  const Progress& progress;
  int total;
  std::string pass;  // ", pass 2 of 3" where there are several
  int done = 0;
  void next(const std::string& name) {
    if (progress) progress(name + pass, static_cast<double>(done) / total);
    ++done;
  }
};

void measure_launch(Backend& b, Timer& timer, hw::GpuProfile& p) {
  const Buffer tiny(b, 16);
  p.launch = timer.time([&] { b.fill_zero(tiny.data(), 16); });
}

void measure_memory(Backend& b, Timer& timer, const ProfileParams& params, hw::GpuProfile& p) {
  const auto largest = static_cast<std::size_t>(params.largest_buffer);
  const Buffer from(b, largest), to(b, largest), sink(b, sizeof(float));
  b.fill_zero(from.data(), largest);
  b.fill_zero(to.data(), largest);
  double rate = 0;  // the best so far, to predict the next point
  std::size_t points = 0;
  for (std::size_t bytes = 1 << 20; bytes <= largest; bytes *= 4, ++points) {
    if (rate > 0 && !timer.affordable(2.0 * static_cast<double>(bytes) / rate, points)) break;
    const struct {
      const char* op;
      double moved;
      std::function<void()> run;
    } ops[] = {
        {"read", static_cast<double>(bytes), [&] { b.read_all(from.data(), bytes, sink.as<float>()); }},
        {"write", static_cast<double>(bytes), [&] { b.fill_zero(to.data(), bytes); }},
        {"copy", 2.0 * static_cast<double>(bytes), [&] { b.copy(to.data(), from.data(), bytes); }},
    };
    for (const auto& op : ops) {
      hw::BandwidthMeasurement m{op.op, op.moved, timer.time(op.run)};
      rate = std::max(rate, m.bytes / m.seconds.median);
      p.bandwidths.push_back(m);
    }
  }
}

// The optimizer step over parameter counts from 64 Ki up to as many as the largest buffer's
// budget holds (four fp32 arrays and the working copy), all of them in buffers allocated once.
void measure_optimizer(Backend& b, Timer& timer, const ProfileParams& params, hw::GpuProfile& p) {
  const DType t = params.dtype;
  const auto copy = static_cast<double>(device::dtype_bytes(t));
  // A parameter's arrays: master weight, moments and gradient in fp32, the working copy.
  const double held = 4 * sizeof(float) + copy;
  // What its step moves: master weight and moments read and written, gradient read, copy written.
  const double moved = 6 * sizeof(float) + sizeof(float) + copy;
  std::vector<std::size_t> counts;
  for (std::size_t count = 1 << 16; held * static_cast<double>(count) <= 1.5 * params.largest_buffer; count *= 4) {
    counts.push_back(count);
  }
  if (counts.empty()) return;
  const std::size_t most = counts.back();
  const Buffer master(b, most * sizeof(float)), m(b, most * sizeof(float)), v(b, most * sizeof(float)),
      grad(b, most * sizeof(float)), weight(b, most * device::dtype_bytes(t));
  randomize(b, DType::kF32, master, most);
  randomize(b, DType::kF32, grad, most);
  b.fill_zero(m.data(), m.bytes());
  b.fill_zero(v.data(), v.bytes());
  const device::AdamW options;
  double rate = 0;
  std::size_t points = 0;
  for (std::size_t count : counts) {
    const double bytes = moved * static_cast<double>(count);
    if (rate > 0 && !timer.affordable(bytes / rate, points++)) break;
    hw::OptimizerMeasurement point{device::dtype_name(t), static_cast<double>(count), bytes, timer.time([&] {
                                     b.adamw(t, master.as<float>(), m.as<float>(), v.as<float>(), grad.as<float>(),
                                             weight.data(), count, options);
                                   })};
    rate = std::max(rate, bytes / point.seconds.median);
    p.optimizer_steps.push_back(point);
  }
}

// The GEMMs of a layer's weight of `n` outputs and `k` inputs (a square one at a width: n = k)
// at each of `tokens`, as far as the budget goes. `seen`: the best rate measured at each token
// count on the narrower widths, which predicts a point's time better than this width's smaller
// token counts do.
//
// A pass reads each layer's weights once, from memory the other layers and the activations
// have moved them out of since: the calls take their weights in turn from copies that fill
// largest_buffer, more than a GPU's L2 or a CPU's last-level cache holds. One weight called
// again and again stays in the cache, and a decode step's few rows, which read the weights
// and do little else, then run at the cache's speed: on a 2-core VM (the cpu backend, one
// core) 2.1 to 2.7 times the rate of weights in turn at 1 to 8 tokens, 1.0 to 1.2 from 16 up.
void measure_gemm(Backend& b, Timer& timer, const ProfileParams& params, DType t, int n, int k,
                  const std::vector<int>& tokens, std::map<int, double>& seen, hw::GpuProfile& p) {
  if (tokens.empty()) return;
  const int most = tokens.back();
  const std::size_t e = device::dtype_bytes(t);
  const std::size_t elements = static_cast<std::size_t>(most) * static_cast<std::size_t>(std::max(n, k));
  const std::size_t weight = static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
  if (static_cast<double>((2 * elements + weight) * e) > params.largest_buffer * 1.5) return;
  const std::size_t copies = std::max<std::size_t>(1, static_cast<std::size_t>(params.largest_buffer) / (weight * e));
  const Buffer a(b, elements * e), weights(b, copies * weight * e), c(b, elements * e);
  randomize(b, t, a, elements);
  const auto copy = [&](std::size_t i) { return static_cast<std::byte*>(weights.data()) + i * weight * e; };
  randomize(b, t, Buffer::view(copy(0), weight * e), weight);
  for (std::size_t i = 1; i < copies; ++i) b.copy(copy(i), copy(0), weight * e);
  std::size_t next = 0;
  double rate = 0;
  std::size_t points = 0;
  for (int m : tokens) {
    const device::Gemm g{t, m, n, k, true};
    const double flops = 2.0 * m * n * k;
    const double predicted = std::max(rate, seen.count(m) ? seen[m] : 0.0);
    if (predicted > 0 && !timer.affordable(flops / predicted, points++)) break;
    hw::GemmMeasurement point{device::dtype_name(t), m, n, k,
                              timer.time([&] { b.gemm(g, a.data(), copy(next++ % copies), c.data()); })};
    rate = std::max(rate, point.flops() / point.seconds.median);
    seen[m] = std::max(seen[m], point.flops() / point.seconds.median);
    p.gemms.push_back(point);
  }
}

// The backward's weight-gradient GEMM of a square layer `width` wide over `tokens` rows, as the
// executor runs it (dW += dY^T X, fp32 accumulated): the same flops as the forward's, but the
// whole weight is its output and the tokens its inner dimension. The gradients a pass writes are
// every layer's own, cold: the calls take theirs in turn from copies that fill largest_buffer.
// `seen`: the forward's best rate at each token count, to budget the points by.
void measure_weight_gradient(Backend& b, Timer& timer, const ProfileParams& params, DType t, int width,
                             const std::vector<int>& tokens, const std::map<int, double>& seen, hw::GpuProfile& p) {
  const std::size_t e = device::dtype_bytes(t);
  const std::size_t elements = static_cast<std::size_t>(tokens.back()) * static_cast<std::size_t>(width);
  const std::size_t gradient = static_cast<std::size_t>(width) * static_cast<std::size_t>(width) * sizeof(float);
  if (static_cast<double>(2 * elements * e + gradient) > params.largest_buffer * 1.5) return;
  const std::size_t copies = std::max<std::size_t>(1, static_cast<std::size_t>(params.largest_buffer) / gradient);
  const Buffer dy(b, elements * e), x(b, elements * e), gradients(b, copies * gradient);
  randomize(b, t, dy, elements);
  randomize(b, t, x, elements);
  const auto copy = [&](std::size_t i) { return static_cast<std::byte*>(gradients.data()) + i * gradient; };
  randomize(b, DType::kF32, Buffer::view(copy(0), gradient), gradient / sizeof(float));
  for (std::size_t i = 1; i < copies; ++i) b.copy(copy(i), copy(0), gradient);
  std::size_t next = 0;
  double rate = 0;
  std::size_t points = 0;
  for (int m : tokens) {
    device::Gemm g{t, width, width, m};
    g.a_transposed = true;
    g.c_fp32 = true;
    g.accumulate = true;
    const double flops = 2.0 * m * width * width;
    const auto forward = seen.find(m);
    const double predicted = std::max(rate, forward != seen.end() ? forward->second : 0.0);
    if (predicted > 0 && !timer.affordable(flops / predicted, points++)) break;
    hw::GemmMeasurement point{device::dtype_name(t), m, width, width,
                              timer.time([&] { b.gemm(g, dy.data(), x.data(), copy(next++ % copies)); }), true};
    rate = std::max(rate, point.flops() / point.seconds.median);
    p.gemms.push_back(point);
  }
}

void measure_attention(Backend& b, Timer& timer, const ProfileParams& params, hw::GpuProfile& p) {
  const DType t = params.dtype;
  const std::vector<int> batches = params.quick ? std::vector<int>{1, 16} : std::vector<int>{1, 8, 32, 128};
  const std::vector<int> lengths = params.quick ? std::vector<int>{512, 4096} : std::vector<int>{256, 1024, 4096, 16384};
  for (const int heads : {kHeads, kWideGroupHeads}) {
    double rate = 0;  // FLOP/s, the best of this layout's points so far
    std::size_t measured = 0;
    for (int batch : batches) {
      for (int length : lengths) {
        hw::AttentionMeasurement m{device::dtype_name(t), batch, length, heads, kKvHeads, kHeadDim, 0, {}};
        m.bytes = 2.0 * batch * length * kKvHeads * kHeadDim * static_cast<double>(device::dtype_bytes(t));
        if (m.bytes > params.largest_buffer) continue;
        if (rate > 0 && !timer.affordable(m.flops() / rate, measured)) continue;
        const std::size_t cache = static_cast<std::size_t>(batch) * length * kKvHeads * kHeadDim;
        const std::size_t queries = static_cast<std::size_t>(batch) * heads * kHeadDim;
        const Buffer k(b, cache * device::dtype_bytes(t)), v(b, cache * device::dtype_bytes(t)),
            q(b, queries * device::dtype_bytes(t)), out(b, queries * device::dtype_bytes(t)),
            lens(b, static_cast<std::size_t>(batch) * sizeof(int));
        randomize(b, t, k, cache);
        randomize(b, t, v, cache);
        randomize(b, t, q, queries);
        const std::vector<int> host_lengths(static_cast<std::size_t>(batch), length);
        b.upload(lens.data(), host_lengths.data(), lens.bytes());
        const device::DecodeAttention shape{t, batch, heads, kKvHeads, kHeadDim, length};
        m.seconds = timer.time([&] { b.decode_attention(shape, q.data(), k.data(), v.data(), lens.as<int>(), out.data()); });
        rate = std::max(rate, m.flops() / m.seconds.median);
        p.attention.push_back(m);
        ++measured;
      }
    }
  }
}

// A pass's attention (ProfileParams::pass_attention), forward and backward timed apart.
void measure_pass_attention(Backend& b, Timer& timer, const ProfileParams& params, hw::GpuProfile& p) {
  const DType t = params.dtype;
  double rate = 0;
  for (const auto& [sequences, length] : params.pass_attention) {
    hw::PassAttentionMeasurement m{device::dtype_name(t), sequences, length, kPassHeads, kPassKvHeads, kHeadDim, {}, {}};
    if (rate > 0 && !timer.affordable(m.both_flops() / rate, p.pass_attention.size())) break;
    const int tokens = sequences * length;
    const std::size_t rows = static_cast<std::size_t>(tokens) * kPassHeads * kHeadDim;
    const std::size_t kv = static_cast<std::size_t>(tokens) * kPassKvHeads * kHeadDim;
    const std::size_t e = device::dtype_bytes(t);
    // q, out and their gradients; k, v and theirs.
    if (static_cast<double>(4 * (rows + kv) * e) > params.largest_buffer) break;
    const Buffer q(b, rows * e), k(b, kv * e), v(b, kv * e), out(b, rows * e), dout(b, rows * e), dq(b, rows * e),
        dk(b, kv * e), dv(b, kv * e), lse(b, static_cast<std::size_t>(tokens) * kPassHeads * sizeof(float)),
        delta(b, lse.bytes()), starts(b, static_cast<std::size_t>(sequences + 1) * sizeof(int));
    randomize(b, t, q, rows);
    randomize(b, t, k, kv);
    randomize(b, t, v, kv);
    randomize(b, t, dout, rows);
    std::vector<int> host_starts(static_cast<std::size_t>(sequences) + 1);
    for (int s = 0; s <= sequences; ++s) host_starts[s] = s * length;
    b.upload(starts.data(), host_starts.data(), starts.bytes());
    const device::PackedAttention shape{t, sequences, tokens, kPassHeads, kPassKvHeads, kHeadDim};
    m.forward = timer.time([&] {
      b.packed_attention(shape, q.data(), k.data(), v.data(), starts.as<int>(), out.data(), lse.as<float>());
    });
    m.backward = timer.time([&] {
      b.packed_attention_backward(shape, q.data(), k.data(), v.data(), starts.as<int>(), out.data(), dout.data(),
                                  lse.as<float>(), delta.as<float>(), dq.data(), dk.data(), dv.data());
    });
    rate = std::max(rate, m.flops_per_second());
    p.pass_attention.push_back(m);
  }
}

void measure_transfers(Backend& b, Timer& timer, const ProfileParams& params, hw::GpuProfile& p) {
  const auto largest = static_cast<std::size_t>(std::min(params.largest_buffer, 256.0 * (1 << 20)));
  std::vector<char> host(largest, 1);
  const Buffer on_device(b, largest);
  double rate = 0;
  std::size_t points = 0;
  for (std::size_t bytes : {std::size_t{4}, std::size_t{1} << 12, std::size_t{1} << 20, std::size_t{1} << 24, largest}) {
    if (bytes > largest) break;
    if (rate > 0 && !timer.affordable(static_cast<double>(bytes) / rate, points++)) break;
    hw::BandwidthMeasurement up{"host_to_device", static_cast<double>(bytes),
                                timer.time([&] { b.upload(on_device.data(), host.data(), bytes); })};
    hw::BandwidthMeasurement down{"device_to_host", static_cast<double>(bytes),
                                  timer.time([&] { b.download(host.data(), on_device.data(), bytes); })};
    rate = std::max(rate, up.bytes / up.seconds.median);
    p.bandwidths.push_back(up);
    p.bandwidths.push_back(down);
  }
}

// Bus bandwidth as NCCL's tests define it, so that one figure compares across operations and
// process counts: the algorithm's rate (the message over the time) times the share of it each
// process's link carries.
double bus_factor(const std::string& op, int ranks) {
  const double n = ranks;
  if (op == "all_reduce") return 2 * (n - 1) / n;
  if (op == "broadcast") return 1;
  return (n - 1) / n;  // all_gather, reduce_scatter
}

// The collectives over every process, from 1 KiB to the largest buffer, in a 16-bit type (the
// GEMMs', bf16 where those are fp32) and in fp32: a trainer's gradients cross in fp32, its
// weights and activations in 16 bits, and a transport may sum the two at different rates (MPI
// sums fp32 itself, bf16 through a user operation). A broadcast moves bytes whatever their
// type: once, in 16 bits. A message is what NCCL's tests call its size: each process's buffer
// for all-reduce and broadcast, the gathered whole for all-gather and the scattered whole for
// reduce-scatter.
void measure_collectives(Backend& b, device::Communicator& comm, const core::Clock& clock, const ProfileParams& params,
                         Passes& passes, hw::GpuProfile& p) {
  Timer timer(b, clock, params, passes, comm);
  const int n = comm.size();
  const auto largest = static_cast<std::size_t>(params.largest_buffer);
  const Buffer one(b, largest), other(b, largest);
  b.fill_zero(one.data(), largest);
  b.fill_zero(other.data(), largest);
  const DType half = params.dtype == DType::kF32 ? DType::kBf16 : params.dtype;
  for (const auto& [op, t] : std::initializer_list<std::pair<std::string, DType>>{{"all_reduce", half},
                                                                                 {"all_reduce", DType::kF32},
                                                                                 {"all_gather", half},
                                                                                 {"all_gather", DType::kF32},
                                                                                 {"reduce_scatter", half},
                                                                                 {"reduce_scatter", DType::kF32},
                                                                                 {"broadcast", half}}) {
    const std::size_t element = device::dtype_bytes(t);
    double rate = 0;
    std::size_t points = 0;
    for (std::size_t bytes = 1 << 10; bytes <= largest; bytes *= 4, ++points) {
      // Whole elements, and a whole number of them per process.
      const std::size_t count = std::max<std::size_t>(1, bytes / element / n) * n;
      const double message = static_cast<double>(count * element);
      if (rate > 0 && !timer.affordable(message / rate, points)) break;
      std::function<void()> run;
      if (op == "all_reduce") {
        run = [&] { comm.all_reduce(t, one.data(), one.data(), count); };
      } else if (op == "all_gather") {
        run = [&] { comm.all_gather(t, one.data(), other.data(), count / n); };
      } else if (op == "reduce_scatter") {
        run = [&] { comm.reduce_scatter(t, one.data(), other.data(), count / n); };
      } else {
        run = [&] { comm.broadcast(t, one.data(), count, 0); };
      }
      hw::CollectiveMeasurement m{op, std::string(device::dtype_name(t)), n, message, timer.time(run), 0};
      rate = message / m.seconds.median;
      m.bus_bandwidth = rate * bus_factor(op, n);
      p.collectives.push_back(m);
    }
  }
  // A gradient's all-reduce as data-parallel trainers send it: kGradientBuckets buckets of
  // params.gradient_bucket bytes one after another, each from memory the one before it is not
  // in. Its rate is what the cost model prices a data-parallel ring's gradients at; one large
  // buffer again and again, or one cached, need not run at it (Open MPI's on a CPU runs 16 MiB at
  // once from its caches faster, 64 MiB at once slower).
  for (const DType t : {half, DType::kF32}) {
    const std::size_t element = device::dtype_bytes(t);
    const std::size_t bucket = std::max<std::size_t>(1, static_cast<std::size_t>(params.gradient_bucket) / element);
    const std::size_t count = std::min(kGradientBuckets * bucket, largest / element);
    const auto run = [&] { device::all_reduce_in_buckets(comm, t, one.data(), count, bucket); };
    const double message = static_cast<double>(count * element);
    hw::CollectiveMeasurement m{"all_reduce", std::string(device::dtype_name(t)), n, message, timer.time(run), 0,
                                static_cast<double>(std::min(bucket, count) * element)};
    m.bus_bandwidth = message / m.seconds.median * bus_factor("all_reduce", n);
    p.collectives.push_back(m);
  }
}

// Every ordered pair of processes: a small transfer (its latency: half a round trip, as one
// message alone would be timed by its sender before it arrives) and a large one (its bandwidth,
// messages back to back), one pair at a time while the others wait. The large messages stream
// from successive slices of a buffer several times their size, into successive slices of the
// receiver's: what a weight sync does, reading tensors spread over memory. A message sent again
// and again from one buffer comes from a CPU's last-level cache; on the 2-core VM of
// benchmarks/RESULTS.md 16 MiB so measured 5.5 GB/s where the sync of a 149 MB model ran at
// two thirds of that.
void measure_peer_transfers(Backend& b, device::Communicator& comm, const core::Clock& clock,
                            const ProfileParams& params, Passes& passes, hw::GpuProfile& p) {
  Timer timer(b, clock, params, passes, comm);
  const DType t = DType::kF32;
  constexpr std::size_t kSlices = 8;
  const std::size_t large = static_cast<std::size_t>(std::min(params.largest_buffer / kSlices,
                                                              params.quick ? 16.0 * (1 << 20) : 64.0 * (1 << 20)));
  const Buffer buffer(b, large * kSlices);
  b.fill_zero(buffer.data(), large * kSlices);
  const auto slice = [&](std::size_t i) { return static_cast<std::byte*>(buffer.data()) + (i % kSlices) * large; };
  const int me = comm.rank();
  for (int from = 0; from < comm.size(); ++from) {
    for (int to = 0; to < comm.size(); ++to) {
      if (from == to) continue;
      const std::string sender = "device" + std::to_string(from), receiver = "device" + std::to_string(to);
      hw::TimeSpread round_trip = timer.time([&] {
        if (me == from) {
          comm.send(t, buffer.data(), 1, to);
          comm.recv(t, buffer.data(), 1, to);
        } else if (me == to) {
          comm.recv(t, buffer.data(), 1, from);
          comm.send(t, buffer.data(), 1, from);
        }
      });
      for (double* x : {&round_trip.median, &round_trip.min, &round_trip.max}) *x /= 2;
      p.transfers.push_back({sender, receiver, static_cast<double>(sizeof(float)), round_trip});
      // Every process calls the timed operation as often (the timer agrees the count), so the
      // sender's and the receiver's slices advance together.
      std::size_t next = 0;
      const hw::TimeSpread streamed = timer.time([&] {
        if (me == from) comm.send(t, slice(next), large / sizeof(float), to);
        if (me == to) comm.recv(t, slice(next), large / sizeof(float), from);
        ++next;
      });
      p.transfers.push_back({sender, receiver, static_cast<double>(large), streamed});
    }
  }
}

void measure_device(Backend& backend, const core::Clock& clock, const ProfileParams& params, Passes& passes,
                    Steps& steps, hw::GpuProfile& p) {
  Timer timer(backend, clock, params, passes);
  steps.next("launch overhead");
  measure_launch(backend, timer, p);
  steps.next("memory bandwidth");
  measure_memory(backend, timer, params, p);
  steps.next("optimizer step");
  measure_optimizer(backend, timer, params, p);
  const std::vector<int> tokens = gemm_tokens(params.tokens, backend.info());
  std::map<int, double> seen;
  for (int width : params.widths) {
    steps.next("GEMM " + std::string(device::dtype_name(params.dtype)) + " width " + std::to_string(width));
    measure_gemm(backend, timer, params, params.dtype, width, width, tokens, seen, p);
  }
  if (params.widths.size() >= 2) {
    // Between the narrowest width and the widest, the two shapes of the same weight: the wide
    // width out and the narrow in, and the other way (hw::GpuProfile::gemm_reduction_share),
    // at the token counts both squares reached.
    const int narrow = params.widths.front(), wide = params.widths.back();
    steps.next(fmt::format("GEMM {} shapes {} x {}", device::dtype_name(params.dtype), narrow, wide));
    const auto reached = [&](int width) {
      std::set<int> at;
      for (const hw::GemmMeasurement& g : p.gemms) {
        if (!g.weight_gradient && g.n == width && g.k == width && g.dtype == device::dtype_name(params.dtype)) {
          at.insert(g.tokens);
        }
      }
      return at;
    };
    const std::set<int> at_narrow = reached(narrow), at_wide = reached(wide);
    std::vector<int> both;
    std::set_intersection(at_narrow.begin(), at_narrow.end(), at_wide.begin(), at_wide.end(), std::back_inserter(both));
    std::map<int, double> shapes_seen = seen;
    measure_gemm(backend, timer, params, params.dtype, wide, narrow, both, shapes_seen, p);
    measure_gemm(backend, timer, params, params.dtype, narrow, wide, both, shapes_seen, p);
  }
  // The weight gradient at the width the GEMM curve takes (fit()): closest to the reference.
  const int gradient_width = *std::min_element(params.widths.begin(), params.widths.end(),
                                              [](int a, int b) { return hw::closer_to_reference(a, b); });
  steps.next("GEMM weight gradient width " + std::to_string(gradient_width));
  measure_weight_gradient(backend, timer, params, params.dtype, gradient_width, tokens, seen, p);
  steps.next("GEMM fp32");
  if (params.dtype != DType::kF32) {
    // One large fp32 point: the fp32 peak a new type needs, at the listed width nearest
    // kFp32Width (in the logarithm).
    const auto off = [](int width) { return std::abs(std::log2(static_cast<double>(width) / kFp32Width)); };
    const int width = *std::min_element(params.widths.begin(), params.widths.end(),
                                        [&](int a, int b) { return off(a) < off(b); });
    std::map<int, double> none;
    measure_gemm(backend, timer, params, DType::kF32, width, width, {2048}, none, p);
  }
  steps.next("decode attention");
  measure_attention(backend, timer, params, p);
  steps.next("pass attention");
  measure_pass_attention(backend, timer, params, p);
  steps.next("host transfers");
  measure_transfers(backend, timer, params, p);
}

}  // namespace

std::vector<int> gemm_tokens(std::vector<int> tokens, const device::DeviceInfo& info) {
  if (tokens.empty()) return tokens;
  const int most = *std::max_element(tokens.begin(), tokens.end());
  for (int rows : info.gemm_row_limits) {
    if (rows < most) tokens.push_back(rows);
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

ProfileParams ProfileParams::quick_settings() {
  ProfileParams p;
  p.quick = true;
  p.repeats = 1;
  p.repeat_seconds = 1e-3;
  p.point_seconds = 0.6;
  p.widths = {512, 1024, 4096};
  // 256 tokens, not 512, second: a CPU measures the first two whatever they cost, and its rate
  // changed by 1% to 6% from 128 tokens to 512 in two quick profiles on a 2-core VM.
  p.pass_attention = {{1, 128}, {1, 256}, {4, 1024}};
  p.tokens = {1, 4, 8, 16, 64, 256, 1024, 2048, 4096, 8192};
  p.largest_buffer = 256.0 * (1 << 20);
  return p;
}

hw::GpuProfile measure(Backend& backend, device::Communicator& comm, const core::Clock& clock,
                       const ProfileParams& params, const Progress& progress) {
  if (params.passes < 1 || params.repeats < 1) throw std::invalid_argument("profile: passes and repeats must be >= 1");
  const bool together = comm.size() > 1;
  const int steps_a_pass =
      8 + static_cast<int>(params.widths.size()) + (params.widths.size() >= 2 ? 1 : 0) + (together ? 2 : 0);
  Steps steps{progress, steps_a_pass * params.passes, ""};
  Passes device_passes, collective_passes, transfer_passes;
  hw::GpuProfile blank;
  const device::DeviceInfo& info = backend.info();
  blank.device = hw::DeviceDescription{info.backend, info.name,   info.count,  info.memory,
                                       info.compute_units, info.driver, info.runtime};
  blank.device_name = info.name;
  hw::GpuProfile p;
  for (int pass = 1; pass <= params.passes; ++pass) {
    // Each pass measures afresh; its timings join the earlier passes' (Passes), so the last
    // pass's profile has every repeat.
    p = blank;
    if (params.passes > 1) steps.pass = fmt::format(", pass {} of {}", pass, params.passes);
    // Rank 0 measures its device while the others wait without spinning; then all of them
    // measure what passes between them.
    if (comm.rank() == 0) measure_device(backend, clock, params, device_passes, steps, p);
    if (together) {
      comm.barrier();
      steps.next("collectives over " + std::to_string(comm.size()) + " processes");
      measure_collectives(backend, comm, clock, params, collective_passes, p);
      steps.next("transfers between processes");
      measure_peer_transfers(backend, comm, clock, params, transfer_passes, p);
    }
    for (Passes* done : {&device_passes, &collective_passes, &transfer_passes}) done->recorded = true;
  }
  fit(p);
  return p;
}

namespace {

// A GEMM of n outputs and k inputs runs at the rate of a square one of width k^s n^(1 - s)
// (hw::Efficiency::gemm_reduction_share). At each token count with both squares a and b
// measured (a < b) and both shapes between them: on the log-log line through the squares'
// rates, of slope log(r_b / r_a) / log(b / a), the shape with k = b sits at a width
// (2s - 1) log(b / a) above the one with n = b, so s = 1/2 + log(r(k = b) / r(n = b)) /
// (2 log(r_b / r_a)). Where the squares' rates lie within 10% the width hardly moves the rate
// and the point says nothing. The median over the token counts, within [0, 1]; none without.
std::optional<double> reduction_share(const std::vector<hw::GemmMeasurement>& gemms,
                                      const std::map<int, std::map<int, double>>& squares) {
  std::vector<double> shares;
  for (const auto& [tokens, by_shape] : hw::gemm_shape_rates(gemms)) {
    const auto square = squares.find(tokens);
    if (square == squares.end()) continue;
    for (const auto& [shape, wide_in] : by_shape) {
      const auto [a, b] = shape;  // n = a, k = b
      if (a >= b) continue;
      const auto wide_out = by_shape.find({b, a});
      const auto ra = square->second.find(a), rb = square->second.find(b);
      if (wide_out == by_shape.end() || ra == square->second.end() || rb == square->second.end()) continue;
      const double spread = std::log(rb->second / ra->second);
      if (std::abs(spread) < std::log(1.1)) continue;
      shares.push_back(std::clamp(0.5 + std::log(wide_in / wide_out->second) / (2 * spread), 0.0, 1.0));
    }
  }
  if (shares.empty()) return std::nullopt;
  std::sort(shares.begin(), shares.end());
  const std::size_t half = shares.size() / 2;
  return shares.size() % 2 ? shares[half] : (shares[half - 1] + shares[half]) / 2;
}

}  // namespace

void fit(hw::GpuProfile& p) {
  // The GEMM curve: at each token count, the width measured there closest to the cost model's
  // reference width (hw::closer_to_reference).
  std::map<int, std::pair<int, double>> best;  // tokens -> (width, rate)
  // fp32 GEMMs beside half-precision ones give the fp32 peak only; alone, they are the curve.
  const bool half_measured =
      std::any_of(p.gemms.begin(), p.gemms.end(), [](const hw::GemmMeasurement& g) { return g.dtype != "fp32"; });
  for (const hw::GemmMeasurement& g : p.gemms) {
    if (g.weight_gradient || g.n != g.k) continue;
    const double rate = g.flops() / g.seconds.median;
    if (g.dtype == "fp32") p.fp32_flops = std::max(p.fp32_flops.value_or(0.0), rate);
    if (g.dtype == "fp32" && half_measured) continue;
    const auto [at, added] = best.try_emplace(g.tokens, g.n, rate);
    if (!added && (hw::closer_to_reference(g.n, at->second.first) || (g.n == at->second.first && rate > at->second.second))) {
      at->second = {g.n, rate};
    }
    if (g.tokens >= hw::kGemmLargeTokens) p.gemm_large_flops = std::max(p.gemm_large_flops.value_or(0.0), rate);
  }
  p.gemm_curve.clear();
  for (const auto& [tokens, point] : best) p.gemm_curve.emplace_back(tokens, point.second);
  if (!p.gemm_curve.empty()) {
    // The small-GEMM rate: the curve's at 256 tokens, as the cost model reads a curve.
    const auto& c = p.gemm_curve;
    p.gemm_small_flops = hw::gemm_curve_efficiency(c, hw::kGemmSmallTokens);
    if (!p.gemm_large_flops) p.gemm_large_flops = c.back().second;
  }
  // The width dependence: at the most tokens measured at two widths, how much faster the wider
  // GEMM runs, as the half width d of an efficiency w / (w + d) (cost::CostParams::
  // gemm_width_half): R = rate(b) / rate(a) = b (a + d) / (a (b + d)), so d = a b (1 - R) /
  // (R a - b); none where the wider is no faster, at most 16 times the wider where it is
  // nearly as much faster as it is wider.
  std::map<int, std::map<int, double>> by_tokens;  // tokens -> width -> rate
  for (const hw::GemmMeasurement& g : p.gemms) {
    if (g.weight_gradient || (g.dtype == "fp32" && half_measured)) continue;
    if (g.n != g.k) continue;
    double& rate = by_tokens[g.tokens][g.n];
    rate = std::max(rate, g.flops() / g.seconds.median);
  }
  // Each width's own curve, where more than one was measured: the cost model moves a GEMM's
  // rate by its width with them (hw::gemm_width_ratio).
  std::map<int, hw::GemmCurve> by_width;
  for (const auto& [tokens, widths] : by_tokens) {
    for (const auto& [width, rate] : widths) by_width[width].emplace_back(tokens, rate);
  }
  p.gemm_curves.clear();
  if (by_width.size() >= 2) {
    for (auto& [width, curve] : by_width) p.gemm_curves.push_back({static_cast<double>(width), std::move(curve)});
  }
  // The weight gradient's curve: its best rate at each token count, in the GEMMs' element type.
  std::map<int, double> weight_gradient;
  for (const hw::GemmMeasurement& g : p.gemms) {
    if (!g.weight_gradient || (g.dtype == "fp32" && half_measured)) continue;
    double& rate = weight_gradient[g.tokens];
    rate = std::max(rate, g.flops() / g.seconds.median);
  }
  p.weight_gradient_curve.assign(weight_gradient.begin(), weight_gradient.end());
  p.gemm_width_half.reset();
  for (auto it = by_tokens.rbegin(); it != by_tokens.rend(); ++it) {
    const std::map<int, double>& widths = it->second;
    if (widths.size() < 2) continue;
    const double a = widths.begin()->first, b = widths.rbegin()->first;
    const double r = widths.rbegin()->second / widths.begin()->second;
    const double most = 16.0 * b;
    p.gemm_width_half = r <= 1 ? 0.0 : r * a >= b ? most : std::min(most, a * b * (1 - r) / (r * a - b));
    break;
  }
  p.gemm_reduction_share = reduction_share(p.gemms, by_tokens);
  // Reading memory: the largest buffer read (the cost model streams weights and caches);
  // copying: the largest buffer copied (a weight sync copies whole shards); host to device:
  // the largest transfer (smaller ones may stay in a CPU's caches).
  double largest_read = 0, largest_copy = 0, largest_upload = 0;
  for (const hw::BandwidthMeasurement& m : p.bandwidths) {
    const double rate = m.bytes / m.seconds.median;
    if (m.op == "read" && m.bytes >= largest_read) {
      largest_read = m.bytes;
      p.memory_bandwidth = rate;
    }
    if (m.op == "copy" && m.bytes >= largest_copy) {
      largest_copy = m.bytes;
      p.copy_bandwidth = rate;
    }
    if (m.op == "host_to_device" && m.bytes >= largest_upload) {
      largest_upload = m.bytes;
      p.host_to_device_bandwidth = rate;
    }
  }
  // The optimizer step: over the most parameters (fewer may stay in a cache).
  double most_parameters = 0;
  for (const hw::OptimizerMeasurement& o : p.optimizer_steps) {
    if (o.parameters >= most_parameters) {
      most_parameters = o.parameters;
      p.optimizer_bandwidth = o.bytes / o.seconds.median;
    }
  }
  // Decode attention: the cache's read at its best point, and where two group sizes were
  // measured, the FLOPs at theirs: the two sides of its roofline (a kernel bound by the read
  // reaches its FLOPs rate only at the larger group, one bound by compute at either).
  std::set<int> groups;
  p.decode_attention_bandwidth.reset();
  p.decode_attention_flops.reset();
  for (const hw::AttentionMeasurement& a : p.attention) {
    p.decode_attention_bandwidth = std::max(p.decode_attention_bandwidth.value_or(0.0), a.bytes / a.seconds.median);
    p.decode_attention_flops = std::max(p.decode_attention_flops.value_or(0.0), a.flops() / a.seconds.median);
    groups.insert(a.group());
  }
  if (groups.size() < 2) p.decode_attention_flops.reset();
  // A pass's attention: at the most tokens measured (a micro-batch's), forward and backward.
  p.attention_flops.reset();
  double most_tokens = 0;
  for (const hw::PassAttentionMeasurement& a : p.pass_attention) {
    const double tokens = static_cast<double>(a.sequences) * a.length;
    if (tokens >= most_tokens) {
      most_tokens = tokens;
      p.attention_flops = a.flops_per_second();
    }
  }
  if (p.launch) p.launch_overhead = p.launch->median;
  // Between devices: the median pair, its largest transfer's rate and its smallest's time.
  std::map<std::pair<std::string, std::string>, std::pair<const hw::TransferMeasurement*, const hw::TransferMeasurement*>>
      pairs;  // (from, to) -> (smallest, largest)
  for (const hw::TransferMeasurement& t : p.transfers) {
    auto& [smallest, largest] = pairs[{t.from, t.to}];
    if (!smallest || t.bytes < smallest->bytes) smallest = &t;
    if (!largest || t.bytes > largest->bytes) largest = &t;
  }
  if (!pairs.empty()) {
    std::vector<double> rates, latencies;
    for (const auto& [endpoints, extremes] : pairs) {
      rates.push_back(extremes.second->bytes / extremes.second->seconds.median);
      latencies.push_back(extremes.first->seconds.median);
    }
    p.intra_node_bandwidth = median_of(rates);
    p.intra_node_latency = median_of(latencies);
  }
  // The all-reduce's best in 16 bits at once (Efficiency::collective), and each collective's
  // rate at its largest message by type: a data-parallel ring's gradients and gathers are
  // large, and a CPU's collectives are fastest on messages its caches hold. A gradient's
  // all-reduce in buckets, where measured, is the all-reduce's rate instead: the ring's
  // all-reduce is the gradients', which cross in buckets.
  std::map<std::pair<std::string, std::string>, const hw::CollectiveMeasurement*> largest;
  p.collective_rates.clear();
  for (const hw::CollectiveMeasurement& c : p.collectives) {
    if (c.op == "all_reduce" && c.dtype != "fp32" && c.bucket <= 0) {
      p.allreduce_bus_bandwidth = std::max(p.allreduce_bus_bandwidth.value_or(0.0), c.bus_bandwidth);
    }
    if (c.op == "broadcast") continue;
    const hw::CollectiveMeasurement*& at = largest[{c.op, c.dtype}];
    // A bucketed all-reduce before any at once, then the largest message.
    if (!at || std::pair(c.bucket > 0, c.bytes) > std::pair(at->bucket > 0, at->bytes)) at = &c;
  }
  for (const auto& [key, c] : largest) p.collective_rates.push_back({key.first, key.second, c->bus_bandwidth});
}

std::string match_gpu_type(const device::DeviceInfo& info, const hw::Catalog& catalog) {
  if (info.backend != "cuda") return "";
  std::string device = " " + lowercase_words(info.name) + " ";
  for (char& c : device) c = c == '-' ? ' ' : c;
  std::string best;
  int best_words = 0;
  for (const hw::GpuSpec& spec : catalog.gpus) {
    // The model word (the first with a digit: a100, l40s, 4090) must be in the device's name;
    // the other words (sxm, pcie) break ties. A PCIe or NVL board says so in its name, an SXM
    // one need not ("NVIDIA H100 80GB HBM3", "NVIDIA H200"): a type whose name gives one of
    // those two form factors needs it in the device's.
    std::istringstream words(lowercase_words(spec.name));
    int matched = 0;
    bool model_seen = false, fits = true;
    for (std::string part; std::getline(words, part, '-');) {
      const bool found = device.find(" " + part + " ") != std::string::npos;
      const bool model = !model_seen && std::any_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (model) {
        model_seen = true;
        fits = fits && found;
      }
      if ((part == "pcie" || part == "nvl") && !found) fits = false;
      matched += found ? 1 : 0;
    }
    if (!fits || std::abs(spec.memory - info.memory) > 0.1 * spec.memory) continue;
    if (matched > best_words) {
      best = spec.name;
      best_words = matched;
    }
  }
  return best;
}

std::string new_type_name(const device::DeviceInfo& info) {
  std::string name = info.name;
  const auto paren = name.find(" (");
  if (paren != std::string::npos) name.erase(paren);
  return (info.backend == "cpu" ? "cpu-" : "gpu-") + lowercase_words(name);
}

}  // namespace hetrl::profile
