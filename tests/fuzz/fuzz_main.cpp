// libFuzzer's entry for one target (HETRL_FUZZ_TARGET): any exception but core::InputError,
// sanitizer report, assert, hang or runaway memory is a crash.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "targets.h"

#ifndef HETRL_FUZZ_TARGET
#error "HETRL_FUZZ_TARGET names the loader to fuzz"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hetrl::fuzz::load(HETRL_FUZZ_TARGET, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
