// The RL arithmetic hetrl-exec runs around the models (exec/rl.h): advantages worked by hand,
// and each loss's gradient against finite differences of the loss itself.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "approx.h"
#include "exec/rl.h"

namespace hetrl::exec {
namespace {

Sample sample(int prompt, int response_tokens, std::vector<float> values, float score) {
  Sample s;
  s.prompt = prompt;
  s.prompt_length = 2;
  s.tokens.assign(static_cast<std::size_t>(2 + response_tokens), 1);
  s.values = std::move(values);
  s.old_logp.assign(static_cast<std::size_t>(response_tokens), -1.0f);
  s.score = score;
  return s;
}

// Central differences of f at x, one coordinate at a time.
std::vector<double> numeric(const std::function<double(const std::vector<float>&)>& f, std::vector<float> x) {
  std::vector<double> g;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    const float h = 1e-3f;
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    g.push_back((up - down) / (2.0 * h));
  }
  return g;
}

TEST_CASE("rl: GAE by hand, returns as advantages plus values, advantages whitened over the batch") {
  RlSettings settings;
  settings.lambda = 0.5;
  std::vector<Sample> samples{sample(0, 3, {0.5f, 0.2f, 0.1f}, 1.0f)};
  gae_advantages(samples, settings);
  // deltas from the end: 1 - 0.1 = 0.9; 0.1 - 0.2 = -0.1; 0.2 - 0.5 = -0.3. GAE: 0.9,
  // -0.1 + 0.5 x 0.9 = 0.35, -0.3 + 0.5 x 0.35 = -0.125.
  const std::vector<double> raw{-0.125, 0.35, 0.9};
  for (std::size_t i = 0; i < 3; ++i) CHECK(samples[0].returns[i] == hetrl::testing::approx(raw[i] + samples[0].values[i]));
  const double mean = (raw[0] + raw[1] + raw[2]) / 3;
  double variance = 0;
  for (double a : raw) variance += (a - mean) * (a - mean) / 3;
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(samples[0].advantages[i] == doctest::Approx((raw[i] - mean) / (std::sqrt(variance) + 1e-6)).epsilon(1e-5));
  }

  // The KL penalty enters each token's reward: one token, no discounting to speak of.
  std::vector<Sample> one{sample(0, 1, {0.25f}, 2.0f), sample(1, 1, {0.0f}, 0.0f)};
  one[0].ref_logp = {-1.5f};  // old -1: KL estimate 0.5
  one[1].ref_logp = {-1.0f};
  settings.kl_coef = 0.1;
  gae_advantages(one, settings);
  CHECK(one[0].returns[0] == hetrl::testing::approx(2.0 - 0.1 * 0.5));
  CHECK(one[1].returns[0] == hetrl::testing::approx(0.0));
  CHECK(one[0].advantages[0] == doctest::Approx(1.0).epsilon(1e-5));  // two values whitened: +1, -1
  CHECK(one[1].advantages[0] == doctest::Approx(-1.0).epsilon(1e-5));
}

TEST_CASE("rl: GRPO advantages are scores normalised within each prompt's group") {
  std::vector<Sample> samples{sample(0, 2, {}, 1.0f), sample(0, 3, {}, 0.0f), sample(0, 1, {}, 2.0f),
                              sample(1, 2, {}, 5.0f), sample(1, 2, {}, 5.0f)};
  group_advantages(samples, RlSettings{});
  // Group 0: mean 1, sample standard deviation 1.
  CHECK(samples[0].advantages == std::vector<float>(2, 0.0f));
  CHECK(samples[1].advantages[2] == doctest::Approx(-1.0).epsilon(1e-5));
  CHECK(samples[2].advantages[0] == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(samples[1].advantages.size() == 3);
  // Group 1: identical scores, no signal.
  CHECK(samples[3].advantages == std::vector<float>(2, 0.0f));
}

TEST_CASE("rl: the clipped policy loss and its KL term against finite differences") {
  RlSettings settings;
  // Ratios inside and beyond the clip range, with positive and negative advantages.
  const std::vector<float> old{-1.0f, -1.0f, -2.0f, -0.5f, -3.0f, -1.0f};
  const std::vector<float> logp{-1.0f, -0.6f, -2.5f, -0.4f, -2.6f, -1.4f};
  const std::vector<float> adv{1.0f, 1.0f, -1.0f, -0.5f, 2.0f, -2.0f};
  const std::vector<float> ref{-1.2f, -0.7f, -2.0f, -0.3f, -3.0f, -1.5f};
  std::vector<float> grad, unused;
  // At ratio 1 the loss is minus the mean advantage.
  CHECK(policy_loss(old, old, adv, nullptr, 6, settings, unused) == hetrl::testing::approx(-(1 + 1 - 1 - 0.5 + 2 - 2) / 6.0));
  for (const std::vector<float>* kl : {static_cast<const std::vector<float>*>(nullptr), &ref}) {
    CAPTURE(kl != nullptr);
    policy_loss(logp, old, adv, kl, 10, settings, grad);
    const auto f = [&](const std::vector<float>& x) { return policy_loss(x, old, adv, kl, 10, settings, unused); };
    const std::vector<double> expected = numeric(f, logp);
    for (std::size_t i = 0; i < grad.size(); ++i) {
      CAPTURE(i);
      CHECK(grad[i] == doctest::Approx(expected[i]).epsilon(1e-3).scale(1e-3));
    }
  }
  // Token 1 (ratio e^0.4 > 1.2, positive advantage) is clipped: no gradient without the KL.
  policy_loss(logp, old, adv, nullptr, 10, settings, grad);
  CHECK(grad[1] == 0.0f);
  CHECK(grad[0] == hetrl::testing::approx(-0.1));
}

TEST_CASE("rl: the clipped value loss against finite differences") {
  RlSettings settings;
  const std::vector<float> old{0.0f, 0.0f, 1.0f, -1.0f};
  const std::vector<float> values{0.3f, 0.9f, 1.2f, 0.0f};
  const std::vector<float> returns{1.0f, -1.0f, 0.0f, 2.0f};
  std::vector<float> grad, unused;
  value_loss(values, old, returns, 4, settings, grad);
  const auto f = [&](const std::vector<float>& x) { return value_loss(x, old, returns, 4, settings, unused); };
  const std::vector<double> expected = numeric(f, values);
  for (std::size_t i = 0; i < grad.size(); ++i) {
    CAPTURE(i);
    CHECK(grad[i] == doctest::Approx(expected[i]).epsilon(1e-3).scale(1e-3));
  }
  // Token 3 moved 1.0 from its old value toward a return of 2: the clipped term (old + 0.5)
  // is larger and does not move with v.
  CHECK(grad[3] == 0.0f);
  CHECK(grad[0] == hetrl::testing::approx((0.3 - 1.0) / 4));
}

}  // namespace
}  // namespace hetrl::exec
