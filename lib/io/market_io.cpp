#include "io/market_io.h"

#include <fmt/format.h>

#include <set>

#include "core/error.h"
#include "io/files.h"
#include "io/json_reader.h"
#include "io/json_writer.h"

namespace hetrl::io {

namespace {

using detail::ObjectReader;
using detail::Range;

// The most nodes an offer may have, rented and already paid for.
constexpr long long kMaxOfferNodes = 100000;

planner::Offer read_offer(ObjectReader& reader, const hw::Catalog& catalog) {
  planner::Offer offer;
  const bool instance = reader.has("instance");
  if (instance == reader.has("node")) {
    throw core::InputError(core::located(reader.where(), "an offer gives either \"instance\" or \"node\""));
  }
  const std::string key = instance ? "instance" : "node";
  offer.what = reader.string(key);
  try {
    offer.node = instance ? hw::parse_preset_node_spec(offer.what, catalog) : hw::parse_node_spec(offer.what, catalog);
  } catch (const core::InputError& e) {
    reader.fail(key, e.what());
  }
  if (offer.node.node_count != 1) {
    reader.fail(key, fmt::format("an offer is one node (max_nodes says how many), found {} nodes", offer.node.node_count));
  }
  offer.max_new = static_cast<int>(reader.optional_integer("max_nodes", 0, kMaxOfferNodes).value_or(0));
  offer.existing = static_cast<int>(reader.optional_integer("existing_nodes", 0, kMaxOfferNodes).value_or(0));
  std::optional<double> price = reader.optional_number("price_per_hour_usd", Range::kNonNegative);
  reader.finish();
  if (offer.max_new + offer.existing == 0) reader.fail("max_nodes", "an offer needs max_nodes or existing_nodes above 0");
  if (offer.max_new + static_cast<long long>(offer.existing) > kMaxOfferNodes) {
    reader.fail("max_nodes", fmt::format("an offer has at most {} nodes in all", kMaxOfferNodes));
  }
  if (!price) price = offer.node.price_per_hour;
  if (!price) {
    const hw::GpuSpec* gpu = catalog.find_gpu(offer.node.gpu);
    if (gpu != nullptr && gpu->price_per_hour) price = *gpu->price_per_hour * offer.node.gpus_per_node;
  }
  if (!price && offer.max_new > 0) {
    reader.fail("price_per_hour_usd", fmt::format("no price for a node of {}: give price_per_hour_usd", offer.node.gpu));
  }
  offer.price = price.value_or(0);
  return offer;
}

}  // namespace

planner::Market parse_market(std::string_view text, std::string_view file, const hw::Catalog& catalog) {
  const detail::Json json = detail::parse_json(text, file);
  ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.market/v1");
  planner::Market market;
  market.name = root.optional_string("name").value_or("market");
  market.network = hw::default_build_params(catalog);
  std::set<std::string> zones;
  for (ObjectReader& offer : root.object_array("offers", false)) {
    market.offers.push_back(read_offer(offer, catalog));
    zones.insert(market.offers.back().node.zone);
  }
  if (std::optional<ObjectReader> network = root.optional_object("network")) {
    const auto zone_known = [&](std::string_view key, const std::string& zone) {
      if (zones.count(zone) == 0) {
        network->fail(key, fmt::format("zone {} has no offer{}", core::quoted(zone),
                                       core::did_you_mean(zone, {zones.begin(), zones.end()})));
      }
    };
    const auto parse = [&](std::string_view key, auto&& f) {
      try {
        return f();
      } catch (const core::InputError& e) {
        network->fail(key, e.what());
      }
    };
    const auto specs = [&](std::string_view key) {
      return network->has(key) ? network->string_array(key) : std::vector<std::string>{};
    };
    for (const std::string& spec : specs("links")) {
      market.network.links.push_back(parse("links", [&] { return hw::parse_link_spec(spec, catalog); }));
      zone_known("links", market.network.links.back().zone_a);
      zone_known("links", market.network.links.back().zone_b);
    }
    for (const std::string& spec : specs("regions")) {
      market.network.regions.push_back(parse("regions", [&] { return hw::parse_region_spec(spec); }));
      for (const std::string& zone : market.network.regions.back().zones) zone_known("regions", zone);
    }
    struct Default {
      const char* key;
      const char* flag;  // hetrl-cluster's, which takes the same spec
      hw::LinkSpec* link;
    };
    const Default defaults[] = {{"intra_zone", "--intra-zone", &market.network.intra_zone},
                                {"cross_zone", "--cross-zone", &market.network.cross_zone},
                                {"cross_region", "--cross-region", &market.network.cross_region}};
    for (const Default& d : defaults) {
      if (std::optional<std::string> spec = network->optional_string(d.key)) {
        *d.link = parse(d.key, [&] { return hw::parse_network_spec(*spec, catalog, d.flag); });
      }
    }
    network->finish();
  }
  root.finish();
  // Every cluster of the market must build: the whole market once, to say now what is wrong.
  planner::Counts all;
  for (const planner::Offer& offer : market.offers) all.push_back(offer.max_new);
  try {
    planner::market_cluster(market, all, catalog, market.name);
  } catch (const core::InputError& e) {
    throw core::InputError(core::located(file, e.what()));
  }
  return market;
}

namespace {

detail::OrderedJson point_json(const planner::Market& market, const planner::CapacityPoint& point, double target) {
  detail::OrderedJson nodes = detail::OrderedJson::array();
  for (std::size_t i = 0; i < market.offers.size(); ++i) {
    const planner::Offer& offer = market.offers[i];
    if (offer.existing + point.counts[i] == 0) continue;
    nodes.push_back({{"offer", offer.what}, {"rented", point.counts[i]}, {"paid", offer.existing}});
  }
  detail::OrderedJson out;
  out["nodes"] = std::move(nodes);
  out["gpus"] = planner::market_gpus(market, point.counts);
  out["usd_per_hour"] = detail::file_units(point.usd_per_hour);
  out["samples_per_second"] = detail::file_units(point.samples_per_second);
  out["reaches_target"] = planner::reaches(point.samples_per_second, target);
  return out;
}

}  // namespace

std::string capacity_json(const planner::Market& market, const planner::CapacityReport& report,
                          const std::string& market_hash, const std::string& workload_hash) {
  detail::OrderedJson out;
  out["schema"] = "hetrl.capacity/v1";
  detail::write_provenance(out, {"hetrl-plan", HETRL_VERSION, {{"market", market_hash}, {"workload", workload_hash}}});
  out["market"] = market.name;
  out["workload"] = report.workload;
  out["planner"] = report.planner;
  out["target_samples_per_second"] = detail::file_units(report.target);
  const planner::CapacityResult& r = report.result;
  out["proven"] = r.proven;
  out["lower_bound_usd_per_hour"] = r.cheapest || !r.proven ? detail::OrderedJson(detail::file_units(r.lower_bound))
                                                            : detail::OrderedJson(nullptr);
  out["clusters_planned"] = r.planned;
  out["search_seconds"] = detail::file_units(report.seconds);
  out["cheapest"] = r.cheapest ? point_json(market, *r.cheapest, report.target) : detail::OrderedJson(nullptr);
  if (report.pareto) {
    detail::OrderedJson front = detail::OrderedJson::array();
    for (const planner::CapacityPoint& p : report.front) front.push_back(point_json(market, p, report.target));
    out["front"] = std::move(front);
  }
  return detail::dump(out);
}

}  // namespace hetrl::io
