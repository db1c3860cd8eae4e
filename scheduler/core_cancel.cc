// Core: cancelling a job — plan → persist → apply → act.
//
// Pending tasks end CANCELLED; a task that holds devices gets the durable stop intent CANCEL and
// the job turns CANCELLING until every such task has stopped (then CANCELLED). Nothing changes in
// memory and no StopTask is sent before the store has the cancel; if it refuses, the caller gets
// the error and the job is as it was.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

// Why `job` cannot be cancelled now (or answers at once through `done`); true when it can.
bool Core::State::CancelPrecondition(const JobEntry* job, int64_t id,
                                     const Callback<JobRecord>& done) const {
  if (job == nullptr) {
    done(Status::NotFound("job " + std::to_string(id) + " not found"));
  } else if (IsTerminal(job->head.state)) {
    done(Status::FailedPrecondition("job " + std::to_string(id) + " is already " +
                                    std::string(ToString(job->head.state))));
  } else if (job->head.state == JobState::kCancelling) {
    done(job->Record());  // asked again while its tasks stop: the same answer
  } else if (job->cancel_storing) {
    done(Status::FailedPrecondition("job " + std::to_string(id) + " is being cancelled"));
  } else {
    return true;
  }
  return false;
}

CancelPlan Core::State::PlanCancel(const JobEntry& job, const std::string& reason) const {
  CancelPlan plan;
  const int64_t now = clock->NowMicros();
  bool stopping = false;
  for (const Task& task : job.tasks) {
    const TaskRecord& cur = task.rec;
    if (IsTerminal(cur.state)) continue;
    stopping |= cur.state != TaskState::kPending;
    // A task whose end is being stored ends by itself; the job waits for it as CANCELLING.
    if (task.changing) continue;
    TaskRecord t = cur;
    if (t.state == TaskState::kPending) {
      t.state = TaskState::kCancelled;
      t.reason = reason;
      t.finished_us = now;
      t.pending = {};
    } else {
      t.stop = StopIntent::kCancel;  // the allocation stays held until the process is gone
      t.reason = "cancelling: " + reason;
    }
    plan.after.push_back(std::move(t));
  }
  plan.state = stopping ? JobState::kCancelling : JobState::kCancelled;
  plan.finish_us = stopping ? 0 : now;
  plan.reason = reason;
  for (const TaskRecord& t : plan.after) plan.batch.emplace_back(UpdateTask{t});
  plan.batch.emplace_back(UpdateJob{job.id(), plan.state, reason, plan.finish_us});
  plan.batch.emplace_back(AppendEvent{
      Event("job.cancelled", "job/" + std::to_string(job.id()), reason, job.head.spec.tenant)});
  return plan;
}

// The stored plan applied to the tasks as they are now: what to stop, and what moved meanwhile.
void Core::State::ApplyCancelToTasks(JobEntry& j, const CancelPlan& plan,
                                     std::vector<int32_t>* stop, std::vector<TaskChange>* late) {
  for (const TaskRecord& t : plan.after) {
    TaskRecord& cur = j.task(t.index).rec;
    if (j.task(t.index).changing || cur.attempt != t.attempt) continue;
    if (t.state == TaskState::kCancelled && cur.state == TaskState::kPending) {
      queue.Remove(j, t.index);
      cur = t;
      jobs.Reindex(j, t.index);
    } else if (t.stop == StopIntent::kCancel && cur.state == t.state) {
      cur = t;
      jobs.Reindex(j, t.index);
      stop->push_back(t.index);
    } else if (cur.state == TaskState::kPending) {
      queue.Remove(j, t.index);  // its placement was not stored: it never started
      late->push_back(PlanFinish(j, t.index, TaskState::kCancelled, plan.reason, 0));
    }
  }
}

void Core::CancelJob(int64_t id, std::string reason, Callback<JobRecord> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  JobEntry* job = s_->jobs.Find(id);
  if (!s_->CancelPrecondition(job, id, done)) return;
  CancelPlan plan = s_->PlanCancel(*job, reason.empty() ? "cancelled by user" : reason);
  std::vector<Mutation> batch = std::move(plan.batch);
  job->cancel_storing = true;
  s_->Persist(
      std::move(batch), [this, id, plan = std::move(plan), done = std::move(done)](Status st) {
        JobEntry* j = s_->jobs.Find(id);
        if (j == nullptr) return done(Status::NotFound("job " + std::to_string(id) + " not found"));
        j->cancel_storing = false;
        if (!st.ok()) return done(st.WithContext("cancel not stored"));
        std::vector<int32_t> stop;
        std::vector<TaskChange> late;  // what moved while the cancel was stored
        s_->ApplyCancelToTasks(*j, plan, &stop, &late);
        if (IsTerminal(j->head.state)) {
          // Its last task's end was stored and applied while the cancel was being stored: the job
          // ended as it did; the row the cancel overwrote is written back.
          s_->PersistOrRetry({UpdateJob{id, j->head.state, j->head.reason, j->head.finish_us}});
          return done(j->Record());
        }
        j->head.state = plan.state;
        j->head.reason = plan.reason;
        j->head.finish_us = plan.finish_us;
        // A task whose end was in flight may have ended meanwhile: CANCELLING with every task ended
        // is CANCELLED.
        if (s_->RefreshJobState(*j)) {
          s_->PersistOrRetry({UpdateJob{id, j->head.state, j->head.reason, j->head.finish_us}});
        }
        for (int32_t i : stop) s_->dispatcher.Stop(*j, i, plan.reason);
        if (!late.empty()) s_->CommitTaskChanges(this, std::move(late));
        const char* what =
            j->head.state == JobState::kCancelled ? "job cancelled: " : "job cancelling: ";
        s_->Notify(*j, what + plan.reason);
        done(j->Record());
      });
}

}  // namespace gpupool
