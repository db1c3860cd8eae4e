#include "store/memory_join_tokens.h"

#include <algorithm>
#include <tuple>

#include "store/validate.h"

namespace gpupool {

MemoryJoinTokens::MemoryJoinTokens() : table_(std::make_shared<Table>()) {}

std::unique_ptr<MemoryJoinTokens> MemoryJoinTokens::Share() const {
  return std::unique_ptr<MemoryJoinTokens>(new MemoryJoinTokens(table_));
}

Status MemoryJoinTokens::Create(const JoinTokenRecord& t) {
  GPUPOOL_RETURN_IF_ERROR(ValidateJoinToken(t));
  MutexLock lock(&table_->mu);
  if (!table_->rows.emplace(t.id, t).second) {
    return Status::AlreadyExists("join token " + t.id + " already exists");
  }
  return Status::Ok();
}

Result<std::optional<JoinTokenRecord>> MemoryJoinTokens::Get(const std::string& id) {
  MutexLock lock(&table_->mu);
  auto it = table_->rows.find(id);
  if (it == table_->rows.end()) return std::optional<JoinTokenRecord>();
  return std::optional<JoinTokenRecord>(it->second);
}

Result<std::vector<JoinTokenRecord>> MemoryJoinTokens::List() {
  MutexLock lock(&table_->mu);
  std::vector<JoinTokenRecord> out;
  for (const auto& [_, t] : table_->rows) out.push_back(t);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.create_ms, a.id) < std::tie(b.create_ms, b.id);
  });
  return out;
}

Status MemoryJoinTokens::Revoke(const std::string& id, int64_t now_ms) {
  MutexLock lock(&table_->mu);
  auto it = table_->rows.find(id);
  if (it == table_->rows.end()) return Status::NotFound("join token " + id + " does not exist");
  if (it->second.revoke_ms == 0) it->second.revoke_ms = now_ms;
  return Status::Ok();
}

Status MemoryJoinTokens::Use(const std::string& id, const std::string& node, int64_t now_ms) {
  MutexLock lock(&table_->mu);
  auto it = table_->rows.find(id);
  if (it == table_->rows.end()) return Status::NotFound("join token " + id + " does not exist");
  GPUPOOL_RETURN_IF_ERROR(JoinTokenUsable(it->second, now_ms));
  ++it->second.uses;
  it->second.last_node = node;
  it->second.last_use_ms = now_ms;
  return Status::Ok();
}

}  // namespace gpupool
