#include "io/files.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <utility>
#include <vector>

#include "core/error.h"

namespace hetrl::io {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw core::InputError(fmt::format("cannot read {}: it is a directory", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw core::InputError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  // In pieces, so that an endless input (/dev/zero, a pipe that never ends) stops at the limit
  // instead of at the end of memory.
  std::string text;
  std::vector<char> piece(1 << 20);
  while (in) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    text.append(piece.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxInputBytes) {
      throw core::InputError(fmt::format("cannot read {}: larger than {} MiB, the most an input file may hold", path,
                                         kMaxInputBytes >> 20));
    }
  }
  if (in.bad()) throw core::InputError(fmt::format("cannot read {}: read error", path));
  return text;
}

namespace {

// Where an output goes: through symbolic links (even one to a file not yet there) to the file
// they name, so that a link stays a link.
std::filesystem::path resolved(const std::string& path) {
  std::filesystem::path target(path);
  std::error_code ec;
  for (int links = 0; links < 40 && std::filesystem::is_symlink(std::filesystem::symlink_status(target, ec)); ++links) {
    const std::filesystem::path next = std::filesystem::read_symlink(target, ec);
    if (ec) break;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(target, ec);
  return ec ? target : canonical;
}

// An existing output that is neither a regular file nor a folder (a device such as /dev/null,
// a pipe): written in place, never replaced by a file of our own.
bool special(const std::filesystem::path& target) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(target, ec);
  return !ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status) &&
         !std::filesystem::is_directory(status);
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::filesystem::path target = resolved(path);
  if (special(target)) {
    std::ofstream out(target, std::ios::binary);
    if (out) out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (out) out.flush();
    if (!out) throw core::JobError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    return;
  }
  std::filesystem::path temp = target;
  temp += fmt::format(".tmp{}", static_cast<long>(::getpid()));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw core::JobError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw core::JobError(fmt::format("cannot write {}: write error", path));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, target, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw core::JobError(fmt::format("cannot write {}: {}", path, ec.message()));
  }
}

void check_writable(const std::string& path) {
  const std::filesystem::path target = resolved(path);
  if (special(target)) {
    if (::access(target.c_str(), W_OK) != 0) {
      throw core::JobError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    return;
  }
  std::filesystem::path folder = target.parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  if (std::filesystem::is_directory(target, ec)) {
    throw core::JobError(fmt::format("cannot write {}: it is a directory", path));
  }
  if (!std::filesystem::is_directory(folder, ec)) {
    throw core::JobError(fmt::format("cannot write {}: no folder {}", path, folder.string()));
  }
  if (::access(folder.c_str(), W_OK) != 0) {
    throw core::JobError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
}

void check_outputs(std::span<const std::string> outputs, std::span<const std::string> inputs) {
  std::vector<std::pair<std::string, std::filesystem::path>> seen;  // outputs so far, resolved
  for (const std::string& output : outputs) {
    if (output.empty()) continue;
    check_writable(output);
    const std::filesystem::path target = resolved(output);
    if (special(target)) continue;  // a device or pipe: written in place, reads nothing back
    for (const std::string& input : inputs) {
      std::error_code ec;
      if (!input.empty() && std::filesystem::equivalent(target, input, ec)) {
        throw core::InputError(fmt::format("{} is the input {}: an output never replaces an input", output, input));
      }
    }
    for (const auto& [other, path] : seen) {
      if (path == target) throw core::InputError(fmt::format("{} is given for two outputs (as {} too)", output, other));
    }
    seen.emplace_back(output, target);
  }
}

}  // namespace hetrl::io
