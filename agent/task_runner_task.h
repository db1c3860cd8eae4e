// TaskRunner::Task: what the runner keeps of one task attempt. Internal to the runner's own
// translation units (task_runner.cc, task_runner_container.cc); every field is guarded by the
// runner's mu_.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/oci/container.h"
#include "agent/task_record.h"
#include "agent/task_runner.h"

namespace gpupool::agent {

struct TaskRunner::Task {
  TaskSpec spec;
  TaskStatus status;
  std::string dir;
  pid_t pid = 0;
  int pidfd = -1;
  TaskKind kind = TaskKind::kPlain;
  // Re-adopted from a previous agent process (TaskRunner::Recover): not this process's child, so
  // its end is seen through its pidfd and its status read from the recorder's file.
  bool adopted = false;
  int64_t leader_start = 0;     // the leader's start time (task_record.h)
  int64_t started_unix_ms = 0;  // when its program started
  bool reaped = false;
  int wait_status = 0;
  bool stop_requested = false;
  bool runtime_exceeded = false;
  std::string fault_reason;  // FailDevices(): reported FAILED with this reason
  std::string violation;     // the slice watchdog killed a process of it: FAILED, this reason
  bool sent_kill = false;
  int64_t runtime_deadline = 0;  // monotonic µs; 0 = none
  int64_t kill_deadline = 0;     // monotonic µs; 0 = none
  bool guarded = false;          // DeviceGuard::Ended() owed
  std::string slice_key;         // its slice ledger runs (SliceLedgers)
  std::string slice_dir;         // that ledger's directory, on the host
  bool pulling = false;          // an image task before its container started: no process yet
  std::unique_ptr<oci::PreparedContainer> container;  // an image task's, once prepared
  // When Start() accepted it: TaskStartTiming's origin.
  std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();
};

}  // namespace gpupool::agent
