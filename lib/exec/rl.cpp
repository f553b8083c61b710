#include "exec/rl.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace hetrl::exec {

void gae_advantages(std::vector<Sample>& samples, const RlSettings& settings) {
  double sum = 0, squares = 0, count = 0;
  for (Sample& s : samples) {
    const int n = s.response_length();
    if (static_cast<int>(s.values.size()) != n) throw std::logic_error("gae: a sample without a value per token");
    const bool kl = !s.ref_logp.empty();
    s.advantages.assign(static_cast<std::size_t>(n), 0.0f);
    s.returns.assign(static_cast<std::size_t>(n), 0.0f);
    double next_value = 0, running = 0;
    for (int t = n - 1; t >= 0; --t) {
      const std::size_t i = static_cast<std::size_t>(t);
      double reward = t == n - 1 ? s.score : 0.0;
      if (kl) reward -= settings.kl_coef * (s.old_logp[i] - s.ref_logp[i]);
      const double delta = reward + settings.gamma * next_value - s.values[i];
      running = delta + settings.gamma * settings.lambda * running;
      s.advantages[i] = static_cast<float>(running);
      s.returns[i] = static_cast<float>(running + s.values[i]);
      next_value = s.values[i];
      sum += running;
      squares += running * running;
      count += 1;
    }
  }
  if (count == 0) return;
  const double mean = sum / count;
  const double deviation = std::sqrt(std::max(0.0, squares / count - mean * mean));
  for (Sample& s : samples) {
    for (float& a : s.advantages) a = static_cast<float>((a - mean) / (deviation + settings.epsilon));
  }
}

void group_advantages(std::vector<Sample>& samples, const RlSettings& settings) {
  std::map<int, std::pair<double, double>> moments;  // per prompt: sum, sum of squares
  std::map<int, int> counts;
  for (const Sample& s : samples) {
    moments[s.prompt].first += s.score;
    moments[s.prompt].second += static_cast<double>(s.score) * s.score;
    ++counts[s.prompt];
  }
  for (Sample& s : samples) {
    const double n = counts[s.prompt];
    const double mean = moments[s.prompt].first / n;
    // The sample standard deviation, as GRPO normalises (0 for a group of one).
    const double variance = n > 1 ? std::max(0.0, (moments[s.prompt].second - n * mean * mean) / (n - 1)) : 0.0;
    const float a = static_cast<float>((s.score - mean) / (std::sqrt(variance) + settings.epsilon));
    s.advantages.assign(static_cast<std::size_t>(s.response_length()), a);
    s.returns.clear();
  }
}

double policy_loss(const std::vector<float>& logp, const std::vector<float>& old_logp,
                   const std::vector<float>& advantages, const std::vector<float>* ref_logp, double tokens,
                   const RlSettings& settings, std::vector<float>& dlogp) {
  if (logp.size() != old_logp.size() || logp.size() != advantages.size() || (ref_logp && ref_logp->size() != logp.size())) {
    throw std::logic_error("policy_loss: per-token vectors of different lengths");
  }
  dlogp.assign(logp.size(), 0.0f);
  double loss = 0;
  for (std::size_t i = 0; i < logp.size(); ++i) {
    const double a = advantages[i];
    const double ratio = std::exp(static_cast<double>(logp[i]) - old_logp[i]);
    const double clipped = std::clamp(ratio, 1 - settings.clip, 1 + settings.clip);
    const double unclipped_term = ratio * a, clipped_term = clipped * a;
    // -min(r A, clip(r) A): the gradient flows through r only where the unclipped term is the
    // smaller (or the clip does not bind).
    double grad = 0;
    if (unclipped_term <= clipped_term) {
      loss -= unclipped_term;
      grad = -a * ratio;  // d(-r A)/d logp
    } else {
      loss -= clipped_term;
    }
    if (ref_logp) {
      // k3: exp(ref - logp) - (ref - logp) - 1, >= 0, unbiased for KL(pi || ref).
      const double diff = static_cast<double>((*ref_logp)[i]) - logp[i];
      loss += settings.kl_coef * (std::exp(diff) - diff - 1);
      grad += settings.kl_coef * (1 - std::exp(diff));
    }
    dlogp[i] = static_cast<float>(grad / tokens);
  }
  return loss / tokens;
}

double value_loss(const std::vector<float>& values, const std::vector<float>& old_values,
                  const std::vector<float>& returns, double tokens, const RlSettings& settings,
                  std::vector<float>& dvalue) {
  if (values.size() != old_values.size() || values.size() != returns.size()) {
    throw std::logic_error("value_loss: per-token vectors of different lengths");
  }
  dvalue.assign(values.size(), 0.0f);
  double loss = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i], old = old_values[i], r = returns[i];
    const double moved = std::clamp(v - old, -settings.value_clip, settings.value_clip);
    const double plain = (v - r) * (v - r), clipped = (old + moved - r) * (old + moved - r);
    double grad;
    if (plain >= clipped) {
      loss += 0.5 * plain;
      grad = v - r;
    } else {
      // Only where the clip binds (else the two terms are equal), so the clipped value does not
      // move with v.
      loss += 0.5 * clipped;
      grad = 0;
    }
    dvalue[i] = static_cast<float>(grad / tokens);
  }
  return loss / tokens;
}

}  // namespace hetrl::exec
