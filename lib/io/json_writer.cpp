#include "io/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace hetrl::io::detail {

double file_units(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.12g", value);
  return std::strtod(text, nullptr);
}

namespace {

// The JSON pointer of the first number that is not finite, if any: built on the way back out,
// so a clean document (a trace of millions of events) costs one walk and no strings.
std::optional<std::string> non_finite(const OrderedJson& json) {
  if (json.is_number_float()) return std::isfinite(json.get<double>()) ? std::nullopt : std::optional<std::string>("");
  if (json.is_object()) {
    for (const auto& [key, value] : json.items()) {
      if (std::optional<std::string> at = non_finite(value)) return "/" + pointer_token(key) + *at;
    }
  } else if (json.is_array()) {
    for (std::size_t i = 0; i < json.size(); ++i) {
      if (std::optional<std::string> at = non_finite(json[i])) return "/" + std::to_string(i) + *at;
    }
  }
  return std::nullopt;
}

void check_finite(const OrderedJson& json, const std::string& pointer) {
  if (const std::optional<std::string> at = non_finite(json)) {
    const std::string where = pointer + *at;
    throw core::JobError(fmt::format("internal error: the output would hold a non-finite number at {}",
                                     where.empty() ? "/" : where));
  }
}

}  // namespace

// JSON has no infinity or NaN (nlohmann writes null): a figure that overflowed is a bug, and a
// file with null where a number belongs is refused by the reader, so the write fails instead.
std::string dump(const OrderedJson& json) {
  check_finite(json, "");
  return json.dump(2) + "\n";
}

ArrayWriter::ArrayWriter(std::string& out, std::string key) : out_(out), key_(std::move(key)) {
  out_ += fmt::format("  {}: [", OrderedJson(key_).dump());
}

void ArrayWriter::add(const OrderedJson& element) {
  check_finite(element, fmt::format("/{}/{}", pointer_token(key_), count_));
  // Two levels in: four spaces before each of the element's lines.
  out_ += count_++ == 0 ? "\n    " : ",\n    ";
  for (const char c : element.dump(2)) {
    out_ += c;
    if (c == '\n') out_ += "    ";
  }
}

void ArrayWriter::close() { out_ += count_ == 0 ? "]" : "\n  ]"; }

}  // namespace hetrl::io::detail
