#pragma once
// A mixed-integer linear program as plain data: columns (variables) with bounds, objective
// coefficients and integrality, and rows (constraints) as sparse linear terms with bounds.
// Formulations build one of these; tests inspect it without a solver; ilp/solver.h hands it to
// CBC. Infinite bounds are +-kInfinity.

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace hetrl::ilp {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

enum class Sense { kMinimize, kMaximize };

struct Column {
  std::string name;
  double lower = 0;
  double upper = kInfinity;
  double objective = 0;
  bool integer = false;
};

struct Row {
  std::string name;
  std::vector<std::pair<int, double>> terms;  // column index, coefficient
  double lower = -kInfinity;
  double upper = kInfinity;
};

class Model {
 public:
  explicit Model(Sense sense = Sense::kMinimize) : sense_(sense) {}

  int add_column(std::string name, double lower, double upper, double objective, bool integer);
  int add_binary(std::string name, double objective = 0) {
    return add_column(std::move(name), 0, 1, objective, true);
  }
  int add_continuous(std::string name, double lower, double upper, double objective = 0) {
    return add_column(std::move(name), lower, upper, objective, false);
  }
  // Terms naming the same column are merged (their coefficients added).
  void add_row(std::string name, std::vector<std::pair<int, double>> terms, double lower, double upper);
  void add_less_equal(std::string name, std::vector<std::pair<int, double>> terms, double rhs) {
    add_row(std::move(name), std::move(terms), -kInfinity, rhs);
  }
  void add_greater_equal(std::string name, std::vector<std::pair<int, double>> terms, double rhs) {
    add_row(std::move(name), std::move(terms), rhs, kInfinity);
  }
  void add_equal(std::string name, std::vector<std::pair<int, double>> terms, double rhs) {
    add_row(std::move(name), std::move(terms), rhs, rhs);
  }

  Sense sense() const { return sense_; }
  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<Row>& rows() const { return rows_; }

  // The objective of an assignment, and whether it meets every bound and row within `tolerance`
  // (integrality included). Used to check warm starts and solutions.
  double objective_of(const std::vector<double>& values) const;
  bool satisfied_by(const std::vector<double>& values, double tolerance = 1e-6) const;

 private:
  Sense sense_;
  std::vector<Column> columns_;
  std::vector<Row> rows_;
};

}  // namespace hetrl::ilp
