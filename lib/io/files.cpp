#include "io/files.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <signal.h>
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

// Temporary files the signal handler removes: each slot holds a path (malloc'd) or null, and
// the process that made it. Reading a slot and unlink() are async-signal-safe; a process forked
// from this one (the ILP's solver) has the same slots and leaves its parent's files alone.
constexpr int kSlots = 64;
std::atomic<char*> temp_slots[kSlots];
std::atomic<pid_t> slot_owner[kSlots];  // the process that made each one

// What each signal did before (a handler of a test harness, say), restored before the signal is
// raised again.
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction before[std::size(kSignals)];

extern "C" void remove_temps_and_end(int signal) {
  const pid_t self = ::getpid();
  for (int slot = 0; slot < kSlots; ++slot) {
    const char* path = temp_slots[slot].load();
    if (path != nullptr && slot_owner[slot].load() == self) ::unlink(path);
  }
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    if (kSignals[i] == signal) ::sigaction(signal, &before[i], nullptr);
  }
  ::raise(signal);
}

// The handler is installed at each output, for the signals that end a process and were not
// set to be ignored (nohup), where something else has not taken its place since.
void install_handler() {
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction now {};
    if (::sigaction(kSignals[i], nullptr, &now) != 0 || now.sa_handler == SIG_IGN ||
        now.sa_handler == remove_temps_and_end) {
      continue;
    }
    before[i] = now;
    struct sigaction action {};
    action.sa_handler = remove_temps_and_end;
    sigemptyset(&action.sa_mask);
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

int remember(const std::string& temp) {
  install_handler();
  for (int slot = 0; slot < kSlots; ++slot) {
    char* expected = nullptr;
    char* copy = ::strdup(temp.c_str());
    if (temp_slots[slot].compare_exchange_strong(expected, copy)) {
      slot_owner[slot] = ::getpid();
      return slot;
    }
    std::free(copy);
  }
  return -1;  // all taken: removed on failure, but not on a signal
}

void forget(int slot) {
  if (slot >= 0) std::free(temp_slots[slot].exchange(nullptr));
}

void write_in_place(const std::string& path, const std::string& target, std::string_view content) {
  if (path == kStdout) {
    std::fflush(stdout);
    if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() || std::fflush(stdout) != 0) {
      throw core::JobError(fmt::format("cannot write to standard output: {}", std::strerror(errno)));
    }
    return;
  }
  std::ofstream out(target, std::ios::binary);
  if (out) out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (out) out.flush();
  if (!out) throw core::JobError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

}  // namespace

OutputFiles::~OutputFiles() {
  for (Output& out : outputs_) discard(out);
}

void OutputFiles::discard(Output& out) {
  if (!out.temp.empty()) {
    std::error_code ignored;
    std::filesystem::remove(out.temp, ignored);
  }
  forget(out.slot);
  out.slot = -1;
  out.temp.clear();
}

void OutputFiles::add(const std::string& path, std::string_view content) {
  Output out;
  out.path = path;
  if (path != kStdout) out.target = resolved(path).string();
  if (path == kStdout || special(out.target)) {
    out.content = content;
    outputs_.push_back(std::move(out));
    return;
  }
  out.temp = out.target + fmt::format(".tmp{}", static_cast<long>(::getpid()));
  out.slot = remember(out.temp);
  std::ofstream file(out.temp, std::ios::binary | std::ios::trunc);
  if (!file) {
    const int error = errno;
    discard(out);
    throw core::JobError(fmt::format("cannot write {}: {}", path, std::strerror(error)));
  }
  file.write(content.data(), static_cast<std::streamsize>(content.size()));
  file.close();
  if (!file) {
    discard(out);
    throw core::JobError(fmt::format("cannot write {}: write error", path));
  }
  outputs_.push_back(std::move(out));
}

void OutputFiles::commit() {
  // Devices, pipes and standard output first: they cannot be taken back, and a failure there
  // must not leave the files renamed.
  for (const Output& out : outputs_) {
    if (out.temp.empty()) write_in_place(out.path, out.target, out.content);
  }
  for (Output& out : outputs_) {
    if (out.temp.empty()) continue;
    std::error_code ec;
    std::filesystem::rename(out.temp, out.target, ec);
    if (ec) throw core::JobError(fmt::format("cannot write {}: {}", out.path, ec.message()));
    forget(out.slot);
    out.slot = -1;
    out.temp.clear();
  }
  outputs_.clear();
}

void write_file_atomic(const std::string& path, std::string_view content) {
  OutputFiles out;
  out.add(path, content);
  out.commit();
}

void check_writable(const std::string& path) {
  if (path == kStdout) return;
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
    const bool to_stdout = output == kStdout;
    const std::filesystem::path target = to_stdout ? std::filesystem::path(kStdout) : resolved(output);
    if (!to_stdout) {
      if (special(target)) continue;  // a device or pipe: written in place, reads nothing back
      for (const std::string& input : inputs) {
        std::error_code ec;
        if (!input.empty() && std::filesystem::equivalent(target, input, ec)) {
          throw core::InputError(fmt::format("{} is the input {}: an output never replaces an input", output, input));
        }
      }
    }
    for (const auto& [other, path] : seen) {
      if (path != target) continue;
      throw core::InputError(to_stdout ? std::string("standard output (-) is given for two outputs")
                                       : fmt::format("{} is given for two outputs (as {} too)", output, other));
    }
    seen.emplace_back(output, target);
  }
}

}  // namespace hetrl::io
