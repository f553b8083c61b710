#pragma once
// Solving a Model, and writing it for other solvers. The solver behind this interface is COIN-OR
// CBC (ilp/cbc_solver.cpp, the one file that includes it). Whether the call worked is kept apart
// from what the solver concluded: a solve returns a Status, and throws only for bugs.

#include <functional>
#include <string>
#include <vector>

#include "ilp/mip.h"

namespace hetrl::ilp {

enum class Status {
  kOptimal,          // proven optimal within the gap
  kFeasible,         // stopped at the time limit with a solution
  kInfeasible,       // proven infeasible
  kNoSolution,       // stopped at the time limit without a solution
  kUnbounded,
  kError,
};

const char* status_name(Status status);

struct SolveParams {
  double time_limit = 86400;  // seconds (a day: no limit unless a caller sets one)
  double relative_gap = 1e-6; // stop when (incumbent - bound) / incumbent is below this
  int threads = 1;
  bool log = false;           // the solver's own output on stdout
  std::vector<double> warm_start{};  // a feasible assignment to start from, or empty
  // Run in the solving process just before CBC starts: tests inject a crash or a hang there.
  std::function<void()> before_solve{};
};

struct SolveResult {
  Status status = Status::kError;
  double objective = 0;  // of the best solution, when there is one
  double bound = 0;      // the best bound proven
  double gap = 0;        // relative
  long long nodes = 0;
  double seconds = 0;
  std::vector<double> values;  // the best solution, when there is one
  std::string message;
};

SolveResult solve(const Model& model, const SolveParams& params);

// The model as the text of an LP or MPS file readable by CBC, HiGHS, Gurobi and others, for
// the tool to write with its other outputs. Throw core::JobError when it cannot be made.
std::string lp_text(const Model& model);
std::string mps_text(const Model& model);

}  // namespace hetrl::ilp
