#pragma once
// What every hetrl tool's main shares: parsing flags with CLI11 and mapping outcomes to exit
// codes. 0: done; 1: the job could not be done (core::JobError, or an unexpected failure);
// 2: bad input or usage (core::InputError, a flag CLI11 rejects). Errors are one line on
// stderr, "<tool>: error: <message>"; nothing else is printed for them.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace hetrl::apps {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

// Parses argv into `app`, then runs `body` and returns its exit code, or the code of the
// error it throws.
int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// Ends the run as bad usage (exit 2) from inside run_tool's body: for flag combinations that
// CLI11 cannot check, such as build flags given to a subcommand.
[[noreturn]] void usage_error(const std::string& message);

// Flag checks CLI11 lacks. CLI::PositiveNumber and CLI::Range let NaN through (and print a
// bound of 309 digits for infinity); CLI11 reads "-1" and 2^64 into an unsigned integer by
// wrapping.
// A finite number above zero (and, as in input files, not under core::kSmallestQuantity).
CLI::Validator finite_positive();
// A finite number from `low` to `high` (zero, or of magnitude at least core::kSmallestQuantity).
CLI::Validator finite_range(double low, double high);
// A whole number from 0 to 18446744073709551615, in decimal digits without a sign.
CLI::Validator unsigned_integer();
// A whole number from `low` to `high`, in decimal digits (CLI::Range also takes "0x10" and
// "0b11" for 16 and 3).
CLI::Validator whole_number(long long low, long long high);

}  // namespace hetrl::apps
