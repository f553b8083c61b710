#include "workload/algorithm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <set>

#include "core/error.h"

namespace hetrl::workload {
namespace {

constexpr std::array<std::string_view, 4> kRoleNames = {"actor", "critic", "reference", "reward"};
constexpr std::array<std::string_view, 5> kTaskKindNames = {"generate", "forward", "train", "cpu",
                                                            "weight_sync"};
constexpr std::array<std::string_view, 4> kRoleNeedNames = {"unused", "required", "optional",
                                                            "required_or_rule"};

template <typename Enum, std::size_t N>
std::optional<Enum> from_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

}  // namespace

std::string_view role_name(Role role) { return kRoleNames[static_cast<int>(role)]; }
std::optional<Role> role_from_name(std::string_view name) {
  return from_name<Role>(kRoleNames, name);
}

Head head_of(Role role) {
  return role == Role::kCritic || role == Role::kReward ? Head::kScalar : Head::kLanguage;
}
std::string_view task_kind_name(TaskKind kind) { return kTaskKindNames[static_cast<int>(kind)]; }
std::optional<TaskKind> task_kind_from_name(std::string_view name) {
  return from_name<TaskKind>(kTaskKindNames, name);
}
std::optional<RoleNeed> role_need_from_name(std::string_view name) {
  return from_name<RoleNeed>(kRoleNeedNames, name);
}

const AlgorithmSpec& AlgorithmCatalog::get(std::string_view name, std::string_view where) const {
  for (const AlgorithmSpec& spec : algorithms) {
    if (spec.name == name) return spec;
  }
  throw core::InputError(core::located(
      where, fmt::format("unknown algorithm {}{}", core::quoted(name),
                         core::did_you_mean(name, names()))));
}

const PayloadSpec& AlgorithmCatalog::payload(std::string_view name) const {
  for (const PayloadSpec& spec : payloads) {
    if (spec.name == name) return spec;
  }
  assert(false && "payload names are checked by AlgorithmCatalog::validate");
  return payloads.front();
}

std::vector<std::string> AlgorithmCatalog::names() const {
  std::vector<std::string> out;
  for (const AlgorithmSpec& spec : algorithms) out.push_back(spec.name);
  return out;
}

void AlgorithmCatalog::validate() const {
  std::set<std::string> payload_names;
  for (const PayloadSpec& p : payloads) payload_names.insert(p.name);
  for (const AlgorithmSpec& algorithm : algorithms) {
    const std::string where = fmt::format("algorithm {}", core::quoted(algorithm.name));
    std::vector<std::string> task_names;
    for (const TaskTemplate& task : algorithm.tasks) {
      if (std::find(task_names.begin(), task_names.end(), task.name) != task_names.end()) {
        throw core::InputError(fmt::format("{}: task {} is defined twice", where, task.name));
      }
      task_names.push_back(task.name);
      if (task.role && algorithm.need(*task.role) == RoleNeed::kUnused) {
        throw core::InputError(fmt::format("{}: task {} uses role {}, which the algorithm marks unused",
                                           where, task.name, role_name(*task.role)));
      }
      if ((task.kind != TaskKind::kCpu) != task.role.has_value()) {
        throw core::InputError(fmt::format(
            "{}: task {}: GPU tasks need a role and CPU tasks have none", where, task.name));
      }
    }
    for (const TaskTemplate& task : algorithm.tasks) {
      for (const TaskInput& input : task.inputs) {
        if (std::find(task_names.begin(), task_names.end(), input.from) == task_names.end()) {
          throw core::InputError(fmt::format("{}: task {} takes input from unknown task {}{}",
                                             where, task.name, core::quoted(input.from),
                                             core::did_you_mean(input.from, task_names)));
        }
        if (!payload_names.count(input.payload)) {
          throw core::InputError(fmt::format("{}: task {}: unknown payload {}", where, task.name,
                                             core::quoted(input.payload)));
        }
      }
    }
    // Cycle check (Kahn) over same-iteration edges.
    const std::size_t n = algorithm.tasks.size();
    std::vector<int> pending(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      for (const TaskInput& input : algorithm.tasks[i].inputs) {
        if (!input.previous_iteration) ++pending[i];
      }
    }
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < n; ++i) {
      if (pending[i] == 0) ready.push_back(i);
    }
    std::size_t done = 0;
    while (!ready.empty()) {
      const std::size_t t = ready.back();
      ready.pop_back();
      ++done;
      for (std::size_t i = 0; i < n; ++i) {
        for (const TaskInput& input : algorithm.tasks[i].inputs) {
          if (!input.previous_iteration && input.from == algorithm.tasks[t].name &&
              --pending[i] == 0) {
            ready.push_back(i);
          }
        }
      }
    }
    if (done != n) throw core::InputError(where + ": the task graph has a cycle");
  }
}

}  // namespace hetrl::workload
