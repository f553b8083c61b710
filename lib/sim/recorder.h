#pragma once
// A listener that keeps every task instance, replica run, transfer and change of a link's
// traffic, for reports and traces.

#include <vector>

#include "sim/simulator.h"

namespace hetrl::sim {

class Recorder final : public Listener {
 public:
  void task_done(const TaskRun& run) override { tasks.push_back(run); }
  void replica_done(const ReplicaRun& run) override { replicas.push_back(run); }
  void transfer_done(const TransferRun& run) override { transfers.push_back(run); }
  void link_rate(int link, double time, double bytes_per_second) override {
    link_rates.push_back({link, time, bytes_per_second});
  }

  struct LinkRate {
    int link;
    double time;
    double bytes_per_second;
  };
  std::vector<TaskRun> tasks;
  std::vector<ReplicaRun> replicas;
  std::vector<TransferRun> transfers;
  std::vector<LinkRate> link_rates;
};

}  // namespace hetrl::sim
