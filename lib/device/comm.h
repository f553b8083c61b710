#pragma once
// Communication between the processes of one run, one device each: the collectives a data-,
// tensor- or pipeline-parallel step needs, on device buffers.
//
// A run is one process, or several started by a launcher (mpirun) with one device each. The
// transport follows the backend: MPI (Open MPI) between processes on the cpu backend, NCCL on
// the cuda backend (its communicator bootstrapped through MPI), and no transport for a process
// alone. Sums are element-wise in fp32 and rounded to the storage type after each step, as NCCL
// does (device/kernels.h, add_into); the order of the steps is the library's.
//
// Every collective is called by every process of the run, in the same order, with the same
// counts; a process that fails must abort() the run, or the others wait for it forever.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "device/backend.h"
#include "device/host_memory.h"

namespace hetrl::device {

// Where this process is among those the launcher started, from its environment (Open MPI's
// OMPI_COMM_WORLD_*, or PMI_RANK and PMI_SIZE); rank 0 of 1 when no launcher started it.
struct Launch {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // among the processes on this machine: the device it takes
  int local_size = 1;
};
Launch launch_from_environment();

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string transport() const = 0;  // "none", "mpi" or "nccl"

  // recv = the sum over processes of send (count elements each); send may be recv.
  virtual void all_reduce(DType t, const void* send, void* recv, std::size_t count) = 0;
  // recv (size() * count elements) = every process's send (count elements), in rank order. In
  // place where send is this rank's block of recv (recv + rank() * count elements), as NCCL's.
  virtual void all_gather(DType t, const void* send, void* recv, std::size_t count) = 0;
  // recv (count elements) = this rank's block of count elements of the sum of send
  // (size() * count elements). In place where recv is that block of send (send + rank() *
  // count elements), as NCCL's: the other blocks of send are then left undefined.
  virtual void reduce_scatter(DType t, const void* send, void* recv, std::size_t count) = 0;
  virtual void broadcast(DType t, void* data, std::size_t count, int root) = 0;
  // Point to point: a send to `peer` matches peer's recv from this rank, in order.
  virtual void send(DType t, const void* data, std::size_t count, int peer) = 0;
  virtual void recv(DType t, void* data, std::size_t count, int peer) = 0;
  // A send to `peer` and a receive from it at once (`sent` and `received` elements), which
  // matches the peer's own exchange with this rank: two processes that each send to the other
  // before receiving would wait for each other forever (a large message waits for its receive).
  virtual void exchange(DType t, const void* send, std::size_t sent, void* recv, std::size_t received, int peer) = 0;

  // Host-side agreement between the processes. barrier() waits without spinning a core, so a
  // process that waits does not slow one that measures.
  virtual void barrier() = 0;
  virtual double max(double x) = 0;
  virtual void broadcast_host(void* data, std::size_t bytes, int root) = 0;

  // Host messages between processes that do not meet: what one group of a plan hands another
  // that works on other iterations meanwhile. post() sends `message` (kept until taken) to
  // `peer` and returns at once; take() receives the next message of `peer` with `tag` (`bytes`
  // long), waiting without spinning until it is here; finish_posted() waits until every posted
  // message was taken. Messages of one peer and tag are taken in the order posted. Tags run from
  // 0 to kPostTags - 1. On NCCL's transport they travel over its host communicator.
  static constexpr int kPostTags = 16384;
  virtual void post(HostBytes message, int peer, int tag) = 0;
  virtual void take(void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual void finish_posted() = 0;

  // Ends every process of the run with `code` (after this process printed why).
  [[noreturn]] virtual void abort(int code) = 0;

  // The processes of this communicator that give the same `color` (at least 0), as a
  // communicator of their own ranked by `key` (ties by rank here): a tensor-parallel group, a
  // data-parallel one. Called by every process of this one, as a collective.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

// comm.all_reduce of `count` elements in place, in pieces of at most `bucket` elements one
// after another, as data-parallel trainers send their gradients (a transport may be much
// slower a byte on one large buffer: Open MPI's on the cpu backend is, past 16 MiB).
void all_reduce_in_buckets(Communicator& comm, DType t, void* data, std::size_t count, std::size_t bucket);
// The bytes of a bucket of gradients: PyTorch DDP's default, what hetrl-exec sends its
// gradients in and hetrl-profile times a gradient's all-reduce in.
inline constexpr std::size_t kGradientBucketBytes = std::size_t{25} << 20;

// The communicator over the processes the launcher started, for `backend`'s device. Throws
// DeviceError when the build lacks what the launch needs (MPI, or NCCL for the cuda backend
// across processes).
std::unique_ptr<Communicator> make_communicator(Backend& backend, const Launch& launch);

// A process alone: collectives copy, point to point has no peer.
std::unique_ptr<Communicator> make_single_communicator(Backend& backend);

// Whether this build has each transport.
bool built_with_mpi();
bool built_with_nccl();

#if defined(HETRL_HAVE_MPI)
// MPI's world, on host memory (the cpu backend's).
std::unique_ptr<Communicator> make_mpi_communicator();
#endif
#if defined(HETRL_HAVE_NCCL)
// NCCL over `backend`'s GPU, one rank per process; `host` (MPI's world, or the single
// communicator) bootstraps it and does the host-side agreement.
std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, std::unique_ptr<Communicator> host);
#endif

}  // namespace hetrl::device
