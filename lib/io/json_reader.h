#pragma once
// Strict reading of hetrl's JSON files (private to lib/io: the only header outside the
// .cpp files of io that includes nlohmann/json).
//
// An ObjectReader walks one JSON object. Each accessor records the key it asked for, present
// or not; finish() then rejects any key nobody asked for, suggesting the closest known one.
// Every error names the file and the JSON pointer of the value, what was expected and what
// was found, in one line.

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/provenance.h"

namespace hetrl::io::detail {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// "the string \"x\"", "the number 3", "an array", "an object", "null", "true".
std::string describe(const Json& value);
// "\"a\", \"b\" or \"c\"": the names a member may take, for its error message.
std::string one_of(std::span<const std::string_view> names);

// Parses JSON text. Throws core::InputError "file:line:column: malformed JSON: ...".
Json parse_json(std::string_view text, std::string_view file);

std::string pointer_token(std::string_view key);  // escapes '~' and '/'

enum class Range { kAny, kPositive, kNonNegative, kFraction, kUnitInterval };

class ObjectReader {
 public:
  // Throws when `value` is not an object.
  ObjectReader(const Json& value, std::string file, std::string pointer);

  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }
  // "file: /pointer" (or "file" at the top level), and the same for a member.
  std::string where() const;
  std::string where(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, std::string_view message) const;

  bool has(std::string_view key);
  std::string string(std::string_view key);
  std::optional<std::string> optional_string(std::string_view key);
  // An optional string naming one of `choices`: its value, `fallback` when absent; any other
  // name fails with "expected "a", "b" or "c", found "x"".
  template <class T>
  T optional_choice(std::string_view key, std::initializer_list<std::pair<std::string_view, T>> choices,
                    T fallback) {
    const std::optional<std::string> name = optional_string(key);
    if (!name) return fallback;
    std::vector<std::string_view> names;
    for (const auto& [choice, value] : choices) {
      if (choice == *name) return value;
      names.push_back(choice);
    }
    fail_choice(key, names, *name);
  }
  [[noreturn]] void fail_choice(std::string_view key, std::span<const std::string_view> names,
                                std::string_view found) const;
  double number(std::string_view key, Range range = Range::kAny);
  std::optional<double> optional_number(std::string_view key, Range range = Range::kAny);
  // An optional positive quantity in file units (the key names them), times `unit` to SI.
  std::optional<double> optional_quantity(std::string_view key, double unit);
  long long integer(std::string_view key, long long min_value, long long max_value);
  std::optional<long long> optional_integer(std::string_view key, long long min_value,
                                            long long max_value);
  bool boolean(std::string_view key);
  std::optional<bool> optional_boolean(std::string_view key);
  ObjectReader object(std::string_view key);
  std::optional<ObjectReader> optional_object(std::string_view key);
  std::vector<ObjectReader> object_array(std::string_view key, bool allow_empty);
  std::vector<std::string> string_array(std::string_view key);
  // The members of an object whose values are objects, e.g. {"H100-SXM": {...}, ...}.
  std::vector<std::pair<std::string, ObjectReader>> object_map(std::string_view key);
  const Json& value(std::string_view key);  // required, any type

  // Rejects keys that no accessor asked for.
  void finish() const;

 private:
  const Json* member(std::string_view key);
  const Json& required(std::string_view key);

  const Json& value_;
  std::string file_;
  std::string pointer_;
  std::set<std::string, std::less<>> asked_;
};

// Optional "generator" {"tool", "version"} and "inputs" {name: hash}.
core::Provenance read_provenance(ObjectReader& reader);
void write_provenance(OrderedJson& out, const core::Provenance& provenance);

// Checks "schema": expects `schema` exactly; names the kind of file found otherwise.
void check_schema(ObjectReader& reader, std::string_view schema);

}  // namespace hetrl::io::detail
