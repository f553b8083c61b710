#include "cost/queue.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hetrl::cost {
namespace {

constexpr int kFields = 3;      // full_steps, full_context, tail_steps
constexpr double kLogFloor = -745;  // log of the smallest double: a sequence surely running

}  // namespace

QueueTable::QueueTable(const std::function<double(double)>& survival, double max_response, double prompt,
                       double iteration_samples, int points) {
  const double max_steps = max_response - 1;
  if (!(max_steps > 0) || points <= 0) return;
  const double cell = max_steps / kCells;  // decode steps a cell

  // Of the responses, those whose n - 1 decode steps round to m cells, for m >= 1; those that
  // round to none take a sample and no step.
  std::vector<double> mass(kCells + 1, 0.0);
  double occupying = 0;
  for (int m = 1; m <= kCells; ++m) {
    mass[m] = std::max(0.0, survival(1 + std::max(0.0, m - 0.5) * cell) - survival(1 + (m + 0.5) * cell));
    occupying += mass[m];
  }
  if (!(occupying > 0)) return;
  // Of a started sequence (one that takes a step): still running u cells on (survive[u]), done
  // by then (log of it), u = 0..kCells + 1.
  std::vector<double> survive(kCells + 2, 0.0), log_done(kCells + 2, 0.0);
  double done = 0;
  for (int u = 0; u <= kCells; ++u) {
    done += mass[u] / occupying;
    survive[u] = std::max(0.0, 1.0 - done);
    log_done[u] = done > 0 ? std::max(kLogFloor, std::log(std::min(1.0, done))) : kLogFloor;
  }
  survive[kCells] = 0.0;  // exactly, whatever the sum's rounding
  log_done[kCells] = 0.0;

  points_ = points;
  shapes_ = kPerWave * (kMaxWaves - 1);
  const int stride = kFields + 3 * points;
  table_.assign(static_cast<std::size_t>(shapes_) * stride, 0.0);

  // The fluid, per slot. Before cell k: `running[u]`, `age[u]` (summed, in cells) and
  // `log_sum[u]` (of log_done) of the sequences started before k, u cells after k.
  std::vector<double> running(kCells + 2, 0.0), age(kCells + 2, 0.0), log_sum(kCells + 2, 0.0);
  const int limit = (kMaxWaves + 1) * (kCells + 1);
  std::vector<double> freed(static_cast<std::size_t>(limit + kCells + 2), 0.0);
  freed[0] = 1.0;
  std::vector<double> tail_running(kCells + 1), tail_age(kCells + 1);
  double started = 0;       // samples a slot has taken
  double context_sum = 0;   // over the full cells: decode steps times a sequence's mean context
  min_steps_ = std::numeric_limits<double>::infinity();
  // Grid point `index` (q waves), whose last sample starts in cell k: `partial` of the slots
  // freed there start one, the rest idle from there on.
  const auto write_point = [&](int index, int k, double q, double partial) {
    double* out = &table_[static_cast<std::size_t>(index - 1) * stride];
    out[0] = k * cell;
    out[1] = k > 0 ? context_sum / (k * cell) : prompt + 1;
    // The tail's cells: sequences running, their age, and the iteration still running.
    double tail = 0;
    for (int u = 0; u <= kCells; ++u) {
      tail_running[u] = running[u] + partial * survive[u];
      tail_age[u] = age[u] + partial * survive[u] * u;
      const double log_none = iteration_samples / q * (log_sum[u] + partial * log_done[u]);
      tail += -std::expm1(log_none) * cell;
    }
    out[2] = tail;
    min_steps_ = std::min(min_steps_, out[0] + tail);
    double* share = out + kFields;
    double* log2_share = share + points;
    double* context = log2_share + points;
    for (int j = 0; j < points; ++j) {
      const double step = (j + 0.5) / points * tail;  // decode steps after the last start
      const double x = std::clamp(step / cell - 0.5, 0.0, static_cast<double>(kCells));
      const int i = std::min(static_cast<int>(x), kCells - 1);
      const double f = x - i;
      const double n = tail_running[i] * (1 - f) + tail_running[i + 1] * f;
      const double a = tail_age[i] * (1 - f) + tail_age[i + 1] * f;
      share[j] = std::max(0.0, n);
      log2_share[j] = n > 0 ? std::log2(n) : -std::numeric_limits<double>::infinity();
      context[j] = prompt + 0.5 + (n > 0 ? (a / n + 0.5) * cell : step + 0.5);
    }
  };
  int next = 1;
  for (int k = 0; next <= shapes_ && k < limit; ++k) {
    const double starts = freed[k];           // sequences starting in cell k
    const double taken = starts / occupying;  // and the samples they take
    for (; next <= shapes_; ++next) {
      const double q = 1.0 + static_cast<double>(next) / kPerWave;
      if (q > started + taken) break;
      write_point(next, k, q, (q - started) * occupying);
    }
    // Cell k at full batch: every slot runs a sequence, those started before k at their age.
    // A sequence's i-th decode step (from 0) reads prompt + 1 + i tokens: over a cell's steps,
    // prompt + 0.5 and the cell's middle.
    const double busy = running[0] + starts;
    context_sum += cell * (prompt + 0.5 + ((busy > 0 ? age[0] / busy : 0.0) + 0.5) * cell);
    started += taken;
    for (int m = 1; m <= kCells; ++m) freed[k + m] += starts * mass[m] / occupying;
    for (int u = 0; u <= kCells; ++u) {
      running[u] = running[u + 1] + starts * survive[u + 1];
      age[u] = age[u + 1] + starts * survive[u + 1] * (u + 1);
      log_sum[u] = log_sum[u + 1] + starts * log_done[u + 1];
    }
  }
  // Every grid point is reached: each slot starts a sequence at least every kCells + 1 cells.
  const double* last = &table_[static_cast<std::size_t>(shapes_ - 1) * stride];
  const double* before = &table_[static_cast<std::size_t>(shapes_ - 1 - kPerWave) * stride];
  wave_steps_ = last[0] - before[0];
  wave_context_ = wave_steps_ > 0 ? (last[0] * last[1] - before[0] * before[1]) / wave_steps_ : prompt + 1;
}

QueueTable::Bracket QueueTable::bracket(double q) const {
  Bracket b;
  if (empty() || !(q > 1)) return b;
  const double last = kMaxWaves;
  if (q > last) {
    const double waves = std::ceil(q - last);
    q -= waves;
    b.extra_steps = waves * wave_steps_;
    b.extra_context = wave_context_;
  }
  const double x = (q - 1) * kPerWave;
  b.lower = std::min(static_cast<int>(x), shapes_ - 1);
  b.weight = std::clamp(x - b.lower, 0.0, 1.0);
  return b;
}

QueueShape QueueTable::shape(int index) const {
  const std::size_t stride = kFields + 3 * static_cast<std::size_t>(points_);
  const double* p = &table_[static_cast<std::size_t>(index - 1) * stride];
  const auto n = static_cast<std::size_t>(points_);
  return {p[0], p[1], p[2], {p + kFields, n}, {p + kFields + n, n}, {p + kFields + 2 * n, n}};
}

}  // namespace hetrl::cost
