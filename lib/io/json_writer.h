#pragma once
// Helpers for writing hetrl's JSON (private to lib/io).

#include <string>

#include "io/json_reader.h"

namespace hetrl::io::detail {

// A quantity converted back to file units, rounded to 12 significant digits so that unit
// conversions do not print as 0.015000000000000001.
double file_units(double value);

// Dumps with a two-space indent and a final newline. Throws core::JobError where a number is
// not finite (JSON cannot say it; the file would not read back).
std::string dump(const OrderedJson& json);

}  // namespace hetrl::io::detail
