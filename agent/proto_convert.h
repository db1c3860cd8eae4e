// Conversions between the agent's value types and the gpupool.v1 agent protocol, in one place.
//
// FromProto(StartTask) also completes each device grant's thread percentage when the scheduler
// left it 0: ceil(granted milli-TFLOPS × 100 / the device's milli-TFLOPS), clamped to 1..100, or
// 100 when the grant names no TFLOPS (a whole device). It lists the device files the task may
// open: each granted device's (from the inventory) and, when any device is granted, the control
// devices.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "agent/backend.h"
#include "agent/task_runner.h"
#include "gpupool/v1/agent.pb.h"

namespace gpupool::agent {

void ToProto(const Device& d, v1::DeviceInfo* out);
void ToProto(const Link& l, v1::DeviceLink* out);
void ToProto(const DeviceSample& s, v1::DeviceMetrics* out);
void ToProto(const TaskStatus& t, v1::RunningTask* out);
void ToProto(const TaskStatus& t, int64_t epoch, v1::TaskUpdate* out);
v1::TaskState ToProto(TaskPhase phase);
bool IsTerminal(v1::TaskState state);

TaskSpec FromProto(const v1::StartTask& s, const std::string& owner, const Inventory& inventory);

}  // namespace gpupool::agent
