#pragma once
// The device layer: one interface over a compute device, two backends chosen at run time.
// `cpu` runs on the host (OpenBLAS for GEMMs, the kernels of device/kernels.h in plain loops);
// `cuda` runs on one NVIDIA GPU (cuBLAS for GEMMs, thin launches over the same kernels), built
// only where the CUDA toolkit is (HETRL_HAVE_CUDA).
//
// Buffers live on the device; host data moves only through upload and download. Operations
// may run asynchronously in order (one CUDA stream); synchronize() waits for all of them, so
// a timed region ends with it. Shapes are row-major; every kernel computes in fp32 whatever the
// storage type (device/numeric.h). Errors (no device, out of memory, a failed launch) throw
// DeviceError with what failed.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "device/kernels.h"
#include "device/numeric.h"

namespace hetrl::device {

class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceInfo {
  std::string backend;      // "cpu" or "cuda"
  std::string name;         // e.g. "NVIDIA H200" or the CPU's model name
  int index = 0;            // the device's number among the backend's devices
  int count = 1;            // how many devices the backend sees
  double memory = 0;        // bytes
  int compute_units = 0;    // streaming multiprocessors, or CPU threads
  std::string driver;       // CUDA driver version, or the kernel's release
  std::string runtime;      // CUDA runtime and cuBLAS versions, or OpenBLAS's configuration
  // Row counts where the GEMM of a layer's weight (B transposed) changes algorithm: the most rows
  // each algorithm but the last takes, ascending (the CPU's few-row loop: up to 14). Its rate
  // breaks there, so a profile measures a point at each; none known for cuBLAS, whose kernel
  // choice is its own.
  std::vector<int> gemm_row_limits;
};

// C[m x n] = A[m x k] B[k x n] (B given as [n x k] when b_transposed, as a layer's weight is;
// A as [k x m] when a_transposed, as activations are for a weight's gradient), A and B in
// `dtype`, accumulated in fp32. C is in `dtype`, or fp32 when c_fp32 (gradients summed over
// micro-batches); `accumulate` adds the product to C instead of overwriting it.
struct Gemm {
  DType dtype = DType::kBf16;
  int m = 0, n = 0, k = 0;
  bool b_transposed = false;
  bool a_transposed = false;
  bool c_fp32 = false;
  bool accumulate = false;
};

// Decode attention: `batch` sequences, each one new query per head, over a cache of
// `capacity` positions laid out [sequence][position][kv_head][head_dim]; q and out are
// [sequence][head][head_dim]. lengths (device ints) gives each sequence's cached positions.
struct DecodeAttention {
  DType dtype = DType::kBf16;
  int batch = 0, heads = 0, kv_heads = 0, head_dim = 0, capacity = 0;
};

// Attention over a KV cache for one step that appends `queries` tokens to each of `batch`
// sequences (a prompt's prefill, a training sequence, or one decode token): q and out are
// [sequence][query][head][head_dim], the cache as DecodeAttention's; lengths (device ints) gives
// each sequence's cached positions including the step's own, and query t sees the first
// lengths - queries + t + 1 of them (causal).
struct Attention {
  DType dtype = DType::kBf16;
  int batch = 0, queries = 0, heads = 0, kv_heads = 0, head_dim = 0, capacity = 0;
};

// Causal attention over whole sequences of different lengths packed one after another, without
// padding (a scoring or training pass, as engines run variable-length batches): `tokens` rows
// in all, sequence s being rows starts[s] to starts[s + 1] (device ints, batch + 1 of them) of
// q and out ([row][head][head_dim]) and of k and v ([row][kv_head][head_dim]): its own keys.
struct PackedAttention {
  DType dtype = DType::kBf16;
  int batch = 0, tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
};

// Rows x cols of a larger row-major matrix `full_cols` wide, from (first_row, first_col): a
// slice of a weight. A whole tensor of n values is whole(n).
struct Block {
  std::size_t rows = 1, cols = 0, full_cols = 0, first_row = 0, first_col = 0;
  HETRL_HD std::size_t count() const { return rows * cols; }
  // The index in the whole matrix of element i of the block.
  HETRL_HD std::size_t index(std::size_t i) const { return (first_row + i / cols) * full_cols + first_col + i % cols; }
};
inline Block whole(std::size_t count) { return {1, count, count, 0, 0}; }

// What an allocation holds, as a training framework's memory report names it: the device's
// memory in use is counted by purpose, so that a run's peak can be set beside the cost model's
// need term by term. Workspace is what a model works in through a task, reused from step to
// step (step inputs, a layer's scratch, logits); communication, a collective's staging buffers.
enum class Purpose : std::uint8_t {
  kWeights,
  kGradients,
  kOptimizer,
  kActivations,
  kKvCache,
  kWorkspace,
  kCommunication,
  kOther,
};
inline constexpr std::size_t kPurposes = 8;
inline constexpr std::array<Purpose, kPurposes> kAllPurposes{
    Purpose::kWeights,  Purpose::kGradients, Purpose::kOptimizer,     Purpose::kActivations,
    Purpose::kKvCache,  Purpose::kWorkspace, Purpose::kCommunication, Purpose::kOther};
// "weights", "gradients", "optimizer", "activations", "kv_cache", "workspace", "communication",
// "other": the keys of hetrl.execreport's breakdowns.
const char* purpose_name(Purpose purpose);
// Bytes by purpose, indexed by the enum's value.
using MemoryByPurpose = std::array<std::size_t, kPurposes>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;

  // Device memory for `purpose` (Buffer's constructor calls this); allocate alone counts its
  // block as Purpose::kOther.
  void* allocate_for(Purpose purpose, std::size_t bytes) {
    const Purpose was = pending_;
    pending_ = purpose;
    try {
      void* p = allocate(bytes);
      pending_ = was;
      return p;
    } catch (...) {
      pending_ = was;
      throw;
    }
  }
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  // The bytes of device memory allocated and not yet released (as the backend rounds them up;
  // blocks its allocator keeps for reuse are not in use), and the most there have been since the
  // backend was made or reset_memory_peak last ran: a framework's max_memory_allocated. Each
  // also by purpose: the peak's is what was in use for each at the moment of the peak.
  std::size_t memory_in_use() const { return in_use_; }
  std::size_t memory_peak() const { return peak_; }
  const MemoryByPurpose& memory_in_use_by_purpose() const { return by_purpose_; }
  const MemoryByPurpose& memory_peak_by_purpose() const { return peak_by_purpose_; }
  void reset_memory_peak() {
    peak_ = in_use_;
    peak_by_purpose_ = by_purpose_;
  }
  virtual void upload(void* device, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* device, std::size_t bytes) = 0;
  virtual void copy(void* to, const void* from, std::size_t bytes) = 0;
  // `rows` rows of `width` bytes each, the rows `to_pitch` and `from_pitch` bytes apart: a block
  // of columns of one matrix into another's.
  virtual void copy_2d(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t width,
                       std::size_t rows) = 0;
  virtual void synchronize() = 0;

  // Memory traffic for bandwidth measurement: writes `bytes` of zeros; reads `bytes` (a sum of
  // 32-bit words into *sink, so no read is optimised away).
  virtual void fill_zero(void* p, std::size_t bytes) = 0;
  virtual void read_all(const void* p, std::size_t bytes, float* sink) = 0;

  virtual void gemm(const Gemm& g, const void* a, const void* b, void* c) = 0;
  virtual void rmsnorm(DType t, const void* x, const void* w, void* y, int rows, int n, float eps) = 0;
  virtual void rmsnorm_backward(DType t, const void* x, const void* w, const void* dy, void* dx, float* dw, int rows,
                                int n, float eps) = 0;
  // Rotates `tokens` x `heads` heads in place; token i is at position first_position + i.
  virtual void rope(DType t, void* x, int tokens, int heads, int head_dim, int first_position, float theta,
                    bool inverse) = 0;
  virtual void swiglu(DType t, const void* gate, const void* up, void* out, std::size_t count) = 0;
  virtual void swiglu_backward(DType t, const void* gate, const void* up, const void* dh, void* dgate, void* dup,
                               std::size_t count) = 0;
  virtual void decode_attention(const DecodeAttention& a, const void* q, const void* k, const void* v,
                                const int* lengths, void* out) = 0;
  // lse (fp32 [sequence][query][head], may be null) keeps each query head's log-sum-exp for
  // attention_backward. slots (device ints, may be null) maps the step's sequence s to the
  // cache's sequence slots[s]: a decode step runs the sequences still generating, wherever
  // their caches are.
  virtual void attention(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                         const int* slots, void* out, float* lse) = 0;
  // The gradients of attention: dq like q; dk and dv like the cache, each sequence's first
  // `lengths` positions written. delta is fp32 scratch of lse's size.
  virtual void attention_backward(const Attention& a, const void* q, const void* k, const void* v, const int* lengths,
                                  const void* out, const void* dout, const float* lse, float* delta, void* dq, void* dk,
                                  void* dv) = 0;
  // Attention and its gradients over packed sequences, as attention and attention_backward
  // (lse and delta [row][head]); dk and dv are written whole.
  virtual void packed_attention(const PackedAttention& a, const void* q, const void* k, const void* v,
                                const int* starts, void* out, float* lse) = 0;
  virtual void packed_attention_backward(const PackedAttention& a, const void* q, const void* k, const void* v,
                                         const int* starts, const void* out, const void* dout, const float* lse,
                                         float* delta, void* dq, void* dk, void* dv) = 0;
  // As rope, token i at positions[i] (device ints): a decode step's sequences are at
  // positions of their own.
  virtual void rope_at(DType t, void* x, const int* positions, int tokens, int heads, int head_dim, float theta,
                       bool inverse) = 0;
  // out[r] = table[tokens[r]], rows of n; the backward adds each dy row into its token's row
  // of the fp32 gradient.
  virtual void embed(DType t, const void* table, const int* tokens, void* out, int rows, int n) = 0;
  virtual void embed_backward(DType t, const void* dy, const int* tokens, float* dtable, int rows, int n) = 0;
  // out[rows_at[r]] = x[r], rows of n: a decode step's keys and values into their caches.
  virtual void scatter(DType t, const void* x, const int* rows_at, void* out, int rows, int n) = 0;
  // Every element uniform in [low, high) (kernels.h uniform_element), or `value`: weights
  // initialised on the device from a seed. The uniform fill writes `block` of a larger matrix,
  // each element the value it has there, so a tensor-parallel shard of a weight holds exactly
  // its slice of the whole one.
  virtual void fill_uniform(DType t, void* x, const Block& block, float low, float high, unsigned long long seed) = 0;
  virtual void fill_value(DType t, void* x, std::size_t count, float value) = 0;
  // into += from (a residual); x[r] += bias for rows of n, and the bias's gradient (the column
  // sums of dy) added into dbias.
  virtual void add(DType t, void* into, const void* from, std::size_t count) = 0;
  virtual void add_bias(DType t, void* x, const void* bias, int rows, int n) = 0;
  virtual void bias_backward(DType t, const void* dy, float* dbias, int rows, int n) = 0;
  // The next token of each row (kernels.h sample_row): row r is sequence sequences[r] at
  // positions[r] (device ints); tokens (device ints) receives the draws.
  virtual void sample(DType t, const void* logits, int rows, int vocab, float temperature, unsigned long long seed,
                      const int* sequences, const int* positions, int* tokens) = 0;
  virtual void softmax(DType t, void* x, int rows, int n) = 0;
  // Per-row losses (fp32) and, when dlogits is not null, their gradient times dloss, and times
  // row_dloss[r] where that is not null (a per-token weight: a policy loss's coefficient).
  virtual void cross_entropy(DType t, const void* logits, const int* targets, float* losses, void* dlogits,
                             int rows, int vocab, float dloss, const float* row_dloss) = 0;
  virtual void adamw(DType t, float* master, float* m, float* v, const float* grad, void* weight, std::size_t count,
                     const AdamW& options) = 0;
  virtual void cast(DType from, const void* x, DType to, void* y, std::size_t count) = 0;
  // The sum of the squares of `count` fp32 values on the device, added in fp64 (kernels.h
  // square): a gradient's squared norm, without copying the gradient to the host.
  virtual double sum_squares(const float* x, std::size_t count) = 0;

 protected:
  // Each backend's allocate and release report the blocks they hand out and take back, with
  // their bytes as the backend rounds them (a block's purpose is the allocate call's).
  void count_allocated(const void* p, std::size_t bytes) {
    purposes_[p] = pending_;
    in_use_ += bytes;
    by_purpose_[static_cast<std::size_t>(pending_)] += bytes;
    if (in_use_ > peak_) {
      peak_ = in_use_;
      peak_by_purpose_ = by_purpose_;
    }
  }
  void count_released(const void* p, std::size_t bytes) noexcept {
    in_use_ -= bytes;
    const auto it = purposes_.find(p);
    if (it == purposes_.end()) return;
    by_purpose_[static_cast<std::size_t>(it->second)] -= bytes;
    purposes_.erase(it);
  }

 private:
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
  MemoryByPurpose by_purpose_{}, peak_by_purpose_{};
  std::unordered_map<const void*, Purpose> purposes_;  // each block handed out
  Purpose pending_ = Purpose::kOther;                   // the purpose of the allocate under way
};

// A device allocation released with its owner, or a view of part of another that it does not
// release (which must outlive it).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& backend, std::size_t bytes, Purpose purpose = Purpose::kOther)
      : backend_(&backend), data_(backend.allocate_for(purpose, bytes)), bytes_(bytes) {}
  static Buffer view(void* data, std::size_t bytes) {
    Buffer out;
    out.data_ = data;
    out.bytes_ = bytes;
    return out;
  }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      backend_ = other.backend_;
      data_ = other.data_;
      bytes_ = other.bytes_;
      other.data_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void reset() noexcept {
    if (data_ && backend_) backend_->release(data_);
    data_ = nullptr;
  }
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A buffer of zeros. Every page is touched when it is made, as a GPU's memory is mapped when
// it is allocated, so the first collective or kernel into it does not fault its pages in (on
// the cpu backend a first touch runs near 0.7 GB/s on a VM: a 150 MB all-gather's first call
// took 3 s).
inline Buffer zeros(Backend& backend, std::size_t bytes, Purpose purpose = Purpose::kOther) {
  Buffer out(backend, bytes, purpose);
  backend.fill_zero(out.data(), bytes);
  return out;
}

// The backends this build has ("cpu", and "cuda" where it was built with CUDA).
std::vector<std::string> built_backends();

// "cpu", "cuda" (device `index`), or "auto" (cuda where a device is present, else cpu). Throws
// DeviceError when the backend is not built or has no device, core::InputError for an unknown
// name.
std::unique_ptr<Backend> make_backend(const std::string& name, int index = 0);

std::unique_ptr<Backend> make_cpu_backend();

// OpenBLAS picks its GEMM kernels once, as it loads, from the CPU's model number. A model newer
// than the library (Debian 12's OpenBLAS 0.3.21 does not know Emerald Rapids) gets its generic
// x86-64 kernels, "Prescott" (SSE3), which run GEMMs four to five times slower than the AVX-512
// ones on such a CPU. better_blas_core names the kernels to ask for instead (the value of
// OPENBLAS_CORETYPE: "SkylakeX" where the CPU has AVX-512, "Haswell" where it has AVX2 and
// FMA), or "" where OpenBLAS's choice stands.
struct CpuFeatures {
  bool avx2_fma = false;
  bool avx512 = false;  // F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use
};
CpuFeatures cpu_features();
std::string better_blas_core(std::string_view chosen, const CpuFeatures& features);

// Where better_blas_core has an answer for this CPU and the environment does not set
// OPENBLAS_CORETYPE already, runs this program again (the same process, arguments and
// environment) with OPENBLAS_CORETYPE set to it; otherwise, or when that fails, returns. For the
// main of a tool that computes on the cpu backend, before anything else: under mpirun the
// process keeps its id, and MPI has not started.
void choose_blas_kernels(char** argv);
#if defined(HETRL_HAVE_CUDA)
std::unique_ptr<Backend> make_cuda_backend(int index);
int cuda_device_count();
#endif

}  // namespace hetrl::device
