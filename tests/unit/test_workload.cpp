#include <doctest/doctest.h>

#include "approx.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "io/catalog_io.h"
#include "io/workload_io.h"

using namespace hetrl;

namespace {

const io::Catalogs& catalogs() { return io::builtin_catalogs(); }

std::string workload_text(const std::string& fields) {
  return R"({"schema": "hetrl.workload/v1", "prompts_per_iteration": 64,
             "prompt_length_tokens": 512,
             "response_length": {"distribution": "fixed", "tokens": 256}, )" +
         fields + "}";
}

io::LoadedWorkload parse(const std::string& fields) {
  return io::parse_workload(workload_text(fields), "w.json", "", catalogs().algorithms,
                            catalogs().models);
}

constexpr const char* kPpoModels =
    R"("algorithm": "ppo", "models": {"actor": "Qwen2.5-7B", "critic": "Qwen2.5-7B",
       "reference": "Qwen2.5-7B", "reward": "rule"})";

}  // namespace

TEST_CASE("a PPO workload with defaults") {
  const io::LoadedWorkload loaded = parse(kPpoModels);
  const workload::Workload& w = loaded.workload;
  CHECK(loaded.name == "w");
  CHECK(w.algorithm == "ppo");
  CHECK(w.role(workload::Role::kReward).kind == workload::RoleModel::Kind::kRule);
  CHECK(w.role(workload::Role::kActor).model == "Qwen2.5-7B");
  CHECK(w.samples_per_iteration() == 64);
  CHECK(w.mini_batches == 1);
  CHECK(w.mode == workload::Mode::kSync);
  CHECK(w.response.mean() == 256);
}

TEST_CASE("the embedded default workload is valid") {
  const io::LoadedWorkload loaded =
      io::parse_workload(io::builtin_file("default_workload.json"), "default_workload.json", "",
                         catalogs().algorithms, catalogs().models);
  CHECK(loaded.workload.role(workload::Role::kActor).model == "Qwen2.5-7B");
}

TEST_CASE("bad workloads name the field at fault") {
  CHECK_THROWS_WITH_AS(
      parse(R"("algorithm": "ppo", "models": {"actor": "Qwen2.5-7b-instruct"})"),
      "w.json: /models/actor: unknown model \"Qwen2.5-7b-instruct\" (did you mean \"Qwen2.5-7B\"?)",
      core::InputError);
  CHECK_THROWS_WITH_AS(parse(R"("algorithm": "ppo2", "models": {})"),
                       "w.json: /algorithm: unknown algorithm \"ppo2\" (did you mean \"ppo\"?)",
                       core::InputError);
  CHECK_THROWS_WITH_AS(
      parse(R"("algorithm": "grpo", "samples_per_prompt": 8, "models": {"actor": "Qwen2.5-7B",
               "critic": "Qwen2.5-7B", "reward": "rule"})"),
      "w.json: /models/critic: grpo has no critic; remove it", core::InputError);
  CHECK_THROWS_WITH_AS(
      parse(R"("algorithm": "ppo", "models": {"actor": "Qwen2.5-7B", "reward": "rule"})"),
      "w.json: /models/critic: ppo needs a critic model", core::InputError);
  CHECK_THROWS_WITH_AS(
      parse(R"("algorithm": "ppo", "models": {"actor": "rule", "critic": "Qwen2.5-7B",
               "reward": "rule"})"),
      "w.json: /models/actor: only a role that ppo allows to be a rule can be \"rule\"; actor "
      "needs a model",
      core::InputError);
  CHECK_THROWS_WITH_AS(
      parse(R"("algorithm": "grpo", "models": {"actor": "Qwen2.5-7B", "reward": "rule"})"),
      "w.json: /samples_per_prompt: expected at least 2, found 1", core::InputError);
  CHECK_THROWS_WITH_AS(parse(std::string(kPpoModels) + R"(, "mini_batches": 5)"),
                       "w.json: /mini_batches: the 64 samples of an iteration (64 prompts x 1) "
                       "do not split into 5 equal mini-batches",
                       core::InputError);
  CHECK_THROWS_WITH_AS(parse(std::string(kPpoModels) + R"(, "mode": "async")"),
                       "w.json: /max_staleness: expected at least 1, found 0", core::InputError);
  CHECK_THROWS_WITH_AS(parse(std::string(kPpoModels) + R"(, "max_staleness": 2)"),
                       "w.json: /max_staleness: only an async workload has a staleness bound",
                       core::InputError);
  CHECK_THROWS_WITH_AS(parse(std::string(kPpoModels) + R"(, "mode": "semi")"),
                       "w.json: /mode: expected \"sync\" or \"async\", found \"semi\"",
                       core::InputError);
  CHECK_THROWS_WITH_AS(parse(std::string(kPpoModels) + R"(, "epochs": 0)"),
                       "w.json: /epochs: expected a whole number from 1 to 1024, found the number 0",
                       core::InputError);
  CHECK_THROWS_WITH_AS(parse(std::string(kPpoModels) + R"(, "epoch": 2)"),
                       "w.json: /epoch: unknown field \"epoch\" (did you mean \"epochs\"?)",
                       core::InputError);
}

TEST_CASE("response-length distributions") {
  const auto lengths_of = [](const std::string& spec) {
    const std::string text = R"({"schema": "hetrl.workload/v1", "algorithm": "ppo",
        "models": {"actor": "Qwen2.5-7B", "critic": "Qwen2.5-7B", "reward": "rule"},
        "prompts_per_iteration": 8, "prompt_length_tokens": 16, "response_length": )" + spec + "}";
    return io::parse_workload(text, "w.json", "", catalogs().algorithms, catalogs().models)
        .workload.response;
  };
  const workload::ResponseLengths ln =
      lengths_of(R"({"distribution": "lognormal", "mean_tokens": 1000, "max_tokens": 8192, "sigma": 1.0})");
  // The clamped mean the location was solved for, checked by numerical integration of
  // min(exp(mu + sigma z), max) against the standard normal density.
  const double mu = ln.log_location();
  double integral = 0;
  const double step = 1e-3;
  for (double z = -12; z < 12; z += step) {
    const double density = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    integral += std::min(std::exp(mu + z), 8192.0) * density * step;
  }
  CHECK(integral == hetrl::testing::approx(1000).epsilon(1e-3));
  // Quantiles rise and stop at the clamp; the median of a lognormal is exp(mu).
  CHECK(ln.quantile(0.5) == hetrl::testing::approx(std::exp(mu)).epsilon(1e-6));
  CHECK(ln.quantile(0.9) > ln.quantile(0.5));
  CHECK(ln.quantile(1.0) == 8192);
  // Samples: same seed, same lengths; their mean near the target; none past the clamp.
  const std::vector<int> a = ln.sample(200000, 7);
  CHECK(a == ln.sample(200000, 7));
  CHECK(a != ln.sample(200000, 8));
  const double mean = std::accumulate(a.begin(), a.end(), 0.0) / static_cast<double>(a.size());
  CHECK(mean == hetrl::testing::approx(1000).epsilon(0.02));
  CHECK(*std::max_element(a.begin(), a.end()) == 8192);

  CHECK_THROWS_WITH_AS(
      lengths_of(R"({"distribution": "lognormal", "mean_tokens": 5000, "max_tokens": 4096})"),
      "w.json: /response_length: mean_tokens must be at least 1 and below max_tokens (4096), "
      "found 5000",
      core::InputError);
  CHECK_THROWS_WITH_AS(lengths_of(R"({"distribution": "zipf"})"),
                       "w.json: /response_length/distribution: expected \"fixed\", "
                       "\"lognormal\" or \"trace\", found \"zipf\"",
                       core::InputError);
}

TEST_CASE("length traces: one column, or a named column of a CSV") {
  CHECK(io::parse_length_trace("length\n10\n# note\n\n20\n", "t.csv", "") ==
        std::vector<int>{10, 20});
  CHECK(io::parse_length_trace("id,tokens\n1,300\n2,40\n", "t.csv", "tokens") ==
        std::vector<int>{300, 40});
  CHECK_THROWS_WITH_AS(io::parse_length_trace("id,tokens\n1,300\n", "t.csv", "token"),
                       "t.csv:1: no column \"token\" in the header (did you mean \"tokens\"?)",
                       core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_length_trace("10\n-3\n", "t.csv", ""),
                       "t.csv:2: response length: expected a whole number from 1 to 16777216, "
                       "found -3",
                       core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_length_trace("10,2\n", "t.csv", ""),
                       "t.csv:1: expected one length per row, found 2 fields; name the column "
                       "to read",
                       core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_length_trace("# nothing\n", "t.csv", ""),
                       "t.csv: the trace has no lengths", core::InputError);
  // Windows line ends, spaces around fields, no newline after the last row.
  CHECK(io::parse_length_trace(" 7 \r\n\t8\r\n9", "t.csv", "") == std::vector<int>{7, 8, 9});
  CHECK(io::parse_length_trace("id , tokens\r\n1, 30 \r\n2,4", "t.csv", "tokens") == std::vector<int>{30, 4});
  CHECK_THROWS_WITH_AS(io::parse_length_trace("10\n99999999999\n", "t.csv", ""),
                       "t.csv:2: response length: expected a whole number from 1 to 16777216, found 99999999999",
                       core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_length_trace("10\n\n12x\n", "t.csv", ""),
                       "t.csv:3: response length: expected a whole number, found \"12x\"", core::InputError);
  CHECK_THROWS_WITH_AS(io::parse_length_trace("id,tokens\n1,300\n2\n", "t.csv", "tokens"),
                       "t.csv:3: the row has no field for column \"tokens\"", core::InputError);
  workload::ResponseLengths trace;
  trace.kind = workload::LengthKind::kTrace;
  trace.trace = {300, 100, 400, 200};
  CHECK(trace.mean() == 250);
  CHECK(trace.max() == 400);
  CHECK(trace.quantile(0.5) == 200);
  // The p-quantile is the ceil(p * n)-th smallest, the first for p = 0.
  const std::vector<double> ps{0.0, 0.25, 0.3, 0.5, 0.75, 0.76, 1.0};
  CHECK(trace.quantiles(ps) == std::vector<double>{100, 100, 200, 200, 300, 400, 400});
  const std::vector<int> drawn = trace.sample(1000, 1);
  CHECK(std::all_of(drawn.begin(), drawn.end(), [](int n) { return n % 100 == 0 && n <= 400; }));
}
