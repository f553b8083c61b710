#pragma once
// The one error model of hetrl. The library never prints or exits: it throws one of the two
// error types below, and each tool maps them to exit codes (2 for InputError, 1 for JobError).
// Broken invariants inside the library are bugs and are asserts, not errors.
//
// An InputError says where (a file and a JSON pointer, or a command-line flag), what was
// expected and what was found, in one line.

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace hetrl::core {

// Bad input or usage: a file, flag or value the user can fix. Tools exit with code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// The job could not be done although the input was valid (no feasible plan, solver failure,
// an output file that cannot be written). Tools exit with code 1.
class JobError : public std::runtime_error {
 public:
  explicit JobError(const std::string& message) : std::runtime_error(message) {}
};

// Joins a location and a message: "where: message", or just the message when where is empty.
std::string located(std::string_view where, std::string_view message);

// The known name closest to `name`, or "" when none is close enough to be a likely typo.
// Case, '-', '_' and spaces are ignored when comparing.
std::string closest_name(std::string_view name, const std::vector<std::string>& known);

// " (did you mean \"X\"?)" for the closest known name, or "" when there is none.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);

// Quotes a string for an error message: "abc".
std::string quoted(std::string_view text);

}  // namespace hetrl::core
