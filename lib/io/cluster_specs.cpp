#include "io/cluster_specs.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/version.h"
#include "hw/cluster_builder.h"
#include "io/files.h"
#include "io/profile_io.h"

namespace hetrl::io {

hw::Cluster build_cluster(const ClusterSpecs& specs, const Catalogs& catalogs) {
  const hw::Catalog& catalog = catalogs.hardware;
  hw::ClusterBuildParams params = hw::default_build_params(catalog);
  params.name = specs.name;
  // Profiles first: one may define a GPU type of its own (a CPU, a GPU the catalogue lacks)
  // that --node then names.
  std::vector<hw::GpuTypeOverride> profiled;
  std::vector<std::pair<std::string, std::string>> profile_inputs;  // after the catalogue's, below
  for (const std::string& path : specs.profiles) {
    const std::string text = read_text_file(path);
    const std::string hash = core::content_hash(text);
    try {
      const hw::GpuProfile profile = parse_profile(text, path);
      profiled.push_back(hw::override_from_profile(profile, catalog, fmt::format("profile {} ({})", path, hash)));
    } catch (const core::InputError& e) {
      throw core::InputError(core::located("--from-profile " + path, e.what()));
    }
    profile_inputs.emplace_back(path, hash);
  }
  std::vector<std::string> new_types;
  for (const hw::GpuTypeOverride& o : profiled) {
    if (!catalog.find_gpu(o.name)) new_types.push_back(o.name);
  }
  for (const std::string& spec : specs.nodes) {
    params.node_groups.push_back(hw::parse_node_spec(spec, catalog, new_types));
  }
  for (const std::string& spec : specs.preset_nodes) {
    params.node_groups.push_back(hw::parse_preset_node_spec(spec, catalog));
  }
  for (const std::string& spec : specs.links) params.links.push_back(hw::parse_link_spec(spec, catalog));
  for (const std::string& spec : specs.regions) params.regions.push_back(hw::parse_region_spec(spec));
  if (!specs.intra_zone.empty()) {
    params.intra_zone = hw::parse_network_spec(specs.intra_zone, catalog, "--intra-zone");
  }
  if (!specs.cross_zone.empty()) {
    params.cross_zone = hw::parse_network_spec(specs.cross_zone, catalog, "--cross-zone");
  }
  if (!specs.cross_region.empty()) {
    params.cross_region = hw::parse_network_spec(specs.cross_region, catalog, "--cross-region");
  }
  params.provenance.tool = "hetrl-cluster";
  params.provenance.version = core::kVersion;
  for (const char* file : {"gpus.json", "instances.json", "networks.json"}) {
    params.provenance.inputs.emplace_back(file, core::content_hash(builtin_file(file)));
  }
  params.provenance.inputs.insert(params.provenance.inputs.end(), profile_inputs.begin(), profile_inputs.end());
  for (const hw::GpuTypeOverride& o : profiled) hw::add_override(params, o);
  for (const std::string& spec : specs.prices) {
    hw::add_override(params, hw::parse_gpu_price_spec(spec, catalog));
  }
  return hw::build_cluster(params, catalog);
}

}  // namespace hetrl::io
