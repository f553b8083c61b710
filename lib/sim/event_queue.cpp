#include "sim/event_queue.h"

#include <cassert>

namespace hetrl::sim {

void EventQueue::at(double time, Action action) {
  assert(time >= now_ && "events are never scheduled in the past");
  events_.push({time, next_sequence_++, std::move(action)});
}

std::uint64_t EventQueue::run(const std::function<bool()>& stop) {
  std::uint64_t count = 0;
  while (!events_.empty()) {
    if (stop && count % kStopCheck == 0 && count > 0 && stop()) break;
    // The action may schedule more events: take it out of the queue first.
    Event event = std::move(const_cast<Event&>(events_.top()));
    events_.pop();
    assert(event.time >= now_ && "time never runs backwards");
    now_ = event.time;
    event.action();
    ++count;
  }
  return count;
}

}  // namespace hetrl::sim
