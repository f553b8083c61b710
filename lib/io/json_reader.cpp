#include "io/json_reader.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "core/text.h"

namespace hetrl::io::detail {
namespace {

std::string range_text(Range range) {
  switch (range) {
    case Range::kAny: return "a number";
    case Range::kPositive: return "a positive number";
    case Range::kNonNegative: return "a number >= 0";
    case Range::kFraction: return "a number above 0 and at most 1";
    case Range::kUnitInterval: return "a number from 0 to 1";
  }
  return "a number";
}

bool in_range(double value, Range range) {
  switch (range) {
    case Range::kAny: return true;
    case Range::kPositive: return value > 0;
    case Range::kNonNegative: return value >= 0;
    case Range::kFraction: return value > 0 && value <= 1;
    case Range::kUnitInterval: return value >= 0 && value <= 1;
  }
  return true;
}

}  // namespace

std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return value.get<bool>() ? "true" : "false";
    case Json::value_t::string: {
      std::string text = value.get<std::string>();
      if (text.size() > 40) text = text.substr(0, 37) + "...";
      return "the string " + core::quoted(text);
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "the number " + value.dump();
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "an unreadable value";
  }
}

namespace {

// "file:line:column" of a byte offset into the text.
std::string position(std::string_view text, std::string_view file, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("{}:{}:{}", file, line, column);
}

// Follows the parse to refuse a key an object already has: the file's author read one value
// and the parser would keep the other. Knows the JSON pointer of the object being read.
class DuplicateKeys {
 public:
  explicit DuplicateKeys(std::string_view file) : file_(file) {}

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        element();
        frames_.push_back({event == Json::parse_event_t::object_start, {}, {}, -1});
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end: frames_.pop_back(); break;
      case Json::parse_event_t::key: {
        Frame& object = frames_.back();
        object.key = parsed.get<std::string>();
        if (!object.keys.insert(object.key).second) {
          std::string pointer;
          for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
            pointer += "/" + (frames_[i].object ? pointer_token(frames_[i].key) : std::to_string(frames_[i].index));
          }
          throw core::InputError(fmt::format("{}{}: the key {} appears twice in one object (which one is meant?)",
                                             file_, pointer.empty() ? "" : ": " + pointer, core::quoted(object.key)));
        }
        break;
      }
      case Json::parse_event_t::value: element(); break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string> keys;  // an object's, so far
    std::string key;             // an object's member being read
    long index = -1;             // an array's element being read
  };
  // A value starts: the next element when it is in an array.
  void element() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }

  std::string_view file_;
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json(std::string_view text, std::string_view file) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw core::InputError(fmt::format("{}: empty file, expected a JSON object", file));
  }
  try {
    return Json::parse(text.begin(), text.end(), DuplicateKeys(file));
  } catch (const Json::parse_error& e) {
    // e.byte is 1-based: the position just past the offending character.
    std::string reason = e.what();
    const std::size_t colon = reason.find(": ", reason.find("parse error"));
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    throw core::InputError(fmt::format("{}: malformed JSON: {}", position(text, file, e.byte > 0 ? e.byte - 1 : 0), reason));
  } catch (const Json::out_of_range& e) {
    // A number past the double range: nlohmann names the literal ("number overflow parsing
    // '1e400'"); find it to say where.
    std::string what = e.what();
    const std::size_t open = what.find('\'');
    const std::size_t close = what.rfind('\'');
    const std::string literal = open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
    const std::size_t at = literal.empty() ? std::string_view::npos : text.find(literal);
    throw core::InputError(fmt::format("{}: {} is out of range (numbers must lie between -1.8e308 and 1.8e308)",
                                       at == std::string_view::npos ? std::string(file) : position(text, file, at),
                                       literal.empty() ? "a number" : "the number " + literal));
  }
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

ObjectReader::ObjectReader(const Json& value, std::string file, std::string pointer)
    : value_(value), file_(std::move(file)), pointer_(std::move(pointer)) {
  if (!value_.is_object()) {
    throw core::InputError(
        fmt::format("{}: expected an object, found {}", where(), describe(value_)));
  }
}

std::string ObjectReader::where() const {
  return pointer_.empty() ? file_ : file_ + ": " + pointer_;
}

std::string ObjectReader::where(std::string_view key) const {
  return file_ + ": " + pointer_ + "/" + pointer_token(key);
}

std::string one_of(std::span<const std::string_view> names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += core::quoted(names[i]);
  }
  return out;
}

void ObjectReader::fail_choice(std::string_view key, std::span<const std::string_view> names,
                               std::string_view found) const {
  fail(key, fmt::format("expected {}, found {}", one_of(names), core::quoted(found)));
}

void ObjectReader::fail(std::string_view key, std::string_view message) const {
  throw core::InputError(core::located(where(key), message));
}

const Json* ObjectReader::member(std::string_view key) {
  asked_.emplace(key);
  const auto it = value_.find(key);
  return it == value_.end() ? nullptr : &*it;
}

const Json& ObjectReader::required(std::string_view key) {
  const Json* found = member(key);
  if (!found) {
    throw core::InputError(
        core::located(where(), fmt::format("missing required field {}", core::quoted(key))));
  }
  return *found;
}

bool ObjectReader::has(std::string_view key) { return member(key) != nullptr; }

std::string ObjectReader::string(std::string_view key) {
  const Json& v = required(key);
  if (!v.is_string()) fail(key, "expected a string, found " + describe(v));
  std::string text = v.get<std::string>();
  if (text.empty()) fail(key, "expected a non-empty string");
  return text;
}

std::optional<std::string> ObjectReader::optional_string(std::string_view key) {
  if (!has(key)) return std::nullopt;
  return string(key);
}

double ObjectReader::number(std::string_view key, Range range) {
  const Json& v = required(key);
  if (!v.is_number()) fail(key, fmt::format("expected {}, found {}", range_text(range), describe(v)));
  const double value = v.get<double>();
  if (!std::isfinite(value) || !in_range(value, range)) {
    fail(key, fmt::format("expected {}, found {}", range_text(range), describe(v)));
  }
  if (std::abs(value) > core::kLargestQuantity) {
    fail(key, fmt::format("expected {} of magnitude at most 1e12, found {}", range_text(range), describe(v)));
  }
  if (value != 0 && std::abs(value) < core::kSmallestQuantity) {
    const bool zero_allowed = range == Range::kAny || range == Range::kNonNegative;
    fail(key, fmt::format("expected {} of magnitude at least 1e-12, found {}",
                          zero_allowed ? "0 or a number" : range_text(range), describe(v)));
  }
  return value;
}

std::optional<double> ObjectReader::optional_number(std::string_view key, Range range) {
  if (!has(key)) return std::nullopt;
  return number(key, range);
}

std::optional<double> ObjectReader::optional_quantity(std::string_view key, double unit) {
  if (const std::optional<double> value = optional_number(key, Range::kPositive)) return *value * unit;
  return std::nullopt;
}

long long ObjectReader::integer(std::string_view key, long long min_value, long long max_value) {
  const Json& v = required(key);
  const std::string expected =
      fmt::format("expected a whole number from {} to {}", min_value, max_value);
  if (!v.is_number_integer()) fail(key, fmt::format("{}, found {}", expected, describe(v)));
  const bool negative = v.is_number_unsigned() ? false : v.get<long long>() < 0;
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(max_value)) {
    fail(key, fmt::format("{}, found {}", expected, describe(v)));
  }
  const long long value = negative ? v.get<long long>() : static_cast<long long>(v.get<unsigned long long>());
  if (value < min_value || value > max_value) {
    fail(key, fmt::format("{}, found {}", expected, describe(v)));
  }
  return value;
}

std::optional<long long> ObjectReader::optional_integer(std::string_view key, long long min_value,
                                                        long long max_value) {
  if (!has(key)) return std::nullopt;
  return integer(key, min_value, max_value);
}

bool ObjectReader::boolean(std::string_view key) {
  const Json& v = required(key);
  if (!v.is_boolean()) fail(key, "expected true or false, found " + describe(v));
  return v.get<bool>();
}

std::optional<bool> ObjectReader::optional_boolean(std::string_view key) {
  if (!has(key)) return std::nullopt;
  return boolean(key);
}

ObjectReader ObjectReader::object(std::string_view key) {
  return ObjectReader(required(key), file_, pointer_ + "/" + pointer_token(key));
}

std::optional<ObjectReader> ObjectReader::optional_object(std::string_view key) {
  if (!has(key)) return std::nullopt;
  return object(key);
}

std::vector<ObjectReader> ObjectReader::object_array(std::string_view key, bool allow_empty) {
  const Json& v = required(key);
  if (!v.is_array()) fail(key, "expected an array, found " + describe(v));
  if (v.empty() && !allow_empty) fail(key, "expected a non-empty array");
  std::vector<ObjectReader> out;
  const std::string base = pointer_ + "/" + pointer_token(key) + "/";
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.emplace_back(v[i], file_, base + std::to_string(i));
  }
  return out;
}

std::vector<std::string> ObjectReader::string_array(std::string_view key) {
  const Json& v = required(key);
  if (!v.is_array()) fail(key, "expected an array of strings, found " + describe(v));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() || v[i].get<std::string>().empty()) {
      throw core::InputError(fmt::format("{}/{}: expected a non-empty string, found {}",
                                         where(key), i, describe(v[i])));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

std::vector<std::pair<std::string, ObjectReader>> ObjectReader::object_map(std::string_view key) {
  const Json& v = required(key);
  if (!v.is_object()) fail(key, "expected an object, found " + describe(v));
  std::vector<std::pair<std::string, ObjectReader>> out;
  const std::string base = pointer_ + "/" + pointer_token(key) + "/";
  for (auto it = v.begin(); it != v.end(); ++it) {
    out.emplace_back(it.key(), ObjectReader(it.value(), file_, base + pointer_token(it.key())));
  }
  return out;
}

const Json& ObjectReader::value(std::string_view key) { return required(key); }

void ObjectReader::finish() const {
  std::vector<std::string> known(asked_.begin(), asked_.end());
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (!asked_.count(it.key())) {
      throw core::InputError(core::located(
          where(it.key()), fmt::format("unknown field {}{}", core::quoted(it.key()),
                                       core::did_you_mean(it.key(), known))));
    }
  }
}

core::Provenance read_provenance(ObjectReader& reader) {
  core::Provenance provenance;
  if (auto generator = reader.optional_object("generator")) {
    provenance.tool = generator->string("tool");
    provenance.version = generator->string("version");
    generator->finish();
  }
  if (reader.has("inputs")) {
    const Json& inputs = reader.value("inputs");
    if (!inputs.is_object()) reader.fail("inputs", "expected an object, found " + describe(inputs));
    for (auto it = inputs.begin(); it != inputs.end(); ++it) {
      if (!it.value().is_string()) {
        throw core::InputError(fmt::format("{}/{}: expected a hash string, found {}",
                                           reader.where("inputs"), pointer_token(it.key()),
                                           describe(it.value())));
      }
      provenance.inputs.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  return provenance;
}

void write_provenance(OrderedJson& out, const core::Provenance& provenance) {
  if (!provenance.tool.empty()) {
    out["generator"] = {{"tool", provenance.tool}, {"version", provenance.version}};
  }
  if (!provenance.inputs.empty()) {
    OrderedJson inputs = OrderedJson::object();
    for (const auto& [name, hash] : provenance.inputs) inputs[name] = hash;
    out["inputs"] = std::move(inputs);
  }
}

void check_schema(ObjectReader& reader, std::string_view schema) {
  if (!reader.has("schema")) {
    throw core::InputError(core::located(
        reader.where(), fmt::format("missing \"schema\": expected {}", core::quoted(schema))));
  }
  const std::string found = reader.string("schema");
  if (found == schema) return;
  const std::string_view kind = schema.substr(0, schema.find('/'));
  if (found.rfind(std::string(kind) + "/", 0) == 0) {
    reader.fail("schema", fmt::format("unsupported version {}; this hetrl reads {}",
                                      core::quoted(found), core::quoted(schema)));
  }
  reader.fail("schema", fmt::format("this is a {} file, expected {}", core::quoted(found),
                                    core::quoted(schema)));
}

}  // namespace hetrl::io::detail
