#pragma once
// What the cuda backend's translation units share: the stream a backend queues its work on, so
// that NCCL's collectives run in order with the backend's kernels.

#include <cuda_runtime.h>

#include "device/backend.h"

namespace hetrl::device {

// `backend` must be a cuda backend; throws DeviceError otherwise.
cudaStream_t cuda_stream(Backend& backend);

}  // namespace hetrl::device
