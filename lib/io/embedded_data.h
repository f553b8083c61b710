#pragma once
// The data files under cost_models/, compiled into the library (cmake/embed_files.cmake) so
// every tool carries its catalogues and defaults and runs from any folder.

#include <optional>
#include <string_view>

namespace hetrl::io {

// The text of an embedded file by its name under cost_models/, e.g. "gpus.json".
std::optional<std::string_view> embedded_file(std::string_view name);

}  // namespace hetrl::io
