// The job table (job_table.h).
#include "scheduler/job_table.h"

#include <utility>

namespace gpupool {

JobRecord JobEntry::Record() const {
  JobRecord rec = head;
  rec.tasks.reserve(tasks.size());
  for (const Task& t : tasks) rec.tasks.push_back(t.rec);
  return rec;
}

JobEntry JobEntry::FromRecord(JobRecord rec) {
  JobEntry e;
  e.tasks.resize(rec.tasks.size());
  for (size_t i = 0; i < rec.tasks.size(); ++i) e.tasks[i].rec = std::move(rec.tasks[i]);
  rec.tasks.clear();
  e.head = std::move(rec);
  return e;
}

JobEntry* JobTable::Find(int64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobEntry* JobTable::Find(int64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

JobEntry* JobTable::FindTask(const std::string& task_id, int32_t* index) {
  int64_t job_id = 0;
  if (!ParseTaskId(task_id, &job_id, index)) return nullptr;
  JobEntry* job = Find(job_id);
  return job != nullptr && job->Has(*index) ? job : nullptr;
}

const JobEntry* JobTable::FindTask(const std::string& task_id, int32_t* index) const {
  return const_cast<JobTable*>(this)->FindTask(task_id, index);
}

}  // namespace gpupool
