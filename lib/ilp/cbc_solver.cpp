// The one file that talks to COIN-OR CBC: loads a Model into CLP/CBC through the OSI
// interface, runs CBC's standard solver (presolve, cuts, heuristics, branch and bound) with
// its own output off unless asked for, maps its outcome to Status, and writes LP and MPS files.
// Models are solved as minimisations; a maximisation is negated on the way in and out.

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "CbcModel.hpp"
#include "CbcSolver.hpp"
#include "CoinError.hpp"
#include "CoinMpsIO.hpp"
#include "CoinPackedMatrix.hpp"
#include "CoinPackedVector.hpp"
#include "OsiClpSolverInterface.hpp"
#include "core/error.h"
#include "core/isolate.h"
#include "ilp/solver.h"

namespace hetrl::ilp {
namespace {

double finite(double value, double infinity) {
  if (value == kInfinity) return infinity;
  if (value == -kInfinity) return -infinity;
  return value;
}

// Loads `model` into `solver` as a minimisation with its names.
void load(const Model& model, OsiClpSolverInterface& solver) {
  const double infinity = solver.getInfinity();
  const double sign = model.sense() == Sense::kMaximize ? -1.0 : 1.0;
  const std::size_t n = model.columns().size();
  // Row-ordered arrays built once: appending rows one at a time copies the matrix over and
  // over (minutes on models with 10^5 rows).
  std::vector<double> elements, row_lower, row_upper;
  std::vector<int> indices, lengths;
  std::vector<CoinBigIndex> starts;
  for (const Row& row : model.rows()) {
    starts.push_back(static_cast<CoinBigIndex>(elements.size()));
    lengths.push_back(static_cast<int>(row.terms.size()));
    for (const auto& [column, coefficient] : row.terms) {
      indices.push_back(column);
      elements.push_back(coefficient);
    }
    row_lower.push_back(finite(row.lower, infinity));
    row_upper.push_back(finite(row.upper, infinity));
  }
  starts.push_back(static_cast<CoinBigIndex>(elements.size()));
  const CoinPackedMatrix matrix(false, static_cast<int>(n), static_cast<int>(model.rows().size()),
                                static_cast<CoinBigIndex>(elements.size()), elements.data(),
                                indices.data(), starts.data(), lengths.data());
  std::vector<double> col_lower, col_upper, objective;
  for (const Column& c : model.columns()) {
    col_lower.push_back(finite(c.lower, infinity));
    col_upper.push_back(finite(c.upper, infinity));
    objective.push_back(sign * c.objective);
  }
  solver.loadProblem(matrix, col_lower.data(), col_upper.data(), objective.data(), row_lower.data(),
                     row_upper.data());
  solver.setObjSense(1.0);
  solver.setIntParam(OsiNameDiscipline, 2);
  for (std::size_t c = 0; c < n; ++c) {
    if (model.columns()[c].integer) solver.setInteger(static_cast<int>(c));
    solver.setColName(static_cast<int>(c), model.columns()[c].name);
  }
  for (std::size_t r = 0; r < model.rows().size(); ++r) {
    solver.setRowName(static_cast<int>(r), model.rows()[r].name);
  }
}

// The model as LP or MPS text. CBC writes it into an unnamed temporary file (nothing is left
// of it however the process ends), read back whole: the tool commits it with its other
// outputs, or none of them.
std::string model_text(const Model& model, bool lp) {
  const char* format = lp ? "LP" : "MPS";
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  load(model, solver);
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::tmpfile(), std::fclose);
  if (!file) {
    throw core::JobError(fmt::format("cannot write the model as {}: no temporary file: {}", format, std::strerror(errno)));
  }
  int failed = 0;
  // The MPS writer throws CoinError where it cannot open its file, and OSI's LP writer, given
  // a file name, ends the process: the LP writer is given the open file, the MPS writer the
  // same file by its name in /proc, and CoinError stops here.
  try {
    if (lp) {
      solver.writeLp(file.get(), 1e-12, 10, 15);
      failed = std::fflush(file.get());
    } else {
      std::vector<std::string> rows, columns;
      std::vector<char> integer;
      for (const Row& r : model.rows()) rows.push_back(r.name);
      for (const Column& c : model.columns()) {
        columns.push_back(c.name);
        integer.push_back(c.integer ? 1 : 0);
      }
      CoinMpsIO writer;
      writer.messageHandler()->setLogLevel(0);
      writer.setMpsData(*solver.getMatrixByCol(), solver.getInfinity(), solver.getColLower(),
                        solver.getColUpper(), solver.getObjCoefficients(), integer.data(),
                        solver.getRowLower(), solver.getRowUpper(), columns, rows);
      const std::string name = fmt::format("/proc/self/fd/{}", ::fileno(file.get()));
      failed = writer.writeMps(name.c_str(), 0, 1);  // uncompressed, with extra accuracy
    }
  } catch (const CoinError& e) {
    throw core::JobError(fmt::format("cannot write the model as {}: {}", format, e.message()));
  }
  std::string text;
  if (failed == 0 && std::fseek(file.get(), 0, SEEK_SET) == 0) {
    char piece[1 << 16];
    for (std::size_t got; (got = std::fread(piece, 1, sizeof piece, file.get())) > 0;) text.append(piece, got);
    failed = std::ferror(file.get());
  }
  if (failed != 0 || text.empty()) throw core::JobError(fmt::format("cannot write the model as {}", format));
  return text;
}

}  // namespace

const char* status_name(Status status) {
  switch (status) {
    case Status::kOptimal: return "optimal";
    case Status::kFeasible: return "feasible (time limit)";
    case Status::kInfeasible: return "infeasible";
    case Status::kNoSolution: return "no solution (time limit)";
    case Status::kUnbounded: return "unbounded";
    case Status::kError: return "error";
  }
  return "error";
}

namespace {

// One run of CBC's standard solver on `model`, with or without its preprocessing.
SolveResult run_cbc(const Model& model, const SolveParams& params, double seconds_left, bool preprocess) {
  const auto start = std::chrono::steady_clock::now();
  const double sign = model.sense() == Sense::kMaximize ? -1.0 : 1.0;
  const int n = static_cast<int>(model.columns().size());
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(params.log ? 1 : 0);
  load(model, solver);
  CbcModel cbc(solver);
  cbc.setLogLevel(params.log ? 1 : 0);
  cbc.messageHandler()->setLogLevel(params.log ? 1 : 0);
  if (!params.warm_start.empty() && static_cast<int>(params.warm_start.size()) == n &&
      model.satisfied_by(params.warm_start)) {
    cbc.setBestSolution(params.warm_start.data(), n, sign * model.objective_of(params.warm_start), true);
  }
  CbcMain0(cbc);
  cbc.setLogLevel(params.log ? 1 : 0);
  const std::string seconds = fmt::format("{}", std::max(0.01, seconds_left));
  const std::string gap = fmt::format("{}", std::max(0.0, params.relative_gap));
  const std::string threads = fmt::format("{}", std::max(1, params.threads));
  const std::string log = params.log ? "1" : "0";
  // Wall-clock seconds (CBC counts CPU seconds by default).
  std::vector<const char*> argv = {"hetrl", "-log", log.c_str(), "-timeMode", "elapsed", "-sec",
                                   seconds.c_str(), "-ratio", gap.c_str()};
  if (params.threads > 1) {
    argv.push_back("-threads");
    argv.push_back(threads.c_str());
  }
  if (!preprocess) {
    argv.push_back("-preprocess");
    argv.push_back("off");
  }
  argv.push_back("-solve");
  argv.push_back("-quit");
  CbcMain1(static_cast<int>(argv.size()), argv.data(), cbc);

  SolveResult result;
  result.nodes = cbc.getNodeCount();
  const double* best = cbc.bestSolution();
  if (best) {
    result.values.assign(best, best + n);
    result.objective = model.objective_of(result.values);
  }
  result.bound = sign * cbc.getBestPossibleObjValue();
  if (cbc.isProvenOptimal() && best) {
    result.status = Status::kOptimal;
  } else if (cbc.isProvenInfeasible()) {
    result.status = Status::kInfeasible;
  } else if (cbc.isContinuousUnbounded()) {
    result.status = Status::kUnbounded;
  } else if (best) {
    result.status = Status::kFeasible;
  } else if (cbc.isSecondsLimitReached()) {
    result.status = Status::kNoSolution;
  } else {
    result.status = Status::kError;
    result.message = fmt::format("CBC stopped with status {} and secondary status {}", cbc.status(),
                                 cbc.secondaryStatus());
  }
  if (best) {
    const double scale = std::max(1e-10, std::abs(result.objective));
    result.gap = result.status == Status::kOptimal ? std::max(0.0, std::abs(result.objective - result.bound) / scale)
                                                   : std::abs(result.objective - result.bound) / scale;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

// CBC's runs on one model: with its preprocessing, then without where that one fails.
SolveResult solve_here(const Model& model, const SolveParams& params) {
  SolveResult result = run_cbc(model, params, params.time_limit, true);
  // CBC's preprocessing can fail to map its solution back to the model ("postprocessed model
  // is infeasible - possible tolerance issue") and then report a worse one than the start it
  // was given, as optimal, or one that breaks the model's rows at the same objective; or,
  // given a start, declare the rest infeasible and call it optimal without a bound to show
  // for it. Where any of these shows, solve again without preprocessing.
  if (!result.values.empty() && !model.satisfied_by(result.values)) {
    SolveResult again = run_cbc(model, params, params.time_limit - result.seconds, false);
    again.seconds += result.seconds;
    return again;
  }
  const bool warm = !params.warm_start.empty() && params.warm_start.size() == model.columns().size() &&
                    model.satisfied_by(params.warm_start);
  if (warm) {
    const double sign = model.sense() == Sense::kMaximize ? -1.0 : 1.0;
    const double start = model.objective_of(params.warm_start);
    const bool lost = result.values.empty() ||
                      sign * (result.objective - start) > 1e-9 * std::max(1.0, std::abs(start));
    const bool unproven = result.status == Status::kOptimal &&
                          result.gap > 2 * std::max(params.relative_gap, 1e-9);
    if (lost || unproven) {
      SolveResult again = run_cbc(model, params, params.time_limit - result.seconds, false);
      again.seconds += result.seconds;
      result = std::move(again);
    }
  }
  return result;
}

// A SolveResult as bytes, from the solving child to the caller.
template <class T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
template <class T>
bool take(std::string_view& in, T& value) {
  if (in.size() < sizeof value) return false;
  std::memcpy(&value, in.data(), sizeof value);
  in.remove_prefix(sizeof value);
  return true;
}

std::string encode(const SolveResult& r) {
  std::string out;
  put(out, static_cast<int>(r.status));
  put(out, r.objective);
  put(out, r.bound);
  put(out, r.gap);
  put(out, r.nodes);
  put(out, r.seconds);
  put(out, r.message.size());
  out += r.message;
  put(out, r.values.size());
  out.append(reinterpret_cast<const char*>(r.values.data()), r.values.size() * sizeof(double));
  return out;
}

bool decode(std::string_view in, SolveResult& r) {
  int status = 0;
  std::size_t length = 0, count = 0;
  if (!take(in, status) || !take(in, r.objective) || !take(in, r.bound) || !take(in, r.gap) ||
      !take(in, r.nodes) || !take(in, r.seconds) || !take(in, length) || in.size() < length) {
    return false;
  }
  r.status = static_cast<Status>(status);
  r.message.assign(in.substr(0, length));
  in.remove_prefix(length);
  if (!take(in, count) || in.size() != count * sizeof(double)) return false;
  r.values.resize(count);
  if (count > 0) std::memcpy(r.values.data(), in.data(), in.size());  // no solution: no values
  return true;
}

}  // namespace

SolveResult solve(const Model& model, const SolveParams& params) {
  // CBC runs in a child process: its root LP does not look at the clock (one took minutes past
  // a 30 s limit on a 64-GPU cluster) and its preprocessing has crashed on large models, and
  // neither may take the planner with it. CBC stops itself at the limit between nodes; the
  // child is killed only when it has not within a little more.
  const double grace = std::max(0.2, 0.03 * params.time_limit);
  const core::Isolated run = core::run_isolated(
      [&] {
        if (params.before_solve) params.before_solve();
        return encode(solve_here(model, params));
      },
      params.time_limit + grace, params.log);
  SolveResult result;
  switch (run.end) {
    case core::Isolated::End::kUnavailable: return solve_here(model, params);
    case core::Isolated::End::kReturned:
      if (decode(run.output, result)) return result;
      result.message = "CBC's result did not come back whole";
      break;
    case core::Isolated::End::kTimedOut:
      result.status = Status::kNoSolution;
      result.message = fmt::format("CBC had not stopped {:.2g} s past its time limit and was killed", grace);
      break;
    case core::Isolated::End::kCrashed:
      result.message = fmt::format("CBC crashed: {}", core::describe_end(run));
      break;
  }
  result.seconds = run.seconds;
  return result;
}

std::string lp_text(const Model& model) { return model_text(model, true); }
std::string mps_text(const Model& model) { return model_text(model, false); }

}  // namespace hetrl::ilp
