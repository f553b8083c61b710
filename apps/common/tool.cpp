#include "common/tool.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "core/text.h"

namespace hetrl::apps {
namespace {

void print_error(const CLI::App& app, std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), message.c_str());
}

// The number the whole text spells (std::from_chars: no leading '+', no spaces), if any.
template <typename T>
bool parse_all(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  return error == std::errc() && at == end;
}

// Empty when the whole text is a finite number (into `value`), zero or of a magnitude the
// input files take, else the complaint.
std::string finite_number(const std::string& text, double& value, bool zero_allowed) {
  if (!parse_all(text, value) || !std::isfinite(value)) return fmt::format("expected a finite number, found \"{}\"", text);
  if (value != 0 && std::abs(value) < core::kSmallestQuantity) {
    return fmt::format("expected {} of magnitude at least 1e-12, found \"{}\"",
                       zero_allowed ? "0 or a number" : "a positive number", text);
  }
  return {};
}

}  // namespace

CLI::Validator finite_range(double low, double high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        double value = 0;
        if (std::string wrong = finite_number(text, value, low <= 0); !wrong.empty()) return wrong;
        if (value < low || value > high) return fmt::format("{} is not from {} to {}", text, low, high);
        return {};
      },
      fmt::format("NUMBER in [{} - {}]", low, high));
}

CLI::Validator finite_positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (std::string wrong = finite_number(text, value, false); !wrong.empty()) return wrong;
        if (value <= 0) return fmt::format("{} is not above 0", text);
        return {};
      },
      "POSITIVE");
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t value = 0;
        if (text.empty() || text.front() < '0' || text.front() > '9' || !parse_all(text, value)) {
          return fmt::format("expected a whole number from 0 to {}, found \"{}\"", UINT64_MAX, text);
        }
        return {};
      },
      "UINT");
}

CLI::Validator whole_number(long long low, long long high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        long long value = 0;  // from_chars reads an optional '-' and decimal digits, nothing else
        if (!parse_all(text, value) || value < low || value > high) {
          return fmt::format("expected a whole number from {} to {}, found \"{}\"", low, high, text);
        }
        return {};
      },
      fmt::format("INT in [{} - {}]", low, high));
}

void usage_error(const std::string& message) { throw core::InputError(message); }

namespace {

// The argument that is empty, said as "--flag: expected a value, found \"\"": CLI11 takes an
// empty value for a flag never given (`--cluster "$UNSET"` would plan the embedded cluster),
// and `--flag=` swallows the next argument. Empty when every argument has text.
std::string empty_argument(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.empty()) {
      const std::string_view before = i > 1 ? std::string_view(argv[i - 1]) : std::string_view();
      const std::string name = before.starts_with("-") ? std::string(before) : fmt::format("argument {}", i);
      return fmt::format("{}: expected a value, found \"\"", name);
    }
    if (arg.starts_with("-") && arg.ends_with("=")) {
      return fmt::format("{}: expected a value, found \"\"", arg.substr(0, arg.size() - 1));
    }
  }
  return {};
}

}  // namespace

int run_tool(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  if (const std::string empty = empty_argument(argc, argv); !empty.empty()) {
    print_error(app, empty);
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(app, e.what());
    return kExitBadInput;
  }
  try {
    return body();
  } catch (const core::InputError& e) {
    print_error(app, e.what());
    return kExitBadInput;
  } catch (const core::JobError& e) {
    print_error(app, e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    print_error(app, fmt::format("internal error: {}", e.what()));
    return kExitFailure;
  }
}

}  // namespace hetrl::apps
