#pragma once
// The loaders the fuzz targets feed (targets.cpp has what each takes): each input must load or
// throw core::InputError (the tools' exit 2); anything else is a bug the fuzzer reports.

#include <string_view>
#include <vector>

namespace hetrl::fuzz {

// cluster, workload, plan, profile, trace, models, specs.
const std::vector<std::string_view>& targets();

// Feeds `text` to the target's loader; returns normally when it loads or throws
// core::InputError, and lets any other exception through. Throws std::invalid_argument for an
// unknown target.
void load(std::string_view target, std::string_view text);

}  // namespace hetrl::fuzz
