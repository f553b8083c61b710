#include "cost/cost_model.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>
#include <optional>

namespace hetrl::cost {
namespace {

using workload::TaskKind;

constexpr double kBf16 = 2.0;
// Mixed-precision Adam keeps fp32 master weights, momentum and variance: 12 bytes a parameter
// beside the bf16 weights and gradients (Rajbhandari et al. 2020, ZeRO).
constexpr double kAdamState = 12.0;
// Bytes of a gradient crossing the data-parallel group (workload::GradientReduce): fp32 by
// default, as verl's FSDP mixed precision, Megatron for bf16 models and hetrl-exec reduce them.
double gradient_bytes(const workload::Workload& w) {
  return w.gradient_reduce == workload::GradientReduce::kBf16 ? kBf16 : 4.0;
}
constexpr int kSurvivalPoints = 1024;
constexpr int kMaxLengthPoints = 40;

// NCCL runs a collective with a low-latency protocol or a high-bandwidth one, whichever is
// faster for its volume: each a fixed cost plus the volume at a share of the link's bandwidth.
double faster_protocol(double volume, double bandwidth, double small_latency, double small_efficiency,
                       double large_latency, double large_efficiency) {
  return std::min(small_latency + volume / (bandwidth * small_efficiency),
                  large_latency + volume / (bandwidth * large_efficiency));
}

// Of the bytes each GPU holds, what an all-reduce over `ranks` GPUs of a node moves across each
// GPU's link: 2 (n - 1) / n on a ring, once with the switch reducing (NVLS).
double allreduce_volume(const hw::IntraNodeLink& link, int ranks) {
  return link.nvls ? 1.0 : 2.0 * (ranks - 1) / ranks;
}

}  // namespace

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

void CostModel::StepCost::add(const StepCost& other, double weight) {
  compute += other.compute * weight;
  overhead += other.overhead * weight;
  memory += other.memory * weight;
  tp += other.tp * weight;
  p2p += other.p2p * weight;
}

CostModel::CostModel(const hw::Cluster& cluster, const workload::Workload& workload,
                     const workload::TaskGraph& graph, const workload::ModelCatalog& models,
                     CostParams params)
    : cluster_(cluster), workload_(workload), graph_(graph), params_(params), zone_paths_(cluster) {
  if (workload_.micro_batch_tokens > 0) params_.micro_batch_tokens = workload_.micro_batch_tokens;
  params_.decode_points = std::clamp(params_.decode_points, 1, CostParams::kMaxDecodePoints);
  for (const workload::Task& task : graph_.tasks) {
    // A task of a model has a role (workload::build_graph), whose head it runs and holds.
    const workload::Head head = task.role ? workload::head_of(*task.role) : workload::Head::kLanguage;
    shapes_.push_back(task.model.empty() ? ModelShape() : ModelShape(models.get(task.model, ""), head));
    shapes_.back().vocab_parallel = params_.vocab_parallel;
    shapes_.back().sequence_parallel = params_.sequence_parallel;
    lm_head_.push_back(task.role && head == workload::Head::kLanguage);
  }
  for (const hw::GpuSpec& g : cluster_.gpu_types) {
    switch (workload_.precision) {
      case workload::Precision::kAuto: peak_flops_.push_back(g.tensor_flops()); break;
      case workload::Precision::kBf16: peak_flops_.push_back(g.bf16_flops); break;
      case workload::Precision::kFp16: peak_flops_.push_back(g.fp16_flops); break;
    }
  }
  for (std::size_t g = 0; g < cluster_.gpu_types.size(); ++g) {
    const hw::Efficiency& e = cluster_.gpu_types[g].efficiency;
    double best = std::max(e.gemm_large, e.gemm_small);
    for (const auto& point : e.gemm_curve) best = std::max(best, point.second);
    // A type measured at two widths or more prices each task's GEMMs on its width's curve
    // (width_curve); the others by the width half (gemm_width_scale, which asks this first).
    width_curves_.emplace_back();
    if (e.gemm_curves.size() >= 2) {
      for (const hw::WidthCurve& w : e.gemm_curves) {
        for (const auto& point : w.curve) best = std::max(best, point.second);
      }
      auto& curves = width_curves_.back();
      curves.resize(graph_.tasks.size() * kWidthScales * kGemmParts);
      for (std::size_t t = 0; t < graph_.tasks.size(); ++t) {
        if (shapes_[t].hidden <= 0) continue;
        for (int tp = 1; tp < kWidthScales; ++tp) {
          for (const GemmPart part : {GemmPart::kLayers, GemmPart::kHead}) {
            curves[(t * kWidthScales + static_cast<std::size_t>(tp)) * kGemmParts + static_cast<std::size_t>(part)] =
                make_width_curve(static_cast<int>(g), static_cast<int>(t), tp, part);
          }
        }
      }
    }
    max_gemm_.push_back(std::max(params_.max_gemm_efficiency, best));
    for (std::size_t t = 0; t < graph_.tasks.size(); ++t) {
      for (int tp = 0; tp < kWidthScales; ++tp) {
        width_scale_.push_back(shapes_[t].hidden > 0 && tp > 0
                                   ? gemm_width_scale(static_cast<int>(t), tp, static_cast<int>(g))
                                   : 1.0);
      }
    }
  }
  samples_ = workload_.samples_per_iteration();
  prompt_ = workload_.prompt_length_tokens;
  mean_response_ = workload_.response.mean();
  // Log-probabilities of the response tokens in RL; with no generation (SFT, pre-training) the
  // sequences are data and every token is a target.
  const bool generates = std::any_of(graph_.tasks.begin(), graph_.tasks.end(),
                                     [](const workload::Task& t) { return t.kind == TaskKind::kGenerate; });
  head_fraction_ = generates ? mean_response_ / (prompt_ + mean_response_) : 1.0;
  max_response_ = workload_.response.max();

  // Survival of the response-length distribution on a grid over [0, max]: the fraction of
  // sequences still generating at each step.
  survival_table_.resize(kSurvivalPoints);
  // Every quantile the tables need in one call (a trace of millions of lengths is sorted
  // once): p = i / 4096, then n / (n + 1) for n = 2^i - 1, where the longest of n lies.
  constexpr int kSteps = 4096;
  const double p_step = 1.0 / kSteps;
  std::vector<double> ps;
  for (int i = 0; i <= kSteps; ++i) ps.push_back(i * p_step);
  for (int i = 1; i < kMaxLengthPoints; ++i) {
    const double n = std::ldexp(1.0, i) - 1;
    ps.push_back(n / (n + 1));
  }
  const std::vector<double> quantiles = workload_.response.quantiles(ps);
  std::vector<std::pair<double, double>> points;  // (p, quantile), by p (and so by quantile)
  points.reserve(quantiles.size());
  for (std::size_t i = 0; i < quantiles.size(); ++i) points.emplace_back(ps[i], quantiles[i]);
  std::sort(points.begin(), points.end());
  // The distribution function between the quantiles' points is linear (a jump where two
  // share a length), so the n/(n + 1) points resolve the tail beyond the last of the 4,096.
  for (int i = 0; i < kSurvivalPoints; ++i) {
    const double step = max_response_ * i / (kSurvivalPoints - 1);
    const auto above = std::upper_bound(points.begin(), points.end(), step,
                                        [](double x, const std::pair<double, double>& p) { return x < p.second; });
    double cdf = 1.0;
    if (above == points.begin()) {
      cdf = 0.0;
    } else if (above != points.end()) {
      const auto& [p0, q0] = *(above - 1);
      const auto& [p1, q1] = *above;
      cdf = p0 + (p1 - p0) * (step - q0) / (q1 - q0);
    }
    survival_table_[i] = std::clamp(1.0 - cdf, 0.0, 1.0);
  }
  // The expected longest of n draws, the integral of the quantile function against the
  // density of the n-th power, n p^(n - 1), on the quantiles' points (trapezoids), for
  // n = 2^i - 1 (p^n by squaring: p^(2^i) / p). A fixed length is its own expected longest.
  max_length_table_.assign(kMaxLengthPoints, 0.0);
  std::array<double, kMaxLengthPoints> below{};  // p^n at the previous point
  for (std::size_t k = 1; k < points.size(); ++k) {
    const auto [p, quantile] = points[k];
    const double mean_quantile = 0.5 * (points[k - 1].second + quantile);
    double squared = p;  // p^(2^i)
    for (int i = 1; i < kMaxLengthPoints; ++i) {
      squared *= squared;
      const double power = p > 0 ? squared / p : 0.0;
      max_length_table_[i] += mean_quantile * (power - below[i]);
      below[i] = power;
    }
  }
  // The drain's quadrature points, the same for every replica: the decode steps of the
  // iteration's expected longest response, and the survival at the midpoint of each of their
  // parts. Prefill gives every sequence its first token, so a response of n tokens takes n - 1
  // decode steps, and step k runs the sequences longer than k tokens.
  drain_steps_ = std::max(0.0, expected_max_length(samples_) - 1);
  for (int j = 0; j < params_.decode_points; ++j) {
    const double step = 1 + (j + 0.5) / params_.decode_points * drain_steps_;
    drain_survival_.push_back(survival(step));
    drain_log2_survival_.push_back(std::log2(drain_survival_.back()));
    drain_context_.push_back(prompt_ + step);
  }
  queue_ = QueueTable([this](double x) { return survival(x); }, max_response_, prompt_, samples_,
                      params_.decode_points);
}

const hw::GpuSpec& CostModel::gpu(int node) const {
  return cluster_.gpu_types[cluster_.nodes[node].gpu_type];
}

double CostModel::usable_memory(int node) const {
  return gpu(node).memory * (1.0 - params_.memory_reserve_fraction);
}

double CostModel::survival(double step) const {
  if (step <= 0) return 1.0;
  if (step >= max_response_) return 0.0;
  const double x = step / max_response_ * (kSurvivalPoints - 1);
  const int i = static_cast<int>(x);
  const double f = x - i;
  return survival_table_[i] * (1 - f) + survival_table_[std::min(i + 1, kSurvivalPoints - 1)] * f;
}

double CostModel::expected_max_length(double n) const {
  if (n <= 1) return max_length_table_[1];  // one sequence: the mean
  const double x = std::log2(n + 1);
  const int i = std::min(static_cast<int>(x), kMaxLengthPoints - 2);
  const double f = std::min(1.0, x - i);
  return max_length_table_[i] * (1 - f) + max_length_table_[i + 1] * f;
}

double CostModel::node_allreduce_seconds(int node, int ranks, double bytes) const {
  if (ranks <= 1) return 0;
  const hw::Node& n = cluster_.nodes[node];
  return faster_protocol(allreduce_volume(n.intra_node, ranks) * bytes, n.intra_node.bandwidth,
                         small_allreduce_latency(node, ranks), params_.small_collective_efficiency,
                         params_.large_collective_latency, gpu(node).efficiency.collective);
}

hw::GemmCurve CostModel::make_width_curve(int gpu_type, int task, int tp, GemmPart part) const {
  // The part's GEMMs on a shard: each shape's FLOPs a token and its width on this type.
  const ModelShape& shape = shapes_[task];
  const hw::Efficiency& e = cluster_.gpu_types[static_cast<std::size_t>(gpu_type)].efficiency;
  const double share = e.gemm_reduction_share.value_or(params_.gemm_reduction_share);
  std::vector<std::pair<double, double>> gemms;  // (FLOPs, width)
  if (part == GemmPart::kHead) {
    const ModelShape::ShardGemm head = shape.head_gemm(tp);
    gemms.emplace_back(head.flops, head.width(share));
  } else {
    for (const ModelShape::ShardGemm& gemm : shape.shard_layer_gemms(tp)) {
      if (gemm.flops > 0) gemms.emplace_back(gemm.flops, gemm.width(share));
    }
  }
  // At every token count either curve has a point: the type's rate there, moved by the
  // measured widths' ratio (none where fewer than two reach it).
  std::vector<double> tokens;
  for (const auto& point : e.gemm_curve) tokens.push_back(point.first);
  for (const hw::WidthCurve& w : e.gemm_curves) {
    for (const auto& point : w.curve) tokens.push_back(point.first);
  }
  if (e.gemm_curve.empty()) tokens.insert(tokens.end(), {static_cast<double>(hw::kGemmSmallTokens),
                                                         static_cast<double>(hw::kGemmLargeTokens)});
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  hw::GemmCurve curve;
  for (const double t : tokens) {
    double flops = 0, seconds = 0;  // of the part's GEMMs, in proportion
    for (const auto& [gemm_flops, width] : gemms) {
      const double ratio = hw::gemm_width_ratio(e.gemm_curves, t, width, hw::kGemmReferenceWidth);
      flops += gemm_flops;
      seconds += gemm_flops / std::clamp(e.gemm(t) * ratio, 1e-6, 1.0);
    }
    curve.emplace_back(t, flops / seconds);
  }
  return hw::gemm_curve_envelope(std::move(curve));
}

double CostModel::gemm_width_scale(int task, int tp, int gpu_type) const {
  // Tensor parallelism splits one of a GEMM's two weight dimensions (the output of a column-
  // parallel GEMM, the input of a row-parallel one) and keeps the other whole: the geometric
  // mean of the two is the width.
  if (!width_curves_[static_cast<std::size_t>(gpu_type)].empty()) return 1.0;  // its curves by width say it
  const double width = gemm_width(task, tp);
  const double d0 = cluster_.gpu_types[static_cast<std::size_t>(gpu_type)].efficiency.gemm_width_half.value_or(
      params_.gemm_width_half);
  if (d0 <= 0) return 1.0;
  return (width / (width + d0)) / (hw::kGemmReferenceWidth / (hw::kGemmReferenceWidth + d0));
}

double CostModel::gemm_efficiency(int task, int node, int tp, double tokens, GemmPart part) const {
  const int type = cluster_.nodes[node].gpu_type;
  if (const hw::GemmCurve* curve = width_curve(type, task, tp, part)) {
    return std::min(max_gemm_[static_cast<std::size_t>(type)], hw::gemm_curve_efficiency(*curve, tokens));
  }
  const double scale =
      tp < kWidthScales
          ? width_scale_[(static_cast<std::size_t>(type) * graph_.tasks.size() + static_cast<std::size_t>(task)) *
                             kWidthScales +
                         static_cast<std::size_t>(tp)]
          : gemm_width_scale(task, tp, type);
  return std::min(max_gemm_[static_cast<std::size_t>(type)], gpu(node).efficiency.gemm(tokens) * scale);
}

double CostModel::weight_gradient_ratio(int node, double tokens) const {
  const hw::Efficiency& e = gpu(node).efficiency;
  const hw::GemmCurve& curve = e.weight_gradient_curve;
  if (curve.empty()) return 1.0;
  const double forward = e.gemm(tokens);
  if (tokens <= curve.back().first) return hw::gemm_curve_efficiency(curve, tokens) / forward;
  // Past the curve, at least as fast as its last point where the forward is slower, and as the
  // forward where it is faster: with many rows both GEMMs run at the large-GEMM rate.
  return std::max(1.0, curve.back().second / forward);
}

double CostModel::allreduce_seconds(int nodes, int gpus_per_node, double bytes) const {
  if (nodes <= 1) return node_allreduce_seconds(0, gpus_per_node, bytes);
  const double inside = node_allreduce_seconds(0, gpus_per_node, bytes);
  double nic = std::numeric_limits<double>::infinity();
  double latency = 0;
  for (int n = 0; n < nodes; ++n) {
    const hw::Node& a = cluster_.nodes[n];
    const hw::Node& b = cluster_.nodes[(n + 1) % nodes];
    const hw::Path& path = zone_paths_(a.zone, b.zone);
    nic = std::min({nic, a.nic_bandwidth, path.link.bandwidth});
    latency = std::max(latency, path.link.latency);
  }
  const double between = 2.0 * (nodes - 1) * latency +
                         faster_protocol(2.0 * (nodes - 1) / nodes * bytes, nic, params_.nic_small_latency,
                                         params_.nic_small_efficiency, params_.nic_collective_latency,
                                         params_.nic_efficiency);
  return std::max(inside, between);
}

double CostModel::stage_link_bandwidth(int node_a, int node_b, int ranks) const {
  if (node_a == node_b) return cluster_.nodes[node_a].intra_node.bandwidth;
  const hw::Node& a = cluster_.nodes[node_a];
  const hw::Node& b = cluster_.nodes[node_b];
  const double nic = std::min(a.nic_bandwidth / a.gpu_count, b.nic_bandwidth / b.gpu_count);
  const hw::Path& path = zone_paths_(a.zone, b.zone);
  return std::min(nic, path.link.bandwidth / std::max(1, ranks));
}

void CostModel::decode_stages(int task, std::span<const Stage> stages, DecodeStages& out) const {
  const ModelShape& shape = shapes_[task];
  out.clear();
  const int pp = static_cast<int>(stages.size());
  for (int s = 0; s < pp; ++s) {
    const Stage& stage = stages[s];
    const hw::GpuSpec& g = gpu(stage.node);
    const bool last = s == pp - 1;
    DecodeStage d;
    // Per sequence: linear FLOPs plus the attention term per token of context.
    d.flops_fixed = shape.layer_flops(stage.layers, 0) +
                    (last ? (lm_head_[task] ? shape.group_head_flops(stage.tp) : 2.0 * shape.hidden) : 0.0);
    const int type = cluster_.nodes[stage.node].gpu_type;
    if (last && lm_head_[task]) {
      d.head_flops = shape.group_head_flops(stage.tp);
      d.head_curve = width_curve(type, task, stage.tp, GemmPart::kHead);
    }
    d.flops_per_context = shape.layer_flops(stage.layers, 1) - shape.layer_flops(stage.layers, 0);
    d.rate = stage.tp * peak_flops(stage.node);
    d.gemm_small = g.efficiency.gemm_small;
    d.gemm_large = g.efficiency.gemm_large;
    if (g.efficiency.decode_attention) d.attention_flops = d.rate * *g.efficiency.decode_attention;
    if (!g.efficiency.gemm_curve.empty()) d.gemm_curve = &g.efficiency.gemm_curve;
    if (const hw::GemmCurve* curve = width_curve(type, task, stage.tp)) d.gemm_curve = curve;
    d.weight_seconds = kBf16 * shape.shard_params(stage.layers, s == 0, last, stage.tp) /
                       (g.memory_bandwidth * g.efficiency.memory);
    d.overhead = decode_overhead(cluster_.nodes[stage.node].gpu_type);
    d.kv_seconds_per_token = stage.layers * shape.kv_bytes_per_token_layer(stage.tp) /
                             (g.memory_bandwidth * g.efficiency.memory);
    if (stage.tp > 1) {
      // 2 all-reduces per layer of batch x hidden bf16 values: latency + volume / bandwidth.
      // Decode's all-reduces are small: NCCL's low-latency protocol, or what a run measured
      // one to take on the type (its processes' wait for the slowest with it).
      const hw::IntraNodeLink& link = cluster_.nodes[stage.node].intra_node;
      const std::optional<double>& measured = g.efficiency.decode_allreduce;
      d.tp_fixed = 2.0 * stage.layers * (measured ? *measured : small_allreduce_latency(stage.node, stage.tp));
      d.tp_per_sequence = 2.0 * stage.layers * allreduce_volume(link, stage.tp) * shape.hidden * kBf16 /
                          (link.bandwidth * params_.small_collective_efficiency);
    }
    if (s > 0) {
      const int prev = stages[s - 1].node;
      d.p2p_per_sequence = shape.hidden * kBf16 / stage.tp /
                           stage_link_bandwidth(prev, stage.node, stage.tp);
      d.p2p_fixed = prev == stage.node ? 0.0
                                       : zone_paths_(cluster_.nodes[prev].zone, cluster_.nodes[stage.node].zone)
                                             .link.latency;
    }
    out.push_back(d);
  }
}

CostModel::StepCost CostModel::decode_step(const DecodeStages& stages, double batch,
                                           double total_context) const {
  StepCost cost;
  for (const DecodeStage& d : stages) {
    const double efficiency = d.gemm_curve ? hw::gemm_curve_efficiency(*d.gemm_curve, batch)
                                           : hw::gemm_efficiency(d.gemm_small, d.gemm_large, batch);
    add_kernels(d, efficiency, batch, total_context, cost.compute, cost.memory);
    cost.tp += d.tp_fixed + batch * d.tp_per_sequence;
    cost.p2p += d.p2p_fixed + batch * d.p2p_per_sequence;
    cost.overhead = std::max(cost.overhead, d.overhead);
  }
  return cost;
}

CostModel::StepCost CostModel::drain_steps(const DecodeStages& stages, double live) const {
  return tail_steps(stages, live, drain_survival_.data(), drain_log2_survival_.data(), drain_context_.data(),
                    drain_steps_);
}

CostModel::StepCost CostModel::tail_steps(const DecodeStages& stages, double live, const double* share,
                                          const double* log2_share, const double* sequence_context,
                                          double steps) const {
  // What every stage shares at each point: the batch, its context and where its GEMMs stand
  // between the small and the large efficiency (decode_step's, with one log2 per call).
  const int points = params_.decode_points;
  std::array<double, CostParams::kMaxDecodePoints> batch, context, position;
  const double log2_live = std::log2(live);
  constexpr double kSmallLog2 = 8, kLargeLog2 = 11;  // of hw::kGemmSmallTokens and kGemmLargeTokens
  static_assert(hw::kGemmSmallTokens == 256 && hw::kGemmLargeTokens == 2048);
  double batches = 0;
  for (int j = 0; j < points; ++j) {
    const double b = live * share[j];
    batch[j] = std::max(1.0, b);
    context[j] = batch[j] * sequence_context[j];
    position[j] = b <= 1.0 ? 0.0 : (log2_live + log2_share[j] - kSmallLog2) / (kLargeLog2 - kSmallLog2);
    batches += batch[j];
  }
  StepCost cost;
  double overhead = 0;
  for (const DecodeStage& d : stages) {
    overhead = std::max(overhead, d.overhead);
    double compute_bound = 0, memory_bound = 0;
    for (int j = 0; j < points; ++j) {
      const double f = position[j];
      const double efficiency = d.gemm_curve ? hw::gemm_curve_efficiency(*d.gemm_curve, batch[j])
                                : f <= 0       ? d.gemm_small
                                : f >= 1       ? d.gemm_large
                                               : d.gemm_small + (d.gemm_large - d.gemm_small) * f;
      add_kernels(d, efficiency, batch[j], context[j], compute_bound, memory_bound);
    }
    cost.compute += compute_bound;
    cost.memory += memory_bound;
    cost.tp += points * d.tp_fixed + batches * d.tp_per_sequence;
    cost.p2p += points * d.p2p_fixed + batches * d.p2p_per_sequence;
  }
  cost.overhead = points * overhead;
  StepCost out;
  out.add(cost, steps / points);
  return out;
}

CostModel::StepCost CostModel::queue_steps(const DecodeStages& stages, double slots, double waves) const {
  // Between two points of the queue's grid, the two generations' steps weighed by where
  // `waves` lies (one wave, the grid's first point, is the drain).
  const QueueTable::Bracket b = queue_.bracket(waves);
  StepCost out;
  double full = b.extra_steps, context = b.extra_steps * b.extra_context;
  const auto add = [&](int index, double weight) {
    if (index == 0) {
      out.add(drain_steps(stages, slots), weight);
      return;
    }
    const QueueShape shape = queue_.shape(index);
    out.add(tail_steps(stages, slots, shape.share.data(), shape.log2_share.data(), shape.context.data(),
                       shape.tail_steps),
            weight);
    full += weight * shape.full_steps;
    context += weight * shape.full_steps * shape.full_context;
  };
  add(b.lower, 1 - b.weight);
  if (b.weight > 0) add(b.lower + 1, b.weight);
  // The steps with every slot busy: a step's cost is linear in the context at a given batch,
  // so the mean context prices them all.
  if (full > 0) out.add(decode_step(stages, slots, slots * context / full), full);
  return out;
}

std::pair<double, double> CostModel::prefill_seconds(int task, std::span<const Stage> stages,
                                                    double samples) const {
  const ModelShape& shape = shapes_[task];
  const int pp = static_cast<int>(stages.size());
  const double tokens = samples * prompt_;
  const double chunks = std::max(1.0, std::ceil(tokens / params_.prefill_chunk_tokens));
  double compute_max = 0;
  double tp_max = 0;
  for (int s = 0; s < pp; ++s) {
    const Stage& stage = stages[s];
    const hw::GpuSpec& g = gpu(stage.node);
    double linear = tokens * shape.linear_flops(stage.layers);
    const double chunk_tokens = std::min(tokens, params_.prefill_chunk_tokens);
    const double efficiency = gemm_efficiency(task, stage.node, stage.tp, chunk_tokens);
    if (s == pp - 1) {
      // The head at its own width's rate where the type has one, as the layers' FLOPs that take
      // as long.
      double head = lm_head_[task] ? shape.group_head_flops(stage.tp) : 2.0 * shape.hidden;
      if (lm_head_[task] && width_curve(cluster_.nodes[stage.node].gpu_type, task, stage.tp, GemmPart::kHead)) {
        head *= efficiency / gemm_efficiency(task, stage.node, stage.tp, chunk_tokens, GemmPart::kHead);
      }
      linear += samples * head;
    }
    const double rate = stage.tp * peak_flops(stage.node);
    const double bandwidth = g.memory_bandwidth * g.efficiency.memory;
    // Each chunk's GEMMs take the longer of their compute and streaming the stage's weights.
    const double weights = chunks * kBf16 * shape.shard_params(stage.layers, s == 0, s == pp - 1, stage.tp) / bandwidth;
    // The engine's share of the kernel rates (a GPU type's own, measured by a run), or all.
    const double share = g.efficiency.prefill_share();
    const double compute =
        std::max(linear / (rate * efficiency * share), weights) +
        tokens * shape.attention_flops(stage.layers, prompt_ / 2) / (rate * g.efficiency.attention * share) +
        tokens * stage.layers * shape.shard_elementwise_bytes(false, stage.tp) / bandwidth +
        chunks * stage.layers * params_.prefill_layer_overhead;
    const double tp = stage.tp > 1
                          ? 2.0 * stage.layers *
                                    (node_allreduce_seconds(stage.node, stage.tp,
                                                            tokens * shape.hidden * kBf16) +
                                     (chunks - 1) * small_allreduce_latency(stage.node, stage.tp)) +
                                tp_wait(stage, compute)
                          : 0.0;
    // Chunks flow through the stages; the slowest stage sets the pace.
    compute_max = std::max(compute_max, compute);
    tp_max = std::max(tp_max, tp);
  }
  const double fill = (chunks + pp - 1) / chunks;
  return {compute_max * fill, tp_max * fill};
}

double CostModel::kv_capacity_tokens(int task, std::span<const Stage> stages,
                                     std::span<const double> kv_budget) const {
  const ModelShape& shape = shapes_[task];
  double capacity = std::numeric_limits<double>::infinity();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const double per_token = stages[s].layers * shape.kv_bytes_per_token_layer(stages[s].tp);
    capacity = std::min(capacity, std::max(0.0, kv_budget[s] - generation_workspace(task, stages[s])) / per_token);
  }
  return capacity;
}

double CostModel::sequence_kv_tokens() const {
  return std::ceil((prompt_ + mean_response_) / params_.kv_block_tokens) * params_.kv_block_tokens;
}

double CostModel::concurrent_sequences(int task, std::span<const Stage> stages,
                                       std::span<const double> kv_budget) const {
  const double room = kv_capacity_tokens(task, stages, kv_budget) / sequence_kv_tokens();
  return std::max(1.0, std::min(room, params_.max_num_seqs));
}

double CostModel::kv_budget_holding(int task, const Stage& stage, double sequences) const {
  return generation_workspace(task, stage) +
         sequences * sequence_kv_tokens() * stage.layers * shapes_[task].kv_bytes_per_token_layer(stage.tp);
}

double CostModel::generation_floor(int task, std::span<const Stage> stages) const {
  thread_local DecodeStages per_stage;
  decode_stages(task, stages, per_stage);
  double step = 0;
  double overhead = 0;
  for (const DecodeStage& d : per_stage) {
    step += d.weight_seconds + d.tp_fixed + d.p2p_fixed;
    overhead = std::max(overhead, d.overhead);
  }
  step += overhead;
  // Every step runs one sequence at least; a queued generation takes as many steps as its
  // fewest on the grid, at least. The quadrature adds `points` parts of the steps: allow for
  // its rounding.
  const double steps = queue_.empty() ? drain_steps_ : std::min(drain_steps_, queue_.min_steps());
  return steps * step * (1 - 1e-12);
}

double CostModel::generation_seconds(int task, std::span<const Stage> stages, double samples,
                                     std::span<const double> kv_budget, Breakdown& out) const {
  if (samples <= 0) return 0;
  const auto [prefill_compute, prefill_tp] = prefill_seconds(task, stages, samples);
  out.add(kPrefillComputeTerm, prefill_compute);
  if (prefill_tp > 0) out.add(kPrefillAllReduceTerm, prefill_tp);

  const double concurrent = concurrent_sequences(task, stages, kv_budget);

  // Drain: every sequence starts at once and leaves as it finishes; the last one sets the end.
  // Generation ends with its slowest replica, the one that draws the longest response of the
  // whole iteration, so every replica is priced as if it held that one: the expected longest
  // of all the iteration's responses, not of this replica's share. Queue: with more sequences
  // than the cache holds, the slots run one after another, full until the queue empties, and
  // drain from there (QueueTable).
  thread_local DecodeStages per_stage;
  decode_stages(task, stages, per_stage);
  const StepCost decode = samples > concurrent && !queue_.empty()
                              ? queue_steps(per_stage, concurrent, samples / concurrent)
                              : drain_steps(per_stage, std::min(samples, concurrent));
  if (decode.compute > 0) out.add(kDecodeComputeTerm, decode.compute);
  if (decode.memory > 0) out.add(kDecodeMemoryTerm, decode.memory);
  if (decode.overhead > 0) out.add("decode steps' engine overhead (scheduling, sampling)", decode.overhead);
  if (decode.tp > 0) out.add(kDecodeAllReduceTerm, decode.tp);
  if (decode.p2p > 0) out.add("decode pipeline sends", decode.p2p);
  return out.total();
}

double CostModel::stage_pass_compute(int task, const Stage& stage, bool last, double micro, bool training,
                                     Recompute recompute) const {
  const ModelShape& shape = shapes_[task];
  const double sequence = prompt_ + mean_response_;
  // Forward + backward (2x) + what the backward recomputes: full recompute runs the whole
  // forward again (its TP all-reduces too); selective recomputes every second GEMM and the
  // element-wise work, not the fused attention nor the collectives whose outputs it keeps.
  // Fused attention's backward is hw::kAttentionBackwardForwards forwards.
  const bool full = recompute == Recompute::kFull;
  const bool selective = recompute == Recompute::kSelective;
  const double factor = training ? (full ? 4.0 : selective ? 3.5 : 3.0) : 1.0;
  const double attention_factor = training ? (full ? 2.0 : 1.0) + hw::kAttentionBackwardForwards : 1.0;
  const double elementwise_factor = training ? (full || selective ? 4.0 : 3.0) : 1.0;
  const bool eager = workload_.trainer_kernels == workload::TrainerKernels::kEager;
  const hw::GpuSpec& g = gpu(stage.node);
  // GEMMs at their efficiency, fused attention at its own (its backward is 2.5 forwards:
  // FlashAttention recomputes the scores), and the memory-bound element-wise work at the
  // memory bandwidth, split by TP (the norms and residual adds only with sequence
  // parallelism).
  double linear = micro * shape.linear_flops(stage.layers);
  // The language head runs over the scored rows only (the responses'), a GEMM of that many
  // rows at their own efficiency; a value head is a GEMV with the layers'.
  double head = 0, head_rows = micro;
  if (last) {
    if (lm_head_[task]) {
      head_rows = micro * head_fraction_;
      head = head_rows * shape.group_head_flops(stage.tp);
    } else {
      linear += micro * 2.0 * shape.hidden;
    }
  }
  const double head_factor = training && params_.head_recompute ? std::max(factor, 4.0) : factor;
  // Of a training pass's GEMM passes, the backward's weight gradient runs at its own rate
  // (its output the whole weight, the rows its inner dimension: at few rows it may be faster
  // than the forward and the input gradient), the others at the forward's.
  const double gemm_passes = training ? factor - 1.0 + 1.0 / weight_gradient_ratio(stage.node, micro) : factor;
  const double head_passes =
      training && head > 0 ? head_factor - 1.0 + 1.0 / weight_gradient_ratio(stage.node, head_rows) : head_factor;
  const double attention = micro * shape.attention_flops(stage.layers, sequence / 2);
  const double rate = stage.tp * peak_flops(stage.node) * trainer_rate_fraction(params_.trainer, g.efficiency.training);
  return gemm_passes * linear / (rate * gemm_efficiency(task, stage.node, stage.tp, micro)) +
         (head > 0 ? head_passes * head / (rate * gemm_efficiency(task, stage.node, stage.tp, head_rows, GemmPart::kHead))
                   : 0.0) +
         attention_factor * attention / (rate * g.efficiency.attention) +
         elementwise_factor * micro * stage.layers * shape.shard_elementwise_bytes(eager, stage.tp) /
             (g.memory_bandwidth * g.efficiency.memory);
}

std::pair<double, double> CostModel::micro_batching(double samples, int pp, bool training) const {
  const double batch_tokens = samples * (prompt_ + mean_response_) / (training ? workload_.mini_batches : 1);
  const double micro_batches = std::max<double>(pp, std::ceil(batch_tokens / params_.micro_batch_tokens));
  return {micro_batches, batch_tokens / micro_batches};
}

// Flattened: its all-reduce and GEMM-efficiency helpers inlined (the evaluator's hot path).
[[gnu::flatten]] double CostModel::pass_seconds(int task, std::span<const Stage> stages, double samples,
                               const DataParallel& dp, const TrainOptions& train, bool training,
                               Breakdown& out) const {
  const ModelShape& shape = shapes_[task];
  if (samples <= 0) return 0;
  const int pp = static_cast<int>(stages.size());
  const double steps = training ? workload_.mini_batches * workload_.epochs : 1.0;
  const auto [micro_batches, micro] = micro_batching(samples, pp, training);
  const bool full = train.recompute == Recompute::kFull;
  const double allreduces_per_layer = training ? (full ? 6.0 : 4.0) : 2.0;

  // ZeRO-3 (FSDP) gathers every layer's weights (bf16) for the forward and again for the
  // backward and reduce-scatters its gradients (fp32), each micro-batch; prefetching the next
  // layer hides them behind the compute as far as they are shorter.
  const bool gathers = training && train.zero_stage >= 3 && dp.replicas > 1;
  double worst = -1, every = 0;  // the slowest stage's micro-batch, and all stages' together
  double worst_compute = 0, worst_tp = 0, worst_wait = 0, worst_p2p = 0, worst_gather = 0;
  double final_gather = 0;  // the slowest stage's, once a task
  double optimizer = 0;
  for (int s = 0; s < pp; ++s) {
    const Stage& stage = stages[s];
    const hw::GpuSpec& g = gpu(stage.node);
    const bool last = s == pp - 1;
    const double compute = stage_pass_compute(task, stage, last, micro, training, train.recompute);
    double tp = allreduces_per_layer * stage.layers *
                node_allreduce_seconds(stage.node, stage.tp, micro * shape.hidden * kBf16);
    if (params_.tp_overlap) tp = std::max(0.0, tp - compute);  // overlapped with the GEMMs
    const double wait = tp_wait(stage, compute);  // no collective hides it
    double p2p = 0;
    if (!last) {
      const int next = stages[s + 1].node;
      const double bytes = micro * shape.hidden * kBf16 / stage.tp;
      const double latency = next == stage.node
                                 ? 0.0
                                 : zone_paths_(cluster_.nodes[stage.node].zone, cluster_.nodes[next].zone).link.latency;
      p2p = (training ? 2.0 : 1.0) *
            (bytes / stage_link_bandwidth(stage.node, next, stage.tp) + latency);
    }
    double gather = 0;  // exposed: beyond the compute it overlaps
    if (gathers) {
      const double params = shape.shard_params(stage.layers, s == 0, last, stage.tp) / stage.layers;
      const bool fp32 = gradient_bytes(workload_) > kBf16;
      const double layer_gather =
          dp.pass_seconds(hw::Collective::kAllGather, false, kBf16 * params, params_.collective_latency);
      const double collectives =
          stage.layers * (2.0 * layer_gather + dp.pass_seconds(hw::Collective::kReduceScatter, fp32,
                                                               gradient_bytes(workload_) * params,
                                                               params_.collective_latency));
      gather = params_.zero3_prefetch ? std::max(0.0, collectives - compute) : collectives;
      final_gather = std::max(final_gather, stage.layers * layer_gather);
    }
    const double total = compute + gather + tp + wait + p2p;
    every += total;
    if (total > worst) {
      worst = total;
      worst_compute = compute;
      worst_gather = gather;
      worst_tp = tp;
      worst_wait = wait;
      worst_p2p = p2p;
    }
    if (training) {
      const double held = shape.shard_params(stage.layers, s == 0, last, stage.tp);
      const double params = held / (train.zero_stage >= 1 ? dp.replicas : 1);
      // Around the update, on the GPU: the gradients' norm over the stretch it updates, and
      // the gradients it holds zeroed for the next step (ZeRO-2 and 3 hold a stretch); each a
      // stream one way, at the memory's streaming share (the update reads and writes at once,
      // which a CPU's memory serves faster than one way: its share of the read bandwidth
      // there is more than 1).
      const double grads = train.zero_stage >= 2 ? params : held;
      const double around = (params * params_.grad_norm_bytes_per_param + grads * params_.grad_zero_bytes_per_param) /
                            (g.memory_bandwidth * g.efficiency.memory);
      const double step =
          around + (train.optimizer_offload
                        // Gradients out and weights back over PCIe, Adam in the node's memory,
                        // which its GPUs share.
                        ? 2.0 * kBf16 * params / params_.host_bandwidth +
                              params * params_.adam_bytes_per_param /
                                  (params_.host_memory_bandwidth / cluster_.nodes[stage.node].gpu_count)
                        : params * params_.adam_bytes_per_param /
                              (g.memory_bandwidth * g.efficiency.optimizer_share()));
      optimizer = std::max(optimizer, step);
    }
  }
  const char* compute_name = training ? "forward + backward compute" : "forward compute";
  out.add(compute_name, steps * micro_batches * worst_compute);
  if (worst_gather > 0) {
    out.add(kZero3GatherTerm, steps * micro_batches * worst_gather);
  }
  if (worst_tp > 0) out.add(kPassAllReduceTerm, steps * micro_batches * worst_tp);
  if (worst_wait > 0) out.add(kTpWaitTerm, steps * micro_batches * worst_wait);
  if (worst_p2p > 0) out.add("pipeline sends", steps * micro_batches * worst_p2p);
  // The pipeline's fill and drain: each micro-batch flows through every stage, the slowest
  // stage paces the rest, so a step takes (micro-batches - 1) of its micro-batches plus one
  // through every stage (the flow shop's makespan, 1F1B's and GPipe's alike): beside the
  // slowest stage's micro-batches, one of each other stage's. PP - 1 of the slowest's where
  // the stages are even; less where one is slower (the last, with the language head).
  // (A stage of no finite time leaves the bubble none either: infinite less infinite is no
  // number.)
  if (pp > 1) out.add("pipeline bubble", steps * (std::isfinite(every) ? every - worst : every));
  if (training && pp > 1 && lm_head_[task] && shape.head_params == 0) {
    // Each TP shard's piece of the embedding's fp32 gradient to the last stage and the sum
    // back, every step.
    const Stage& first = stages.front();
    const Stage& last = stages.back();
    const double bytes =
        4.0 * shape.vocab * shape.hidden / (shape.vocab_parallel ? static_cast<double>(first.tp) : 1.0);
    const double latency = first.node == last.node
                               ? 0.0
                               : zone_paths_(cluster_.nodes[first.node].zone, cluster_.nodes[last.node].zone).link.latency;
    out.add(kTiedEmbeddingTerm, steps * 2.0 * (bytes / stage_link_bandwidth(first.node, last.node, first.tp) + latency));
  }
  if (training) {
    out.add(train.optimizer_offload ? kOffloadedOptimizerStepTerm : kOptimizerStepTerm, steps * optimizer);
  }
  if (final_gather > 0) out.add(kZero3FinalGatherTerm, final_gather);
  return out.total();
}

double CostModel::replica_seconds(int task, std::span<const Stage> stages, double samples,
                                  const DataParallel& dp, const TrainOptions& train,
                                  std::span<const double> kv_budget, Breakdown& out) const {
  switch (graph_.tasks[task].kind) {
    case TaskKind::kGenerate: return generation_seconds(task, stages, samples, kv_budget, out);
    case TaskKind::kForward: return pass_seconds(task, stages, samples, dp, train, false, out);
    case TaskKind::kTrain: return pass_seconds(task, stages, samples, dp, train, true, out);
    case TaskKind::kCpu:
    case TaskKind::kWeightSync: break;
  }
  assert(false && "replica_seconds takes GPU tasks");
  return 0;
}

StageMemory CostModel::stage_memory(int task, std::span<const Stage> stages, int index, int dp,
                                    const TrainOptions& train) const {
  const ModelShape& shape = shapes_[task];
  const Stage& stage = stages[index];
  const int pp = static_cast<int>(stages.size());
  const bool last = index == pp - 1;
  const double params = shape.shard_params(stage.layers, index == 0, last, stage.tp);
  StageMemory m;
  m.layout = layout_key(stage.tp, pp, index, stage.layers);
  const double micro = std::min(params_.micro_batch_tokens, samples_ * (prompt_ + mean_response_));
  switch (graph_.tasks[task].kind) {
    case TaskKind::kGenerate:
      m.weights = kBf16 * params;
      m.kv_cache_min = generation_workspace(task, stage) +
                       (prompt_ + max_response_) * stage.layers * shape.kv_bytes_per_token_layer(stage.tp);
      break;
    case TaskKind::kForward:
      m.weights = kBf16 * params;
      // One layer's activations at a time, and the last stage's logits.
      m.activations = micro * activation_bytes_per_token_layer(task, stage.tp, Recompute::kNone);
      if (last && lm_head_[task]) m.activations += micro * shape.vocab * 4.0 / stage.tp;
      break;
    case TaskKind::kTrain: {
      // Mixed-precision Adam: bf16 weights (2), gradients (CostParams::gradient_bytes_held),
      // fp32 master weights, momentum and variance (12): 16 or 18 bytes per parameter
      // (Rajbhandari et al. 2020, ZeRO), each part sharded over the DP replicas from its ZeRO
      // stage on.
      const double shards = std::max(1, dp);
      m.weights = kBf16 * params / (train.zero_stage >= 3 ? shards : 1);
      m.gradients = params_.gradient_bytes_held * params / (train.zero_stage >= 2 ? shards : 1);
      m.optimizer = train.optimizer_offload ? 0.0 : kAdamState * params / (train.zero_stage >= 1 ? shards : 1);
      // Sharded weights serve no forward pass of another task: it holds its own slice.
      const bool sharded = train.zero_stage >= 3 && dp > 1;
      if (sharded) m.layout |= kShardedLayout;
      // 1F1B keeps up to (pp - index) micro-batches in flight on stage `index`.
      const double in_flight = pp - index;
      m.activations = in_flight * micro * stage.layers *
                      activation_bytes_per_token_layer(task, stage.tp, train.recompute);
      if (train.recompute != Recompute::kNone) {  // the layer being recomputed, whole
        m.activations += micro * activation_bytes_per_token_layer(task, stage.tp, Recompute::kNone);
      }
      if (last && lm_head_[task]) m.activations += micro * shape.vocab * 4.0 / stage.tp;
      // ZeRO-3: the layer running and the next one, gathered whole.
      if (sharded) m.activations += 2.0 * kBf16 * shape.layer_params / stage.tp;
      break;
    }
    case TaskKind::kCpu:
    case TaskKind::kWeightSync: break;
  }
  return m;
}

DataParallel CostModel::data_parallel(std::span<const std::span<const Stage>> replicas) const {
  DataParallel out(static_cast<int>(replicas.size()));
  if (out.replicas <= 1) return out;
  int ranks = 1;  // GPUs per replica: parallel rings
  for (const auto& stages : replicas) {
    int gpus = 0;
    for (const Stage& stage : stages) gpus += stage.tp;
    ranks = std::max(ranks, gpus);
  }
  // A replica's GPUs on `node`: the rings that leave it through that node's NIC.
  const auto gpus_on = [](std::span<const Stage> stages, int node) {
    int gpus = 0;
    for (const Stage& stage : stages) gpus += stage.node == node ? stage.tp : 0;
    return std::max(gpus, 1);
  };
  // One ring per GPU position of a replica (`ranks` rings in parallel), through the replicas
  // in the given order, each stage's rings to the same stage of the next replica: a hop inside
  // a node uses its GPU link; a hop between nodes shares each node's NIC among the rings of
  // the replica's GPUs there, and a link between zones among all the rings. The slowest hop
  // sets the pace.
  for (int r = 0; r < out.replicas; ++r) {
    const std::span<const Stage> from = replicas[r];
    const std::span<const Stage> to = replicas[(r + 1) % out.replicas];
    for (std::size_t s = 0; s < from.size(); ++s) {
      const int a = from[s].node;
      const int b = to[std::min(s, to.size() - 1)].node;
      const hw::Node& na = cluster_.nodes[a];
      if (a == b) {
        const hw::Efficiency& e = gpu(a).efficiency;
        for (int op = 0; op < hw::kCollectives; ++op) {
          for (int fp32 = 0; fp32 < 2; ++fp32) {
            double& slowest = out.bandwidth[op][fp32];
            slowest = std::min(slowest, na.intra_node.bandwidth * e.collective_share(static_cast<hw::Collective>(op), fp32));
          }
        }
      } else {
        const hw::Node& nb = cluster_.nodes[b];
        const hw::Path& path = zone_paths_(na.zone, nb.zone);
        const int leaving = gpus_on(from, a);
        // Inside a zone the path is each pair of nodes' own; between zones one link all cross.
        const int sharing = na.zone == nb.zone ? leaving : ranks;
        const double hop =
            std::min({na.nic_bandwidth / leaving, nb.nic_bandwidth / gpus_on(to, b), path.link.bandwidth / sharing}) *
            params_.nic_efficiency;
        for (auto& by_type : out.bandwidth) {
          for (double& slowest : by_type) slowest = std::min(slowest, hop);
        }
        out.hop_latency = std::max(out.hop_latency, path.link.latency);
      }
    }
  }
  return out;
}

SyncOverlap CostModel::gradient_sync_overlap(int task, std::span<const Stage> stages, double samples,
                                             const TrainOptions& train) const {
  if (!params_.dp_overlap || stages.empty() || samples <= 0) return {};
  const double micro = micro_batching(samples, static_cast<int>(stages.size()), true).second;
  const bool last = stages.size() == 1;
  const double forward = stage_pass_compute(task, stages.front(), last, micro, false, train.recompute);
  const double whole = stage_pass_compute(task, stages.front(), last, micro, true, train.recompute);
  return {whole - forward, forward};
}

double CostModel::gradient_sync_seconds(int task, std::span<const std::span<const Stage>> replicas,
                                        const DataParallel& ring, const TrainOptions& train, Breakdown& out,
                                        const SyncOverlap& hidden) const {
  if (replicas.size() <= 1 || train.zero_stage >= 3) return 0;
  const ModelShape& shape = shapes_[task];
  double bytes = 0;  // gradient bytes per GPU, the largest
  for (const auto& stages : replicas) {
    const int pp = static_cast<int>(stages.size());
    for (int s = 0; s < pp; ++s) {
      bytes = std::max(bytes, gradient_bytes(workload_) * shape.shard_params(stages[s].layers, s == 0, s == pp - 1, stages[s].tp));
    }
  }
  // An all-reduce is two passes round the ring at its rate; ZeRO's sync a reduce-scatter of
  // the gradients and an all-gather of the updated bf16 weights, each at its own.
  const double steps = workload_.mini_batches * workload_.epochs;
  const bool fp32 = gradient_bytes(workload_) > kBf16;
  const double fixed = params_.collective_latency / 2;
  const auto exposed = [](double seconds, double behind) { return std::max(0.0, seconds - behind); };
  const double per_step =
      train.zero_stage >= 1
          ? exposed(ring.pass_seconds(hw::Collective::kReduceScatter, fp32, bytes, fixed), hidden.backward) +
                exposed(ring.pass_seconds(hw::Collective::kAllGather, false, bytes * kBf16 / gradient_bytes(workload_), fixed),
                        hidden.forward)
          : exposed(2.0 * ring.pass_seconds(hw::Collective::kAllReduce, fp32, bytes, fixed), hidden.backward);
  out.add(train.zero_stage >= 1 ? kGradientReduceScatterTerm : kGradientAllReduceTerm, steps * per_step);
  return out.total();
}

double CostModel::cpu_seconds(int task) const {
  const workload::Task& t = graph_.tasks[task];
  if (t.op == "rule") return samples_ * params_.rule_reward_seconds_per_sample;
  return samples_ * mean_response_ * params_.cpu_seconds_per_token;
}

void CostModel::describe_gpu_set(std::span<const int> gpus_per_node, GpuSet& out) const {
  out.gpus = 0;
  out.nic_bandwidth = 0;
  out.gpus_per_zone.assign(cluster_.zones.size(), 0.0);
  out.nodes = 0;
  out.slowest_nic = std::numeric_limits<double>::infinity();
  out.on_nodes.clear();
  for (std::size_t n = 0; n < cluster_.nodes.size(); ++n) {
    if (gpus_per_node[n] == 0) continue;
    const hw::Node& node = cluster_.nodes[n];
    out.gpus += gpus_per_node[n];
    out.nic_bandwidth += node.nic_bandwidth * gpus_per_node[n] / node.gpu_count;
    out.gpus_per_zone[node.zone] += gpus_per_node[n];
    ++out.nodes;
    out.slowest_nic = std::min(out.slowest_nic, node.nic_bandwidth);
    out.on_nodes.emplace_back(static_cast<int>(n), gpus_per_node[n]);
  }
}

double CostModel::weight_transfer_seconds(double bytes, const GpuSet& trainer, const GpuSet& reader,
                                          Breakdown& out) const {
  const double across = transfer_seconds(bytes, trainer, reader);
  const double broadcast = reader.nodes > 1 ? bytes / reader.slowest_nic : 0.0;
  // Named as the weight sync shows them: it waits for them (they overlap generation).
  if (across >= broadcast) {
    out.add("(waits for the weight transfer to the generation group)", across);
  } else {
    out.add("(waits for the weight broadcast inside the generation group)", broadcast);
  }
  return out.total();
}

namespace {

// The longest any GPU of the replicas takes to move its bf16 shard of the model at
// `rate(node)` bytes/s, every GPU at once.
template <class Rate>
double largest_shard_seconds(const ModelShape& shape, std::span<const std::span<const Stage>> replicas, Rate rate) {
  double seconds = 0;
  for (const auto& stages : replicas) {
    const int pp = static_cast<int>(stages.size());
    for (int s = 0; s < pp; ++s) {
      const Stage& stage = stages[s];
      const double shard = kBf16 * shape.shard_params(stage.layers, s == 0, s == pp - 1, stage.tp);
      seconds = std::max(seconds, shard / rate(stage.node));
    }
  }
  return seconds;
}

}  // namespace

double CostModel::reshard_seconds(int reader, std::span<const ReshardGpu> gpus, Breakdown& out) const {
  const ModelShape& shape = shapes_[reader];
  double slowest = -1, copy = 0, gather = 0;
  for (const ReshardGpu& gpu : gpus) {
    const hw::Node& node = cluster_.nodes[gpu.node];
    const hw::GpuSpec& g = cluster_.gpu_types[node.gpu_type];
    const double wanted = shape.slice_params(gpu.loads);
    const double local = gpu.holds.layers > 0 ? shape.held_params(gpu.loads, gpu.holds) : 0.0;
    const double copy_rate = g.memory_bandwidth * g.efficiency.copy_share();
    const double c = 2.0 * kBf16 * local / copy_rate;
    const double r = kBf16 * std::max(0.0, wanted - local) / node.intra_node.bandwidth;
    if (c + r > slowest) {
      slowest = c + r;
      copy = c;
      gather = r;
    }
  }
  if (copy > 0) out.add(kWeightCopyTerm, copy);
  if (gather > 0) out.add(kWeightGatherTerm, gather);
  return out.total();
}

double CostModel::weight_load_seconds(int reader, std::span<const std::span<const Stage>> replicas,
                                      Breakdown& out) const {
  // A device whose memory is its host's has the weights where they arrived.
  const double seconds = largest_shard_seconds(shapes_[reader], replicas, [&](int node) {
    return gpu(node).memory_is_host ? std::numeric_limits<double>::infinity() : params_.host_bandwidth;
  });
  if (seconds > 0) out.add("weight load from host memory", seconds);
  return out.total();
}

double CostModel::least_resident_bytes(std::span<const int> tasks) const {
  std::array<double, workload::kRoles.size()> need{};  // per role
  for (int t : tasks) {
    const workload::Task& task = graph_.tasks[t];
    if (!task.role) continue;
    const double params = shapes_[t].total_params();
    const double bytes =
        task.kind == TaskKind::kTrain ? (kBf16 + params_.gradient_bytes_held + kAdamState) * params : kBf16 * params;
    double& role = need[static_cast<std::size_t>(*task.role)];
    role = std::max(role, bytes);
  }
  double total = 0;
  for (double bytes : need) total += bytes;
  return total;
}

double CostModel::transfer_seconds(double bytes, const GpuSet& a, const GpuSet& b) const {
  if (bytes <= 0 || a.gpus == 0 || b.gpus == 0) return 0;
  double seconds = 0, latency = 0, inside = 0;
  for_each_shared_node(a, b, [&](int n, double fraction, int gpus_a, int gpus_b) {
    const hw::IntraNodeLink& link = cluster_.nodes[n].intra_node;
    inside += fraction;
    seconds = std::max(seconds, bytes * fraction / (std::min(gpus_a, gpus_b) * link.bandwidth));
    latency = std::max(latency, link.hop_latency);
  });
  if (inside < 1 - kWithinRounding) {
    seconds = std::max(seconds, bytes * (1 - inside) / std::min(a.nic_bandwidth, b.nic_bandwidth));
    for_each_zone_pair(a, b, [&](int za, int zb, double fraction, const hw::Path& path) {
      latency = std::max(latency, path.link.latency);
      if (za != zb) seconds = std::max(seconds, bytes * fraction / path.link.bandwidth);
    });
  }
  return seconds + latency;
}

}  // namespace hetrl::cost
