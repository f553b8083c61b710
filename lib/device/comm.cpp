#include "device/comm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace hetrl::device {
namespace {

// A whole number from the environment, or `fallback` when the variable is unset or not one.
int environment_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return *end == '\0' && value >= 0 && value < (1L << 24) ? static_cast<int>(value) : fallback;
}

class SingleCommunicator final : public Communicator {
 public:
  explicit SingleCommunicator(Backend& backend) : backend_(backend) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string transport() const override { return "none"; }

  void all_reduce(DType t, const void* send, void* recv, std::size_t count) override { move(t, send, recv, count); }
  void all_gather(DType t, const void* send, void* recv, std::size_t count) override { move(t, send, recv, count); }
  void reduce_scatter(DType t, const void* send, void* recv, std::size_t count) override {
    move(t, send, recv, count);
  }
  void broadcast(DType, void*, std::size_t, int root) override { check_rank(root, "broadcast root"); }
  void send(DType, const void*, std::size_t, int peer) override { check_rank(peer, "send to"); }
  void recv(DType, void*, std::size_t, int peer) override { check_rank(peer, "receive from"); }
  void exchange(DType, const void*, std::size_t, void*, std::size_t, int peer) override {
    check_rank(peer, "exchange with");
  }

  void barrier() override {}
  double max(double x) override { return x; }
  void broadcast_host(void*, std::size_t, int root) override { check_rank(root, "broadcast root"); }
  void post(HostBytes, int peer, int) override { check_rank(peer, "post to"); }
  void take(void*, std::size_t, int peer, int) override { check_rank(peer, "take from"); }
  void finish_posted() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
  std::unique_ptr<Communicator> split(int color, int) override {
    if (color < 0) throw DeviceError("split: a color below 0");
    return std::make_unique<SingleCommunicator>(backend_);
  }

 private:
  void move(DType t, const void* from, void* to, std::size_t count) {
    if (from != to) backend_.copy(to, from, count * dtype_bytes(t));
  }
  static void check_rank(int rank, const char* what) {
    if (rank != 0) throw DeviceError(std::string(what) + " rank " + std::to_string(rank) + ": the run has one process");
  }

  Backend& backend_;
};

}  // namespace

Launch launch_from_environment() {
  Launch l;
  l.size = environment_int("OMPI_COMM_WORLD_SIZE", environment_int("PMI_SIZE", 1));
  l.rank = environment_int("OMPI_COMM_WORLD_RANK", environment_int("PMI_RANK", 0));
  l.local_size = environment_int("OMPI_COMM_WORLD_LOCAL_SIZE", environment_int("MPI_LOCALNRANKS", l.size));
  l.local_rank = environment_int("OMPI_COMM_WORLD_LOCAL_RANK", environment_int("MPI_LOCALRANKID", l.rank));
  if (l.size < 1 || l.rank >= l.size) l = Launch{};
  return l;
}

bool built_with_mpi() {
#if defined(HETRL_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

bool built_with_nccl() {
#if defined(HETRL_HAVE_NCCL)
  return true;
#else
  return false;
#endif
}

void all_reduce_in_buckets(Communicator& comm, DType t, void* data, std::size_t count, std::size_t bucket) {
  if (bucket == 0) throw DeviceError("all-reduce in buckets: a bucket of no elements");
  auto* bytes = static_cast<unsigned char*>(data);
  for (std::size_t at = 0; at < count; at += bucket) {
    void* piece = bytes + at * dtype_bytes(t);
    comm.all_reduce(t, piece, piece, std::min(bucket, count - at));
  }
}

std::unique_ptr<Communicator> make_single_communicator(Backend& backend) {
  return std::make_unique<SingleCommunicator>(backend);
}

std::unique_ptr<Communicator> make_communicator(Backend& backend, const Launch& launch) {
  if (launch.size <= 1) return make_single_communicator(backend);
  const bool on_host = backend.info().backend == "cpu";
#if defined(HETRL_HAVE_MPI)
  if (on_host) return make_mpi_communicator();
#if defined(HETRL_HAVE_NCCL)
  return make_nccl_communicator(backend, make_mpi_communicator());
#endif
#endif
  throw DeviceError(std::string("started as ") + std::to_string(launch.size) + " processes, but this build has no " +
                    (on_host ? "MPI (Open MPI, package libopenmpi-dev)" : "NCCL with MPI") +
                    " to connect them");
}

}  // namespace hetrl::device
