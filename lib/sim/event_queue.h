#pragma once
// The simulator's clock: events ordered by (time, sequence number), so events at the same time
// run in the order they were scheduled and every run is reproducible. No global state: each
// simulation owns its queue.

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace hetrl::sim {

class EventQueue {
 public:
  using Action = std::function<void()>;

  // Schedules `action` at absolute time `time` (seconds), not before now().
  void at(double time, Action action);
  void after(double delay, Action action) { at(now_ + delay, std::move(action)); }

  // Runs events in order until none is left, or until `stop` (asked every kStopCheck events)
  // says so; returns the number run.
  static constexpr std::uint64_t kStopCheck = 4096;
  std::uint64_t run(const std::function<bool()>& stop = {});
  double now() const { return now_; }
  bool empty() const { return events_.empty(); }

 private:
  struct Event {
    double time;
    std::uint64_t sequence;
    Action action;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time > b.time || (a.time == b.time && a.sequence > b.sequence);
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  double now_ = 0;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace hetrl::sim
