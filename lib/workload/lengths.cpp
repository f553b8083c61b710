#include "workload/lengths.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"

namespace hetrl::workload {
namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) {
  // Bisection on the CDF: exact to double precision and not on a hot path.
  double lo = -40;
  double hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (normal_cdf(mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// E[min(X, m)] for X lognormal(mu, sigma).
double clamped_mean(double mu, double sigma, double m) {
  const double log_m = std::log(m);
  const double below = std::exp(mu + 0.5 * sigma * sigma) *
                       normal_cdf((log_m - mu - sigma * sigma) / sigma);
  return below + m * (1.0 - normal_cdf((log_m - mu) / sigma));
}

// Uniform in (0, 1) from 53 random bits, never 0.
double uniform01(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

double ResponseLengths::log_location() const {
  assert(kind == LengthKind::kLognormal);
  double lo = -20;
  double hi = std::log(static_cast<double>(max_tokens)) + 20 * sigma;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (clamped_mean(mid, sigma, max_tokens) < mean_tokens ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double ResponseLengths::mean() const {
  switch (kind) {
    case LengthKind::kFixed: return fixed_tokens;
    case LengthKind::kLognormal: return mean_tokens;
    case LengthKind::kTrace:
      return std::accumulate(trace.begin(), trace.end(), 0.0) / static_cast<double>(trace.size());
  }
  return 0;
}

int ResponseLengths::max() const {
  switch (kind) {
    case LengthKind::kFixed: return fixed_tokens;
    case LengthKind::kLognormal: return max_tokens;
    case LengthKind::kTrace: return *std::max_element(trace.begin(), trace.end());
  }
  return 0;
}

double ResponseLengths::quantile(double p) const { return quantiles(std::span<const double>(&p, 1)).front(); }

std::vector<double> ResponseLengths::quantiles(std::span<const double> ps) const {
  std::vector<double> out;
  out.reserve(ps.size());
  std::vector<int> sorted;
  if (kind == LengthKind::kTrace) {
    sorted = trace;
    std::sort(sorted.begin(), sorted.end());
  }
  const double mu = kind == LengthKind::kLognormal ? log_location() : 0.0;
  for (double p : ps) {
    p = std::clamp(p, 0.0, 1.0);
    switch (kind) {
      case LengthKind::kFixed: out.push_back(fixed_tokens); break;
      case LengthKind::kLognormal:
        out.push_back(p >= 1   ? max_tokens
                      : p <= 0 ? 0.0
                               : std::min<double>(max_tokens, std::exp(mu + sigma * normal_quantile(p))));
        break;
      case LengthKind::kTrace: {
        const auto index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
        out.push_back(sorted[std::clamp<std::size_t>(index, 1, sorted.size()) - 1]);
        break;
      }
    }
  }
  return out;
}

std::vector<int> ResponseLengths::sample(int n, std::uint64_t seed) const {
  std::vector<int> out(static_cast<std::size_t>(std::max(0, n)));
  std::mt19937_64 rng(seed);
  switch (kind) {
    case LengthKind::kFixed:
      std::fill(out.begin(), out.end(), fixed_tokens);
      break;
    case LengthKind::kLognormal: {
      const double mu = log_location();
      for (int& length : out) {
        // Box-Muller; one normal per draw keeps draws independent of n's parity.
        const double u1 = uniform01(rng);
        const double u2 = uniform01(rng);
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
        const double x = std::exp(mu + sigma * z);
        length = static_cast<int>(std::clamp(std::round(x), 1.0, static_cast<double>(max_tokens)));
      }
      break;
    }
    case LengthKind::kTrace:
      for (int& length : out) {
        length = trace[static_cast<std::size_t>(uniform01(rng) * static_cast<double>(trace.size()))];
      }
      break;
  }
  return out;
}

void ResponseLengths::validate() const {
  switch (kind) {
    case LengthKind::kFixed:
      if (fixed_tokens < 1) {
        throw core::InputError(
            fmt::format("a fixed response length must be at least 1 token, found {}", fixed_tokens));
      }
      break;
    case LengthKind::kLognormal:
      if (max_tokens < 1) {
        throw core::InputError(fmt::format("max_tokens must be at least 1, found {}", max_tokens));
      }
      if (!(mean_tokens >= 1 && mean_tokens < max_tokens)) {
        throw core::InputError(fmt::format(
            "mean_tokens must be at least 1 and below max_tokens ({}), found {}", max_tokens,
            mean_tokens));
      }
      if (!(sigma > 0 && sigma <= 5)) {
        throw core::InputError(fmt::format("sigma must be in (0, 5], found {}", sigma));
      }
      break;
    case LengthKind::kTrace:
      if (trace.empty()) throw core::InputError("the response-length trace is empty");
      for (std::size_t i = 0; i < trace.size(); ++i) {
        if (trace[i] < 1) {
          throw core::InputError(fmt::format(
              "response-length trace entry {} must be at least 1 token, found {}", i + 1, trace[i]));
        }
      }
      break;
  }
}

}  // namespace hetrl::workload
