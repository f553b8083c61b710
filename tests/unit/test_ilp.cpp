#include <doctest/doctest.h>

#include "approx.h"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "ilp/mip.h"
#include "ilp/solver.h"

using namespace hetrl::ilp;

namespace {

// Knapsack: values 10, 13, 7, 8; weights 5, 6, 3, 4; capacity 10. The best is items 1 and 3
// (weight 10, value 21); items 1 and 2 weigh 9 and are worth 20.
Model knapsack() {
  Model m(Sense::kMaximize);
  const double value[] = {10, 13, 7, 8};
  const double weight[] = {5, 6, 3, 4};
  std::vector<std::pair<int, double>> terms;
  for (int i = 0; i < 4; ++i) terms.emplace_back(m.add_binary("take_" + std::to_string(i), value[i]), weight[i]);
  m.add_less_equal("capacity", terms, 10);
  return m;
}

// Runs the cbc program on a file and returns the objective it prints.
double cbc_objective(const std::string& path) {
  const std::string command = "cbc " + path + " solve 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  REQUIRE(pclose(pipe) == 0);
  const std::size_t at = output.find("Objective value:");
  REQUIRE_MESSAGE(at != std::string::npos, output);
  return std::stod(output.substr(at + 16));
}

}  // namespace

TEST_CASE("a knapsack: optimal, with its value, bound and solution") {
  const Model m = knapsack();
  const SolveResult r = solve(m, {});
  REQUIRE(r.status == Status::kOptimal);
  CHECK(r.objective == hetrl::testing::approx(21));
  CHECK(r.bound == hetrl::testing::approx(21));
  CHECK(r.gap == hetrl::testing::approx(0).epsilon(1e-9));
  REQUIRE(r.values.size() == 4);
  CHECK(r.values == std::vector<double>{0, 1, 0, 1});
  CHECK(m.satisfied_by(r.values));
  CHECK(m.objective_of({1, 1, 0, 0}) == 23);
  CHECK_FALSE(m.satisfied_by({1, 1, 0, 0}));  // weight 11
}

TEST_CASE("a makespan: two jobs on two machines, continuous and binary variables") {
  // Job times 3 and 5 on machine A, 4 and 2 on machine B; each job on one machine; minimise T
  // with T >= each machine's load. Best: job 0 on A (3), job 1 on B (2): T = 3.
  Model m;
  const int a0 = m.add_binary("a0"), a1 = m.add_binary("a1"), b0 = m.add_binary("b0"), b1 = m.add_binary("b1");
  const int t = m.add_continuous("T", 0, kInfinity, 1);
  m.add_equal("job0", {{a0, 1}, {b0, 1}}, 1);
  m.add_equal("job1", {{a1, 1}, {b1, 1}}, 1);
  m.add_greater_equal("load_a", {{t, 1}, {a0, -3}, {a1, -5}}, 0);
  m.add_greater_equal("load_b", {{t, 1}, {b0, -4}, {b1, -2}}, 0);
  const SolveResult r = solve(m, {});
  REQUIRE(r.status == Status::kOptimal);
  CHECK(r.objective == hetrl::testing::approx(3));
  CHECK(r.values[a0] == hetrl::testing::approx(1));
  CHECK(r.values[b1] == hetrl::testing::approx(1));
  // A warm start at the optimum is accepted and the answer stays.
  SolveParams warm;
  warm.warm_start = r.values;
  CHECK(solve(m, warm).objective == hetrl::testing::approx(3));
}

TEST_CASE("an infeasible model says so") {
  Model m;
  const int x = m.add_continuous("x", 0, 1, 1);
  const int y = m.add_binary("y", 1);
  m.add_greater_equal("too_much", {{x, 1}, {y, 1}}, 3);
  const SolveResult r = solve(m, {});
  CHECK(r.status == Status::kInfeasible);
  CHECK(r.values.empty());
  CHECK(std::string(status_name(r.status)) == "infeasible");
}

TEST_CASE("exported LP and MPS files solve to the same objective with the cbc program") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "hetrl_ilp_test";
  std::filesystem::create_directories(dir);
  Model m;  // the knapsack as a minimisation of the value left out: 38 - 21 = 17
  const double value[] = {10, 13, 7, 8};
  const double weight[] = {5, 6, 3, 4};
  std::vector<std::pair<int, double>> terms;
  for (int i = 0; i < 4; ++i) {
    const int take = m.add_binary("take_" + std::to_string(i), -value[i]);
    terms.emplace_back(take, weight[i]);
  }
  m.add_less_equal("capacity", terms, 10);
  const SolveResult r = solve(m, {});
  REQUIRE(r.status == Status::kOptimal);
  CHECK(r.objective == hetrl::testing::approx(-21));
  const std::string lp = (dir / "knapsack.lp").string();
  const std::string mps = (dir / "knapsack.mps").string();
  std::ofstream(lp) << lp_text(m);
  std::ofstream(mps) << mps_text(m);
  CHECK(cbc_objective(lp) == hetrl::testing::approx(r.objective));
  CHECK(cbc_objective(mps) == hetrl::testing::approx(r.objective));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the model's LP and MPS texts name its columns and rows, and its integers as integers") {
  Model m;
  const int x = m.add_binary("pick_x", -1);
  const int y = m.add_continuous("load_y", 0, 4, 1);
  m.add_less_equal("capacity_row", {{x, 1.0}, {y, 2.0}}, 3);
  for (const std::string& text : {lp_text(m), mps_text(m)}) {
    CHECK(text.find("pick_x") != std::string::npos);
    CHECK(text.find("load_y") != std::string::npos);
    CHECK(text.find("capacity_row") != std::string::npos);
  }
  CHECK(mps_text(m).find("BV BOUND pick_x") != std::string::npos);  // a binary's bound
  CHECK(lp_text(m).find("Integers\npick_x") != std::string::npos);
}

TEST_CASE("CBC runs apart: a crash inside the solver is a result with its cause, not the end of the tool") {
  SolveParams params;
  params.before_solve = [] { std::raise(SIGSEGV); };
  const SolveResult r = solve(knapsack(), params);
  CHECK(r.status == Status::kError);
  CHECK(r.values.empty());
  CHECK(r.message.find("CBC crashed") == 0);
  CHECK(r.message.find("signal 11") != std::string::npos);
  // The same model solves in the next call: nothing of the crash is left behind.
  CHECK(solve(knapsack(), {}).status == Status::kOptimal);
}

TEST_CASE("CBC runs apart: a solver that does not stop at its time limit is stopped a little after it") {
  SolveParams params;
  params.time_limit = 0.2;
  params.before_solve = [] {
    for (volatile bool forever = true; forever;) {
    }
  };
  const SolveResult r = solve(knapsack(), params);
  CHECK(r.status == Status::kNoSolution);
  CHECK(r.values.empty());
  CHECK(r.message.find("had not stopped") != std::string::npos);
}
