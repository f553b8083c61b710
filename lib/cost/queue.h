#pragma once
// A generation whose sequences outnumber the room of its KV cache: `slots` sequences decode at
// once and each slot starts the next queued sequence as soon as its own one finishes
// (continuous batching). With one length the slots stay in step and the generation is whole
// waves and a part-full last one; with spread lengths they fall out of step, so that when the
// queue empties the slots' sequences are at every age and the batch drains from there.
//
// QueueTable follows the slots as a fluid, per slot, on a lattice of cells over the longest
// response's decode steps: a slot freed in a cell starts a sequence whose decode steps are the
// distribution's rounded to whole cells (a renewal process), until the slots have started q
// sequences each. The generation is then `full_steps` decode steps with every slot busy and a
// tail, from the last start until the iteration's longest response is expected to end, whose
// batch and contexts are taken at the midpoints of equal parts (the quadrature the cost
// model's drain uses). The tail ends when every response of the iteration is expected done:
// the integral over the steps of 1 - P(none running), each response running independently of
// the others (with every sequence starting together, the expected longest of all).
//
// The shapes depend on q = samples / slots only (per slot; the batch is slots times the share):
// the table holds them on a grid of q from one wave (the drain, priced by the cost model) to
// kMaxWaves, and beyond, whole waves of its last wave's full steps are added.

#include <functional>
#include <span>
#include <vector>

namespace hetrl::cost {

// One grid point of the table: q waves.
struct QueueShape {
  double full_steps = 0;        // decode steps with every slot busy
  double full_context = 0;      // their sequences' mean context in tokens, prompt included
  double tail_steps = 0;        // decode steps after the last sequence starts
  std::span<const double> share;       // per tail point: sequences per slot
  std::span<const double> log2_share;  // its log2 (-inf where none run)
  std::span<const double> context;     // their mean context in tokens, prompt included
};

class QueueTable {
 public:
  static constexpr int kCells = 128;       // lattice cells over the longest response's steps
  static constexpr int kPerWave = 16;      // grid points per wave
  static constexpr int kMaxWaves = 32;     // the grid's last point

  QueueTable() = default;
  // `survival(x)`: the fraction of responses longer than x tokens, non-increasing, 0 from
  // `max_response` (the longest, in tokens) on; a response of n tokens takes n - 1 decode steps
  // (prefill gives the first). `iteration_samples`: the responses of the whole iteration,
  // whose longest ends generation. `points`: the tail's quadrature points.
  QueueTable(const std::function<double(double)>& survival, double max_response, double prompt,
             double iteration_samples, int points);

  // No decode step at all (every response one token long).
  bool empty() const { return shapes_ == 0; }

  // Where q > 1 waves lies on the grid: between point `lower` (0: one wave, the drain) and
  // `lower` + 1, `weight` of the way to the upper one; beyond the grid, whole waves shifted
  // down into its last wave and their full steps added: `extra_steps` steps at a mean context
  // of `extra_context` tokens.
  struct Bracket {
    int lower = 0;
    double weight = 0;
    double extra_steps = 0;
    double extra_context = 0;
  };
  Bracket bracket(double q) const;
  // Point `index` of the grid, 1 to kPerWave * (kMaxWaves - 1): q = 1 + index / kPerWave.
  QueueShape shape(int index) const;
  // The fewest decode steps (full and tail) of any point: with the drain's, a floor under every
  // queued generation's steps.
  double min_steps() const { return min_steps_; }

 private:
  int points_ = 0;
  int shapes_ = 0;
  // Per point: full_steps, full_context, tail_steps, then share, log2_share, context per tail
  // point.
  std::vector<double> table_;
  double wave_steps_ = 0;    // the grid's last wave: full steps
  double wave_context_ = 0;  // and their mean context
  double min_steps_ = 0;
};

}  // namespace hetrl::cost
