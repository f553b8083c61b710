#include "io/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hetrl::io::detail {

double file_units(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.12g", value);
  return std::strtod(text, nullptr);
}

std::string dump(const OrderedJson& json) { return json.dump(2) + "\n"; }

}  // namespace hetrl::io::detail
