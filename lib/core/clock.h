#pragma once
// Time as the planners see it, behind an interface: the tools pass the steady clock, tests a
// fake one, so no test depends on how fast the machine is.

#include <chrono>
#include <limits>

namespace hetrl::core {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double seconds() const = 0;  // since an arbitrary start
};

class SteadyClock final : public Clock {
 public:
  double seconds() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
};

// Advances by `step` seconds each time it is read.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(double step = 0) : step_(step) {}
  double seconds() const override { return now_ += step_; }

 private:
  double step_;
  mutable double now_ = 0;
};

// When work without a time limit of its own must stop (a baseline planner under `auto`, a
// simulation): `at` on `clock`. With no clock it never passes, and reads no clock.
struct Deadline {
  const Clock* clock = nullptr;
  double at = std::numeric_limits<double>::infinity();
  bool passed() const { return clock != nullptr && clock->seconds() >= at; }
};

}  // namespace hetrl::core
