#include "io/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace hetrl::io::detail {

double file_units(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.12g", value);
  return std::strtod(text, nullptr);
}

namespace {

// JSON has no infinity or NaN (nlohmann writes null): a figure that overflowed is a bug, and a
// file with null where a number belongs is refused by the reader, so the write fails instead.
void require_finite(const OrderedJson& json, std::string& pointer) {
  if (json.is_number_float() && !std::isfinite(json.get<double>())) {
    throw core::JobError(fmt::format("internal error: the output would hold a non-finite number at {}",
                                     pointer.empty() ? "/" : pointer));
  }
  const std::size_t size = pointer.size();
  if (json.is_object()) {
    for (const auto& [key, value] : json.items()) {
      pointer += "/" + pointer_token(key);
      require_finite(value, pointer);
      pointer.resize(size);
    }
  } else if (json.is_array()) {
    for (std::size_t i = 0; i < json.size(); ++i) {
      pointer += "/" + std::to_string(i);
      require_finite(json[i], pointer);
      pointer.resize(size);
    }
  }
}

}  // namespace

std::string dump(const OrderedJson& json) {
  std::string pointer;
  require_finite(json, pointer);
  return json.dump(2) + "\n";
}

}  // namespace hetrl::io::detail
