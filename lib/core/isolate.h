#pragma once
// Running a piece of work in a child process, so that a library that may crash or ignore its
// own time limit (CBC: a segmentation fault in its preprocessing, a root LP that runs past
// the limit it was given) cannot take the tool down or hold it past its deadline.

#include <functional>
#include <string>

namespace hetrl::core {

struct Isolated {
  enum class End {
    kReturned,     // the work returned: `output` is what it returned
    kCrashed,      // the child ended without returning: `signal` says how (0: it exited)
    kTimedOut,     // still running at the deadline: it was killed
    kUnavailable,  // no child process could be made: the caller may run the work itself
  };
  End end = End::kUnavailable;
  std::string output;
  int signal = 0;     // kCrashed: the signal that ended the child, or 0
  int exit_code = 0;  // kCrashed without a signal: the child's exit code
  double seconds = 0;  // wall-clock, from the start to the end of the child
};

// Runs `work` in a child process (fork) and waits for what it returns, at most `seconds` of
// wall-clock time. The child shares nothing with the caller afterwards: what it changes in
// memory is lost, and only the returned bytes come back. Its standard output is discarded
// unless `keep_stdout`.
Isolated run_isolated(const std::function<std::string()>& work, double seconds, bool keep_stdout);

// "segmentation fault (signal 11)", "exit code 3": how an isolated child ended, for messages.
std::string describe_end(const Isolated& run);

}  // namespace hetrl::core
