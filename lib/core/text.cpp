#include "core/text.h"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"

namespace hetrl::core {

long long parse_integer(std::string_view text, std::string_view what, long long min_value,
                        long long max_value) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    throw InputError(fmt::format("{}: expected a whole number, found {}", what, quoted(text)));
  }
  if (value < min_value || value > max_value) {
    throw InputError(fmt::format("{}: expected a whole number from {} to {}, found {}", what,
                                 min_value, max_value, value));
  }
  return value;
}

double parse_number(std::string_view text, std::string_view what) {
  // std::from_chars for double is in libstdc++ 11+, which Debian 12 has.
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    throw InputError(fmt::format("{}: expected a number, found {}", what, quoted(text)));
  }
  if (std::abs(value) > kLargestQuantity) {
    throw InputError(fmt::format("{}: expected a number of magnitude at most 1e12, found {}", what, quoted(text)));
  }
  if (value != 0 && std::abs(value) < kSmallestQuantity) {
    throw InputError(fmt::format("{}: expected 0 or a number of magnitude at least 1e-12, found {}", what, quoted(text)));
  }
  return value;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> pieces;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(separator, start);
    if (at == std::string_view::npos) {
      pieces.emplace_back(text.substr(start));
      return pieces;
    }
    pieces.emplace_back(text.substr(start, at - start));
    start = at + 1;
  }
}

std::string signed_percent(double fraction) {
  const double tenths = std::round(1000.0 * fraction);
  return fmt::format("{:+.1f}%", tenths / 10.0 + 0.0);  // + 0.0: -0 becomes +0
}

}  // namespace hetrl::core
