#include "core/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace hetrl::core {
namespace {

// Writes all of `data` to `fd`; false when the reader is gone.
bool write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// The child's side: run the work, send what it returned, leave without running the parent's
// exit handlers or flushing its copies of the parent's buffers.
[[noreturn]] void child(const std::function<std::string()>& work, int fd, bool keep_stdout) {
  if (!keep_stdout) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDOUT_FILENO);
  }
  int code = 0;
  try {
    if (!write_all(fd, work())) code = 2;
  } catch (...) {
    code = 3;
  }
  std::fflush(stdout);
  ::close(fd);
  ::_exit(code);
}

}  // namespace

Isolated run_isolated(const std::function<std::string()>& work, double seconds, bool keep_stdout) {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point start = Steady::now();
  Isolated run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return run;
  // Buffered output would otherwise be written twice, once by each process.
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return run;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(work, fds[1], keep_stdout);
  }
  ::close(fds[1]);
  // The clock counts nanoseconds in 64 bits: a limit past about 292 years would wrap (a limit of
  // 1e10 s ended at once). Ten years is as good as none.
  constexpr double kLongest = 10 * 365.25 * 24 * 3600;
  const double limit = seconds > 0 ? std::min(seconds, kLongest) : 0.0;
  const Steady::time_point deadline =
      start + std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(limit));
  bool timed_out = false;
  char buffer[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline is checked at the top
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of the child's output
    run.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.seconds = std::chrono::duration<double>(Steady::now() - start).count();
  if (timed_out) {
    run.end = Isolated::End::kTimedOut;
    run.output.clear();
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    run.end = Isolated::End::kReturned;
  } else {
    run.end = Isolated::End::kCrashed;
    run.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    run.output.clear();
  }
  return run;
}

std::string describe_end(const Isolated& run) {
  switch (run.end) {
    case Isolated::End::kReturned: return "returned";
    case Isolated::End::kTimedOut: return "still running at the deadline";
    case Isolated::End::kUnavailable: return "no child process could be made";
    case Isolated::End::kCrashed: break;
  }
  if (run.signal != 0) return std::string(::strsignal(run.signal)) + " (signal " + std::to_string(run.signal) + ")";
  return "exit code " + std::to_string(run.exit_code);
}

}  // namespace hetrl::core
