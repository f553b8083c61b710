#pragma once
// Units. Inside the library every quantity is in SI base units held in a double: seconds,
// bytes, bytes per second, FLOP per second, US dollars. Files and flags carry the unit in the
// key name (memory_gib, bandwidth_gbps, latency_ms); these constants convert at the edges.
//
// Conventions: GiB = 2^30 bytes (memory capacities); GB/s = 1e9 bytes/s (memory and
// GPU-to-GPU bandwidths, as datasheets give them); Gbps = 1e9 bits/s (network links and NICs,
// as cloud providers give them).

namespace hetrl::core {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGBps = 1e9;          // bytes per second in one GB/s
inline constexpr double kGbps = 1e9 / 8.0;    // bytes per second in one Gbit/s
inline constexpr double kTflops = 1e12;       // FLOP per second in one TFLOP/s
inline constexpr double kMillisecond = 1e-3;  // seconds
inline constexpr double kHour = 3600;         // seconds

}  // namespace hetrl::core
