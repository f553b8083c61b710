// The cuda backend: one NVIDIA GPU. GEMMs go to cuBLAS (cublasGemmEx, fp32 accumulation);
// every other kernel is a thin launch over the arithmetic of device/kernels.h, one thread per
// row, pair, element or query head. All work is queued on one stream; synchronize() waits.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

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

template <typename T>
__global__ void rmsnorm_kernel(const T* x, const T* w, T* y, int rows, int n, float eps) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) rmsnorm_row(x + static_cast<long>(r) * n, w, y + static_cast<long>(r) * n, n, eps);
}

template <typename T>
__global__ void rmsnorm_backward_kernel(const T* x, const T* w, const T* dy, T* dx, int rows, int n, float eps) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    const long offset = static_cast<long>(r) * n;
    rmsnorm_backward_row(x + offset, w, dy + offset, dx + offset, n, eps);
  }
}

template <typename T>
__global__ void inverse_rms_kernel(const T* x, float* inverse, int rows, int n, float eps) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) inverse[r] = inverse_rms(x + static_cast<long>(r) * n, n, eps);
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

template <typename T>
__global__ void decode_attention_kernel(DecodeAttention a, const T* q, const T* k, const T* v, const int* lengths,
                                        T* out) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= a.batch * a.heads) return;
  const int s = h / a.heads, head = h % a.heads;
  const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
  const long kv = static_cast<long>(s) * a.capacity * stride + static_cast<long>(head / (a.heads / a.kv_heads)) * a.head_dim;
  const long at = static_cast<long>(h) * a.head_dim;
  attend_cached(q + at, k + kv, v + kv, lengths[s], stride, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)),
                out + at);
}

template <typename T>
__global__ void attention_kernel(Attention a, const T* q, const T* k, const T* v, const int* lengths,
                                 const int* slots, T* out, float* lse) {
  const long row = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= static_cast<long>(a.batch) * a.queries * a.heads) return;
  const int h = static_cast<int>(row % a.heads);
  const int t = static_cast<int>(row / a.heads % a.queries);
  const int s = static_cast<int>(row / a.heads / a.queries);
  const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
  const long kv = static_cast<long>(slots ? slots[s] : s) * a.capacity * stride +
                  static_cast<long>(h / (a.heads / a.kv_heads)) * a.head_dim;
  const float l = attend_cached(q + row * a.head_dim, k + kv, v + kv, visible_length(lengths[s], a.queries, t), stride,
                                a.head_dim, rsqrtf(static_cast<float>(a.head_dim)), out + row * a.head_dim);
  if (lse) lse[row] = l;
}

template <typename T>
__global__ void attention_delta_kernel(Attention a, const T* out, const T* dout, float* delta) {
  const long row = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row < static_cast<long>(a.batch) * a.queries * a.heads) {
    delta[row] = attention_delta(out + row * a.head_dim, dout + row * a.head_dim, a.head_dim);
  }
}

template <typename T>
__global__ void attention_dq_kernel(Attention a, const T* q, const T* k, const T* v, const int* lengths, const T* dout,
                                    const float* lse, const float* delta, T* dq) {
  const long row = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= static_cast<long>(a.batch) * a.queries * a.heads) return;
  const int h = static_cast<int>(row % a.heads);
  const int t = static_cast<int>(row / a.heads % a.queries);
  const int s = static_cast<int>(row / a.heads / a.queries);
  const long stride = static_cast<long>(a.kv_heads) * a.head_dim;
  const long kv = static_cast<long>(s) * a.capacity * stride + static_cast<long>(h / (a.heads / a.kv_heads)) * a.head_dim;
  attend_cached_dq(q + row * a.head_dim, k + kv, v + kv, dout + row * a.head_dim, lse[row], delta[row],
                   visible_length(lengths[s], a.queries, t), stride, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)),
                   dq + row * a.head_dim);
}

// One thread per cached position of one kv head of one sequence.
template <typename T>
__global__ void attention_dkv_kernel(Attention a, const T* q, const T* k, const T* v, const int* lengths, const T* dout,
                                     const float* lse, const float* delta, T* dk, T* dv) {
  const long p = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= static_cast<long>(a.batch) * a.capacity * a.kv_heads) return;
  const int kvh = static_cast<int>(p % a.kv_heads);
  const int j = static_cast<int>(p / a.kv_heads % a.capacity);
  const int s = static_cast<int>(p / a.kv_heads / a.capacity);
  if (j >= lengths[s]) return;
  const int group = a.heads / a.kv_heads;
  const long first_row = static_cast<long>(s) * a.queries * a.heads;
  const long at = p * a.head_dim;
  attend_cached_dkv(q + first_row * a.head_dim, dout + first_row * a.head_dim, lse + first_row, delta + first_row,
                    k + at, v + at, first_query_seeing(lengths[s], a.queries, j), a.queries, a.heads, kvh * group, group,
                    a.head_dim, rsqrtf(static_cast<float>(a.head_dim)), dk + at, dv + at);
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

// One thread per query head of a packed row (PackedAttention).
template <typename T>
__global__ void packed_attention_kernel(PackedAttention a, const T* q, const T* k, const T* v, const int* starts,
                                        T* out, float* lse) {
  const long row = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= static_cast<long>(a.tokens) * a.heads) return;
  const PackedQuery at = packed_query(a, starts, row);
  const float l = attend_cached(q + row * a.head_dim, k + at.kv, v + at.kv, at.seen, static_cast<long>(a.kv_heads) * a.head_dim,
                                a.head_dim, rsqrtf(static_cast<float>(a.head_dim)), out + row * a.head_dim);
  if (lse) lse[row] = l;
}

template <typename T>
__global__ void packed_attention_dq_kernel(PackedAttention a, const T* q, const T* k, const T* v, const int* starts,
                                           const T* out, const T* dout, const float* lse, float* delta, T* dq) {
  const long row = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= static_cast<long>(a.tokens) * a.heads) return;
  const PackedQuery at = packed_query(a, starts, row);
  delta[row] = attention_delta(out + row * a.head_dim, dout + row * a.head_dim, a.head_dim);
  attend_cached_dq(q + row * a.head_dim, k + at.kv, v + at.kv, dout + row * a.head_dim, lse[row], delta[row], at.seen,
                   static_cast<long>(a.kv_heads) * a.head_dim, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)),
                   dq + row * a.head_dim);
}

// One thread per packed position of one kv head; reads every delta of its sequence, so it runs
// after the dq kernel has written them.
template <typename T>
__global__ void packed_attention_dkv_kernel(PackedAttention a, const T* q, const T* k, const T* v, const int* starts,
                                            const T* dout, const float* lse, const float* delta, T* dk, T* dv) {
  const long p = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= static_cast<long>(a.tokens) * a.kv_heads) return;
  const int kvh = static_cast<int>(p % a.kv_heads);
  const int token = static_cast<int>(p / a.kv_heads);
  const int s = packed_sequence(starts, a.batch, token);
  const int queries = starts[s + 1] - starts[s];
  const int group = a.heads / a.kv_heads;
  const long first_row = static_cast<long>(starts[s]) * a.heads;
  const long at = p * a.head_dim;
  attend_cached_dkv(q + first_row * a.head_dim, dout + first_row * a.head_dim, lse + first_row, delta + first_row,
                    k + at, v + at, first_query_seeing(queries, queries, token - starts[s]), queries, a.heads,
                    kvh * group, group, a.head_dim, rsqrtf(static_cast<float>(a.head_dim)), dk + at, dv + at);
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

template <typename T>
__global__ void sample_kernel(const T* logits, int rows, int vocab, float temperature, unsigned long long seed,
                              const int* sequences, const int* positions, int* tokens) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    tokens[r] = sample_row(logits + static_cast<long>(r) * vocab, vocab, temperature, seed, sequences[r], positions[r]);
  }
}

template <typename T>
__global__ void softmax_kernel(T* x, int rows, int n) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) softmax_row(x + static_cast<long>(r) * n, n);
}

template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const int* targets, float* losses, T* dlogits, int rows,
                                     int vocab, float dloss, const float* row_dloss) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const long offset = static_cast<long>(r) * vocab;
  losses[r] = cross_entropy_row(logits + offset, vocab, targets[r]);
  if (dlogits) {
    cross_entropy_backward_row(logits + offset, vocab, targets[r], row_dloss ? dloss * row_dloss[r] : dloss,
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
    info_.driver = "CUDA driver " + version(driver);
    info_.runtime = "CUDA runtime " + version(runtime) + ", cuBLAS " + std::to_string(blas_version) + ", sm_" +
                    std::to_string(props.major) + std::to_string(props.minor);
  }
  ~CudaBackend() override {
    if (scratch_) cudaFree(scratch_);
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }

  const DeviceInfo& info() const override { return info_; }
  cudaStream_t stream() const { return stream_; }

  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  void release(void* p) noexcept override { cudaFree(p); }
  void upload(void* device, const void* host, std::size_t bytes) override {
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "upload");
    synchronize();
  }
  void download(void* host, const void* device, std::size_t bytes) override {
    check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "download");
    synchronize();
  }
  void copy(void* to, const void* from, std::size_t bytes) override {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  }
  void copy_2d(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t width,
               std::size_t rows) override {
    check(cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, width, rows, cudaMemcpyDeviceToDevice, stream_), "copy_2d");
  }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "synchronize"); }

  void fill_zero(void* p, std::size_t bytes) override { check(cudaMemsetAsync(p, 0, bytes, stream_), "fill"); }

  void read_all(const void* p, std::size_t bytes, float* sink) override {
    check(cudaMemsetAsync(sink, 0, sizeof(float), stream_), "read");
    const std::size_t words = bytes / sizeof(uint4);
    read_kernel<<<static_cast<unsigned>(info_.compute_units) * 8, kThreads, 0, stream_>>>(
        static_cast<const uint4*>(p), words, sink);
    launched("read");
  }

  void gemm(const Gemm& g, const void* a, const void* b, void* c) override {
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
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      rmsnorm_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(typed<T>(x), typed<T>(w), typed<T>(y), rows, n, eps);
    });
    launched("rmsnorm");
  }

  void rmsnorm_backward(DType t, const void* x, const void* w, const void* dy, void* dx, float* dw, int rows, int n,
                        float eps) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      rmsnorm_backward_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(typed<T>(x), typed<T>(w), typed<T>(dy),
                                                                          typed<T>(dx), rows, n, eps);
      if (dw) {
        float* inverse = scratch(static_cast<std::size_t>(rows) * sizeof(float));
        inverse_rms_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(typed<T>(x), inverse, rows, n, eps);
        rmsnorm_weight_grad_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(typed<T>(x), typed<T>(dy), inverse, dw,
                                                                             rows, n);
      }
    });
    launched("rmsnorm_backward");
  }

  void rope(DType t, void* x, int tokens, int heads, int head_dim, int first_position, float theta,
            bool inverse) override {
    const std::size_t pairs = static_cast<std::size_t>(tokens) * heads * (head_dim / 2);
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      rope_kernel<<<blocks_for(pairs), kThreads, 0, stream_>>>(typed<T>(x), tokens, heads, head_dim, first_position,
                                                               theta, inverse);
    });
    launched("rope");
  }

  void swiglu(DType t, const void* gate, const void* up, void* out, std::size_t count) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      swiglu_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(typed<T>(gate), typed<T>(up), typed<T>(out), count);
    });
    launched("swiglu");
  }

  void swiglu_backward(DType t, const void* gate, const void* up, const void* dh, void* dgate, void* dup,
                       std::size_t count) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      swiglu_backward_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(
          typed<T>(gate), typed<T>(up), typed<T>(dh), typed<T>(dgate), typed<T>(dup), count);
    });
    launched("swiglu_backward");
  }

  void decode_attention(const DecodeAttention& a, const void* q, const void* k, const void* v, const int* lengths,
                        void* out) override {
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: decode attention head_dim above " + std::to_string(kMaxHeadDim));
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      decode_attention_kernel<<<blocks_for(static_cast<std::size_t>(a.batch) * a.heads), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), lengths, typed<T>(out));
    });
    launched("decode_attention");
  }

  void attention(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                 const int* slots, void* out, float* lse) override {
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    const std::size_t rows = static_cast<std::size_t>(a.batch) * a.queries * a.heads;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      attention_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(a, typed<T>(q), typed<T>(k), typed<T>(v), lengths,
                                                                   slots, typed<T>(out), lse);
    });
    launched("attention");
  }

  void attention_backward(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                          const void* out, const void* dout, const float* lse, float* delta, void* dq, void* dk,
                          void* dv) override {
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    const std::size_t rows = static_cast<std::size_t>(a.batch) * a.queries * a.heads;
    const std::size_t positions = static_cast<std::size_t>(a.batch) * a.capacity * a.kv_heads;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      attention_delta_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(a, typed<T>(out), typed<T>(dout), delta);
      attention_dq_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(a, typed<T>(q), typed<T>(k), typed<T>(v), lengths,
                                                                      typed<T>(dout), lse, delta, typed<T>(dq));
      attention_dkv_kernel<<<blocks_for(positions), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), lengths, typed<T>(dout), lse, delta, typed<T>(dk), typed<T>(dv));
    });
    launched("attention_backward");
  }

  void packed_attention(const PackedAttention& a, const void* q, const void* k, const void* v, const int* starts,
                        void* out, float* lse) override {
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    const std::size_t rows = static_cast<std::size_t>(a.tokens) * a.heads;
    if (rows == 0) return;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      packed_attention_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(a, typed<T>(q), typed<T>(k), typed<T>(v),
                                                                          starts, typed<T>(out), lse);
    });
    launched("packed_attention");
  }

  void packed_attention_backward(const PackedAttention& a, const void* q, const void* k, const void* v,
                                 const int* starts, const void* out, const void* dout, const float* lse, float* delta,
                                 void* dq, void* dk, void* dv) override {
    if (a.head_dim > kMaxHeadDim) throw DeviceError("cuda: attention head_dim above " + std::to_string(kMaxHeadDim));
    const std::size_t rows = static_cast<std::size_t>(a.tokens) * a.heads;
    const std::size_t positions = static_cast<std::size_t>(a.tokens) * a.kv_heads;
    if (rows == 0) return;
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      packed_attention_dq_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), starts, typed<T>(out), typed<T>(dout), lse, delta, typed<T>(dq));
      packed_attention_dkv_kernel<<<blocks_for(positions), kThreads, 0, stream_>>>(
          a, typed<T>(q), typed<T>(k), typed<T>(v), starts, typed<T>(dout), lse, delta, typed<T>(dk), typed<T>(dv));
    });
    launched("packed_attention_backward");
  }

  void rope_at(DType t, void* x, const int* positions, int tokens, int heads, int head_dim, float theta,
               bool inverse) override {
    const std::size_t pairs = static_cast<std::size_t>(tokens) * heads * (head_dim / 2);
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      rope_at_kernel<<<blocks_for(pairs), kThreads, 0, stream_>>>(typed<T>(x), positions, tokens, heads, head_dim,
                                                                  theta, inverse);
    });
    launched("rope_at");
  }

  void embed(DType t, const void* table, const int* tokens, void* out, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      embed_kernel<<<blocks_for(static_cast<std::size_t>(rows) * n), kThreads, 0, stream_>>>(
          typed<T>(table), tokens, typed<T>(out), rows, n);
    });
    launched("embed");
  }

  void embed_backward(DType t, const void* dy, const int* tokens, float* dtable, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      embed_grad_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(typed<T>(dy), tokens, dtable, rows, n);
    });
    launched("embed_backward");
  }

  void scatter(DType t, const void* x, const int* rows_at, void* out, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      scatter_kernel<<<blocks_for(static_cast<std::size_t>(rows) * n), kThreads, 0, stream_>>>(
          typed<T>(x), rows_at, typed<T>(out), rows, n);
    });
    launched("scatter");
  }

  void fill_uniform(DType t, void* x, const Block& block, float low, float high, unsigned long long seed) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      fill_uniform_kernel<<<blocks_for(block.count()), kThreads, 0, stream_>>>(typed<T>(x), block, low, high, seed);
    });
    launched("fill_uniform");
  }

  void fill_value(DType t, void* x, std::size_t count, float value) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      fill_value_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(typed<T>(x), count, value);
    });
    launched("fill_value");
  }

  void add(DType t, void* into, const void* from, std::size_t count) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      add_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(typed<T>(into), typed<T>(from), count);
    });
    launched("add");
  }

  void add_bias(DType t, void* x, const void* bias, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      add_bias_kernel<<<blocks_for(static_cast<std::size_t>(rows) * n), kThreads, 0, stream_>>>(
          typed<T>(x), typed<T>(bias), rows, n);
    });
    launched("add_bias");
  }

  void bias_backward(DType t, const void* dy, float* dbias, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      bias_grad_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(typed<T>(dy), dbias, rows, n);
    });
    launched("bias_backward");
  }

  void sample(DType t, const void* logits, int rows, int vocab, float temperature, unsigned long long seed,
              const int* sequences, const int* positions, int* tokens) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      sample_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(typed<T>(logits), rows, vocab, temperature, seed,
                                                                sequences, positions, tokens);
    });
    launched("sample");
  }

  void softmax(DType t, void* x, int rows, int n) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      softmax_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(typed<T>(x), rows, n);
    });
    launched("softmax");
  }

  void cross_entropy(DType t, const void* logits, const int* targets, float* losses, void* dlogits, int rows, int vocab,
                     float dloss, const float* row_dloss) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      cross_entropy_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(typed<T>(logits), targets, losses,
                                                                        static_cast<T*>(dlogits), rows, vocab, dloss,
                                                                        row_dloss);
    });
    launched("cross_entropy");
  }

  void adamw(DType t, float* master, float* m, float* v, const float* grad, void* weight, std::size_t count,
             const AdamW& options) override {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      adamw_kernel<<<blocks_for(count), kThreads, 0, stream_>>>(master, m, v, grad, typed<T>(weight), count,
                                                                adamw_step(options));
    });
    launched("adamw");
  }

  void cast(DType from, const void* x, DType to, void* y, std::size_t count) override {
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
  // Device memory for a kernel's intermediate values (rmsnorm_backward's inverse RMS per row),
  // grown as needed; the stream orders its uses.
  float* scratch(std::size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) {
        synchronize();
        cudaFree(scratch_);
        scratch_ = nullptr;
      }
      check(cudaMalloc(&scratch_, bytes), "cudaMalloc");
      scratch_bytes_ = bytes;
    }
    return static_cast<float*>(scratch_);
  }

  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
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
