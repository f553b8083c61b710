#include "io/files.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
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

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::filesystem::path target(path);
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
  const std::filesystem::path target(path);
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

}  // namespace hetrl::io
