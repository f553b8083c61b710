#include "core/error.h"

#include <algorithm>
#include <cctype>
#include <tuple>

namespace hetrl::core {
namespace {

std::string normalised(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '-' || c == '_' || c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

// Length of the longest common subsequence: how many of a name's characters a candidate
// has, in order, whatever was left out or added in between.
std::size_t common_subsequence(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1, 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = 0;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = a[i - 1] == b[j - 1] ? diagonal + 1 : std::max(row[j], row[j - 1]);
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string located(std::string_view where, std::string_view message) {
  if (where.empty()) return std::string(message);
  std::string out(where);
  out += ": ";
  out += message;
  return out;
}

std::string closest_name(std::string_view name, const std::vector<std::string>& known) {
  const std::string wanted = normalised(name);
  if (wanted.empty()) return {};
  const std::size_t typo_limit = std::max<std::size_t>(2, wanted.size() / 3);
  // Candidates rank by kind of likeness, then by how much of the name they cover, then by edit
  // distance; ties keep the earlier name. Kinds: 0, the candidate has at least 80% of the
  // name's characters in order ("A100-80G" for "A100-SXM-80G"); 1, the candidate is the
  // name's start ("Qwen2.5-7B-Instruct" for "Qwen2.5-7B"); 2, a small typo.
  std::string best;
  std::tuple<int, double, std::size_t> best_score{3, 0.0, 0};
  for (const std::string& candidate : known) {
    const std::string norm = normalised(candidate);
    const double coverage = static_cast<double>(common_subsequence(wanted, norm)) /
                            static_cast<double>(wanted.size());
    const std::size_t distance = edit_distance(wanted, norm);
    const bool prefix = norm.size() >= 3 && wanted.rfind(norm, 0) == 0;
    const int kind = coverage >= 0.8 ? 0 : prefix ? 1 : distance <= typo_limit ? 2 : 3;
    const std::tuple<int, double, std::size_t> score{kind, -coverage, distance};
    if (kind < 3 && score < best_score) {
      best_score = score;
      best = candidate;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  const std::string best = closest_name(name, known);
  return best.empty() ? std::string() : " (did you mean " + quoted(best) + "?)";
}

std::string quoted(std::string_view text) {
  std::string out = "\"";
  out += text;
  out += '"';
  return out;
}

}  // namespace hetrl::core
