// Replays inputs through a fuzz target's loader without libFuzzer, in every build: the seeds
// and the inputs that once crashed a loader (tests/fuzz/regressions) as ctest tests.
// Usage: fuzz_replay TARGET FILE_OR_FOLDER...
// Exits 0 when every input loads or is refused with core::InputError; otherwise prints the
// input and the exception and exits 1.

#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "targets.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: fuzz_replay TARGET FILE_OR_FOLDER...\n";
    return 2;
  }
  const std::string target = argv[1];
  std::vector<std::filesystem::path> inputs;
  for (int i = 2; i < argc; ++i) {
    const std::filesystem::path path = argv[i];
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else {
      inputs.push_back(path);
    }
  }
  if (inputs.empty()) {
    std::cerr << "fuzz_replay: no inputs\n";
    return 2;
  }
  for (const std::filesystem::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "fuzz_replay: cannot read " << path.string() << "\n";
      return 2;
    }
    std::ostringstream text;
    text << in.rdbuf();
    try {
      hetrl::fuzz::load(target, text.str());
    } catch (const std::exception& e) {
      std::cerr << "fuzz_replay: " << target << ": " << path.string() << ": " << e.what() << "\n";
      return 1;
    }
  }
  std::cout << "fuzz_replay: " << target << ": " << inputs.size() << " inputs\n";
  return 0;
}
