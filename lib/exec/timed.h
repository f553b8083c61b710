#pragma once
// Host seconds of a collective that returns when done (MPI's), added to its CollectiveTime.

#include <chrono>
#include <utility>

#include "exec/transformer.h"

namespace hetrl::exec {

// Runs f(); where `on`, adds its host seconds and one call to `time`.
template <class F>
void timed_call(CollectiveTime& time, bool on, F&& f) {
  if (!on) {
    std::forward<F>(f)();
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  std::forward<F>(f)();
  time.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++time.calls;
}

}  // namespace hetrl::exec
