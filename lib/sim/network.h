#pragma once
// Transfers between GPU groups sharing the links they cross (reading map):
//   - Links: each group's NICs out and in (the group's share of its nodes' NICs, as the cost
//     model counts them), each zone link, one per direction (links are full duplex), and on a
//     node that several groups share, each group's GPU links there out and in (its GPUs there
//     times the node's GPU link). A transfer spreads its bytes over the GPUs of both groups, so
//     it puts on the link from zone a to zone b the fraction of its bytes that crosses it: the
//     share of the sending group's GPUs in a times the share of the receiving group's GPUs in
//     b; on a shared node's GPU links the share of the sender's GPUs there times the
//     receiver's; on the NICs the rest.
//   - Rates are max-min fair (progressive filling): the rates of all transfers rise together
//     until a link is full or a transfer reaches its own cap; those keep their rate and the
//     others go on rising.
//   - Whenever a transfer starts or its last byte leaves, the rates are shared again. A transfer
//     arrives the path's latency after its last byte leaves.
//   Alone, a transfer takes exactly the cost model's transfer_seconds. Without contention (the
//   cost model's own assumption) every transfer moves as if it were alone.

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cost/cost_model.h"
#include "sim/event_queue.h"

namespace hetrl::sim {

struct Link {
  std::string name;
  double capacity = 0;  // bytes/s
};

// Per link, over the run so far.
struct LinkUse {
  double bytes = 0;         // carried
  double busy_seconds = 0;  // with traffic
};

class Network {
 public:
  // `sets`: the GPUs of each group as the cost model describes them. The network schedules its
  // own events on `queue`.
  Network(EventQueue& queue, const cost::CostModel& model,
          std::vector<cost::CostModel::GpuSet> sets, bool contention);

  const std::vector<Link>& links() const { return links_; }
  const std::vector<LinkUse>& use() const { return use_; }

  // Starts moving `bytes` from group `from` to group `to` now, at most at `max_rate` bytes/s;
  // `done` runs when the last byte has arrived.
  void start(double bytes, int from, int to, double max_rate, std::function<void()> done);

  // Called with (link, time, bytes/s) whenever the traffic on a link changes.
  void on_rate(std::function<void(int, double, double)> callback) { on_rate_ = std::move(callback); }

  // Transfers still moving.
  int active() const;

 private:
  struct Load {
    int link;
    double fraction;  // of the transfer's rate that the link carries
  };
  struct Flow {
    double remaining = 0;
    double bytes = 0;
    double latency = 0;
    double max_rate = std::numeric_limits<double>::infinity();
    double alone_rate = 0;  // with no other transfer
    double rate = 0;
    std::vector<Load> loads;
    std::function<void()> done;
    bool active = false;
  };

  // Drains the active transfers at their rates up to now, and counts the links' use.
  void advance();
  // Max-min fair rates of the active transfers, then the next end of a transfer.
  void share();
  void tick(std::uint64_t version);
  int out_link(int group) const { return 2 * group; }
  int in_link(int group) const { return 2 * group + 1; }
  int zone_link(int from, int to) const;
  // The GPU links out of `group` on `node` (the link after is the one in); -1 if the node
  // holds no other group.
  int gpu_link(int group, int node) const;

  EventQueue& queue_;
  const cost::CostModel& model_;
  std::vector<cost::CostModel::GpuSet> sets_;
  bool contention_;
  std::vector<Link> links_;
  std::vector<std::vector<std::pair<int, int>>> gpu_links_;  // per group: (node, link out), by node
  std::vector<LinkUse> use_;
  std::vector<double> load_;  // bytes/s on each link now
  std::vector<Flow> flows_;
  double last_ = 0;
  std::uint64_t version_ = 0;  // a scheduled tick is stale once the rates change again
  std::function<void(int, double, double)> on_rate_;
  // Scratch for share().
  std::vector<double> remaining_capacity_;
  std::vector<double> unfrozen_fraction_;
  std::vector<char> frozen_;
  std::vector<char> full_;
  std::vector<double> next_load_;
};

}  // namespace hetrl::sim
