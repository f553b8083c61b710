// Dealing a batch's samples to data-parallel replicas (exec::deal): each replica as many as a
// contiguous split by the shares gives it, its tokens near its share of them. And a pipeline
// stage's training schedule (exec::one_f_one_b).

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

#include "exec/run.h"

namespace hetrl::exec {
namespace {

long long sum_of(const std::vector<std::size_t>& share, const std::vector<long long>& tokens) {
  long long n = 0;
  for (const std::size_t i : share) n += tokens[i];
  return n;
}

TEST_CASE("deal: every sample once, each replica its count, tokens balanced where a contiguous split is not") {
  // Long samples first, short ones last: a contiguous split in halves gives one replica
  // 4 x 40 tokens and the other 4 x 10.
  const std::vector<long long> tokens{40, 40, 40, 40, 10, 10, 10, 10};
  std::vector<std::size_t> all(tokens.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  const auto out = deal(all, tokens, {0.5, 0.5});
  REQUIRE(out.size() == 2);
  CHECK(out[0].size() == 4);
  CHECK(out[1].size() == 4);
  std::vector<std::size_t> seen = out[0];
  seen.insert(seen.end(), out[1].begin(), out[1].end());
  std::sort(seen.begin(), seen.end());
  CHECK(seen == all);
  CHECK(sum_of(out[0], tokens) == 100);
  CHECK(sum_of(out[1], tokens) == 100);
  CHECK(std::is_sorted(out[0].begin(), out[0].end()));
  CHECK(std::is_sorted(out[1].begin(), out[1].end()));
}

TEST_CASE("deal: uneven shares take counts and tokens in proportion") {
  std::vector<long long> tokens;
  for (int i = 0; i < 12; ++i) tokens.push_back(10 + (i * 7) % 23);
  // A subset of the samples, as a mini-batch is.
  const std::vector<std::size_t> slice{1, 2, 3, 5, 6, 8, 9, 11};
  const auto out = deal(slice, tokens, {0.25, 0.75});
  REQUIRE(out.size() == 2);
  CHECK(out[0].size() == 2);
  CHECK(out[1].size() == 6);
  const long long a = sum_of(out[0], tokens), b = sum_of(out[1], tokens);
  CHECK(a + b == sum_of(slice, tokens));
  // Within one sample's tokens of a quarter (the longest is 32).
  CHECK(std::abs(static_cast<double>(a) - 0.25 * static_cast<double>(a + b)) <= 32);
  for (const auto& share : out) {
    for (const std::size_t i : share) CHECK(std::find(slice.begin(), slice.end(), i) != slice.end());
  }
}

TEST_CASE("deal: one replica takes everything, and fewer samples than replicas leave some empty") {
  const std::vector<long long> tokens{5, 9, 7};
  const auto one = deal({0, 1, 2}, tokens, {1.0});
  REQUIRE(one.size() == 1);
  CHECK(one[0] == std::vector<std::size_t>{0, 1, 2});
  const auto many = deal({0, 1}, tokens, {0.25, 0.25, 0.25, 0.25});
  REQUIRE(many.size() == 4);
  std::size_t dealt = 0;
  for (const auto& share : many) dealt += share.size();
  CHECK(dealt == 2);
  CHECK(deal({}, tokens, {0.5, 0.5}) == std::vector<std::vector<std::size_t>>(2));
}

TEST_CASE("1F1B: each stage's warm-up forwards, then one forward and the oldest backward in turn, then the rest") {
  using S = PipelineStep;
  // Where the steady part begins (the schedule's size where it has none).
  const auto steady = [](const std::vector<S>& schedule) {
    return static_cast<std::size_t>(std::find_if(schedule.begin(), schedule.end(), [](const S& s) { return s.steady; }) -
                                    schedule.begin());
  };
  // Four stages, six micro-batches: the first stage runs three forwards ahead, the last none.
  const std::vector<S> first = one_f_one_b(4, 0, 6);
  CHECK(first == std::vector<S>{{true, 0, false}, {true, 1, false}, {true, 2, false}, {true, 3, true}, {false, 0, true},
                                {true, 4, true}, {false, 1, true}, {true, 5, true}, {false, 2, true}, {false, 3, false},
                                {false, 4, false}, {false, 5, false}});
  CHECK(steady(first) == 3);
  const std::vector<S> last = one_f_one_b(4, 3, 3);
  CHECK(last == std::vector<S>{{true, 0, true}, {false, 0, true}, {true, 1, true}, {false, 1, true}, {true, 2, true},
                               {false, 2, true}});
  CHECK(steady(last) == 0);
  // Fewer micro-batches than the warm-up: every forward, then every backward (GPipe's order),
  // no steady part.
  const std::vector<S> few = one_f_one_b(4, 0, 2);
  CHECK(few == std::vector<S>{{true, 0, false}, {true, 1, false}, {false, 0, false}, {false, 1, false}});
  CHECK(steady(few) == few.size());
  // Every stage of every pipeline: each micro-batch's forward once and before its backward,
  // the backwards in order, and at most stages - stage waiting at once.
  for (int stages = 1; stages <= 6; ++stages) {
    for (int stage = 0; stage < stages; ++stage) {
      for (int micro = 0; micro <= 9; ++micro) {
        CAPTURE(stages);
        CAPTURE(stage);
        CAPTURE(micro);
        const std::vector<S> schedule = one_f_one_b(stages, stage, micro);
        REQUIRE(schedule.size() == static_cast<std::size_t>(2 * micro));
        int forwards = 0, backwards = 0, most = 0;
        for (const S& step : schedule) {
          if (step.forward) {
            CHECK(step.micro_batch == forwards++);
          } else {
            CHECK(step.micro_batch == backwards++);
            CHECK(backwards <= forwards);
          }
          most = std::max(most, forwards - backwards);
        }
        CHECK(most <= std::max(1, std::min(micro, stages - stage)));
      }
    }
  }
}

}  // namespace
}  // namespace hetrl::exec
