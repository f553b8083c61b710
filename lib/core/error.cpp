#include "core/error.h"

#include <algorithm>
#include <cctype>

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
  std::string best;
  std::size_t best_score = static_cast<std::size_t>(-1);
  for (const std::string& candidate : known) {
    const std::string norm = normalised(candidate);
    std::size_t score = edit_distance(wanted, norm);
    // A name that contains the other whole ("A100" in "A100-SXM-80G") is a strong hint.
    if (!wanted.empty() && (norm.find(wanted) != std::string::npos ||
                            wanted.find(norm) != std::string::npos)) {
      score = std::min<std::size_t>(score, 1 + (norm.size() > wanted.size()
                                                    ? (norm.size() - wanted.size()) / 4
                                                    : (wanted.size() - norm.size()) / 4));
    }
    if (score < best_score) {
      best_score = score;
      best = candidate;
    }
  }
  const std::size_t limit = std::max<std::size_t>(2, wanted.size() / 3);
  return best_score <= limit ? best : std::string();
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
