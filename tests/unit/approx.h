#pragma once
// Comparing figures within a relative tolerance. doctest's Approx adds a scale of 1 to the
// magnitudes it compares: Approx(1.0).epsilon(0.15) accepts 0.7, and any two values under 1e-5
// compare equal, so a check of seconds near 1e-7 could not fail. approx() compares relative to
// the values alone; around an expected zero, within epsilon of it.

#include <doctest/doctest.h>

namespace hetrl::testing {

inline doctest::Approx approx(double expected) { return doctest::Approx(expected).scale(expected == 0 ? 1.0 : 0.0); }

}  // namespace hetrl::testing
