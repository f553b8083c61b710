#pragma once
// Reading and writing whole files. Writes go to a temporary file in the same folder that is
// renamed over the target, so a failed run never leaves a half-written output.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace hetrl::io {

// The most an input file may hold: three times a 10-million-row response-length trace (about
// 86 MB), far past any cluster, workload, plan or profile hetrl reads.
inline constexpr std::size_t kMaxInputBytes = std::size_t{256} << 20;

// Throws core::InputError "cannot read FILE: reason", past kMaxInputBytes too.
std::string read_text_file(const std::string& path);

// Throws core::JobError "cannot write FILE: reason". Writes through symbolic links to the file
// they name, and into a device or pipe (/dev/null) in place.
void write_file_atomic(const std::string& path, std::string_view content);

// Throws core::JobError "cannot write FILE: reason" when write_file_atomic would fail for want
// of a folder or of permission to write in it: for tools that work long before they write.
void check_writable(const std::string& path);

// Before a run: check_writable for each output, and core::InputError where an output is the
// same file as an input (by device and inode, through links) or as another output. Empty
// paths are skipped.
void check_outputs(std::span<const std::string> outputs, std::span<const std::string> inputs);

}  // namespace hetrl::io
