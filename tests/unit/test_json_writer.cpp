#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "core/error.h"
#include "io/json_writer.h"
#include "io/sim_io.h"
#include "sim/recorder.h"
#include "workload/rl_graph.h"

using namespace hetrl;

namespace {

// What ArrayWriter prints for `elements` under "events", followed by a second key.
std::string streamed(const io::detail::OrderedJson& elements) {
  std::string out = "{\n";
  io::detail::ArrayWriter writer(out, "events");
  for (const io::detail::OrderedJson& e : elements) writer.add(e);
  writer.close();
  return out + ",\n  \"after\": 1\n}\n";
}

}  // namespace

TEST_CASE("an array printed element by element is the text dump() prints for the whole tree") {
  const io::detail::OrderedJson elements = io::detail::OrderedJson::array(
      {io::detail::OrderedJson{{"name", "a\nb \"quoted\""}, {"ts", 1.5}, {"args", {{"list", {1, 2, 3}}, {"empty", io::detail::OrderedJson::array()}}}},
       io::detail::OrderedJson(42), io::detail::OrderedJson::array({io::detail::OrderedJson::object(), "x"}), io::detail::OrderedJson("last")});
  for (const io::detail::OrderedJson& array : {elements, io::detail::OrderedJson::array(), io::detail::OrderedJson::array({7})}) {
    io::detail::OrderedJson whole;
    whole["events"] = array;
    whole["after"] = 1;
    CHECK(streamed(array) == io::detail::dump(whole));
  }
}

TEST_CASE("an element with a number that is not finite fails naming its pointer, as dump() does") {
  std::string out;
  io::detail::ArrayWriter writer(out, "traceEvents");
  writer.add({{"ts", 0.0}});
  CHECK_THROWS_WITH_AS(writer.add({{"name", "x"}, {"args", {{"GB/s", std::numeric_limits<double>::infinity()}}}}),
                       "internal error: the output would hold a non-finite number at /traceEvents/1/args/GB~1s",
                       core::JobError);
}

TEST_CASE("a trace whose event would start at an infinite time is not written") {
  workload::TaskGraph graph;
  graph.tasks.push_back({});
  graph.tasks.back().name = "generate";
  sim::Recorder recorder;
  recorder.tasks.push_back({0, 0, 0, 0.0, 1.0});
  const sim::SimSummary summary;
  CHECK(io::chrome_trace_json(recorder, summary, graph, 1).find("\"dur\": 1000000.0") != std::string::npos);
  recorder.tasks.push_back({1, 0, 0, std::numeric_limits<double>::infinity(), 2.0});
  // Two process names, then the first task: the second task is event 3.
  CHECK_THROWS_WITH_AS(io::chrome_trace_json(recorder, summary, graph, 1),
                       "internal error: the output would hold a non-finite number at /traceEvents/3/ts",
                       core::JobError);
}
