#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/files.h"

using namespace hetrl;
namespace fs = std::filesystem;

namespace {

// A fresh, empty folder for one test.
fs::path fresh_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("hetrl_files_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string contents(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("outputs are committed together: nothing is in place before commit, everything after, no temporary left") {
  const fs::path dir = fresh_folder("commit");
  {
    std::ofstream(dir / "b.json") << "old";
    io::OutputFiles out;
    out.add((dir / "a.json").string(), "first");
    out.add((dir / "b.json").string(), "second");
    CHECK_FALSE(fs::exists(dir / "a.json"));
    CHECK(contents(dir / "b.json") == "old");
    out.commit();
  }
  CHECK(names_in(dir) == std::vector<std::string>{"a.json", "b.json"});
  CHECK(contents(dir / "a.json") == "first");
  CHECK(contents(dir / "b.json") == "second");
  fs::remove_all(dir);
}

TEST_CASE("a failed write leaves none of the run's outputs and no temporary file, and an old file as it was") {
  const fs::path dir = fresh_folder("failed");
  std::ofstream(dir / "kept.json") << "old";
  {
    io::OutputFiles out;
    out.add((dir / "kept.json").string(), "new");
    out.add((dir / "fresh.json").string(), "new");
    try {
      out.add((dir / "missing" / "t.json").string(), "{}");
      FAIL("a folder that is not there was written into");
    } catch (const core::JobError& e) {
      CHECK(std::string(e.what()).find("cannot write " + (dir / "missing" / "t.json").string()) == 0);
    }
  }  // never committed
  CHECK(names_in(dir) == std::vector<std::string>{"kept.json"});
  CHECK(contents(dir / "kept.json") == "old");
  fs::remove_all(dir);
}

TEST_CASE("SIGTERM or SIGINT while outputs wait for their commit removes their temporary files and still ends the process") {
  for (const int signal : {SIGTERM, SIGINT}) {
    const fs::path dir = fresh_folder("signal" + std::to_string(signal));
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::signal(signal, SIG_DFL);  // as in a tool, not the test harness's crash report
      io::OutputFiles out;
      out.add((dir / "a.json").string(), "a");
      out.add((dir / "b.json").string(), "b");
      std::raise(signal);
      ::_exit(0);  // not reached while the signal ends the process
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal);
    CHECK(names_in(dir).empty());
    fs::remove_all(dir);
  }
}

TEST_CASE("a device is written in place: /dev/null stays a device and no temporary file is made beside it") {
  io::OutputFiles out;
  out.add("/dev/null", "nothing");
  out.commit();
  struct stat info {};
  REQUIRE(::stat("/dev/null", &info) == 0);
  CHECK(S_ISCHR(info.st_mode));
  for (const fs::directory_entry& e : fs::directory_iterator("/dev")) {
    CHECK(e.path().filename().string().rfind("null.tmp", 0) != 0);
  }
}

TEST_CASE("one file for two outputs, or an output that is an input, is refused before anything is written") {
  const fs::path dir = fresh_folder("same");
  std::ofstream(dir / "in.json") << "input";
  fs::create_symlink(dir / "in.json", dir / "link.json");
  const std::string in = (dir / "in.json").string();
  const std::vector<std::string> inputs{in};
  CHECK_THROWS_AS(io::check_outputs(std::vector<std::string>{(dir / "link.json").string()}, inputs), core::InputError);
  CHECK_THROWS_AS(io::check_outputs(std::vector<std::string>{"-", "-"}, inputs), core::InputError);
  CHECK_NOTHROW(io::check_outputs(std::vector<std::string>{"-", (dir / "out.json").string()}, inputs));
  CHECK(contents(dir / "in.json") == "input");
  fs::remove_all(dir);
}
