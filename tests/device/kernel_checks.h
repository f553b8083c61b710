#pragma once
// What the kernel checks share (test_kernels.cpp, test_kernels_model.cpp): the storage types,
// their precision, random inputs, raw buffers, element-wise comparison and finite differences.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "device_test_backend.h"

namespace hetrl::device {

inline constexpr DType kTypes[] = {DType::kF32, DType::kBf16, DType::kF16};

// Relative precision of one value stored in t (half an ulp at 1, with room for fp32 sums).
inline double precision(DType t) { return t == DType::kF32 ? 1e-5 : t == DType::kBf16 ? 8e-3 : 1e-3; }

inline std::vector<double> random_values(std::size_t n, double scale, unsigned seed, DType t) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = quantize(t, normal(rng));
  return v;
}

template <typename U>
inline Buffer put_raw(Backend& b, const std::vector<U>& values) {
  Buffer buffer(b, values.size() * sizeof(U));
  b.upload(buffer.data(), values.data(), buffer.bytes());
  return buffer;
}

template <typename U>
inline std::vector<U> get_raw(Backend& b, const Buffer& buffer, std::size_t count) {
  std::vector<U> values(count);
  b.download(values.data(), buffer.data(), count * sizeof(U));
  return values;
}

// |found - expected| within tolerance * max(1, |expected|, scale), element by element.
inline void check_close(const std::vector<double>& found, const std::vector<double>& expected, double tolerance,
                 double scale = 1.0) {
  REQUIRE(found.size() == expected.size());
  for (std::size_t i = 0; i < found.size(); ++i) {
    CAPTURE(i);
    CAPTURE(found[i]);
    CAPTURE(expected[i]);
    CHECK(std::abs(found[i] - expected[i]) <= tolerance * std::max({1.0, std::abs(expected[i]), scale}));
  }
}

// The gradient of f at x by central differences, in double.
inline std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                     std::vector<double> x) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i], h = 1e-5 * std::max(1.0, std::abs(keep));
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace hetrl::device
