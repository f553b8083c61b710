// NCCL as a communicator: the cuda backend's transport, one rank per process and GPU. Rank 0
// makes NCCL's unique id and the host communicator (MPI's world) hands it to the others; every
// operation is queued on the backend's stream, in order with its kernels.

#include <nccl.h>

#include <cstdlib>
#include <string>

#include "device/comm.h"
#include "device/cuda_internal.h"

namespace hetrl::device {
namespace {

void check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) throw DeviceError(std::string("nccl: ") + what + ": " + ncclGetErrorString(status));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kBf16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kF32:
      break;
  }
  return ncclFloat32;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Backend& backend, std::unique_ptr<Communicator> host)
      : backend_(backend), stream_(cuda_stream(backend)), host_(std::move(host)) {
    ncclUniqueId id{};
    if (host_->rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    host_->broadcast_host(&id, sizeof id, 0);
    check(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string transport() const override { return "nccl"; }

  void all_reduce(DType t, const void* send, void* recv, std::size_t count) override {
    check(ncclAllReduce(send, recv, count, nccl_type(t), ncclSum, comm_, stream_), "ncclAllReduce");
  }
  void all_gather(DType t, const void* send, void* recv, std::size_t count) override {
    check(ncclAllGather(send, recv, count, nccl_type(t), comm_, stream_), "ncclAllGather");
  }
  void reduce_scatter(DType t, const void* send, void* recv, std::size_t count) override {
    check(ncclReduceScatter(send, recv, count, nccl_type(t), ncclSum, comm_, stream_), "ncclReduceScatter");
  }
  void broadcast(DType t, void* data, std::size_t count, int root) override {
    check(ncclBroadcast(data, data, count, nccl_type(t), root, comm_, stream_), "ncclBroadcast");
  }
  void send(DType t, const void* data, std::size_t count, int peer) override {
    check(ncclSend(data, count, nccl_type(t), peer, comm_, stream_), "ncclSend");
  }
  void recv(DType t, void* data, std::size_t count, int peer) override {
    check(ncclRecv(data, count, nccl_type(t), peer, comm_, stream_), "ncclRecv");
  }
  void exchange(DType t, const void* send, std::size_t sent, void* recv, std::size_t received, int peer) override {
    check(ncclGroupStart(), "ncclGroupStart");
    check(ncclSend(send, sent, nccl_type(t), peer, comm_, stream_), "ncclSend");
    check(ncclRecv(recv, received, nccl_type(t), peer, comm_, stream_), "ncclRecv");
    check(ncclGroupEnd(), "ncclGroupEnd");
  }

  void barrier() override { host_->barrier(); }
  double max(double x) override { return host_->max(x); }
  void broadcast_host(void* data, std::size_t bytes, int root) override { host_->broadcast_host(data, bytes, root); }
  void post(HostBytes message, int peer, int tag) override { host_->post(std::move(message), peer, tag); }
  void take(void* data, std::size_t bytes, int peer, int tag) override { host_->take(data, bytes, peer, tag); }
  void finish_posted() override { host_->finish_posted(); }
  // A group of its own: the host communicator split, and NCCL bootstrapped over that part.
  std::unique_ptr<Communicator> split(int color, int key) override {
    return std::make_unique<NcclCommunicator>(backend_, host_->split(color, key));
  }
  [[noreturn]] void abort(int code) override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    host_->abort(code);
    std::exit(code);  // not reached; the host compiler does not see abort() through the pointer as noreturn
  }

 private:
  Backend& backend_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Communicator> host_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, std::unique_ptr<Communicator> host) {
  return std::make_unique<NcclCommunicator>(backend, std::move(host));
}

}  // namespace hetrl::device
