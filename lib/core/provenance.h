#pragma once
// What made a file: the tool and its version, and content hashes of the inputs it was made
// from. Every file hetrl writes carries one; files written by hand may omit it.

#include <string>
#include <utility>
#include <vector>

namespace hetrl::core {

struct Provenance {
  std::string tool;
  std::string version;
  std::vector<std::pair<std::string, std::string>> inputs;  // name, content hash
};

}  // namespace hetrl::core
