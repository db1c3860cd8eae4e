// Core: events recorded for others. The event log is written by the leader's core alone, in its
// batches (one writer, so event ids grow in commit order and webhooks can follow them by id); a
// component outside the core that has something to tell a tenant (the service controller)
// appends through here.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

void Core::RecordEvent(EventRecord event, Callback<bool> done) {
  if (event.kind.empty() || event.subject.empty()) {
    done(Status::InvalidArgument("event: a kind and a subject are required"));
    return;
  }
  if (event.time_us == 0) event.time_us = s_->clock->NowMicros();
  std::vector<Mutation> batch{AppendEvent{std::move(event)}};
  s_->Persist(std::move(batch), [done = std::move(done)](Status st) {
    if (!st.ok()) {
      done(st);
      return;
    }
    done(true);
  });
}

}  // namespace gpupool
