#pragma once
// The backend the device tests run on: the cpu backend in the unit tests, the cuda backend in
// the gpu-labelled tests (HETRL_TEST_BACKEND, set by tests/device/CMakeLists.txt).

#include <memory>

#include "device/backend.h"

namespace hetrl::device {

inline std::unique_ptr<Backend> test_backend() { return make_backend(HETRL_TEST_BACKEND); }

}  // namespace hetrl::device
