#include <doctest/doctest.h>

#include "approx.h"

#include <csignal>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "core/error.h"
#include "core/hash.h"
#include "core/isolate.h"
#include "core/text.h"

using namespace hetrl::core;

TEST_CASE("closest_name suggests the likely intended name") {
  const std::vector<std::string> gpus = {"A10", "A100-SXM-40G", "A100-SXM-80G", "H100-SXM",
                                         "H100-PCIe", "L4", "L40S"};
  CHECK(closest_name("A100-80G", gpus) == "A100-SXM-80G");  // parts left out
  CHECK(closest_name("h100-sxm", gpus) == "H100-SXM");      // case
  CHECK(closest_name("L40s", gpus) == "L40S");
  CHECK(closest_name("H100_PCIE", gpus) == "H100-PCIe");    // separators
  CHECK(closest_name("MI300X", gpus).empty());              // nothing close
  CHECK(did_you_mean("L40SS", gpus) == " (did you mean \"L40S\"?)");
  CHECK(did_you_mean("TPUv5", gpus).empty());
}

TEST_CASE("located joins a place and a message") {
  CHECK(located("f.json: /a", "bad") == "f.json: /a: bad");
  CHECK(located("", "bad") == "bad");
}

TEST_CASE("parse_integer accepts whole numbers in range and nothing else") {
  CHECK(parse_integer("8", "n", 1, 10) == 8);
  CHECK_THROWS_WITH_AS(parse_integer("8x", "count", 1, 10),
                       "count: expected a whole number, found \"8x\"", InputError);
  CHECK_THROWS_WITH_AS(parse_integer("", "count", 1, 10),
                       "count: expected a whole number, found \"\"", InputError);
  CHECK_THROWS_WITH_AS(parse_integer("0", "count", 1, 10),
                       "count: expected a whole number from 1 to 10, found 0", InputError);
  CHECK_THROWS_AS(parse_integer("1e3", "count", 1, 10000), InputError);
  CHECK_THROWS_AS(parse_integer("99999999999999999999", "count", 1, 10), InputError);
}

TEST_CASE("parse_number reads finite decimals") {
  CHECK(parse_number("0.5", "x") == hetrl::testing::approx(0.5));
  CHECK(parse_number("1e3", "x") == hetrl::testing::approx(1000));
  CHECK(parse_number("-2", "x") == hetrl::testing::approx(-2));
  CHECK_THROWS_AS(parse_number("fast", "x"), InputError);
  CHECK_THROWS_AS(parse_number("1.5GB", "x"), InputError);
  CHECK_THROWS_AS(parse_number("inf", "x"), InputError);
}

TEST_CASE("signed_percent writes a change with its sign, and none that rounds to zero as negative") {
  CHECK(signed_percent(0.125) == "+12.5%");
  CHECK(signed_percent(-0.05) == "-5.0%");
  CHECK(signed_percent(0.0) == "+0.0%");
  // A last-bit difference between two sums of the same terms, either way.
  CHECK(signed_percent(-2.2e-16) == "+0.0%");
  CHECK(signed_percent(-0.0004) == "+0.0%");
  CHECK(signed_percent(2.2e-16) == "+0.0%");
  CHECK(signed_percent(-0.0006) == "-0.1%");
}

TEST_CASE("split keeps empty pieces") {
  CHECK(split("a,b", ',') == std::vector<std::string>{"a", "b"});
  CHECK(split("a,,b,", ',') == std::vector<std::string>{"a", "", "b", ""});
  CHECK(split("", ',') == std::vector<std::string>{""});
}

TEST_CASE("fnv1a64 matches the published test vectors") {
  // From the FNV reference test suite (Fowler, Noll, Vo).
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ull);
  CHECK(content_hash("a") == "fnv1a64:af63dc4c8601ec8c");
}

TEST_CASE("isolated work: what it returns comes back, and how it ended when it did not return") {
  int touched = 0;
  const Isolated ok = run_isolated(
      [&] {
        touched = 1;  // the child's copy: the caller's stays 0
        return std::string("bytes\0back", 10);
      },
      60, false);
  CHECK(ok.end == Isolated::End::kReturned);
  CHECK(ok.output == std::string("bytes\0back", 10));
  CHECK(touched == 0);

  // A limit past what the clock can count is no limit, not an instant timeout.
  for (const double forever : {1e10, 1e300, std::numeric_limits<double>::infinity()}) {
    CAPTURE(forever);
    CHECK(run_isolated([] { return std::string("done"); }, forever, false).output == "done");
  }

  const Isolated big = run_isolated([] { return std::string(3 << 20, 'x'); }, 60, false);
  CHECK(big.end == Isolated::End::kReturned);
  CHECK(big.output.size() == (3u << 20));

  const Isolated crash = run_isolated([]() -> std::string { std::raise(SIGSEGV); return {}; }, 60, false);
  CHECK(crash.end == Isolated::End::kCrashed);
  CHECK(crash.signal == SIGSEGV);
  CHECK(describe_end(crash).find("(signal 11)") != std::string::npos);

  const Isolated thrown = run_isolated([]() -> std::string { throw std::runtime_error("no"); }, 60, false);
  CHECK(thrown.end == Isolated::End::kCrashed);
  CHECK(thrown.signal == 0);
  CHECK(describe_end(thrown) == "exit code 3");

  const Isolated endless = run_isolated(
      []() -> std::string {
        for (volatile bool forever = true; forever;) {
        }
        return {};
      },
      0.1, false);
  CHECK(endless.end == Isolated::End::kTimedOut);
  CHECK(endless.output.empty());
}
