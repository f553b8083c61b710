// Plan evaluations per second on one core: builds a pool of distinct candidate plans for a
// scenario (every layout the verl and streamrl baselines try), then evaluates them round-robin
// for a fixed count. Prints one CSV row per scenario:
//   scenario,gpus,plans,evaluations,seconds,evaluations_per_second
// Usage: eval_speed CLUSTER.json WORKLOAD.json [EVALUATIONS]

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "core/error.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "plan/evaluate.h"
#include "planner/baselines.h"
#include "planner/layout.h"

using namespace hetrl;

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: eval_speed CLUSTER.json WORKLOAD.json [EVALUATIONS]\n");
    return 2;
  }
  try {
    const io::Catalogs& catalogs = io::builtin_catalogs();
    const io::Inputs in = io::load_inputs(argv[1], argv[2], catalogs);
    const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
    const long long count = argc > 3 ? std::atoll(argv[3]) : 200000;

    // The pool: one plan per strategy for each split of the nodes into two groups, plus
    // all-colocated plans; only feasible ones are kept.
    std::vector<plan::Plan> pool;
    plan::Evaluator evaluator(model);
    const std::vector<int> nodes = planner::all_nodes(in.cluster);
    for (const planner::PlannerResult& r :
         {planner::plan_verl(model, in.workload.models, nodes),
          planner::plan_streamrl(model, in.workload.models, nodes),
          planner::plan_homogeneous(model, in.workload.models)}) {
      if (r.found) pool.push_back(r.plan);
    }
    // Variants: the same plans with perturbed shares, so the pool is not just three plans.
    const std::size_t base = pool.size();
    for (std::size_t i = 0; i < base; ++i) {
      for (int k = 1; k <= 20; ++k) {
        plan::Plan variant = pool[i];
        for (plan::Group& g : variant.groups) {
          for (plan::TaskPlacement& t : g.tasks) {
            double total = 0;
            for (std::size_t r = 0; r < t.replicas.size(); ++r) {
              t.replicas[r].share *= 1.0 + 0.01 * k * ((r % 3) == 0 ? 1 : -0.5);
              total += t.replicas[r].share;
            }
            for (plan::Replica& r : t.replicas) r.share /= total;
          }
        }
        pool.push_back(std::move(variant));
      }
    }
    double checksum = 0;
    const auto start = std::chrono::steady_clock::now();
    for (long long i = 0; i < count; ++i) {
      checksum += evaluator.evaluate(pool[static_cast<std::size_t>(i) % pool.size()]).samples_per_second;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("{},{},{},{},{:.3f},{:.0f}\n", in.cluster.name, in.cluster.total_gpus(), pool.size(),
               count, seconds, static_cast<double>(count) / seconds);
    return checksum > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "eval_speed: error: {}\n", e.what());
    return 2;
  }
}
