#pragma once
// Reading the catalogues of cost_models/: GPU types and intra-node links (gpus.json), instance
// presets (instances.json), network presets (networks.json), model architectures
// (models.json) and RL algorithms (algorithms.json). The built-in ones are embedded and
// parsed once; the parse functions take any text so tests can feed broken catalogues.

#include <string>
#include <string_view>

#include "hw/gpu.h"
#include "workload/algorithm.h"
#include "workload/model.h"

namespace hetrl::io {

struct Catalogs {
  hw::Catalog hardware;
  workload::ModelCatalog models;
  workload::AlgorithmCatalog algorithms;
};

hw::Catalog parse_hardware_catalog(std::string_view gpus_json, std::string_view instances_json,
                                   std::string_view networks_json);
// A model catalogue (hetrl.models/v1). `user`: a file a workload names, whose models need no
// published count or source.
workload::ModelCatalog parse_model_catalog(std::string_view text, std::string_view file, bool user = false);
workload::AlgorithmCatalog parse_algorithm_catalog(std::string_view text, std::string_view file);

// The embedded catalogues, parsed on first use.
const Catalogs& builtin_catalogs();

// The text of an embedded file under cost_models/; a missing name is a bug.
std::string_view builtin_file(std::string_view name);

}  // namespace hetrl::io
