#pragma once
// Strict parsing of numbers and lists written by people (command-line specs such as
// "2x8xA100-SXM-80G" or "gbps=10,latency_ms=60"). Each function throws core::InputError that
// names `what` and the text it could not read; nothing is silently truncated or defaulted.

#include <string>
#include <string_view>
#include <vector>

namespace hetrl::core {

// A whole decimal integer, e.g. "8". Rejects "", "8x", "-1" when min_value > -1, "1e3".
long long parse_integer(std::string_view text, std::string_view what, long long min_value,
                        long long max_value);

// The largest magnitude a number in an input may have, in the input's own units (Gbps, ms,
// USD per hour, GiB, tokens, bytes): no quantity hetrl reads comes near it, and a larger one
// would overflow once converted and summed (1e308 Gbps is infinite in bytes/s).
inline constexpr double kLargestQuantity = 1e12;
// The smallest magnitude a non-zero number in an input may have, in the same units: a smaller
// one is zero in all but name, and a time divided by it overflows (a 1e-320 Gbps link, a 1e-320
// efficiency).
inline constexpr double kSmallestQuantity = 1e-12;

// A finite decimal number, zero or of magnitude from kSmallestQuantity to kLargestQuantity,
// e.g. "0.5" or "1e3".
double parse_number(std::string_view text, std::string_view what);

// A change written for people: `fraction` (after / before - 1) as a signed percentage with one
// decimal, e.g. "+12.5%". One that rounds to zero is "+0.0%", never "-0.0%" (a last-bit
// difference between two sums of the same terms).
std::string signed_percent(double fraction);

// Splits on every `separator`, keeping empty pieces.
std::vector<std::string> split(std::string_view text, char separator);

}  // namespace hetrl::core
