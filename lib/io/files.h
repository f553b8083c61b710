#pragma once
// Reading and writing whole files. Writes go to a temporary file in the same folder that is
// renamed over the target, so a failed run never leaves a half-written output, and a run's
// outputs are committed together.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hetrl::io {

// The most an input file may hold: three times a 10-million-row response-length trace (about
// 86 MB), far past any cluster, workload, plan or profile hetrl reads.
inline constexpr std::size_t kMaxInputBytes = std::size_t{256} << 20;

// Throws core::InputError "cannot read FILE: reason", past kMaxInputBytes too.
std::string read_text_file(const std::string& path);

// The path that names standard output as an output.
inline constexpr std::string_view kStdout = "-";

// The files one run writes, committed together: all or none. A regular file is written at
// add() to a temporary file beside it (through symbolic links, beside the file they name) and
// renamed over it at commit(); a device or pipe (/dev/null) and "-" (standard output) are
// written in place at commit(), before the renames. Temporary files are removed when the set
// is destroyed uncommitted, and when SIGINT, SIGTERM or SIGHUP ends the process.
class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();

  // Throws core::JobError "cannot write FILE: reason"; nothing is left of it then.
  void add(const std::string& path, std::string_view content);
  // Throws core::JobError as add() does. Each output is committed once.
  void commit();

 private:
  struct Output {
    std::string path;       // as the user gave it
    std::string target;     // resolved through links
    std::string temp;       // the temporary file; empty for a device, pipe or "-"
    std::string content;    // kept for a device, pipe or "-" only
    int slot = -1;          // where the signal handler finds the temporary file
  };
  void discard(Output& out);
  std::vector<Output> outputs_;
};

// One output, committed at once. Throws core::JobError "cannot write FILE: reason".
void write_file_atomic(const std::string& path, std::string_view content);

// Throws core::JobError "cannot write FILE: reason" when write_file_atomic would fail for want
// of a folder or of permission to write in it: for tools that work long before they write.
void check_writable(const std::string& path);

// Before a run: check_writable for each output, and core::InputError where an output is the
// same file as an input (by device and inode, through links) or as another output. Empty
// paths are skipped.
void check_outputs(std::span<const std::string> outputs, std::span<const std::string> inputs);

}  // namespace hetrl::io
