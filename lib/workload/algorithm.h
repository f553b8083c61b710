#pragma once
// RL algorithms as data: the task graph of one iteration (cost_models/algorithms.json), the
// roles it needs and the payloads its edges carry. Nothing else in hetrl branches on the
// algorithm's name; it reads these templates.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workload/model.h"

namespace hetrl::workload {

enum class Role { kActor, kCritic, kReference, kReward };
inline constexpr std::array<Role, 4> kRoles = {Role::kActor, Role::kCritic, Role::kReference,
                                               Role::kReward};
std::string_view role_name(Role role);
std::optional<Role> role_from_name(std::string_view name);

// What a role's model ends in: the actor and the reference in logits over the vocabulary
// (log-probabilities), the critic and a reward model in one value per token.
Head head_of(Role role);

enum class TaskKind { kGenerate, kForward, kTrain, kCpu, kWeightSync };
std::string_view task_kind_name(TaskKind kind);
std::optional<TaskKind> task_kind_from_name(std::string_view name);

// How an algorithm uses a role.
enum class RoleNeed { kUnused, kRequired, kOptional, kRequiredOrRule };
std::optional<RoleNeed> role_need_from_name(std::string_view name);

enum class TokenSpan { kNone, kResponse, kPromptAndResponse };

struct PayloadSpec {
  std::string name;
  double bytes_per_token = 0;
  TokenSpan tokens = TokenSpan::kNone;
  double bytes_per_sample = 0;
  double bytes_per_parameter = 0;
  std::string source;
};

struct TaskInput {
  std::string from;
  std::string payload;
  bool previous_iteration = false;
};

struct TaskTemplate {
  std::string name;
  std::optional<Role> role;  // none for CPU tasks such as the advantage
  TaskKind kind = TaskKind::kCpu;
  std::optional<TaskKind> kind_with_rule;  // the kind when the role is a rule
  std::string op;
  std::vector<TaskInput> inputs;
};

struct AlgorithmSpec {
  std::string name;
  std::string description;
  std::string source;
  std::array<RoleNeed, 4> roles{};  // indexed by Role
  int min_samples_per_prompt = 1;
  std::vector<TaskTemplate> tasks;

  RoleNeed need(Role role) const { return roles[static_cast<int>(role)]; }
};

struct AlgorithmCatalog {
  std::vector<PayloadSpec> payloads;
  std::vector<AlgorithmSpec> algorithms;

  const AlgorithmSpec& get(std::string_view name, std::string_view where) const;
  const PayloadSpec& payload(std::string_view name) const;  // requires a validated catalogue
  std::vector<std::string> names() const;

  // Inputs name known tasks and payloads, task names are unique, roles of tasks are used by
  // the algorithm, and the graph without previous-iteration edges has no cycle.
  void validate() const;
};

}  // namespace hetrl::workload
