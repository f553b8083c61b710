// The cpu backend: the host as a device. GEMMs go to OpenBLAS (fp32; bf16 and fp16 operands
// are widened to fp32 first, since Debian's OpenBLAS has no half-precision GEMM, and the result
// rounded back), but for products of a few rows by a bf16 weight (decode steps), which the
// backend sums itself; every other operation loops over the kernels of device/kernels.h. The device
// is the cores this process may run on: all of them alone, its share under a launcher that
// binds processes to cores (mpirun), and OpenBLAS runs one thread on each.

#include <cblas.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "device/backend.h"
#include "device/comm.h"
#include "device/host_memory.h"

namespace hetrl::device {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(' '));
        return name;
      }
    }
  }
  return "CPU";
}

// The cores this process may run on.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// A loop built for AVX-512 and AVX2 beside the baseline, the CPU's best chosen when the
// program loads (GCC on x86-64; elsewhere the baseline alone).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HETRL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HETRL_CPU_CLONES
#endif

// A product of a few rows (a decode step's, a row a sequence) by a bf16 weight stored
// transposed, summed straight from the 16-bit weights in fp32: each weight is read once. The
// sgemm path widens the weight to fp32 first, writing it out and reading it back, and packs it:
// on a 2-core VM that was half of a decode step's GEMM time (one core, a 896 x 4864 weight:
// sgemm 3.4-3.9 ms at 1 and 8 rows, this loop 1.1-2.1 ms at 1 to 8; in a slower spell sgemm
// 4.5-4.8 ms at each of 8 to 16 rows, this loop 2.1-4.4 ms at 10 to 14; past that sgemm is as
// fast). Sixteen partial sums a row, added in order at the end: the same result every call.
constexpr int kFewRows = 14;

using Lanes = float __attribute__((vector_size(64)));             // 16 floats
using WideBits = std::uint32_t __attribute__((vector_size(64)));  // 16 words
using HalfBits = std::uint16_t __attribute__((vector_size(32)));  // 16 bf16

template <int Rows, int Columns>
__attribute__((always_inline)) inline void few_rows_block(const float* a, const Bf16* bt, float* c, int n, int k,
                                                         int first, bool accumulate) {
  Lanes sums[Columns][Rows] = {};
  int i = 0;
  for (; i + 16 <= k; i += 16) {
    Lanes w[Columns];
    for (int q = 0; q < Columns; ++q) {
      HalfBits h;
      std::memcpy(&h, bt + static_cast<std::size_t>(first + q) * k + i, sizeof h);
      const WideBits bits = __builtin_convertvector(h, WideBits) << 16;
      std::memcpy(&w[q], &bits, sizeof bits);
    }
    for (int r = 0; r < Rows; ++r) {
      Lanes x;
      std::memcpy(&x, a + static_cast<std::size_t>(r) * k + i, sizeof x);
      for (int q = 0; q < Columns; ++q) sums[q][r] += x * w[q];
    }
  }
  for (int q = 0; q < Columns; ++q) {
    const Bf16* w = bt + static_cast<std::size_t>(first + q) * k;
    for (int r = 0; r < Rows; ++r) {
      float sum = 0;
      for (int l = 0; l < 16; ++l) sum += sums[q][r][l];
      for (int t = i; t < k; ++t) sum += a[static_cast<std::size_t>(r) * k + t] * to_float(w[t]);
      float& out = c[static_cast<std::size_t>(r) * n + first + q];
      out = accumulate ? out + sum : sum;
    }
  }
}

template <int Rows>
__attribute__((always_inline)) inline void few_rows(const float* a, const Bf16* bt, float* c, int n, int k,
                                                   bool accumulate) {
  // Weight rows read together, A's loads shared by them: as many as the vector registers hold
  // beside the rows' sums. A decode step of a 896-wide model on one core took 17-19% less at 3
  // to 6 rows with 4 than with 2, 18-20% less at 12 and 14 with 2 than with 1 (RESULTS.md, "The
  // few-row GEMM's columns").
  constexpr int kColumns = Rows <= 6 ? 4 : Rows <= 8 ? 3 : 2;
  int first = 0;
  for (; first + kColumns <= n; first += kColumns) few_rows_block<Rows, kColumns>(a, bt, c, n, k, first, accumulate);
  for (; first < n; ++first) few_rows_block<Rows, 1>(a, bt, c, n, k, first, accumulate);
}

HETRL_CPU_CLONES
void few_rows_gemm(const float* a, const Bf16* bt, float* c, int m, int n, int k, bool accumulate) {
  switch (m) {
    case 1: few_rows<1>(a, bt, c, n, k, accumulate); break;
    case 2: few_rows<2>(a, bt, c, n, k, accumulate); break;
    case 3: few_rows<3>(a, bt, c, n, k, accumulate); break;
    case 4: few_rows<4>(a, bt, c, n, k, accumulate); break;
    case 5: few_rows<5>(a, bt, c, n, k, accumulate); break;
    case 6: few_rows<6>(a, bt, c, n, k, accumulate); break;
    case 7: few_rows<7>(a, bt, c, n, k, accumulate); break;
    case 8: few_rows<8>(a, bt, c, n, k, accumulate); break;
    case 9: few_rows<9>(a, bt, c, n, k, accumulate); break;
    case 10: few_rows<10>(a, bt, c, n, k, accumulate); break;
    case 11: few_rows<11>(a, bt, c, n, k, accumulate); break;
    case 12: few_rows<12>(a, bt, c, n, k, accumulate); break;
    case 13: few_rows<13>(a, bt, c, n, k, accumulate); break;
    case 14: few_rows<14>(a, bt, c, n, k, accumulate); break;
    default: throw std::logic_error("few_rows_gemm: more rows than kFewRows");
  }
}

// The sum of squares of fp32 values in fp64 (a gradient norm's), in 32 lanes added in order at
// the end: one running sum waits on each addition before the next. Over 44.5 million values
// (a TP-2 shard's gradients of the calibration model) on one core of a 2-core VM, one running
// sum read 3.8-4.4 GB/s and the lanes 7.1-8.2 (three timings of each, a stand-alone copy of
// both loops). Each square of an fp32 value is exact in fp64, so fused and separate
// multiply-adds agree: the same result on every CPU.
using Floats8 = float __attribute__((vector_size(32)));
using Doubles8 = double __attribute__((vector_size(64)));

HETRL_CPU_CLONES
double lanes_sum_squares(const float* x, std::size_t count) {
  constexpr std::size_t kVectors = 4;
  Doubles8 sums[kVectors] = {};
  std::size_t i = 0;
  for (; i + 8 * kVectors <= count; i += 8 * kVectors) {
    for (std::size_t q = 0; q < kVectors; ++q) {
      Floats8 f;
      std::memcpy(&f, x + i + 8 * q, sizeof f);
      const Doubles8 d = __builtin_convertvector(f, Doubles8);
      sums[q] += d * d;
    }
  }
  double sum = 0;
  for (std::size_t q = 0; q < kVectors; ++q) {
    for (int l = 0; l < 8; ++l) sum += sums[q][l];
  }
  for (; i < count; ++i) sum += square(x[i]);
  return sum;
}

template <typename T>
const T* typed(const void* p) {
  return static_cast<const T*>(p);
}
template <typename T>
T* typed(void* p) {
  return static_cast<T*>(p);
}

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    info_.backend = "cpu";
    const int threads = usable_cores();
    openblas_set_num_threads(threads);
    info_.name = cpu_model_name() + " (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
    info_.compute_units = threads;
    info_.gemm_row_limits = {kFewRows};
    // The processes a launcher started on this host share its memory as they share its cores:
    // each device is its share.
    info_.memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
                   std::max(1, launch_from_environment().local_size);
    utsname u{};
    if (uname(&u) == 0) info_.driver = std::string(u.sysname) + " " + u.release;
    info_.runtime = openblas_get_config();
    if (const char* forced = std::getenv("OPENBLAS_CORETYPE")) {
      info_.runtime += std::string(" (OPENBLAS_CORETYPE=") + forced + ")";
    }
  }

  const DeviceInfo& info() const override { return info_; }

  ~CpuBackend() override { drop_cached(); }

  // Device memory is host memory in large pages from 1 MiB (device/host_memory.h), whose blocks
  // span whole huge pages. Those released are kept and handed out again, as a GPU runtime's
  // caching allocator keeps device memory: the host would otherwise hand the pages back and
  // fault each one in again, zeroed, when a buffer is allocated anew (a profile's passes, each
  // task's activations). A block serves any request its huge pages hold, up to an eighth more:
  // a scoring pass's activations, whose sizes move with the iteration's response lengths, take
  // the blocks the last one left. Kept for its exact size only, the first scoring task after
  // generation faulted its activations in each iteration, 1.06-1.13 times the second one's time
  // on the same sequences (1.03-1.07 with the blocks below 2 MiB from the C library;
  // benchmarks/RESULTS.md). Memory is counted as asked; at most a quarter of it is kept.
  void* allocate(std::size_t bytes) override {
    const std::size_t rounded = host_aligned_bytes(bytes);
    const std::size_t capacity = host_block_bytes(rounded);
    if (capacity >= kCachedFrom) {
      const auto kept = cached_.lower_bound(capacity);
      if (kept != cached_.end() && kept->first <= capacity + capacity / 8) {
        void* p = kept->second;
        const std::size_t held = kept->first;
        cached_.erase(kept);
        cached_bytes_ -= held;
        hand_out(p, rounded, held);
        return p;
      }
    }
    void* p = allocate_host(capacity);
    if (!p && !cached_.empty()) {
      drop_cached();
      p = allocate_host(capacity);
    }
    if (!p) throw DeviceError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    try {
      hand_out(p, rounded, capacity);
    } catch (...) {
      free_host(p, capacity);
      throw;
    }
    return p;
  }
  void release(void* p) noexcept override {
    const auto block = live_.find(p);
    if (block == live_.end()) return;  // not ours (null, or released already)
    const auto [bytes, capacity] = block->second;
    live_.erase(block);
    count_released(p, bytes);
    if (capacity < kCachedFrom || static_cast<double>(cached_bytes_ + capacity) > info_.memory / 4) {
      free_host(p, capacity);
      return;
    }
    try {
      cached_.emplace(capacity, p);
      cached_bytes_ += capacity;
    } catch (...) {
      free_host(p, capacity);
    }
  }
  void upload(void* device, const void* host, std::size_t bytes) override { std::memcpy(device, host, bytes); }
  void download(void* host, const void* device, std::size_t bytes) override { std::memcpy(host, device, bytes); }
  void copy(void* to, const void* from, std::size_t bytes) override { std::memcpy(to, from, bytes); }
  void copy_2d(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t width,
               std::size_t rows) override {
    for (std::size_t r = 0; r < rows; ++r) {
      std::memcpy(static_cast<char*>(to) + r * to_pitch, static_cast<const char*>(from) + r * from_pitch, width);
    }
  }
  void synchronize() override {}

  void fill_zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }

  double sum_squares(const float* x, std::size_t count) override { return lanes_sum_squares(x, count); }

  void read_all(const void* p, std::size_t bytes, float* sink) override {
    // Eight independent integer sums, so the loop vectorises and is bound by memory.
    const auto* words = static_cast<const std::uint32_t*>(p);
    const std::size_t count = bytes / 4;
    std::uint32_t lanes[8] = {};
    std::size_t i = 0;
    for (; i + 8 <= count; i += 8) {
      for (int l = 0; l < 8; ++l) lanes[l] += words[i + static_cast<std::size_t>(l)];
    }
    for (; i < count; ++i) lanes[0] += words[i];
    std::uint32_t total = 0;
    for (std::uint32_t l : lanes) total += l;
    *sink = static_cast<float>(total);
  }

  void gemm(const Gemm& g, const void* a, const void* b, void* c) override {
    const CBLAS_TRANSPOSE ta = g.a_transposed ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = g.b_transposed ? CblasTrans : CblasNoTrans;
    const int lda = g.a_transposed ? g.m : g.k;
    const int ldb = g.b_transposed ? g.k : g.n;
    const float beta = g.accumulate ? 1.0f : 0.0f;
    const std::size_t c_count = static_cast<std::size_t>(g.m) * static_cast<std::size_t>(g.n);
    const bool c_wide = g.dtype == DType::kF32 || g.c_fp32;
    float* out = c_wide ? typed<float>(c) : nullptr;
    if (!c_wide) {
      out = grow(wide_c_, c_count);
      if (g.accumulate) cast(g.dtype, c, DType::kF32, out, c_count);
    }
    if (g.dtype == DType::kF32) {
      cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, 1.0f, typed<float>(a), lda, typed<float>(b), ldb, beta, out, g.n);
    } else {
      const std::size_t a_count = static_cast<std::size_t>(g.m) * static_cast<std::size_t>(g.k);
      float* wide_a = grow(wide_a_, a_count);
      cast(g.dtype, a, DType::kF32, wide_a, a_count);
      if (g.dtype == DType::kBf16 && g.b_transposed && !g.a_transposed && g.m <= kFewRows) {
        few_rows_gemm(wide_a, typed<Bf16>(b), out, g.m, g.n, g.k, g.accumulate);
      } else {
        const std::size_t b_count = static_cast<std::size_t>(g.k) * static_cast<std::size_t>(g.n);
        float* wide_b = grow(wide_b_, b_count);
        cast(g.dtype, b, DType::kF32, wide_b, b_count);
        cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, 1.0f, wide_a, lda, wide_b, ldb, beta, out, g.n);
      }
    }
    if (!c_wide) cast(DType::kF32, out, g.dtype, c, c_count);
  }

  void rmsnorm(DType t, const void* x, const void* w, void* y, int rows, int n, float eps) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int r = 0; r < rows; ++r) {
        const long offset = static_cast<long>(r) * n;
        rmsnorm_row(OneLane{}, typed<T>(x) + offset, typed<T>(w), typed<T>(y) + offset, n, eps);
      }
    });
  }

  void rmsnorm_backward(DType t, const void* x, const void* w, const void* dy, void* dx, float* dw, int rows, int n,
                        float eps) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int r = 0; r < rows; ++r) {
        const long offset = static_cast<long>(r) * n;
        rmsnorm_backward_row(OneLane{}, typed<T>(x) + offset, typed<T>(w), typed<T>(dy) + offset, typed<T>(dx) + offset,
                             n, eps);
      }
      if (dw) {
        inverse_.resize(static_cast<std::size_t>(rows));
        for (int r = 0; r < rows; ++r) {
          inverse_[static_cast<std::size_t>(r)] = inverse_rms(OneLane{}, typed<T>(x) + static_cast<long>(r) * n, n, eps);
        }
        for (int col = 0; col < n; ++col) dw[col] = rmsnorm_weight_grad(typed<T>(x), typed<T>(dy), inverse_.data(), rows, n, col);
      }
    });
  }

  void rope(DType t, void* x, int tokens, int heads, int head_dim, int first_position, float theta,
            bool inverse) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int token = 0; token < tokens; ++token) {
        for (int h = 0; h < heads; ++h) {
          T* head = typed<T>(x) + (static_cast<long>(token) * heads + h) * head_dim;
          for (int i = 0; i < head_dim / 2; ++i) {
            rope_pair(head, i, head_dim, static_cast<float>(first_position + token), theta, inverse);
          }
        }
      }
    });
  }

  void swiglu(DType t, const void* gate, const void* up, void* out, std::size_t count) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t i = 0; i < count; ++i) typed<T>(out)[i] = device::swiglu(typed<T>(gate)[i], typed<T>(up)[i]);
    });
  }

  void swiglu_backward(DType t, const void* gate, const void* up, const void* dh, void* dgate, void* dup,
                       std::size_t count) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t i = 0; i < count; ++i) {
        device::swiglu_backward(typed<T>(gate)[i], typed<T>(up)[i], typed<T>(dh)[i], typed<T>(dgate)[i],
                                typed<T>(dup)[i]);
      }
    });
  }

  void decode_attention(const DecodeAttention& a, const void* q, const void* k, const void* v, const int* lengths,
                        void* out) override {
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
      const int group = a.heads / a.kv_heads;
      const float scale = 1.0f / sqrtf(static_cast<float>(a.head_dim));
      for (int s = 0; s < a.batch; ++s) {
        const long cache = static_cast<long>(s) * a.capacity * stride;
        for (int h = 0; h < a.heads; ++h) {
          const long head = (static_cast<long>(s) * a.heads + h) * a.head_dim;
          const long kv = cache + static_cast<long>(h / group) * a.head_dim;
          attend_cached(OneLane{}, typed<T>(q) + head, typed<T>(k) + kv, typed<T>(v) + kv, lengths[s], stride,
                        a.head_dim, scale, typed<T>(out) + head);
        }
      }
    });
  }

  void attention(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                 const int* slots, void* out, float* lse) override {
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
      const int group = a.heads / a.kv_heads;
      const float scale = 1.0f / sqrtf(static_cast<float>(a.head_dim));
      for (int s = 0; s < a.batch; ++s) {
        const long cache = static_cast<long>(slots ? slots[s] : s) * a.capacity * stride;
        for (int t = 0; t < a.queries; ++t) {
          const int length = visible_length(lengths[s], a.queries, t);
          for (int h = 0; h < a.heads; ++h) {
            const long row = (static_cast<long>(s) * a.queries + t) * a.heads + h;
            const long kv = cache + static_cast<long>(h / group) * a.head_dim;
            const float l = attend_cached(OneLane{}, typed<T>(q) + row * a.head_dim, typed<T>(k) + kv, typed<T>(v) + kv,
                                          length, stride, a.head_dim, scale, typed<T>(out) + row * a.head_dim);
            if (lse) lse[row] = l;
          }
        }
      }
    });
  }

  void attention_backward(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                          const void* out, const void* dout, const float* lse, float* delta, void* dq, void* dk,
                          void* dv) override {
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
      const int group = a.heads / a.kv_heads;
      const float scale = 1.0f / sqrtf(static_cast<float>(a.head_dim));
      const long rows = static_cast<long>(a.batch) * a.queries * a.heads;
      for (long row = 0; row < rows; ++row) {
        delta[row] =
            attention_delta(OneLane{}, typed<T>(out) + row * a.head_dim, typed<T>(dout) + row * a.head_dim, a.head_dim);
      }
      for (int s = 0; s < a.batch; ++s) {
        const long cache = static_cast<long>(s) * a.capacity * stride;
        const long first_row = static_cast<long>(s) * a.queries * a.heads;
        for (int t = 0; t < a.queries; ++t) {
          const int length = visible_length(lengths[s], a.queries, t);
          for (int h = 0; h < a.heads; ++h) {
            const long row = first_row + static_cast<long>(t) * a.heads + h;
            const long kv = cache + static_cast<long>(h / group) * a.head_dim;
            attend_cached_dq(OneLane{}, typed<T>(q) + row * a.head_dim, typed<T>(k) + kv, typed<T>(v) + kv,
                             typed<T>(dout) + row * a.head_dim, lse[row], delta[row], length, stride, a.head_dim, scale,
                             typed<T>(dq) + row * a.head_dim);
          }
        }
        for (int j = 0; j < lengths[s]; ++j) {
          for (int kvh = 0; kvh < a.kv_heads; ++kvh) {
            const long at = cache + j * stride + static_cast<long>(kvh) * a.head_dim;
            attend_cached_dkv(OneLane{}, typed<T>(q) + first_row * a.head_dim, typed<T>(dout) + first_row * a.head_dim,
                              lse + first_row, delta + first_row, typed<T>(k) + at, typed<T>(v) + at,
                              first_query_seeing(lengths[s], a.queries, j), a.queries, a.heads, kvh * group, group,
                              a.head_dim, scale, typed<T>(dk) + at, typed<T>(dv) + at);
          }
        }
      }
    });
  }

  void packed_attention(const PackedAttention& a, const void* q, const void* k, const void* v, const int* starts,
                        void* out, float* lse) override {
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
      const int group = a.heads / a.kv_heads;
      const float scale = 1.0f / sqrtf(static_cast<float>(a.head_dim));
      for (int s = 0; s < a.batch; ++s) {
        const int first = starts[s], queries = starts[s + 1] - starts[s];
        for (int t = 0; t < queries; ++t) {
          for (int h = 0; h < a.heads; ++h) {
            const long row = static_cast<long>(first + t) * a.heads + h;
            const long kv = first * stride + static_cast<long>(h / group) * a.head_dim;
            const float l = attend_cached(OneLane{}, typed<T>(q) + row * a.head_dim, typed<T>(k) + kv, typed<T>(v) + kv,
                                          visible_length(queries, queries, t), stride, a.head_dim, scale,
                                          typed<T>(out) + row * a.head_dim);
            if (lse) lse[row] = l;
          }
        }
      }
    });
  }

  void packed_attention_backward(const PackedAttention& a, const void* q, const void* k, const void* v,
                                 const int* starts, const void* out, const void* dout, const float* lse, float* delta,
                                 void* dq, void* dk, void* dv) override {
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
      const int group = a.heads / a.kv_heads;
      const float scale = 1.0f / sqrtf(static_cast<float>(a.head_dim));
      const long rows = static_cast<long>(a.tokens) * a.heads;
      for (long row = 0; row < rows; ++row) {
        delta[row] =
            attention_delta(OneLane{}, typed<T>(out) + row * a.head_dim, typed<T>(dout) + row * a.head_dim, a.head_dim);
      }
      for (int s = 0; s < a.batch; ++s) {
        const int first = starts[s], queries = starts[s + 1] - starts[s];
        const long first_row = static_cast<long>(first) * a.heads;
        for (int t = 0; t < queries; ++t) {
          for (int h = 0; h < a.heads; ++h) {
            const long row = first_row + static_cast<long>(t) * a.heads + h;
            const long kv = first * stride + static_cast<long>(h / group) * a.head_dim;
            attend_cached_dq(OneLane{}, typed<T>(q) + row * a.head_dim, typed<T>(k) + kv, typed<T>(v) + kv,
                             typed<T>(dout) + row * a.head_dim, lse[row], delta[row],
                             visible_length(queries, queries, t), stride, a.head_dim, scale,
                             typed<T>(dq) + row * a.head_dim);
          }
        }
        for (int j = 0; j < queries; ++j) {
          for (int kvh = 0; kvh < a.kv_heads; ++kvh) {
            const long at = (first + j) * stride + static_cast<long>(kvh) * a.head_dim;
            attend_cached_dkv(OneLane{}, typed<T>(q) + first_row * a.head_dim, typed<T>(dout) + first_row * a.head_dim,
                              lse + first_row, delta + first_row, typed<T>(k) + at, typed<T>(v) + at,
                              first_query_seeing(queries, queries, j), queries, a.heads, kvh * group, group,
                              a.head_dim, scale, typed<T>(dk) + at, typed<T>(dv) + at);
          }
        }
      }
    });
  }

  void rope_at(DType t, void* x, const int* positions, int tokens, int heads, int head_dim, float theta,
               bool inverse) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int token = 0; token < tokens; ++token) {
        for (int h = 0; h < heads; ++h) {
          T* head = typed<T>(x) + (static_cast<long>(token) * heads + h) * head_dim;
          for (int i = 0; i < head_dim / 2; ++i) {
            rope_pair(head, i, head_dim, static_cast<float>(positions[token]), theta, inverse);
          }
        }
      }
    });
  }

  void embed(DType t, const void* table, const int* tokens, void* out, int rows, int n) override {
    const std::size_t row_bytes = static_cast<std::size_t>(n) * dtype_bytes(t);
    for (int r = 0; r < rows; ++r) {
      std::memcpy(static_cast<char*>(out) + static_cast<std::size_t>(r) * row_bytes,
                  static_cast<const char*>(table) + static_cast<std::size_t>(tokens[r]) * row_bytes, row_bytes);
    }
  }

  void embed_backward(DType t, const void* dy, const int* tokens, float* dtable, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int col = 0; col < n; ++col) embed_grad_column(typed<T>(dy), tokens, dtable, rows, n, col);
    });
  }

  void scatter(DType t, const void* x, const int* rows_at, void* out, int rows, int n) override {
    const std::size_t row_bytes = static_cast<std::size_t>(n) * dtype_bytes(t);
    for (int r = 0; r < rows; ++r) {
      std::memcpy(static_cast<char*>(out) + static_cast<std::size_t>(rows_at[r]) * row_bytes,
                  static_cast<const char*>(x) + static_cast<std::size_t>(r) * row_bytes, row_bytes);
    }
  }

  void fill_uniform(DType t, void* x, const Block& block, float low, float high, unsigned long long seed) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      const std::size_t count = block.count();
      for (std::size_t i = 0; i < count; ++i) typed<T>(x)[i] = store<T>(uniform_element(seed, block.index(i), low, high));
    });
  }

  void fill_value(DType t, void* x, std::size_t count, float value) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      std::fill(typed<T>(x), typed<T>(x) + count, store<T>(value));
    });
  }

  void add(DType t, void* into, const void* from, std::size_t count) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t i = 0; i < count; ++i) typed<T>(into)[i] = device::add(typed<T>(into)[i], typed<T>(from)[i]);
    });
  }

  void add_bias(DType t, void* x, const void* bias, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int r = 0; r < rows; ++r) {
        T* row = typed<T>(x) + static_cast<long>(r) * n;
        for (int i = 0; i < n; ++i) row[i] = device::add(row[i], typed<T>(bias)[i]);
      }
    });
  }

  void bias_backward(DType t, const void* dy, float* dbias, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int col = 0; col < n; ++col) dbias[col] += column_sum(typed<T>(dy), rows, n, col);
    });
  }

  void sample(DType t, const void* logits, int rows, int vocab, float temperature, unsigned long long seed,
              const int* sequences, const int* positions, int* tokens) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int r = 0; r < rows; ++r) {
        tokens[r] = sample_row(OneLane{}, typed<T>(logits) + static_cast<long>(r) * vocab, vocab, temperature, seed,
                               sequences[r], positions[r]);
      }
    });
  }

  void softmax(DType t, void* x, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int r = 0; r < rows; ++r) softmax_row(OneLane{}, typed<T>(x) + static_cast<long>(r) * n, n);
    });
  }

  void cross_entropy(DType t, const void* logits, const int* targets, float* losses, void* dlogits, int rows,
                     int vocab, float dloss, const float* row_dloss) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      for (int r = 0; r < rows; ++r) {
        const long offset = static_cast<long>(r) * vocab;
        losses[r] = cross_entropy_row(OneLane{}, typed<T>(logits) + offset, vocab, targets[r]);
        if (dlogits) {
          cross_entropy_backward_row(OneLane{}, typed<T>(logits) + offset, vocab, targets[r],
                                     row_dloss ? dloss * row_dloss[r] : dloss, typed<T>(dlogits) + offset);
        }
      }
    });
  }

  void adamw(DType t, float* master, float* m, float* v, const float* grad, void* weight, std::size_t count,
             const AdamW& options) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      const AdamWStep step = adamw_step(options);
      for (std::size_t i = 0; i < count; ++i) adamw_element(master[i], m[i], v[i], grad[i], step, typed<T>(weight)[i]);
    });
  }

  void cast(DType from, const void* x, DType to, void* y, std::size_t count) override {
    with_dtype(from, [&](auto from_tag) {
      using From = decltype(from_tag);
      with_dtype(to, [&](auto to_tag) {
        using To = decltype(to_tag);
        for (std::size_t i = 0; i < count; ++i) typed<To>(y)[i] = device::cast<To>(typed<From>(x)[i]);
      });
    });
  }

 private:
  void drop_cached() noexcept {
    for (const auto& [bytes, block] : cached_) free_host(block, bytes);
    cached_.clear();
    cached_bytes_ = 0;
  }

  // The GEMMs' fp32 scratch (operands widened from bf16 or fp16, a narrow product before its
  // rounding) in host memory of allocate_host's, as device memory is: a stream over a widened
  // weight is as much a stream as a copy of it. It only ever grows: a resize to a larger size
  // would zero the new part, and a step alternating small and large weights would pay that
  // every call.
  using Scratch = std::vector<float, HostAllocator<float>>;
  static float* grow(Scratch& scratch, std::size_t count) {
    if (scratch.size() < count) scratch.resize(count);
    return scratch.data();
  }

  // `bytes` counted of a block that holds `capacity` (whole huge pages from kCachedFrom up).
  void hand_out(void* p, std::size_t bytes, std::size_t capacity) {
    live_[p] = {bytes, capacity};
    count_allocated(p, bytes);
  }
  static constexpr std::size_t kCachedFrom = kWholeHugePagesFrom;
  DeviceInfo info_;
  Scratch wide_a_, wide_b_, wide_c_;
  std::vector<float> inverse_;  // rmsnorm_backward: each row's inverse RMS
  // Blocks handed out: the bytes counted, and the bytes the block holds.
  std::unordered_map<void*, std::pair<std::size_t, std::size_t>> live_;
  std::multimap<std::size_t, void*> cached_;  // released large blocks by the bytes they hold
  std::size_t cached_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
  return f;
}

std::string better_blas_core(std::string_view chosen, const CpuFeatures& features) {
  // OpenBLAS's names are case-insensitive; its fallback for a model it does not know.
  std::string name(chosen);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name != "prescott") return "";
  if (features.avx512) return "SkylakeX";
  if (features.avx2_fma) return "Haswell";
  return "";
}

void choose_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* chosen = openblas_get_corename();
  const std::string better = better_blas_core(chosen ? chosen : "", cpu_features());
  if (better.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", better.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // exec failed: go on with OpenBLAS's own choice
}

}  // namespace hetrl::device
