#include "planner/capacity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/units.h"

namespace hetrl::planner {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The next target of a sweep along the front: just above a throughput reached.
double next_target(double samples_per_second) { return samples_per_second * (1 + 1e-9); }
// A target every cluster with a plan reaches.
constexpr double kAnyPlan = 1e-300;

bool all_below(const Counts& a, const Counts& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] > b[i]) return false;
  }
  return true;
}

// The better of two clusters reaching a target: the cheaper, then the faster.
bool better_point(const CapacityPoint& a, const CapacityPoint& b) {
  if (cheaper(a.usd_per_hour, b.usd_per_hour)) return true;
  if (cheaper(b.usd_per_hour, a.usd_per_hour)) return false;
  return a.samples_per_second > b.samples_per_second;
}

}  // namespace

bool reaches(double samples_per_second, double target) {
  return samples_per_second > 0 && samples_per_second >= target * (1 - 1e-12);
}

bool cheaper(double usd_a, double usd_b) { return usd_a < usd_b - 1e-9 * std::max(1.0, std::abs(usd_b)); }

double rent_per_hour(const Market& market, const Counts& counts) {
  double usd = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) usd += counts[i] * market.offers[i].price;
  return usd;
}

long long market_gpus(const Market& market, const Counts& counts) {
  long long gpus = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const Offer& offer = market.offers[i];
    gpus += static_cast<long long>(offer.existing + counts[i]) * offer.node.gpus_per_node;
  }
  return gpus;
}

bool has_nodes(const Market& market, const Counts& counts) {
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (market.offers[i].existing + counts[i] > 0) return true;
  }
  return false;
}

hw::Cluster market_cluster(const Market& market, const Counts& counts, const hw::Catalog& catalog,
                           const std::string& name) {
  hw::ClusterBuildParams params = market.network;
  params.name = name;
  params.node_groups.clear();
  std::set<std::string> zones;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const Offer& offer = market.offers[i];
    const int nodes = offer.existing + counts[i];
    if (nodes == 0) continue;
    hw::NodeGroup group = offer.node;
    group.node_count = nodes;
    group.price_per_hour = offer.price;
    params.node_groups.push_back(std::move(group));
    zones.insert(offer.node.zone);
  }
  // The links and regions of zones this cluster has.
  std::erase_if(params.links, [&](const hw::LinkRequest& link) {
    return zones.count(link.zone_a) == 0 || zones.count(link.zone_b) == 0;
  });
  for (hw::RegionRequest& region : params.regions) {
    std::erase_if(region.zones, [&](const std::string& zone) { return zones.count(zone) == 0; });
  }
  std::erase_if(params.regions, [](const hw::RegionRequest& region) { return region.zones.empty(); });
  return hw::build_cluster(params, catalog);
}

std::string structure_key(const hw::Cluster& cluster) {
  const std::size_t zone_count = cluster.zones.size();
  std::vector<std::vector<std::string>> nodes(zone_count);
  for (const hw::Node& node : cluster.nodes) {
    nodes[static_cast<std::size_t>(node.zone)].push_back(
        fmt::format("{}x{}/{}/{}", node.gpu_count, cluster.gpu_types[static_cast<std::size_t>(node.gpu_type)].name,
                    node.nic_bandwidth, node.intra_node_link.value_or("")));
  }
  std::vector<std::pair<std::string, int>> zones;  // content, index
  for (std::size_t z = 0; z < zone_count; ++z) {
    std::sort(nodes[z].begin(), nodes[z].end());
    std::string content;
    for (const std::string& node : nodes[z]) content += node + ";";
    zones.emplace_back(std::move(content), static_cast<int>(z));
  }
  std::sort(zones.begin(), zones.end());
  std::string key = fmt::format("intra {} {}|", cluster.network.intra_zone.bandwidth, cluster.network.intra_zone.latency);
  for (std::size_t i = 0; i < zones.size(); ++i) {
    // Two zones alike in content leave their order open: the key then names them.
    const bool alike = (i > 0 && zones[i - 1].first == zones[i].first) ||
                       (i + 1 < zones.size() && zones[i + 1].first == zones[i].first);
    key += fmt::format("zone {}{}[{}]", i, alike ? cluster.zones[static_cast<std::size_t>(zones[i].second)].name : "",
                       zones[i].first);
  }
  for (std::size_t i = 0; i < zones.size(); ++i) {
    for (std::size_t j = i + 1; j < zones.size(); ++j) {
      const hw::Path path = cluster.zone_path(zones[i].second, zones[j].second);
      key += fmt::format("|{}-{}:{}/{}", i, j, path.link.bandwidth, path.link.latency);
    }
  }
  return key;
}

Oracle planning_oracle(const Market& market, const hw::Catalog& catalog,
                       std::function<double(const hw::Cluster&)> plan) {
  auto seen = std::make_shared<std::map<std::string, double>>();
  return [&market, &catalog, plan = std::move(plan), seen](const Counts& counts) {
    const hw::Cluster cluster = market_cluster(market, counts, catalog, market.name);
    const std::string key = structure_key(cluster);
    const auto known = seen->find(key);
    if (known != seen->end()) return known->second;
    const double samples_per_second = plan(cluster);
    seen->emplace(key, samples_per_second);
    return samples_per_second;
  };
}

CapacitySearch::CapacitySearch(const Market& market, Oracle oracle, core::Deadline deadline, long long max_bound_gpus)
    : market_(market), oracle_(std::move(oracle)), deadline_(deadline), max_bound_gpus_(max_bound_gpus) {}

double CapacitySearch::throughput(const Counts& counts) {
  if (!has_nodes(market_, counts)) return 0;
  const auto known = std::find_if(planned_points_.begin(), planned_points_.end(),
                                  [&](const Planned& p) { return p.counts == counts; });
  if (known == planned_points_.end()) {
    const double samples_per_second = oracle_(counts);
    planned_points_.push_back({counts, samples_per_second});
    ++planned_;
  }
  // More nodes never lower the best plan: the best of any smaller cluster planned.
  double best = 0;
  for (const Planned& p : planned_points_) {
    if (p.samples_per_second > best && all_below(p.counts, counts)) best = p.samples_per_second;
  }
  const CapacityPoint point{counts, rent_per_hour(market_, counts), best};
  if (best > 0 && (!fastest_ || best > fastest_->samples_per_second ||
                   (best == fastest_->samples_per_second && cheaper(point.usd_per_hour, fastest_->usd_per_hour)))) {
    fastest_ = point;
  }
  return best;
}

// The better of the best so far and this cluster, which reaches the target.
void CapacitySearch::consider(const Counts& counts, double samples_per_second, std::optional<CapacityPoint>& best) const {
  const CapacityPoint point{counts, rent_per_hour(market_, counts), samples_per_second};
  if (!best || better_point(point, *best)) best = point;
}

// Each offer alone (with the nodes already paid for): the fewest of its nodes that reach the
// target, doubling then halving the gap, while its clusters are small enough and doubling still
// pays (a plan's throughput levels off when its batch is spread thin).
void CapacitySearch::offer_alone(std::size_t i, double target, std::optional<CapacityPoint>& best) {
  const std::size_t offers = market_.offers.size();
  Counts counts(offers, 0);
  int low = 0, high = -1;  // low misses; high reaches
  double before = 0;
  for (int n = 1; n <= market_.offers[i].max_new; n = std::min(2 * n, market_.offers[i].max_new)) {
    counts[i] = n;
    if (market_gpus(market_, counts) > max_bound_gpus_ || deadline_.passed()) break;
    if (best && !cheaper(rent_per_hour(market_, counts), best->usd_per_hour)) break;
    const double now = throughput(counts);
    if (reaches(now, target)) {
      high = n;
      break;
    }
    if (n > 1 && now < before * 1.02) break;
    before = now;
    low = n;
    if (n == market_.offers[i].max_new) break;
  }
  while (high > low + 1 && !deadline_.passed()) {
    counts[i] = (low + high) / 2;
    if (reaches(throughput(counts), target)) {
      high = counts[i];
    } else {
      low = counts[i];
    }
  }
  if (high > 0) {
    counts[i] = high;
    consider(counts, throughput(counts), best);
  }
}

// Cheaper neighbours of the best while one reaches the target, the cheapest first: a node fewer;
// a node traded for as many cheaper ones as cost less, in a zone the cluster has (another GPU
// type beside the first, two small nodes for a large one); an offer's nodes moved to the same
// node in a zone where it is cheaper.
void CapacitySearch::cheaper_neighbours(double target, std::optional<CapacityPoint>& best) {
  const std::size_t offers = market_.offers.size();
  for (bool moved = best.has_value(); moved && !deadline_.passed();) {
    moved = false;
    const Counts at = best->counts;
    std::set<std::string> zones;
    for (std::size_t i = 0; i < offers; ++i) {
      if (at[i] + market_.offers[i].existing > 0) zones.insert(market_.offers[i].node.zone);
    }
    std::vector<Counts> next;
    for (std::size_t i = 0; i < offers; ++i) {
      if (at[i] == 0) continue;
      const Offer& from = market_.offers[i];
      next.push_back(at);
      --next.back()[i];
      for (std::size_t j = 0; j < offers; ++j) {
        const Offer& to = market_.offers[j];
        if (j == i || at[j] == to.max_new || !(to.price < from.price)) continue;
        if (zones.count(to.node.zone) > 0) {
          const int most = to.price > 0 ? static_cast<int>(std::ceil(from.price / to.price)) - 1 : 1;
          next.push_back(at);
          --next.back()[i];
          next.back()[j] += std::min(std::max(most, 1), to.max_new - at[j]);
        }
        const bool same_node = to.node.gpu == from.node.gpu && to.node.gpus_per_node == from.node.gpus_per_node &&
                               to.node.nic_bandwidth == from.node.nic_bandwidth &&
                               to.node.intra_node_link == from.node.intra_node_link;
        if (same_node && to.node.zone != from.node.zone && at[j] + at[i] <= to.max_new) {
          next.push_back(at);
          next.back()[j] += at[i];
          next.back()[i] = 0;
        }
      }
    }
    std::stable_sort(next.begin(), next.end(), [&](const Counts& a, const Counts& b) {
      return rent_per_hour(market_, a) < rent_per_hour(market_, b);
    });
    for (const Counts& counts : next) {
      if (deadline_.passed()) break;
      if (!has_nodes(market_, counts) || !cheaper(rent_per_hour(market_, counts), best->usd_per_hour)) continue;
      if (market_gpus(market_, counts) > max_bound_gpus_) continue;
      const double samples_per_second = throughput(counts);
      if (reaches(samples_per_second, target)) {
        consider(counts, samples_per_second, best);
        moved = true;
        break;
      }
    }
  }
}

// Branch and bound over boxes of counts, the cheapest lower corner first: the least a cluster
// reaching the target costs when the deadline stopped it, nullopt when it ran to its end.
std::optional<double> CapacitySearch::branch_and_bound(double target, std::optional<CapacityPoint>& best) {
  const std::size_t offers = market_.offers.size();
  struct Box {
    Counts lo, hi;
    double usd = 0;  // the lower corner's rent
    long long order = 0;
  };
  const auto later = [](const Box& a, const Box& b) {
    if (a.usd != b.usd) return a.usd > b.usd;
    return a.order > b.order;
  };
  Counts all(offers, 0);
  for (std::size_t i = 0; i < offers; ++i) all[i] = market_.offers[i].max_new;
  std::priority_queue<Box, std::vector<Box>, decltype(later)> boxes(later);
  long long order = 0;
  boxes.push(Box{Counts(offers, 0), all, 0, order++});
  while (!boxes.empty()) {
    Box box = boxes.top();
    if (best && cheaper(best->usd_per_hour, box.usd)) break;
    if (deadline_.passed()) return box.usd;
    boxes.pop();
    if (best) {  // no cluster dearer than the best so far
      for (std::size_t i = 0; i < offers; ++i) {
        const double price = market_.offers[i].price;
        if (price <= 0) continue;
        const double room = std::floor((best->usd_per_hour - box.usd) / price + 1e-9);
        if (room < box.hi[i] - box.lo[i]) box.hi[i] = box.lo[i] + static_cast<int>(std::max(0.0, room));
      }
    }
    const double at_lo = throughput(box.lo);
    if (reaches(at_lo, target)) {  // the rest of the box costs more
      consider(box.lo, at_lo, best);
      continue;
    }
    if (box.lo == box.hi) continue;
    // The upper corner, planned where it is small enough to be worth it (one far larger than
    // the best cluster so far reaches the target all but always, and takes long to plan).
    const long long hi_gpus = market_gpus(market_, box.hi);
    const bool worth = hi_gpus <= max_bound_gpus_ && (!best || hi_gpus <= 2 * market_gpus(market_, best->counts));
    if (worth && !reaches(throughput(box.hi), target)) continue;
    // Split the widest side, in dollars.
    std::size_t side = 0;
    double widest = -1;
    for (std::size_t i = 0; i < offers; ++i) {
      const double width = (box.hi[i] - box.lo[i]) * std::max(market_.offers[i].price, 1e-9);
      if (box.hi[i] > box.lo[i] && width > widest) {
        widest = width;
        side = i;
      }
    }
    const int middle = box.lo[side] + (box.hi[side] - box.lo[side]) / 2;
    Box low{box.lo, box.hi, box.usd, order++};
    low.hi[side] = middle;
    Box high{box.lo, box.hi, 0, order++};
    high.lo[side] = middle + 1;
    high.usd = rent_per_hour(market_, high.lo);
    boxes.push(std::move(low));
    boxes.push(std::move(high));
  }
  return std::nullopt;
}

CapacityResult CapacitySearch::cheapest(double target) {
  // A first answer to bound the search by, then the branch and bound.
  std::optional<CapacityPoint> best;
  for (std::size_t i = 0; i < market_.offers.size() && !deadline_.passed(); ++i) offer_alone(i, target, best);
  cheaper_neighbours(target, best);
  CapacityResult result;
  if (const std::optional<double> left = branch_and_bound(target, best)) {
    result.proven = false;
    result.lower_bound = *left;
  } else {
    result.lower_bound = best ? best->usd_per_hour : kInfinity;
  }
  result.cheapest = best;
  result.fastest = fastest_;
  result.planned = planned_;
  return result;
}

std::vector<CapacityPoint> CapacitySearch::front(double target, bool* proven) {
  std::vector<CapacityPoint> points;
  *proven = true;
  double at = kAnyPlan;
  while (true) {
    const CapacityResult step = cheapest(at);
    *proven = *proven && step.proven;
    if (!step.cheapest) break;
    points.push_back(*step.cheapest);
    if (reaches(step.cheapest->samples_per_second, target) || !step.proven) break;
    at = next_target(step.cheapest->samples_per_second);
  }
  return points;
}

ExhaustiveCapacity exhaustive_capacity(const Market& market, const Oracle& oracle, double target) {
  std::vector<CapacityPoint> all;
  Counts counts(market.offers.size(), 0);
  while (true) {
    if (has_nodes(market, counts)) all.push_back({counts, rent_per_hour(market, counts), oracle(counts)});
    std::size_t i = 0;
    while (i < counts.size() && counts[i] == market.offers[i].max_new) counts[i++] = 0;
    if (i == counts.size()) break;
    ++counts[i];
  }
  ExhaustiveCapacity out;
  out.result.planned = static_cast<long long>(all.size());
  // The cheapest reaching `at`, and of those the fastest (the first in counting order of ties).
  const auto cheapest = [&](double at) {
    std::optional<CapacityPoint> best;
    for (const CapacityPoint& p : all) {
      if (reaches(p.samples_per_second, at) && (!best || better_point(p, *best))) best = p;
    }
    return best;
  };
  out.result.cheapest = cheapest(target);
  out.result.lower_bound = out.result.cheapest ? out.result.cheapest->usd_per_hour : kInfinity;
  for (const CapacityPoint& p : all) {
    if (p.samples_per_second > 0 && (!out.result.fastest || p.samples_per_second > out.result.fastest->samples_per_second))
      out.result.fastest = p;
  }
  for (double at = kAnyPlan;;) {
    const std::optional<CapacityPoint> point = cheapest(at);
    if (!point) break;
    out.front.push_back(*point);
    if (reaches(point->samples_per_second, target)) break;
    at = next_target(point->samples_per_second);
  }
  return out;
}

std::string gpus_text(const Market& market, const Counts& counts) {
  std::vector<std::pair<std::string, long long>> types;  // in order of first offer
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const Offer& offer = market.offers[i];
    const long long gpus = static_cast<long long>(offer.existing + counts[i]) * offer.node.gpus_per_node;
    if (gpus == 0) continue;
    const auto known = std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.first == offer.node.gpu; });
    if (known == types.end()) {
      types.emplace_back(offer.node.gpu, gpus);
    } else {
      known->second += gpus;
    }
  }
  std::string out;
  for (const auto& [type, gpus] : types) out += fmt::format("{}{} {}", out.empty() ? "" : " + ", gpus, type);
  return out;
}

namespace {

// "us-east-1a:p4de.24xlarge x2 (+1 paid)" for each offer with nodes, joined by ", ".
std::string nodes_text(const Market& market, const Counts& counts) {
  std::string out;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const Offer& offer = market.offers[i];
    if (offer.existing + counts[i] == 0) continue;
    out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", offer.what, counts[i]);
    if (offer.existing > 0) out += fmt::format(" (+{} paid)", offer.existing);
  }
  return out;
}

// USD per 1,000 samples at the cluster's rent; nullopt without a plan.
std::optional<double> usd_per_1k_samples(const CapacityPoint& p) {
  if (p.samples_per_second <= 0) return std::nullopt;
  return p.usd_per_hour / core::kHour * 1000 / p.samples_per_second;
}

std::string usd_per_1k(const CapacityPoint& p) {
  const std::optional<double> usd = usd_per_1k_samples(p);
  return usd ? fmt::format("{:.3f}", *usd) : "-";
}

}  // namespace

std::string format_capacity(const Market& market, const CapacityReport& report) {
  const CapacityResult& r = report.result;
  std::string out = fmt::format("Capacity: market {}, workload {}, target {:.4g} samples/s ({} planner)\n",
                                core::quoted(market.name), core::quoted(report.workload), report.target, report.planner);
  if (r.cheapest) {
    const CapacityPoint& p = *r.cheapest;
    out += fmt::format("\n{:<44} {:>7} {:>5} {:>5} {:>10} {:>10}\n", "offer", "rented", "of", "paid", "$/node-h", "$/h");
    for (std::size_t i = 0; i < market.offers.size(); ++i) {
      const Offer& offer = market.offers[i];
      if (offer.existing + p.counts[i] == 0) continue;
      out += fmt::format("{:<44} {:>7} {:>5} {:>5} {:>10.2f} {:>10.2f}\n", offer.what, p.counts[i], offer.max_new,
                         offer.existing, offer.price, offer.price * p.counts[i]);
    }
    out += fmt::format("\nThe cheapest cluster reaching the target: {} GPUs ({}), ${:.2f}/h rented, {:.4g} samples/s, "
                       "${} per 1k samples\n",
                       market_gpus(market, p.counts), gpus_text(market, p.counts), p.usd_per_hour, p.samples_per_second,
                       usd_per_1k(p));
  }
  if (r.proven) {
    out += fmt::format("Search: {} clusters planned in {:.1f} s; no cheaper cluster reaches the target\n", r.planned,
                       report.seconds);
  } else {
    out += fmt::format("Search: {} clusters planned in {:.1f} s, stopped by its time limit; a cluster reaching the "
                       "target costs at least ${:.2f}/h",
                       r.planned, report.seconds, r.lower_bound);
    if (r.cheapest && r.cheapest->usd_per_hour > 0) {
      out += fmt::format(" ({:.1f}% below this one)", 100 * (1 - r.lower_bound / r.cheapest->usd_per_hour));
    }
    out += "\n";
  }
  if (report.pareto) {
    out += fmt::format("\nThe front of throughput against price ({} cluster{}, cheapest first):\n", report.front.size(),
                       report.front.size() == 1 ? "" : "s");
    out += fmt::format("{:>10} {:>12} {:>10}  {}\n", "$/h", "samples/s", "$ per 1k", "nodes");
    for (const CapacityPoint& p : report.front) {
      out += fmt::format("{:>10.2f} {:>12.4g} {:>10}  {}\n", p.usd_per_hour, p.samples_per_second, usd_per_1k(p),
                         nodes_text(market, p.counts));
    }
  }
  return out;
}

std::string capacity_csv(const Market& market, const std::vector<CapacityPoint>& points, double target) {
  std::string out = "usd_per_hour,samples_per_second,usd_per_1k_samples,gpus,reaches_target";
  for (const Offer& offer : market.offers) out += fmt::format(",\"{}\"", offer.what);
  out += "\n";
  for (const CapacityPoint& p : points) {
    const std::optional<double> per_1k = usd_per_1k_samples(p);
    out += fmt::format("{:.12g},{:.12g},{},{},{}", p.usd_per_hour, p.samples_per_second,
                       per_1k ? fmt::format("{:.12g}", *per_1k) : "",
                       market_gpus(market, p.counts), reaches(p.samples_per_second, target) ? 1 : 0);
    for (int count : p.counts) out += fmt::format(",{}", count);
    out += "\n";
  }
  return out;
}

}  // namespace hetrl::planner
