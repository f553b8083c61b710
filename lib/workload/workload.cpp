#include "workload/workload.h"

#include <fmt/format.h>

#include "core/error.h"

namespace hetrl::workload {

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kAuto: return "auto";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "auto";
}

namespace {

void at_least(long long value, long long minimum, std::string_view pointer) {
  if (value < minimum) {
    throw core::InputError(
        fmt::format("{}: expected at least {}, found {}", pointer, minimum, value));
  }
}

}  // namespace

void Workload::validate(const AlgorithmCatalog& algorithms, const ModelCatalog& models) const {
  const AlgorithmSpec& spec = algorithms.get(algorithm, "/algorithm");
  for (Role r : kRoles) {
    const std::string pointer = fmt::format("/models/{}", role_name(r));
    const RoleModel& given = role(r);
    const RoleNeed need = spec.need(r);
    switch (given.kind) {
      case RoleModel::Kind::kNone:
        if (need == RoleNeed::kRequired || need == RoleNeed::kRequiredOrRule) {
          throw core::InputError(fmt::format("{}: {} needs a {} model{}", pointer, algorithm,
                                             role_name(r),
                                             need == RoleNeed::kRequiredOrRule ? " or \"rule\"" : ""));
        }
        break;
      case RoleModel::Kind::kRule:
        if (need != RoleNeed::kRequiredOrRule) {
          throw core::InputError(fmt::format(
              "{}: only a role that {} allows to be a rule can be \"rule\"; {} needs a model",
              pointer, algorithm, role_name(r)));
        }
        break;
      case RoleModel::Kind::kModel:
        if (need == RoleNeed::kUnused) {
          throw core::InputError(
              fmt::format("{}: {} has no {}; remove it", pointer, algorithm, role_name(r)));
        }
        models.get(given.model, pointer);
        break;
    }
  }
  at_least(prompts_per_iteration, 1, "/prompts_per_iteration");
  at_least(samples_per_prompt, spec.min_samples_per_prompt, "/samples_per_prompt");
  at_least(prompt_length_tokens, 1, "/prompt_length_tokens");
  at_least(mini_batches, 1, "/mini_batches");
  at_least(epochs, 1, "/epochs");
  if (samples_per_iteration() % mini_batches != 0) {
    throw core::InputError(fmt::format(
        "/mini_batches: the {} samples of an iteration ({} prompts x {}) do not split into {} "
        "equal mini-batches", samples_per_iteration(), prompts_per_iteration, samples_per_prompt,
        mini_batches));
  }
  try {
    response.validate();
  } catch (const core::InputError& e) {
    throw core::InputError(core::located("/response_length", e.what()));
  }
  if (mode == Mode::kAsync) {
    at_least(max_staleness, 1, "/max_staleness");
  } else if (max_staleness != 0) {
    throw core::InputError("/max_staleness: only an async workload has a staleness bound");
  }
}

}  // namespace hetrl::workload
