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

// Prints a large array (a trace's events) into `out` one element at a time, exactly as dump()
// would print it as the value of a key at the top level of an object, without the whole tree
// in memory: open() writes `"key": [`, add() each element, close() the bracket. Non-finite
// numbers throw as in dump(), named by their pointer under /key.
class ArrayWriter {
 public:
  ArrayWriter(std::string& out, std::string key);
  void add(const OrderedJson& element);
  void close();

 private:
  std::string& out_;
  std::string key_;
  std::size_t count_ = 0;
};

}  // namespace hetrl::io::detail
