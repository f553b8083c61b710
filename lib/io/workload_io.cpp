#include "io/workload_io.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <filesystem>

#include "core/error.h"
#include "core/text.h"
#include "io/catalog_io.h"
#include "io/files.h"
#include "io/json_reader.h"

namespace hetrl::io {
namespace {

using detail::ObjectReader;
using detail::Range;

std::string_view trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

// The trimmed fields of one CSV row into `fields`, reused from row to row.
void split_row(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  for (std::size_t start = 0;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return;
    start = comma + 1;
  }
}

bool is_whole_number(std::string_view text) {
  long long value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

workload::ResponseLengths read_lengths(ObjectReader& r, const std::string& base_dir) {
  workload::ResponseLengths lengths;
  const std::string kind = r.string("distribution");
  if (kind == "fixed") {
    lengths.kind = workload::LengthKind::kFixed;
    lengths.fixed_tokens = static_cast<int>(r.integer("tokens", 1, workload::kMaxResponseTokens));
  } else if (kind == "lognormal") {
    lengths.kind = workload::LengthKind::kLognormal;
    lengths.mean_tokens = r.number("mean_tokens", Range::kPositive);
    lengths.max_tokens = static_cast<int>(r.integer("max_tokens", 1, workload::kMaxResponseTokens));
    lengths.sigma = r.optional_number("sigma", Range::kPositive).value_or(workload::kDefaultLognormalSigma);
  } else if (kind == "trace") {
    lengths.kind = workload::LengthKind::kTrace;
    lengths.trace_file = r.string("file");
    lengths.trace_column = r.optional_string("column").value_or("");
    std::filesystem::path path(lengths.trace_file);
    if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
    try {
      lengths.trace = read_length_trace(path.string(), lengths.trace_column);
    } catch (const core::InputError& e) {
      throw core::InputError(core::located(r.where("file"), e.what()));
    }
  } else {
    constexpr std::array<std::string_view, 3> kinds{"fixed", "lognormal", "trace"};
    r.fail_choice("distribution", kinds, kind);
  }
  r.finish();
  return lengths;
}

}  // namespace

LoadedWorkload parse_workload(std::string_view text, std::string_view file,
                              const std::string& base_dir,
                              const workload::AlgorithmCatalog& algorithms,
                              const workload::ModelCatalog& models) {
  using workload::RoleModel;
  const detail::Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.workload/v1");
  LoadedWorkload loaded;
  loaded.name = root.optional_string("name").value_or(
      std::filesystem::path(std::string(file)).stem().string());
  detail::read_provenance(root);
  workload::Workload& w = loaded.workload;
  loaded.models = models;
  if (const auto model_file = root.optional_string("model_file")) {
    // Architectures of the user's own, added to the catalogue's (a name it has is refused).
    const std::filesystem::path path = std::filesystem::path(base_dir) / *model_file;
    try {
      loaded.model_file_text = read_text_file(path.string());
    } catch (const core::InputError& e) {
      root.fail("model_file", e.what());
    }
    const workload::ModelCatalog own = parse_model_catalog(loaded.model_file_text, path.string(), true);
    for (const workload::ModelArch& m : own.models) {
      if (models.find(m.name)) {
        throw core::InputError(core::located(
            path.string(), fmt::format("/models/{}: the catalogue has a model named {} already; choose another name",
                                       m.name, core::quoted(m.name))));
      }
      loaded.models.models.push_back(m);
    }
  }
  w.algorithm = root.string("algorithm");
  algorithms.get(w.algorithm, root.where("algorithm"));
  ObjectReader roles = root.object("models");
  for (workload::Role role : workload::kRoles) {
    const auto model = roles.optional_string(workload::role_name(role));
    if (!model) continue;
    RoleModel& given = w.role(role);
    if (*model == "rule") {
      given.kind = RoleModel::Kind::kRule;
    } else {
      given.kind = RoleModel::Kind::kModel;
      given.model = loaded.models.get(*model, roles.where(workload::role_name(role))).name;
    }
  }
  roles.finish();
  constexpr long long kMaxCount = 1 << 24;
  w.prompts_per_iteration = static_cast<int>(root.integer("prompts_per_iteration", 1, kMaxCount));
  w.samples_per_prompt = static_cast<int>(root.optional_integer("samples_per_prompt", 1, 1 << 16).value_or(1));
  w.prompt_length_tokens = static_cast<int>(root.integer("prompt_length_tokens", 1, kMaxCount));
  ObjectReader lengths = root.object("response_length");
  w.response = read_lengths(lengths, base_dir);
  w.mini_batches = static_cast<int>(root.optional_integer("mini_batches", 1, kMaxCount).value_or(1));
  w.epochs = static_cast<int>(root.optional_integer("epochs", 1, 1 << 10).value_or(1));
  w.mode = root.optional_choice("mode", {{"sync", workload::Mode::kSync}, {"async", workload::Mode::kAsync}},
                                workload::Mode::kSync);
  w.max_staleness = static_cast<int>(root.optional_integer("max_staleness", 0, 1 << 10).value_or(0));
  w.micro_batch_tokens =
      static_cast<int>(root.optional_integer("micro_batch_tokens", 1, kMaxCount).value_or(0));
  using workload::Precision;
  w.precision = root.optional_choice(
      "precision", {{"auto", Precision::kAuto}, {"bf16", Precision::kBf16}, {"fp16", Precision::kFp16}},
      Precision::kAuto);
  using workload::TrainerKernels;
  w.trainer_kernels = root.optional_choice(
      "trainer_kernels", {{"fused", TrainerKernels::kFused}, {"eager", TrainerKernels::kEager}},
      TrainerKernels::kFused);
  using workload::GradientReduce;
  w.gradient_reduce = root.optional_choice("gradient_reduce", {{"fp32", GradientReduce::kFp32}, {"bf16", GradientReduce::kBf16}},
                                           GradientReduce::kFp32);
  root.finish();
  try {
    w.validate(algorithms, loaded.models);
  } catch (const core::InputError& e) {
    throw core::InputError(core::located(file, e.what()));
  }
  return loaded;
}

LoadedWorkload read_workload(const std::string& path, const workload::AlgorithmCatalog& algorithms,
                             const workload::ModelCatalog& models) {
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return parse_workload(read_text_file(path), path, base_dir, algorithms, models);
}

// Row by row over views of the text, with messages formatted only for a row that is wrong: a
// trace may hold millions of rows.
std::vector<int> parse_length_trace(std::string_view text, std::string_view file,
                                    const std::string& column) {
  std::vector<int> lengths;
  int column_index = column.empty() ? 0 : -1;
  bool first_row = true;
  std::size_t line_number = 0;
  std::vector<std::string_view> fields;
  for (std::size_t next = 0; next < text.size();) {
    const std::size_t end = std::min(text.find('\n', next), text.size());
    const std::string_view line = trim(text.substr(next, end - next));
    next = end + 1;
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    split_row(line, fields);
    const auto where = [&] { return fmt::format("{}:{}", file, line_number); };
    if (first_row) {
      first_row = false;
      if (!column.empty()) {
        for (std::size_t i = 0; i < fields.size(); ++i) {
          if (fields[i] == column) column_index = static_cast<int>(i);
        }
        if (column_index < 0) {
          throw core::InputError(fmt::format("{}: no column {} in the header{}", where(), core::quoted(column),
                                             core::did_you_mean(column, {fields.begin(), fields.end()})));
        }
        continue;
      }
      if (fields.size() == 1 && !is_whole_number(fields[0])) continue;  // a header
    }
    if (column.empty() && fields.size() != 1) {
      throw core::InputError(fmt::format(
          "{}: expected one length per row, found {} fields; name the column to read", where(),
          fields.size()));
    }
    if (column_index >= static_cast<int>(fields.size())) {
      throw core::InputError(fmt::format("{}: the row has no field for column {}", where(),
                                         core::quoted(column)));
    }
    const std::string_view field = fields[column_index];
    int length = 0;
    const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), length);
    if (field.empty() || ec != std::errc() || ptr != field.data() + field.size() || length < 1 ||
        length > workload::kMaxResponseTokens) {
      // The message of the slow path: what is wrong with the field.
      length = static_cast<int>(core::parse_integer(field, where() + ": response length", 1, workload::kMaxResponseTokens));
    }
    lengths.push_back(length);
  }
  if (lengths.empty()) throw core::InputError(fmt::format("{}: the trace has no lengths", file));
  return lengths;
}

std::vector<int> read_length_trace(const std::string& path, const std::string& column) {
  return parse_length_trace(read_text_file(path), path, column);
}

}  // namespace hetrl::io
