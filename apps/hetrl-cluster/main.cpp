// hetrl-cluster: build a cluster description from flags, validate one, show one, or list the
// catalogue. With -o the cluster is written to a file and its table printed; without, the
// JSON goes to stdout.

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "common/tool.h"
#include "core/error.h"
#include "core/version.h"
#include "hw/cluster_report.h"
#include "io/catalog_io.h"
#include "io/cluster_io.h"
#include "io/cluster_specs.h"
#include "io/files.h"

namespace {

using namespace hetrl;

constexpr const char* kExamples = R"(Examples:
  hetrl-cluster --node us-east-1a:2x8xA100-SXM-80G --preset-node us-west-2a:4xg6e.48xlarge \
                --link us-east-1a,us-west-2a:gbps=10,latency_ms=30 -o cluster.json
  hetrl-cluster --preset-node us-east-1a:2xp4de.24xlarge --from-profile a100.json -o cluster.json
  hetrl-cluster validate cluster.json
  hetrl-cluster show cluster.json      (no file: the embedded default cluster)
  hetrl-cluster catalog)";

template <class Field>
struct SpecFlag {
  const char* name;
  Field io::ClusterSpecs::*field;
  const char* help;
};

const SpecFlag<std::vector<std::string>> kListFlags[] = {
    {"--node", &io::ClusterSpecs::nodes,
     "Nodes: ZONE:[NODES x]GPUS x GPU_TYPE[:nic_gbps=N,link=NAME,price_per_hour_usd=N]"},
    {"--preset-node", &io::ClusterSpecs::preset_nodes,
     "Nodes of a cloud instance type: ZONE:[NODES x]INSTANCE[:key=value,...]"},
    {"--link", &io::ClusterSpecs::links,
     "A link between two zones: ZONE,ZONE:gbps=G,latency_ms=L or ZONE,ZONE:PRESET"},
    {"--region", &io::ClusterSpecs::regions, "Put zones in a region: REGION=ZONE,ZONE (default: from the zone's name)"},
    {"--from-profile", &io::ClusterSpecs::profiles,
     "A measured profile (hetrl.profile/v1 or v2): replaces the datasheet figures of its GPU type, or defines the type of a device the catalogue lacks"},
    {"--gpu-price", &io::ClusterSpecs::prices, "A GPU type's price: GPU_TYPE=USD_PER_GPU_HOUR"},
};

const SpecFlag<std::string> kNetworkFlags[] = {
    {"--intra-zone", &io::ClusterSpecs::intra_zone,
     "Network inside a zone: gbps=G,latency_ms=L or a preset (default same-zone)"},
    {"--cross-zone", &io::ClusterSpecs::cross_zone, "Default between zones of a region (default preset cross-zone)"},
    {"--cross-region", &io::ClusterSpecs::cross_region, "Default between regions (default preset cross-region)"},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Build, validate and show hetrl cluster descriptions (hetrl.cluster/v1).",
               "hetrl-cluster"};
  app.set_version_flag("--version", std::string(core::kVersion));
  app.footer(kExamples);

  io::ClusterSpecs flags;
  std::string output;
  std::vector<CLI::Option*> build_options;
  for (const auto& [name, field, help] : kListFlags) build_options.push_back(app.add_option(name, flags.*field, help));
  for (const auto& [name, field, help] : kNetworkFlags) build_options.push_back(app.add_option(name, flags.*field, help));
  build_options.push_back(app.add_option("--name", flags.name, "The cluster's name")->capture_default_str());
  build_options.push_back(app.add_option("-o,--output", output, "Write the cluster here (default: JSON to stdout)"));

  CLI::App* validate = app.add_subcommand("validate", "Check a cluster file; exit 0 when it is valid");
  std::string validate_file;
  validate->add_option("file", validate_file, "The cluster file")->required();
  CLI::App* show = app.add_subcommand("show", "Show a cluster as a table of nodes, GPUs and links");
  std::string show_file;
  show->add_option("file", show_file, "The cluster file (default: the embedded default cluster)");
  CLI::App* catalog = app.add_subcommand(
      "catalog", "List the known GPU types, instance presets and network presets");
  app.require_subcommand(0, 1);

  return apps::run_tool(app, argc, argv, [&] {
    const bool building = std::any_of(build_options.begin(), build_options.end(),
                                      [](const CLI::Option* o) { return o->count() > 0; });
    const bool subcommand = !app.get_subcommands().empty();
    if (building && subcommand) {
      apps::usage_error(fmt::format("the build flags do not apply to '{}'",
                                    app.get_subcommands().front()->get_name()));
    }
    const io::Catalogs& catalogs = io::builtin_catalogs();
    if (validate->parsed()) {
      const hw::Cluster cluster = io::read_cluster(validate_file, catalogs.hardware);
      fmt::print("{}: valid hetrl.cluster/v1, {}\n", validate_file, hw::cluster_summary(cluster));
      return apps::kExitOk;
    }
    if (show->parsed()) {
      const hw::Cluster cluster =
          show_file.empty()
              ? io::parse_cluster(io::builtin_file("default_cluster.json"),
                                  "default_cluster.json (embedded)", catalogs.hardware)
              : io::read_cluster(show_file, catalogs.hardware);
      fmt::print("{}", hw::format_cluster_table(cluster));
      return apps::kExitOk;
    }
    if (catalog->parsed()) {
      fmt::print("{}", hw::format_catalog(catalogs.hardware));
      return apps::kExitOk;
    }
    if (!building) {
      fmt::print("{}", app.help());
      return apps::kExitOk;
    }
    if (output == io::kStdout) output.clear();  // the JSON goes to standard output without -o too
    io::check_outputs(std::vector<std::string>{output}, flags.profiles);
    const hw::Cluster cluster = io::build_cluster(flags, catalogs);
    const std::string json = io::cluster_to_json(cluster);
    if (output.empty()) {
      fmt::print("{}", json);
    } else {
      io::write_file_atomic(output, json);
      fmt::print("wrote {}\n\n{}", output, hw::format_cluster_table(cluster));
    }
    return apps::kExitOk;
  });
}
