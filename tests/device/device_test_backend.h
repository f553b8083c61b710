#pragma once
// The backend the device tests run on: the cpu backend in the unit tests, the cuda backend in
// the gpu-labelled tests (HETRL_TEST_BACKEND, set by tests/device/CMakeLists.txt); the
// communicator between the test's processes; moving values to and from device buffers.

#include <memory>
#include <vector>

#include "device/backend.h"
#include "device/comm.h"

namespace hetrl::device {

inline std::unique_ptr<Backend> test_backend() { return make_backend(HETRL_TEST_BACKEND); }

// On the cuda backend NCCL (over MPI's world when mpirun started the test, else alone), so the
// gpu tests run NCCL even on one GPU; on the cpu backend what the launch gives.
inline std::unique_ptr<Communicator> test_communicator(Backend& b) {
  const Launch launch = launch_from_environment();
#if defined(HETRL_HAVE_NCCL)
  if (b.info().backend == "cuda") {
    return make_nccl_communicator(b, launch.size > 1 ? make_mpi_communicator() : make_single_communicator(b));
  }
#endif
  return make_communicator(b, launch);
}

// The value x after a round trip through storage t.
inline double quantize(DType t, double x) {
  const float f = static_cast<float>(x);
  return with_dtype(t, [&](auto tag) { return static_cast<double>(to_float(store<decltype(tag)>(f))); });
}

// Device buffers in storage type t from doubles, and back.
inline Buffer put(Backend& b, DType t, const std::vector<double>& values) {
  Buffer buffer(b, values.size() * dtype_bytes(t));
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> host(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) host[i] = store<T>(static_cast<float>(values[i]));
    b.upload(buffer.data(), host.data(), buffer.bytes());
  });
  return buffer;
}

inline std::vector<double> get(Backend& b, DType t, const Buffer& buffer, std::size_t count) {
  std::vector<double> values(count);
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> host(count);
    b.download(host.data(), buffer.data(), count * sizeof(T));
    for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<double>(to_float(host[i]));
  });
  return values;
}

}  // namespace hetrl::device
