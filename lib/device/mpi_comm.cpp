// MPI's world as a communicator, on host memory: the cpu backend's transport between
// processes. Sums of fp32 use MPI_SUM; bf16 and fp16 have no MPI type, so they travel as 16-bit
// words and are summed by an MPI operation over device/kernels.h's add_into.

#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <list>
#include <string>
#include <thread>

#include "device/comm.h"

namespace hetrl::device {
namespace {

void check(int status, const char* what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw DeviceError(std::string("mpi: ") + what + ": " + std::string(text, static_cast<std::size_t>(length)));
}

template <typename T>
void sum_words(void* in, void* inout, int* count, MPI_Datatype*) {
  add_into(static_cast<T*>(inout), static_cast<const T*>(in), *count);
}

// Open MPI's collectives take temporary buffers of a message's size from malloc and free them
// after each call (a reduce-scatter's the whole of what it sums). glibc maps a block of more
// than its threshold (at most 32 MiB, moving with use) fresh from the kernel each time and
// hands it back when freed, so every call faults each page in again: on a VM about 0.7 GB/s,
// where Open MPI 4.1's reduce-scatter between two processes ran at 0.2 GB/s of the whole for
// 64 and 256 MiB and its all-reduce at 0.35 (a stand-alone test, MPI_Reduce_scatter_block and
// MPI_Allreduce of fp32 with MPI_SUM). Blocks up to 1 GiB stay on the heap, reused from call to
// call, and the heap is not trimmed below 1 GiB: then 2.6-2.8 and 2.3-3.6 GB/s. Set once,
// before MPI's first allocations.
void keep_large_blocks_on_the_heap() {
  constexpr int kLargest = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kLargest);
  mallopt(M_TRIM_THRESHOLD, kLargest);
}

// MPI starts once per process and ends at exit (it cannot start again after it ends), and
// reports errors as return codes instead of ending the process.
class World {
 public:
  static World& get() {
    static World world;
    return world;
  }
  MPI_Op sum(DType t) const { return t == DType::kBf16 ? bf16_sum_ : t == DType::kF16 ? fp16_sum_ : MPI_SUM; }
  // A block of at least `bytes` for one collective at a time, one for every communicator of the
  // process, so that its pages are faulted in once (0.53 s for 148 MB on the VM).
  std::byte* scratch(std::size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

 private:
  World() {
    keep_large_blocks_on_the_heap();
    int started = 0;
    MPI_Initialized(&started);
    if (!started) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      owned_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Op_create(&sum_words<Bf16>, 1, &bf16_sum_), "MPI_Op_create");
    check(MPI_Op_create(&sum_words<Half>, 1, &fp16_sum_), "MPI_Op_create");
  }
  ~World() {
    int ended = 0;
    MPI_Finalized(&ended);
    if (owned_ && !ended) MPI_Finalize();
  }
  bool owned_ = false;
  MPI_Op bf16_sum_ = MPI_OP_NULL, fp16_sum_ = MPI_OP_NULL;
  std::vector<std::byte> scratch_;
};

MPI_Datatype mpi_type(DType t) { return t == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T; }

int mpi_count(std::size_t count, const char* what) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw DeviceError(std::string("mpi: ") + what + " of " + std::to_string(count) + " elements is more than MPI's " +
                      std::to_string(INT_MAX) + " in one call");
  }
  return static_cast<int>(count);
}

class MpiCommunicator final : public Communicator {
 public:
  // MPI's world, or (owned) a communicator split from one.
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD) : world_(World::get()), comm_(comm) {
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiCommunicator() override {
    int ended = 0;
    MPI_Finalized(&ended);
    if (comm_ != MPI_COMM_WORLD && !ended) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::unique_ptr<Communicator> split(int color, int key) override {
    if (color < 0) throw DeviceError("split: a color below 0");
    MPI_Comm part = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(part);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string transport() const override { return "mpi"; }

  void all_reduce(DType t, const void* send, void* recv, std::size_t count) override {
    check(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, mpi_count(count, "all-reduce"), mpi_type(t),
                        world_.sum(t), comm_),
          "MPI_Allreduce");
  }
  // The whole (size() blocks) must also be within MPI's count, so both are checked.
  void all_gather(DType t, const void* send, void* recv, std::size_t count) override {
    (void)mpi_count(count * static_cast<std::size_t>(size_), "all-gather");
    const int n = mpi_count(count, "all-gather");
    const bool in_place = send == static_cast<const std::byte*>(recv) + static_cast<std::size_t>(rank_) * count * dtype_bytes(t);
    check(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(t), recv, n, mpi_type(t), comm_), "MPI_Allgather");
  }
  // A ring, as NCCL's: in step s each process passes the partial sum of block rank - s - 1 to
  // the next and adds its own part of block rank - s - 2 to what the previous passes it, so that
  // after size - 1 steps it holds the whole sum of its own block. Open MPI 4.1's
  // MPI_Reduce_scatter_block and MPI_Reduce_scatter took 2.8 and 2.0 times as long as this ring
  // for 297 MiB of fp32 between two processes on a 2-core VM, 2.1 and 1.7 times among four
  // (benchmarks/reduce_scatter, benchmarks/RESULTS.md), and with each of its tuned component's
  // algorithms forced 2.2 to 2.8 times between two: ZeRO's gradient sync reduce-scatters the
  // whole gradient. In place the partial sums gather in send's own blocks; apart, in recv and a
  // scratch block in turn.
  void reduce_scatter(DType t, const void* send, void* recv, std::size_t count) override {
    const int n = mpi_count(count, "reduce-scatter");
    const std::size_t block = count * dtype_bytes(t);
    auto* whole = static_cast<std::byte*>(const_cast<void*>(send));
    const auto part = [&](int b) { return whole + static_cast<std::size_t>((b % size_ + size_) % size_) * block; };
    const bool in_place = recv == part(rank_);
    if (size_ == 1) {
      if (!in_place) std::copy_n(whole, block, static_cast<std::byte*>(recv));
      return;
    }
    std::byte* scratch = world_.scratch(block);
    const int next = (rank_ + 1) % size_, previous = (rank_ + size_ - 1) % size_;
    const void* passed = part(rank_ - 1);
    for (int s = 0; s < size_ - 1; ++s) {
      // Apart, the steps receive into the two buffers in turn, the last into recv.
      void* into = in_place || (size_ - 2 - s) % 2 != 0 ? static_cast<void*>(scratch) : recv;
      check(MPI_Sendrecv(passed, n, mpi_type(t), next, kTag, into, n, mpi_type(t), previous, kTag, comm_,
                         MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
      std::byte* own = part(rank_ - s - 2);
      if (in_place) {
        add_block(t, own, into, count);
        passed = own;
      } else {
        add_block(t, into, own, count);
        passed = into;
      }
    }
  }
  void broadcast(DType t, void* data, std::size_t count, int root) override {
    check(MPI_Bcast(data, mpi_count(count, "broadcast"), mpi_type(t), root, comm_), "MPI_Bcast");
  }
  void send(DType t, const void* data, std::size_t count, int peer) override {
    check(MPI_Send(data, mpi_count(count, "send"), mpi_type(t), peer, kTag, comm_), "MPI_Send");
  }
  void exchange(DType t, const void* send, std::size_t sent, void* recv, std::size_t received, int peer) override {
    check(MPI_Sendrecv(send, mpi_count(sent, "send"), mpi_type(t), peer, kTag, recv, mpi_count(received, "receive"),
                       mpi_type(t), peer, kTag, comm_, MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
  }
  void recv(DType t, void* data, std::size_t count, int peer) override {
    check(MPI_Recv(data, mpi_count(count, "receive"), mpi_type(t), peer, kTag, comm_, MPI_STATUS_IGNORE),
          "MPI_Recv");
  }

  // MPI's blocking calls spin while they wait; a process measuring beside a waiting one would
  // lose a core to it. The host-side calls start a non-blocking operation and poll it: at once
  // for a millisecond (so that processes meeting at a barrier leave it together), then
  // sleeping between polls, twice as long each time up to 1 ms. A process that arrives while
  // its peer sleeps waits for the peer to wake (a collective moves only while both poll): with
  // sleeps of up to 20 ms the last stage of a two-stage pipeline lost 32-83 ms at the end of
  // each scoring task, and its iteration as run was 1.08-1.09 times its tasks in turn. Waking
  // every millisecond took 4% of a waiting core on the 2-core VM of benchmarks/RESULTS.md.
  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    wait(request);
  }
  double max(double x) override {
    double most = x;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(&x, &most, 1, MPI_DOUBLE, MPI_MAX, comm_, &request), "MPI_Iallreduce");
    wait(request);
    return most;
  }
  void broadcast_host(void* data, std::size_t bytes, int root) override {
    check(MPI_Bcast(data, mpi_count(bytes, "broadcast"), MPI_BYTE, root, comm_), "MPI_Bcast");
  }
  // Posted messages go with MPI_Isend from the communicator's own copy, dropped once sent;
  // their tags sit above the point-to-point calls'.
  void post(HostBytes message, int peer, int tag) override {
    const int mpi_tag = post_tag(tag);
    const int bytes = mpi_count(message.size(), "post");
    reap();
    Posted& p = posted_.emplace_back();
    p.bytes = std::move(message);
    check(MPI_Isend(p.bytes.data(), bytes, MPI_BYTE, peer, mpi_tag, comm_, &p.request), "MPI_Isend");
  }
  void take(void* data, std::size_t bytes, int peer, int tag) override {
    reap();
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Irecv(data, mpi_count(bytes, "take"), MPI_BYTE, peer, post_tag(tag), comm_, &request), "MPI_Irecv");
    wait(request);
  }
  void finish_posted() override {
    for (Posted& p : posted_) wait(p.request);
    posted_.clear();
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }

 private:
  static void wait(MPI_Request& request) {
    poll([&] {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      return done != 0;
    });
  }
  template <typename Done>
  static void poll(const Done& done) {
    const auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(50);
    while (!done()) {
      if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(1)) {
        std::this_thread::sleep_for(pause);
        pause = std::min(2 * pause, std::chrono::microseconds(1000));
      }
    }
  }
  static int post_tag(int tag) {
    if (tag < 0 || tag >= kPostTags) throw DeviceError("post: tag " + std::to_string(tag) + " out of range");
    return kTag + 1 + tag;
  }
  // Drops the posted messages that are sent, oldest first (MPI moves the others on meanwhile).
  void reap() {
    while (!posted_.empty()) {
      int done = 0;
      check(MPI_Test(&posted_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return;
      posted_.pop_front();
    }
  }

  static void add_block(DType t, void* into, const void* from, std::size_t count) {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      add_into(static_cast<T*>(into), static_cast<const T*>(from), static_cast<long>(count));
    });
  }

  struct Posted {
    HostBytes bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  static constexpr int kTag = 7;
  std::list<Posted> posted_;
  World& world_;
  MPI_Comm comm_ = MPI_COMM_WORLD;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace hetrl::device
