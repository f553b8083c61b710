#pragma once
// Storage types of the device layer and the conversions between them, written once for both
// backends: bf16 and fp16 hold tensors, every kernel computes in fp32 (load, compute, store).
//
// Conversions round to nearest, ties to even, as cuda_bf16.h and cuda_fp16.h do: values past
// fp16's largest finite (65504) round to infinity from 65520 on, below its smallest subnormal
// (2^-24) to zero from 2^-25 down; NaN stays NaN. The bit patterns are the IEEE ones, so a
// buffer written here is read by cuBLAS as __nv_bfloat16 or __half.

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HETRL_HD __host__ __device__
#else
#define HETRL_HD
#endif
// Unrolls the loop that follows in GPU code, so that the arrays it indexes stay in registers.
#if defined(__CUDA_ARCH__)
#define HETRL_UNROLL _Pragma("unroll")
#else
#define HETRL_UNROLL
#endif

namespace hetrl::device {

enum class DType { kF32, kBf16, kF16 };

struct Bf16 {
  std::uint16_t bits;
};

struct Half {
  std::uint16_t bits;
};

HETRL_HD inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

HETRL_HD inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

HETRL_HD inline float to_float(float x) { return x; }
HETRL_HD inline float to_float(Bf16 h) { return bits_float(static_cast<std::uint32_t>(h.bits) << 16); }

HETRL_HD inline float to_float(Half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

HETRL_HD inline Bf16 to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};  // quiet NaN
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<std::uint16_t>(rounded >> 16)};
}

HETRL_HD inline Half to_half(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity or NaN (kept quiet)
    return Half{static_cast<std::uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u))};
  }
  if (magnitude >= 0x477ff000u) return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65520
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half or zero
    if (magnitude < 0x33000000u) return Half{static_cast<std::uint16_t>(sign)};  // < 2^-25
    const std::uint32_t exponent = magnitude >> 23;  // 102 to 112
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // value / 2^-24 = mantissa >> shift
    std::uint32_t m = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (m & 1u))) ++m;
    return Half{static_cast<std::uint16_t>(sign | m)};
  }
  const std::uint32_t rebiased = magnitude - 0x38000000u;  // exponent 127 -> 15
  std::uint32_t m = rebiased >> 13;
  const std::uint32_t rest = rebiased & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (m & 1u))) ++m;  // a carry moves into the exponent
  return Half{static_cast<std::uint16_t>(sign | m)};
}

// store<T>(x): the fp32 value x in storage type T.
template <typename T>
struct Store;
template <>
struct Store<float> {
  HETRL_HD static float from(float x) { return x; }
};
template <>
struct Store<Bf16> {
  HETRL_HD static Bf16 from(float x) { return to_bf16(x); }
};
template <>
struct Store<Half> {
  HETRL_HD static Half from(float x) { return to_half(x); }
};

template <typename T>
HETRL_HD inline T store(float x) {
  return Store<T>::from(x);
}

inline constexpr std::size_t dtype_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

inline constexpr const char* dtype_name(DType t) {
  return t == DType::kF32 ? "fp32" : t == DType::kBf16 ? "bf16" : "fp16";
}

// Calls f with a value of the storage type `t` names (its value unused), to dispatch templates.
template <typename F>
decltype(auto) with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kBf16:
      return f(Bf16{});
    case DType::kF16:
      return f(Half{});
    case DType::kF32:
      break;
  }
  return f(float{});
}

}  // namespace hetrl::device
