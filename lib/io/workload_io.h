#pragma once
// The workload file (hetrl.workload/v1):
//
//   {"schema": "hetrl.workload/v1", "name": "...", "algorithm": "ppo",
//    "models": {"actor": "Qwen2.5-7B", "critic": "Qwen2.5-7B", "reference": "Qwen2.5-7B",
//               "reward": "rule"},
//    "prompts_per_iteration": 512, "samples_per_prompt": 1, "prompt_length_tokens": 1024,
//    "response_length": {"distribution": "fixed", "tokens": 1024}
//                     | {"distribution": "lognormal", "mean_tokens": 900, "max_tokens": 4096,
//                        "sigma": 0.8}
//                     | {"distribution": "trace", "file": "traces/x.csv", "column": "tokens"},
//    "mini_batches": 4, "epochs": 1, "mode": "sync" | "async", "max_staleness": 1}
//
// A role left out of "models" has no model (an optional reference, or GRPO's critic);
// "rule" stands for a reward computed on the CPU. A trace file path is relative to the
// workload file's folder.
//
// Response-length traces (CSV): one length per row, or a named column of a file with a
// header row. Blank lines and lines starting with '#' are skipped.

#include <string>
#include <string_view>
#include <vector>

#include "workload/workload.h"

namespace hetrl::io {

struct LoadedWorkload {
  std::string name;
  workload::Workload workload;
  // The catalogue's models with those of the workload's model_file, if it names one, added:
  // what the task graph, the cost model and the planners look models up in.
  workload::ModelCatalog models;
  std::string model_file_text;  // the model file as read (empty without one), for the hash
};

// Parses and validates. `base_dir` resolves relative trace paths.
LoadedWorkload parse_workload(std::string_view text, std::string_view file,
                              const std::string& base_dir,
                              const workload::AlgorithmCatalog& algorithms,
                              const workload::ModelCatalog& models);
LoadedWorkload read_workload(const std::string& path, const workload::AlgorithmCatalog& algorithms,
                             const workload::ModelCatalog& models);

std::vector<int> parse_length_trace(std::string_view text, std::string_view file,
                                    const std::string& column);
std::vector<int> read_length_trace(const std::string& path, const std::string& column);

}  // namespace hetrl::io
