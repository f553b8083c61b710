// The cuda backend: one NVIDIA GPU. GEMMs go to cuBLAS (cublasGemmEx, fp32 accumulation);
// every other kernel is a thin launch over the arithmetic of device/kernels.h: a thread block
// per row (RMSNorm, softmax, cross-entropy, sampling), a warp per query head or cached position
// (attention), a thread per pair, element or column. All work is queued on one stream;
// synchronize() waits. Freed memory is kept for reuse (allocate).

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/backend.h"
#include "device/cuda_internal.h"

namespace hetrl::device {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw DeviceError(std::string("cuda: ") + what + ": " + cudaGetErrorString(status));
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw DeviceError(std::string("cuda: ") + what + ": " + cublasGetStatusString(status));
  }
}

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t work) { return static_cast<unsigned>((work + kThreads - 1) / kThreads); }

// Thread blocks for `units` warps.
constexpr int kWarp = 32;
unsigned blocks_for_warps(std::size_t units) { return blocks_for(units * kWarp); }
constexpr unsigned kWholeWarp = 0xffffffffu;

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct AddWide {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct Most {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Least {
  __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};

// Butterfly shuffles: every lane ends with the same value, since fp32 addition commutes.
template <typename V, typename Op>
__device__ V warp_combine(V x, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x = op(x, __shfl_xor_sync(kWholeWarp, x, offset));
  return x;
}

// Each warp combines its lanes, then every thread combines the warps' values in one order, so
// all threads of the block hold the same result. Every thread of the block must call it.
template <typename V, typename Op>
__device__ V block_combine(V x, Op op) {
  __shared__ V partial[kThreads / kWarp];
  x = warp_combine(x, op);
  __syncthreads();  // the previous call's reads of partial are done
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = x;
  __syncthreads();
  V all = partial[0];
  for (unsigned w = 1; w < blockDim.x / kWarp; ++w) all = op(all, partial[w]);
  return all;
}

// The lanes of kernels.h on the GPU: a warp's 32 threads share a query head or a cached
// position (attention needs only sums); a block's kThreads threads share a row (no per-lane
// arrays, so no kMinCount).
struct WarpLanes {
  static constexpr int kMinCount = kWarp;
  __device__ int first() const { return static_cast<int>(threadIdx.x % kWarp); }
  __device__ int count() const { return kWarp; }
  __device__ float sum(float x) const { return warp_combine(x, Add{}); }
};
struct BlockLanes {
  __device__ int first() const { return static_cast<int>(threadIdx.x); }
  __device__ int count() const { return static_cast<int>(blockDim.x); }
  __device__ float sum(float x) const { return block_combine(x, Add{}); }
  __device__ float most(float x) const { return block_combine(x, Most{}); }
  __device__ int least(int x) const { return block_combine(x, Least{}); }
};

// The warp this thread belongs to, counted over the grid.
__device__ long warp_index() { return (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; }

// A block per row.
template <typename T>
__global__ void rmsnorm_kernel(const T* x, const T* w, T* y, int n, float eps) {
  const long offset = static_cast<long>(blockIdx.x) * n;
  rmsnorm_row(BlockLanes{}, x + offset, w, y + offset, n, eps);
}

template <typename T>
__global__ void rmsnorm_backward_kernel(const T* x, const T* w, const T* dy, T* dx, int n, float eps) {
  const long offset = static_cast<long>(blockIdx.x) * n;
  rmsnorm_backward_row(BlockLanes{}, x + offset, w, dy + offset, dx + offset, n, eps);
}

template <typename T>
__global__ void inverse_rms_kernel(const T* x, float* inverse, int n, float eps) {
  const float r = inverse_rms(BlockLanes{}, x + static_cast<long>(blockIdx.x) * n, n, eps);
  if (threadIdx.x == 0) inverse[blockIdx.x] = r;
}

template <typename T>
__global__ void rmsnorm_weight_grad_kernel(const T* x, const T* dy, const float* inverse, float* dw, int rows, int n) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col < n) dw[col] = rmsnorm_weight_grad(x, dy, inverse, rows, n, col);
}

template <typename T>
__global__ void rope_kernel(T* x, int tokens, int heads, int head_dim, int first_position, float theta, bool inverse) {
  const long pairs = static_cast<long>(tokens) * heads * (head_dim / 2);
  const long p = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int i = static_cast<int>(p % (head_dim / 2));
  const long head = p / (head_dim / 2);
  const int token = static_cast<int>(head / heads);
  rope_pair(x + head * head_dim, i, head_dim, static_cast<float>(first_position + token), theta, inverse);
}

template <typename T>
__global__ void swiglu_kernel(const T* gate, const T* up, T* out, std::size_t count) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = swiglu(gate[i], up[i]);
}

template <typename T>
__global__ void swiglu_backward_kernel(const T* gate, const T* up, const T* dh, T* dgate, T* dup, std::size_t count) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) swiglu_backward(gate[i], up[i], dh[i], dgate[i], dup[i]);
}

// Where query head `row` of an attention step reads: its cache's kv head (offset into k and v),
// the positions it sees, and the stride between positions.
struct HeadCache {
  long kv;
  int length;
  long stride;
};
__device__ HeadCache head_cache(const Attention& a, const int* lengths, const int* slots, long row) {
  const int h = static_cast<int>(row % a.heads);
  const int t = static_cast<int>(row / a.heads % a.queries);
  const int s = static_cast<int>(row / a.heads / a.queries);
  const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
  return {static_cast<long>(slots ? slots[s] : s) * a.capacity * stride +
              static_cast<long>(h / (a.heads / a.kv_heads)) * a.head_dim,
          visible_length(lengths[s], a.queries, t), stride};
}
// A decode step as an attention step: one query a sequence, no slots.
Attention as_step(const DecodeAttention& d) {
  Attention a;
  a.dtype = d.dtype;
  a.batch = d.batch, a.queries = 1, a.heads = d.heads, a.kv_heads = d.kv_heads, a.head_dim = d.head_dim;
  a.capacity = d.capacity;
  return a;
}

// Split attention (kernels.h's attention_parts): a warp per query head and part, parts of one
// head in neighbouring warps, then a warp per head combining them.
template <typename T>
__global__ void attention_part_kernel(Attention a, int parts, int span, const T* q, const T* k, const T* v,
                                      const int* lengths, const int* slots, float* partials) {
  const long unit = warp_index();
  if (unit >= static_cast<long>(a.batch) * a.queries * a.heads * parts) return;
  const long row = unit / parts;
  const HeadCache c = head_cache(a, lengths, slots, row);
  attend_cached_part(WarpLanes{}, q + row * a.head_dim, k + c.kv, v + c.kv, c.length, static_cast<int>(unit % parts),
                     span, c.stride, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)),
                     partials + unit * (kPartHeader + a.head_dim));
}

template <typename T>
__global__ void combine_attention_parts_kernel(long rows, int parts, int head_dim, const float* partials, T* out,
                                               float* lse) {
  const long row = warp_index();
  if (row >= rows) return;
  const WarpLanes lanes;
  const float l = combine_attention_parts(lanes, partials + row * parts * (kPartHeader + head_dim), parts, head_dim,
                                          out + row * head_dim);
  if (lse && lanes.first() == 0) lse[row] = l;
}

template <typename T>
__global__ void attention_kernel(Attention a, const T* q, const T* k, const T* v, const int* lengths,
                                 const int* slots, T* out, float* lse) {
  const long row = warp_index();
  if (row >= static_cast<long>(a.batch) * a.queries * a.heads) return;
  const HeadCache c = head_cache(a, lengths, slots, row);
  const WarpLanes lanes;
  const float l = attend_cached(lanes, q + row * a.head_dim, k + c.kv, v + c.kv, c.length, c.stride, a.head_dim,
                                rsqrtf(static_cast<float>(a.head_dim)), out + row * a.head_dim);
  if (lse && lanes.first() == 0) lse[row] = l;
}

template <typename T>
__global__ void attention_delta_kernel(Attention a, const T* out, const T* dout, float* delta) {
  const long row = warp_index();
  if (row >= static_cast<long>(a.batch) * a.queries * a.heads) return;
  const WarpLanes lanes;
  const float d = attention_delta(lanes, out + row * a.head_dim, dout + row * a.head_dim, a.head_dim);
  if (lanes.first() == 0) delta[row] = d;
}

template <typename T>
__global__ void attention_dq_kernel(Attention a, const T* q, const T* k, const T* v, const int* lengths, const T* dout,
                                    const float* lse, const float* delta, T* dq) {
  const long row = warp_index();
  if (row >= static_cast<long>(a.batch) * a.queries * a.heads) return;
  const int h = static_cast<int>(row % a.heads);
  const int t = static_cast<int>(row / a.heads % a.queries);
  const int s = static_cast<int>(row / a.heads / a.queries);
  const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
  const long kv = static_cast<long>(s) * a.capacity * stride + static_cast<long>(h / (a.heads / a.kv_heads)) * a.head_dim;
  attend_cached_dq(WarpLanes{}, q + row * a.head_dim, k + kv, v + kv, dout + row * a.head_dim, lse[row], delta[row],
                   visible_length(lengths[s], a.queries, t), stride, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)),
                   dq + row * a.head_dim);
}

// A warp per cached position of one kv head of one sequence.
template <typename T>
__global__ void attention_dkv_kernel(Attention a, const T* q, const T* k, const T* v, const int* lengths, const T* dout,
                                     const float* lse, const float* delta, T* dk, T* dv) {
  const long p = warp_index();
  if (p >= static_cast<long>(a.batch) * a.capacity * a.kv_heads) return;
  const int kvh = static_cast<int>(p % a.kv_heads);
  const int j = static_cast<int>(p / a.kv_heads % a.capacity);
  const int s = static_cast<int>(p / a.kv_heads / a.capacity);
  if (j >= lengths[s]) return;
  const int group = a.heads / a.kv_heads;
  const long first_row = static_cast<long>(s) * a.queries * a.heads;
  const long at = p * a.head_dim;
  attend_cached_dkv(WarpLanes{}, q + first_row * a.head_dim, dout + first_row * a.head_dim, lse + first_row,
                    delta + first_row, k + at, v + at, first_query_seeing(lengths[s], a.queries, j), a.queries, a.heads,
                    kvh * group, group, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)), dk + at, dv + at);
}

// Query head `row` of packed attention: where its kv head starts in k and v, and how many
// positions of its sequence it sees.
struct PackedQuery {
  long kv;
  int seen;
};
__device__ PackedQuery packed_query(const PackedAttention& a, const int* starts, long row) {
  const int h = static_cast<int>(row % a.heads);
  const int token = static_cast<int>(row / a.heads);
  const int s = packed_sequence(starts, a.batch, token);
  const int queries = starts[s + 1] - starts[s];
  const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
  return {starts[s] * stride + static_cast<long>(h / (a.heads / a.kv_heads)) * a.head_dim,
          visible_length(queries, queries, token - starts[s])};
}

// A warp per query head of a packed row (PackedAttention).
template <typename T>
__global__ void packed_attention_kernel(PackedAttention a, const T* q, const T* k, const T* v, const int* starts,
                                        T* out, float* lse) {
  const long row = warp_index();
  if (row >= static_cast<long>(a.tokens) * a.heads) return;
  const PackedQuery at = packed_query(a, starts, row);
  const WarpLanes lanes;
  const float l = attend_cached(lanes, q + row * a.head_dim, k + at.kv, v + at.kv, at.seen,
                                static_cast<long>(a.kv_heads) * a.head_dim, a.head_dim,
                                rsqrtf(static_cast<float>(a.head_dim)), out + row * a.head_dim);
  if (lse && lanes.first() == 0) lse[row] = l;
}

template <typename T>
__global__ void packed_attention_dq_kernel(PackedAttention a, const T* q, const T* k, const T* v, const int* starts,
                                           const T* out, const T* dout, const float* lse, float* delta, T* dq) {
  const long row = warp_index();
  if (row >= static_cast<long>(a.tokens) * a.heads) return;
  const PackedQuery at = packed_query(a, starts, row);
  const WarpLanes lanes;
  const float d = attention_delta(lanes, out + row * a.head_dim, dout + row * a.head_dim, a.head_dim);
  if (lanes.first() == 0) delta[row] = d;
  attend_cached_dq(lanes, q + row * a.head_dim, k + at.kv, v + at.kv, dout + row * a.head_dim, lse[row], d, at.seen,
                   static_cast<long>(a.kv_heads) * a.head_dim, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)),
                   dq + row * a.head_dim);
}

// A warp per packed position of one kv head; reads every delta of its sequence, so it runs
// after the dq kernel has written them.
template <typename T>
__global__ void packed_attention_dkv_kernel(PackedAttention a, const T* q, const T* k, const T* v, const int* starts,
                                            const T* dout, const float* lse, const float* delta, T* dk, T* dv) {
  const long p = warp_index();
  if (p >= static_cast<long>(a.tokens) * a.kv_heads) return;
  const int kvh = static_cast<int>(p % a.kv_heads);
  const int token = static_cast<int>(p / a.kv_heads);
  const int s = packed_sequence(starts, a.batch, token);
  const int queries = starts[s + 1] - starts[s];
  const int group = a.heads / a.kv_heads;
  const long first_row = static_cast<long>(starts[s]) * a.heads;
  const long at = p * a.head_dim;
  attend_cached_dkv(WarpLanes{}, q + first_row * a.head_dim, dout + first_row * a.head_dim, lse + first_row,
                    delta + first_row, k + at, v + at, first_query_seeing(queries, queries, token - starts[s]), queries,
                    a.heads, kvh * group, group, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)), dk + at, dv + at);
}

template <typename T>
__global__ void rope_at_kernel(T* x, const int* positions, int tokens, int heads, int head_dim, float theta,
                               bool inverse) {
  const long pairs = static_cast<long>(tokens) * heads * (head_dim / 2);
  const long p = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int i = static_cast<int>(p % (head_dim / 2));
  const long head = p / (head_dim / 2);
  const int token = static_cast<int>(head / heads);
  rope_pair(x + head * head_dim, i, head_dim, static_cast<float>(positions[token]), theta, inverse);
}

template <typename T>
__global__ void embed_kernel(const T* table, const int* tokens, T* out, int rows, int n) {
  const long e = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= static_cast<long>(rows) * n) return;
  const long r = e / n;
  out[e] = table[static_cast<long>(tokens[r]) * n + e % n];
}

template <typename T>
__global__ void embed_grad_kernel(const T* dy, const int* tokens, float* dtable, int rows, int n) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col < n) embed_grad_column(dy, tokens, dtable, rows, n, col);
}

template <typename T>
__global__ void fill_uniform_kernel(T* x, Block block, float low, float high, unsigned long long seed) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < block.count()) x[i] = store<T>(uniform_element(seed, block.index(i), low, high));
}

template <typename T>
__global__ void fill_value_kernel(T* x, std::size_t count, float value) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = store<T>(value);
}

template <typename T>
__global__ void scatter_kernel(const T* x, const int* rows_at, T* out, int rows, int n) {
  const long e = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= static_cast<long>(rows) * n) return;
  out[static_cast<long>(rows_at[e / n]) * n + e % n] = x[e];
}

template <typename T>
__global__ void add_kernel(T* into, const T* from, std::size_t count) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) into[i] = add(into[i], from[i]);
}

template <typename T>
__global__ void add_bias_kernel(T* x, const T* bias, int rows, int n) {
  const long e = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < static_cast<long>(rows) * n) x[e] = add(x[e], bias[e % n]);
}

template <typename T>
__global__ void bias_grad_kernel(const T* dy, float* dbias, int rows, int n) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col < n) dbias[col] += column_sum(dy, rows, n, col);
}

// A block per row.
template <typename T>
__global__ void sample_kernel(const T* logits, int vocab, float temperature, unsigned long long seed,
                              const int* sequences, const int* positions, int* tokens) {
  const int r = blockIdx.x;
  const int token = sample_row(BlockLanes{}, logits + static_cast<long>(r) * vocab, vocab, temperature, seed,
                               sequences[r], positions[r]);
  if (threadIdx.x == 0) tokens[r] = token;
}

template <typename T>
__global__ void softmax_kernel(T* x, int n) {
  softmax_row(BlockLanes{}, x + static_cast<long>(blockIdx.x) * n, n);
}

template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const int* targets, float* losses, T* dlogits, int vocab,
                                     float dloss, const float* row_dloss) {
  const int r = blockIdx.x;
  const long offset = static_cast<long>(r) * vocab;
  const BlockLanes lanes;
  const float loss = cross_entropy_row(lanes, logits + offset, vocab, targets[r]);
  if (threadIdx.x == 0) losses[r] = loss;
  if (dlogits) {
    cross_entropy_backward_row(lanes, logits + offset, vocab, targets[r], row_dloss ? dloss * row_dloss[r] : dloss,
                               dlogits + offset);
  }
}

template <typename T>
__global__ void adamw_kernel(float* master, float* m, float* v, const float* grad, T* weight, std::size_t count,
                             AdamWStep options) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) adamw_element(master[i], m[i], v[i], grad[i], options, weight[i]);
}

template <typename To, typename From>
__global__ void cast_kernel(const From* x, To* y, std::size_t count) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) y[i] = cast<To>(x[i]);
}

// Each thread adds its grid-stride share of squares in fp64; one atomic add a block.
__global__ void sum_squares_kernel(const float* x, std::size_t count, double* total) {
  double part = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    part += square(x[i]);
  }
  part = block_combine(part, AddWide{});
  if (threadIdx.x == 0) atomicAdd(total, part);
}

// Reads 16 bytes a thread per step (grid-stride) and adds the words, so the loads are
// coalesced and wide; one atomic per thread block.
__global__ void read_kernel(const uint4* words, std::size_t count, float* sink) {
  unsigned total = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const uint4 w = words[i];
    total += w.x + w.y + w.z + w.w;
  }
  __shared__ unsigned block_total;
  if (threadIdx.x == 0) block_total = 0;
  __syncthreads();
  atomicAdd(&block_total, total);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(sink, static_cast<float>(block_total));
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBf16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kF32:
      break;
  }
  return CUDA_R_32F;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index) {
    check(cudaSetDevice(index), "cudaSetDevice");
    cudaDeviceProp props{};
    check(cudaGetDeviceProperties(&props, index), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0, count = 0;
    check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, stream_), "cublasSetStream");
    int blas_version = 0;
    check(cublasGetVersion(blas_, &blas_version), "cublasGetVersion");
    info_.backend = "cuda";
    info_.name = props.name;
    info_.index = index;
    info_.count = count;
    info_.memory = static_cast<double>(props.totalGlobalMem);
    info_.compute_units = props.multiProcessorCount;
    resident_warps_ = static_cast<long>(props.multiProcessorCount) * (props.maxThreadsPerMultiProcessor / kWarp);
    info_.driver = "CUDA driver " + version(driver);
    info_.runtime = "CUDA runtime " + version(runtime) + ", cuBLAS " + std::to_string(blas_version) + ", sm_" +
                    std::to_string(props.major) + std::to_string(props.minor);
    const char* times = std::getenv("HETRL_CUDA_OP_TIMES");
    op_times_ = times && *times && std::string(times) != "0";
    created_ = Clock::now();
  }
  ~CudaBackend() override {
    if (op_times_) print_op_times();
    release_cached();
    for (const auto& [p, bytes] : in_use_) cudaFree(p);
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }

  const DeviceInfo& info() const override { return info_; }
  cudaStream_t stream() const { return stream_; }
  // The warps the device holds at once (every multiprocessor full): what split attention fills.
  long resident_warps() const { return resident_warps_; }
  // Positions a part of split attention takes.
  static int span(int capacity, int parts) { return (capacity + parts - 1) / parts; }

  // Freed blocks are kept by size and handed out again, as deep-learning frameworks' caching
  // allocators do: cudaFree waits for the whole device, and a training step makes and frees
  // thousands of temporaries. One stream orders every use, so a block freed by the host can be
  // reused by the next kernel queued. Sizes are rounded up (to 512 bytes; above 1 MiB, to a
  // sixteenth of the next power of two, at most 12.5% more) so that blocks of nearly equal sizes
  // are shared; when the device is full, the kept blocks are freed and the allocation tried again.
  void* allocate(std::size_t bytes) override {
    const std::size_t size = rounded_size(bytes);
    if (auto it = cached_.find(size); it != cached_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      in_use_.emplace(p, size);
      count_allocated(p, size);
      return p;
    }
    void* p = nullptr;
    const OpTimer timer(*this, "cudaMalloc (a new block)");
    cudaError_t status = cudaMalloc(&p, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clears the error
      release_cached();
      status = cudaMalloc(&p, size);
    }
    check(status, "cudaMalloc");
    in_use_.emplace(p, size);
    count_allocated(p, size);
    return p;
  }
  void release(void* p) noexcept override {
    const auto it = in_use_.find(p);
    if (it == in_use_.end()) return;
    count_released(p, it->second);
    cached_[it->second].push_back(p);
    in_use_.erase(it);
  }
  void upload(void* device, const void* host, std::size_t bytes) override {
    const OpTimer timer(*this, "upload");
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "upload");
    synchronize();
  }
  void download(void* host, const void* device, std::size_t bytes) override {
    const OpTimer timer(*this, "download");
    check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "download");
    synchronize();
  }
  void copy(void* to, const void* from, std::size_t bytes) override {
    const OpTimer timer(*this, "copy");
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  }
  void copy_2d(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t width,
               std::size_t rows) override {
    const OpTimer timer(*this, "copy_2d");
    check(cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, width, rows, cudaMemcpyDeviceToDevice, stream_), "copy_2d");
  }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "synchronize"); }

  void fill_zero(void* p, std::size_t bytes) override {
    const OpTimer timer(*this, "fill_zero");
    check(cudaMemsetAsync(p, 0, bytes, stream_), "fill");
  }

  void read_all(const void* p, std::size_t bytes, float* sink) override {
    const OpTimer timer(*this, "read_all");
    check(cudaMemsetAsync(sink, 0, sizeof(float), stream_), "read");
    const std::size_t words = bytes / sizeof(uint4);
    read_kernel<<<static_cast<unsigned>(info_.compute_units) * 8, kThreads, 0, stream_>>>(
        static_cast<const uint4*>(p), words, sink);
    launched("read");
  }

  void gemm(const Gemm& g, const void* a, const void* b, void* c) override {
    const OpTimer timer(*this, g.m <= 16    ? "gemm, up to 16 rows"
                               : g.m <= 256 ? "gemm, 17 to 256 rows"
                                            : "gemm, over 256 rows");
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: a row-major matrix read
    // as column-major is its transpose, so each operand's own flag carries over.
    const float alpha = 1, beta = g.accumulate ? 1.0f : 0.0f;
    const cudaDataType_t type = cuda_type(g.dtype);
    const cudaDataType_t c_type = g.c_fp32 ? CUDA_R_32F : type;
    check(cublasGemmEx(blas_, g.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, g.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                       g.n, g.m, g.k, &alpha, b, type, g.b_transposed ? g.k : g.n, a, type, g.a_transposed ? g.m : g.k,
                       &beta, c, c_type, g.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }

  void rmsnorm(DType t, const void* x, const void* w, void* y, int rows, int n, float eps) override {
    const OpTimer timer(*this, "rmsnorm");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if (rows > 0) rmsnorm_kernel<<<rows, kThreads, 0, stream_>>>(typed<T>(x), typed<T>(w), typed<T>(y), n, eps);
    });
    launched("rmsnorm");
  }

  void rmsnorm_backward(DType t, const void* x, const void* w, const void* dy, void* dx, float* dw, int rows, int n,
                        float eps) override {
    const OpTimer timer(*this, "rmsnorm_backward");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if (rows == 0) return;
      rmsnorm_backward_kernel<<<rows, kThreads, 0, stream_>>>(typed<T>(x), typed<T>(w), typed<T>(dy), typed<T>(dx), n,
                                                              eps);
      if (dw) {
        // Released at once: the stream orders the kernels before the block's next use.
        const Buffer inverse(*this, static_cast<std::size_t>(rows) * sizeof(float));
        inverse_rms_kernel<<<rows, kThreads, 0, stream_>>>(typed<T>(x), inverse.as<float>(), n, eps);
        rmsnorm_weight_grad_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(typed<T>(x), typed<T>(dy),
                                                                             inverse.as<float>(), dw, rows, n);
      }
    });
    launched("rmsnorm_backward");
  }

  void rope(DType t, void* x, int tokens, int heads, int head_dim, int first_position, float theta,
            bool inverse) override {
    const OpTimer timer(*this, "rope");
    const std::size_t pairs = static_cast<std::size_t>(tokens) * heads * (head_dim / 2);
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      rope_kernel<<<blocks_for(pairs), kThreads, 0, stream_>>>(typed<T>(x), tokens, heads, head_dim, first_position,
                                                               theta, inverse);
    });
    launched("rope");
  }

  void swiglu(DType t, const void* gate, const void* up, void* out, std::size_t count) override {
    const OpTimer timer(*this, "swiglu");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      swiglu_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(typed<T>(gate), typed<T>(up), typed<T>(out), count);
    });
    launched("swiglu");
  }

  void swiglu_backward(DType t, const void* gate, const void* up, const void* dh, void* dgate, void* dup,
                       std::size_t count) override {
    const OpTimer timer(*this, "swiglu_backward");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      swiglu_backward_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(
          typed<T>(gate), typed<T>(up), typed<T>(dh), typed<T>(dgate), typed<T>(dup), count);
    });
    launched("swiglu_backward");
  }

  void decode_attention(const DecodeAttention& a, const void* q, const void* k, const void* v, const int* lengths,
                        void* out) override {
    const OpTimer timer(*this, "decode_attention");
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: decode attention head_dim above " + std::to_string(kMaxHeadDim));
    launch_attention(as_step(a), q, k, v, lengths, nullptr, out, nullptr);
    launched("decode_attention");
  }

  void attention(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                 const int* slots, void* out, float* lse) override {
    const OpTimer timer(*this, "attention");
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    launch_attention(a, q, k, v, lengths, slots, out, lse);
    launched("attention");
  }

  void attention_backward(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                          const void* out, const void* dout, const float* lse, float* delta, void* dq, void* dk,
                          void* dv) override {
    const OpTimer timer(*this, "attention_backward");
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    const std::size_t rows = static_cast<std::size_t>(a.batch) * a.queries * a.heads;
    const std::size_t positions = static_cast<std::size_t>(a.batch) * a.capacity * a.kv_heads;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      if (rows == 0) return;
      attention_delta_kernel<<<blocks_for_warps(rows), kThreads, 0, stream_>>>(a, typed<T>(out), typed<T>(dout), delta);
      attention_dq_kernel<<<blocks_for_warps(rows), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), lengths, typed<T>(dout), lse, delta, typed<T>(dq));
      attention_dkv_kernel<<<blocks_for_warps(positions), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), lengths, typed<T>(dout), lse, delta, typed<T>(dk), typed<T>(dv));
    });
    launched("attention_backward");
  }

  void packed_attention(const PackedAttention& a, const void* q, const void* k, const void* v, const int* starts,
                        void* out, float* lse) override {
    const OpTimer timer(*this, "packed_attention");
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    const std::size_t rows = static_cast<std::size_t>(a.tokens) * a.heads;
    if (rows == 0) return;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      packed_attention_kernel<<<blocks_for_warps(rows), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), starts, typed<T>(out), lse);
    });
    launched("packed_attention");
  }

  void packed_attention_backward(const PackedAttention& a, const void* q, const void* k, const void* v,
                                 const int* starts, const void* out, const void* dout, const float* lse, float* delta,
                                 void* dq, void* dk, void* dv) override {
    const OpTimer timer(*this, "packed_attention_backward");
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    const std::size_t rows = static_cast<std::size_t>(a.tokens) * a.heads;
    const std::size_t positions = static_cast<std::size_t>(a.tokens) * a.kv_heads;
    if (rows == 0) return;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      packed_attention_dq_kernel<<<blocks_for_warps(rows), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), starts, typed<T>(out), typed<T>(dout), lse, delta, typed<T>(dq));
      packed_attention_dkv_kernel<<<blocks_for_warps(positions), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), starts, typed<T>(dout), lse, delta, typed<T>(dk), typed<T>(dv));
    });
    launched("packed_attention_backward");
  }

  void rope_at(DType t, void* x, const int* positions, int tokens, int heads, int head_dim, float theta,
               bool inverse) override {
    const OpTimer timer(*this, "rope_at");
    const std::size_t pairs = static_cast<std::size_t>(tokens) * heads * (head_dim / 2);
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      rope_at_kernel<<<blocks_for(pairs), kThreads, 0, stream_>>>(typed<T>(x), positions, tokens, heads, head_dim,
                                                                  theta, inverse);
    });
    launched("rope_at");
  }

  void embed(DType t, const void* table, const int* tokens, void* out, int rows, int n) override {
    const OpTimer timer(*this, "embed");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      embed_kernel<<<blocks_for(static_cast<std::size_t>(rows) * n), kThreads, 0, stream_>>>(
          typed<T>(table), tokens, typed<T>(out), rows, n);
    });
    launched("embed");
  }

  void embed_backward(DType t, const void* dy, const int* tokens, float* dtable, int rows, int n) override {
    const OpTimer timer(*this, "embed_backward");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      embed_grad_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(typed<T>(dy), tokens, dtable, rows, n);
    });
    launched("embed_backward");
  }

  void scatter(DType t, const void* x, const int* rows_at, void* out, int rows, int n) override {
    const OpTimer timer(*this, "scatter");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      scatter_kernel<<<blocks_for(static_cast<std::size_t>(rows) * n), kThreads, 0, stream_>>>(
          typed<T>(x), rows_at, typed<T>(out), rows, n);
    });
    launched("scatter");
  }

  void fill_uniform(DType t, void* x, const Block& block, float low, float high, unsigned long long seed) override {
    const OpTimer timer(*this, "fill_uniform");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      fill_uniform_kernel<<<blocks_for(block.count()), kThreads, 0, stream_>>>(typed<T>(x), block, low, high, seed);
    });
    launched("fill_uniform");
  }

  void fill_value(DType t, void* x, std::size_t count, float value) override {
    const OpTimer timer(*this, "fill_value");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      fill_value_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(typed<T>(x), count, value);
    });
    launched("fill_value");
  }

  void add(DType t, void* into, const void* from, std::size_t count) override {
    const OpTimer timer(*this, "add");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      add_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(typed<T>(into), typed<T>(from), count);
    });
    launched("add");
  }

  void add_bias(DType t, void* x, const void* bias, int rows, int n) override {
    const OpTimer timer(*this, "add_bias");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      add_bias_kernel<<<blocks_for(static_cast<std::size_t>(rows) * n), kThreads, 0, stream_>>>(
          typed<T>(x), typed<T>(bias), rows, n);
    });
    launched("add_bias");
  }

  void bias_backward(DType t, const void* dy, float* dbias, int rows, int n) override {
    const OpTimer timer(*this, "bias_backward");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      bias_grad_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(typed<T>(dy), dbias, rows, n);
    });
    launched("bias_backward");
  }

  void sample(DType t, const void* logits, int rows, int vocab, float temperature, unsigned long long seed,
              const int* sequences, const int* positions, int* tokens) override {
    const OpTimer timer(*this, "sample");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if (rows > 0) {
        sample_kernel<<<rows, kThreads, 0, stream_>>>(typed<T>(logits), vocab, temperature, seed, sequences, positions,
                                                      tokens);
      }
    });
    launched("sample");
  }

  void softmax(DType t, void* x, int rows, int n) override {
    const OpTimer timer(*this, "softmax");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if (rows > 0) softmax_kernel<<<rows, kThreads, 0, stream_>>>(typed<T>(x), n);
    });
    launched("softmax");
  }

  void cross_entropy(DType t, const void* logits, const int* targets, float* losses, void* dlogits, int rows, int vocab,
                     float dloss, const float* row_dloss) override {
    const OpTimer timer(*this, "cross_entropy");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if (rows > 0) {
        cross_entropy_kernel<<<rows, kThreads, 0, stream_>>>(typed<T>(logits), targets, losses,
                                                             static_cast<T*>(dlogits), vocab, dloss, row_dloss);
      }
    });
    launched("cross_entropy");
  }

  void adamw(DType t, float* master, float* m, float* v, const float* grad, void* weight, std::size_t count,
             const AdamW& options) override {
    const OpTimer timer(*this, "adamw");
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      adamw_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(master, m, v, grad, typed<T>(weight), count,
                                                                adamw_step(options));
    });
    launched("adamw");
  }

  double sum_squares(const float* x, std::size_t count) override {
    const OpTimer timer(*this, "sum_squares");
    if (count == 0) return 0;
    const Buffer total(*this, sizeof(double));
    check(cudaMemsetAsync(total.data(), 0, sizeof(double), stream_), "sum_squares");
    const unsigned blocks = std::min<unsigned>(blocks_for(count), static_cast<unsigned>(info_.compute_units) * 4);
    sum_squares_kernel<<<blocks, kThreads, 0, stream_>>>(x, count, total.as<double>());
    launched("sum_squares");
    double sum = 0;
    download(&sum, total.data(), sizeof sum);
    return sum;
  }

  void cast(DType from, const void* x, DType to, void* y, std::size_t count) override {
    const OpTimer timer(*this, "cast");
    with_dtype(from, [&](auto from_tag) {
      using From = decltype(from_tag);
      with_dtype(to, [&](auto to_tag) {
        using To = decltype(to_tag);
        cast_kernel<To, From><<<blocks_for(count), kThreads, 0, stream_>>>(typed<From>(x), typed<To>(y), count);
      });
    });
    launched("cast");
  }

 private:
  template <typename T>
  static const T* typed(const void* p) {
    return static_cast<const T*>(p);
  }
  template <typename T>
  static T* typed(void* p) {
    return static_cast<T*>(p);
  }
  static std::string version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
  static void launched(const char* what) { check(cudaGetLastError(), what); }
  static std::size_t rounded_size(std::size_t bytes) {
    constexpr std::size_t kSmall = 512, kLarge = std::size_t{1} << 20;
    if (bytes <= kLarge) return (std::max<std::size_t>(bytes, 1) + kSmall - 1) / kSmall * kSmall;
    std::size_t power = kLarge;
    while (power < bytes) power *= 2;
    const std::size_t step = power / 16;
    return (bytes + step - 1) / step * step;
  }
  // Frees every kept block (waiting for the device first: a kernel may still use one).
  void release_cached() noexcept {
    if (cached_.empty()) return;
    cudaStreamSynchronize(stream_);
    for (auto& [size, blocks] : cached_) {
      for (void* p : blocks) cudaFree(p);
    }
    cached_.clear();
  }

  // HETRL_CUDA_OP_TIMES=1 in the environment: every operation is waited for before and after,
  // its time (launch and run) added to its name's total, and the totals written to stderr when
  // the backend ends: where a run's device time goes, at the cost of the waits. An operation
  // inside another (an allocation, a copy to the host) counts only in the outer one's time.
  using Clock = std::chrono::steady_clock;
  struct OpTotal {
    double seconds = 0;
    long calls = 0;
  };
  class OpTimer {
   public:
    OpTimer(CudaBackend& backend, const char* op) : backend_(backend.op_times_ ? &backend : nullptr), op_(op) {
      if (!backend_ || backend_->timing_++ > 0) return;
      cudaStreamSynchronize(backend_->stream_);
      begin_ = Clock::now();
    }
    ~OpTimer() {
      if (!backend_ || --backend_->timing_ > 0) return;
      cudaStreamSynchronize(backend_->stream_);
      OpTotal& total = backend_->op_totals_[op_];
      total.seconds += std::chrono::duration<double>(Clock::now() - begin_).count();
      ++total.calls;
    }
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

   private:
    CudaBackend* backend_;
    const char* op_;
    Clock::time_point begin_{};
  };
  void print_op_times() const {
    std::vector<std::pair<std::string, OpTotal>> rows(op_totals_.begin(), op_totals_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    const double life = std::chrono::duration<double>(Clock::now() - created_).count();
    double timed = 0;
    for (const auto& row : rows) timed += row.second.seconds;
    std::fprintf(stderr, "cuda operations on %s (HETRL_CUDA_OP_TIMES), each waited for:\n", info_.name.c_str());
    std::fprintf(stderr, "%-28s %10s %12s %12s %8s\n", "operation", "calls", "seconds", "mean us", "share");
    for (const auto& [op, total] : rows) {
      std::fprintf(stderr, "%-28s %10ld %12.4f %12.2f %7.1f%%\n", op.c_str(), total.calls, total.seconds,
                   total.seconds / static_cast<double>(total.calls) * 1e6, 100 * total.seconds / life);
    }
    std::fprintf(stderr, "%-28s %10s %12.4f %12s %7.1f%%\n", "outside these operations", "", life - timed, "",
                 100 * (life - timed) / life);
  }

  // A warp per query head, or where they do not fill the device, per head and part and then a
  // warp per head combining its parts (kernels.h's attention_parts).
  void launch_attention(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                        const int* slots, void* out, float* lse) {
    const std::size_t rows = static_cast<std::size_t>(a.batch) * a.queries * a.heads;
    if (rows == 0) return;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const int parts = attention_parts(static_cast<long>(rows), a.capacity, resident_warps());
      if (parts == 1) {
        attention_kernel<<<blocks_for_warps(rows), kThreads, 0, stream_>>>(a, typed<T>(q), typed<T>(k), typed<T>(v),
                                                                           lengths, slots, typed<T>(out), lse);
        return;
      }
      const Buffer partials(*this, rows * parts * (kPartHeader + a.head_dim) * sizeof(float));
      attention_part_kernel<<<blocks_for_warps(rows * parts), kThreads, 0, stream_>>>(
          a, parts, span(a.capacity, parts), typed<T>(q), typed<T>(k), typed<T>(v), lengths, slots,
          partials.as<float>());
      combine_attention_parts_kernel<<<blocks_for_warps(rows), kThreads, 0, stream_>>>(
          static_cast<long>(rows), parts, a.head_dim, partials.as<float>(), typed<T>(out), lse);
    });
  }

  DeviceInfo info_;
  long resident_warps_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unordered_map<std::size_t, std::vector<void*>> cached_;  // free blocks by rounded size
  std::unordered_map<void*, std::size_t> in_use_;               // handed-out blocks and their sizes
  bool op_times_ = false;
  int timing_ = 0;  // operations being timed, one inside another
  Clock::time_point created_{};
  std::map<std::string, OpTotal> op_totals_;
};

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::unique_ptr<Backend> make_cuda_backend(int index) { return std::make_unique<CudaBackend>(index); }

cudaStream_t cuda_stream(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (!cuda) throw DeviceError("cuda: the " + backend.info().backend + " backend has no CUDA stream");
  return cuda->stream();
}

}  // namespace hetrl::device
