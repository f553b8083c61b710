#pragma once
// Response lengths of one RL iteration: fixed, a lognormal clamped at the maximum response
// length (generation stops at max_tokens, so the tail piles up there), or an empirical trace.
// The lognormal is given by its mean after clamping, which is what logs report; its location
// is solved from that mean, the maximum and the shape sigma.
//
// Sampling uses its own generator and transforms (not std::normal_distribution, whose output
// differs between standard libraries), so a seed gives the same lengths everywhere.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hetrl::workload {

enum class LengthKind { kFixed, kLognormal, kTrace };

inline constexpr double kDefaultLognormalSigma = 0.8;
// The longest response a workload may name, in tokens (fixed, the lognormal's clamp, a trace's
// rows), and so the longest `hetrl-sim lengths` writes.
inline constexpr int kMaxResponseTokens = 1 << 24;

struct ResponseLengths {
  LengthKind kind = LengthKind::kFixed;
  int fixed_tokens = 0;                     // kFixed
  double mean_tokens = 0;                   // kLognormal: mean after clamping
  int max_tokens = 0;                       // kLognormal: the clamp
  double sigma = kDefaultLognormalSigma;    // kLognormal: shape
  std::vector<int> trace;                   // kTrace: the lengths, in file order
  std::string trace_file;                   // kTrace: as written in the workload
  std::string trace_column;                 // kTrace: empty for a one-column file

  double mean() const;
  int max() const;
  // The p-quantile, p in [0, 1].
  double quantile(double p) const;
  // The quantiles at each of `ps`, with one sort of a trace for them all (a trace may hold
  // millions of lengths).
  std::vector<double> quantiles(std::span<const double> ps) const;
  // n lengths drawn with `seed`: the fixed length, clamped lognormal draws, or trace entries
  // drawn uniformly with replacement.
  std::vector<int> sample(int n, std::uint64_t seed) const;
  // The location mu of the underlying normal (kLognormal only).
  double log_location() const;

  // Throws core::InputError.
  void validate() const;
};

}  // namespace hetrl::workload
