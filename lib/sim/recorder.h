#pragma once
// A listener that keeps every task instance and replica run, for reports and traces.

#include <vector>

#include "sim/simulator.h"

namespace hetrl::sim {

class Recorder final : public Listener {
 public:
  void task_done(const TaskRun& run) override { tasks.push_back(run); }
  void replica_done(const ReplicaRun& run) override { replicas.push_back(run); }

  std::vector<TaskRun> tasks;
  std::vector<ReplicaRun> replicas;
};

}  // namespace hetrl::sim
