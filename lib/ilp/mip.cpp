#include "ilp/mip.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace hetrl::ilp {

int Model::add_column(std::string name, double lower, double upper, double objective, bool integer) {
  assert(lower <= upper);
  columns_.push_back({std::move(name), lower, upper, objective, integer});
  return static_cast<int>(columns_.size()) - 1;
}

void Model::add_row(std::string name, std::vector<std::pair<int, double>> terms, double lower,
                    double upper) {
  // One term per column: coefficients of a repeated column add up; zeros are dropped.
  std::sort(terms.begin(), terms.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<int, double>> merged;
  for (const auto& [column, coefficient] : terms) {
    assert(column >= 0 && column < static_cast<int>(columns_.size()));
    if (!merged.empty() && merged.back().first == column) {
      merged.back().second += coefficient;
    } else {
      merged.emplace_back(column, coefficient);
    }
  }
  std::erase_if(merged, [](const auto& term) { return term.second == 0; });
  rows_.push_back({std::move(name), std::move(merged), lower, upper});
}

double Model::objective_of(const std::vector<double>& values) const {
  double total = 0;
  for (std::size_t c = 0; c < columns_.size(); ++c) total += columns_[c].objective * values[c];
  return total;
}

bool Model::satisfied_by(const std::vector<double>& values, double tolerance) const {
  if (values.size() != columns_.size()) return false;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const Column& col = columns_[c];
    if (values[c] < col.lower - tolerance || values[c] > col.upper + tolerance) return false;
    if (col.integer && std::abs(values[c] - std::round(values[c])) > tolerance) return false;
  }
  for (const Row& row : rows_) {
    double sum = 0;
    for (const auto& [column, coefficient] : row.terms) sum += coefficient * values[column];
    if (sum < row.lower - tolerance * (1 + std::abs(row.lower)) ||
        sum > row.upper + tolerance * (1 + std::abs(row.upper))) {
      return false;
    }
  }
  return true;
}

}  // namespace hetrl::ilp
