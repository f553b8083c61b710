#pragma once
// Capacity planning (hetrl-plan capacity): of the clusters a market can make, the cheapest
// whose best plan reaches a target throughput, and the front of throughput against price.
//
// A market offers nodes per zone (an instance type or a node spec), each at a price per node-
// hour, up to a number that can be rented, and maybe with nodes already paid for. A cluster of
// the market is a number of rented nodes per offer, with every node already paid for; it costs
// the rented nodes' prices. Its throughput is what the planner's best plan on it reaches: a
// black box, priced by planning (an Oracle), so the search plans as few clusters as it can.
//
// The search is a branch and bound over boxes of node counts (lo <= counts <= hi), cheapest
// lower corner first. It rests on one property: more nodes never lower the best plan, since a
// plan may leave nodes idle. So a box whose upper corner misses the target holds no cluster
// that reaches it, and a box whose lower corner reaches it holds none cheaper. The search
// keeps the property on the clusters it planned: a cluster is worth at least the best plan of
// any smaller one it planned. With a time limit it may stop early; it then says so, with the
// least any cluster reaching the target can cost (the cheapest box left).
//
// Clusters alike but for their zones' names (the same nodes in each zone, the same paths
// between zones) are planned once.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "hw/cluster.h"
#include "hw/cluster_builder.h"

namespace hetrl::planner {

struct Offer {
  hw::NodeGroup node;  // its zone, GPUs, NIC and link (node_count unused)
  std::string what;    // for people: the instance type, or the node spec
  double price = 0;    // USD per node-hour of a rented node
  int existing = 0;    // nodes already paid for: in every cluster, at no cost
  int max_new = 0;     // nodes that can be rented
};

struct Market {
  std::string name = "market";
  std::vector<Offer> offers;
  // The network and GPU overrides of every cluster the market makes (no node groups): links
  // and regions of zones a cluster lacks are left out of that cluster.
  hw::ClusterBuildParams network;
};

// Rented nodes per offer.
using Counts = std::vector<int>;

// USD per hour of the rented nodes.
double rent_per_hour(const Market& market, const Counts& counts);
// GPUs of the cluster (rented and already paid for).
long long market_gpus(const Market& market, const Counts& counts);
bool has_nodes(const Market& market, const Counts& counts);
// The cluster of these counts, named `name`: every offer's nodes already paid for and rented,
// each node at its offer's price. Requires has_nodes().
hw::Cluster market_cluster(const Market& market, const Counts& counts, const hw::Catalog& catalog,
                           const std::string& name);
// A key equal for two clusters that differ only in their zones' names and order.
std::string structure_key(const hw::Cluster& cluster);

// The best plan's samples/s on a cluster; 0 when there is none.
using Oracle = std::function<double(const Counts&)>;

// The oracle that builds each cluster and has `plan` price it, once for each structure_key.
Oracle planning_oracle(const Market& market, const hw::Catalog& catalog,
                       std::function<double(const hw::Cluster&)> plan);

struct CapacityPoint {
  Counts counts;
  double usd_per_hour = 0;        // rented nodes
  double samples_per_second = 0;  // the best plan's
};

struct CapacityResult {
  std::optional<CapacityPoint> cheapest;  // reaching the target
  std::optional<CapacityPoint> fastest;   // the fastest cluster planned, for a target missed
  bool proven = true;                     // false: the time limit stopped the search
  double lower_bound = 0;                 // USD/h: no cluster reaching the target costs less
  long long planned = 0;                  // clusters planned (each structure once)
};

class CapacitySearch {
 public:
  // `oracle` is called only on counts with nodes. Past `deadline` the search stops where it
  // is. Boxes whose upper corner has more than `max_bound_gpus` GPUs are split without
  // planning that corner.
  CapacitySearch(const Market& market, Oracle oracle, core::Deadline deadline, long long max_bound_gpus = 4096);

  // The cheapest cluster reaching `target` samples/s (of the cheapest, the fastest).
  CapacityResult cheapest(double target);
  // The clusters no other is both cheaper and as fast as (or as cheap and faster than), from
  // the cheapest with a plan up to the cheapest reaching `target`, cheapest first.
  std::vector<CapacityPoint> front(double target, bool* proven);

  long long planned() const { return planned_; }

 private:
  double throughput(const Counts& counts);
  void consider(const Counts& counts, double samples_per_second, std::optional<CapacityPoint>& best) const;
  void offer_alone(std::size_t offer, double target, std::optional<CapacityPoint>& best);
  void cheaper_neighbours(double target, std::optional<CapacityPoint>& best);
  std::optional<double> branch_and_bound(double target, std::optional<CapacityPoint>& best);

  const Market& market_;
  Oracle oracle_;
  core::Deadline deadline_;
  long long max_bound_gpus_;
  struct Planned {
    Counts counts;
    double samples_per_second;
  };
  std::vector<Planned> planned_points_;
  std::optional<CapacityPoint> fastest_;
  long long planned_ = 0;
};

// Every cluster of the market planned: the cheapest reaching the target, the fastest, and the
// front as CapacitySearch::front() defines it. For tests, on small markets.
struct ExhaustiveCapacity {
  CapacityResult result;
  std::vector<CapacityPoint> front;
};
ExhaustiveCapacity exhaustive_capacity(const Market& market, const Oracle& oracle, double target);

// What hetrl-plan capacity found, to print and write.
struct CapacityReport {
  std::string workload;
  std::string planner;
  double target = 0;  // samples/s
  CapacityResult result;
  bool pareto = false;
  std::vector<CapacityPoint> front;  // with pareto
  double seconds = 0;                // the whole search's
};

// A cluster's GPUs by type, "16 A100-SXM-80G + 8 L40S" (rented and already paid for).
std::string gpus_text(const Market& market, const Counts& counts);
// The search's answer as a table: the cheapest cluster's nodes per offer, its price and
// throughput, how the search ended; with pareto, the front.
std::string format_capacity(const Market& market, const CapacityReport& report);
// The front (or the one cluster) as CSV: a header, one line a cluster, cheapest first.
std::string capacity_csv(const Market& market, const std::vector<CapacityPoint>& points, double target);

// Whether a cluster's samples/s reaches a target (within rounding), and whether one price is
// below another (the same).
bool reaches(double samples_per_second, double target);
bool cheaper(double usd_a, double usd_b);

}  // namespace hetrl::planner
