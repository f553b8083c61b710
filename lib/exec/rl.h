#pragma once
// The arithmetic of an RL iteration around the models, on the host: advantages (GAE with a
// learned critic for PPO; group-normalised scores for GRPO), and the losses of training with
// their gradients with respect to each token's log-probability or value, which
// Transformer::backward takes. The conventions are verl's defaults (docs/exec.md): PPO's
// clipped surrogate (clip 0.2), the KL to the reference as a per-token reward penalty for PPO
// and as a loss term (the k3 estimator) for GRPO, the critic's clipped value loss (0.5), losses
// averaged over the response tokens of a mini-batch.

#include <vector>

namespace hetrl::exec {

struct RlSettings {
  double clip = 0.2;        // PPO ratio clip
  double value_clip = 0.5;  // critic: how far a value may move from the old one before clipping
  double gamma = 1.0;       // discount
  double lambda = 0.95;     // GAE
  double kl_coef = 0.001;   // KL to the reference: reward penalty (PPO) or loss weight (GRPO)
  double epsilon = 1e-6;    // normalisation
};

// One generated sample and what the iteration computes for it. Per-token vectors run over
// the response tokens (the log-probability of token i is the prediction of response token i).
struct Sample {
  int prompt = 0;  // the prompt it answers (GRPO's group)
  int prompt_length = 0;
  std::vector<int> tokens;  // prompt then response
  std::vector<float> old_logp, ref_logp, values;
  float score = 0;  // the reward model's (or rule's) score of the whole response
  std::vector<float> advantages, returns;
  int response_length() const { return static_cast<int>(tokens.size()) - prompt_length; }
};

// PPO: per-token rewards -kl_coef (old - ref) (when ref_logp is there) plus the score on the
// last token; GAE over the critic's values; returns = advantages + values; advantages then
// whitened over every response token of the batch.
void gae_advantages(std::vector<Sample>& samples, const RlSettings& settings);

// GRPO: each sample's advantage on every token is its score less its group's mean, over the
// group's standard deviation.
void group_advantages(std::vector<Sample>& samples, const RlSettings& settings);

// The policy loss of one token set: the mean over `tokens` of -min(r A, clip(r) A) with
// r = exp(logp - old), plus for GRPO kl_coef times the k3 KL to the reference; dlogp gets each
// token's gradient (the mean's share). Returns the loss summed over these tokens (divided by
// `tokens`, so micro-batches of one mini-batch add up to its mean).
double policy_loss(const std::vector<float>& logp, const std::vector<float>& old_logp,
                   const std::vector<float>& advantages, const std::vector<float>* ref_logp, double tokens,
                   const RlSettings& settings, std::vector<float>& dlogp);

// The critic's loss of one token set: the mean over `tokens` of
// 0.5 max((v - R)^2, (clip(v, old - c, old + c) - R)^2), and dvalue per token.
double value_loss(const std::vector<float>& values, const std::vector<float>& old_values,
                  const std::vector<float>& returns, double tokens, const RlSettings& settings,
                  std::vector<float>& dvalue);

}  // namespace hetrl::exec
