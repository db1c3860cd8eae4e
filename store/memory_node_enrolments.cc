#include "store/memory_node_enrolments.h"

namespace gpupool {
namespace {

Status CheckRow(const NodeEnrolment& e) {
  if (e.node.empty()) return Status::InvalidArgument("node enrolment: the node name is empty");
  if (e.serial_hex.empty()) {
    return Status::InvalidArgument("node enrolment of '" + e.node + "': the serial is empty");
  }
  return Status::Ok();
}

}  // namespace

MemoryNodeEnrolments::MemoryNodeEnrolments() : table_(std::make_shared<Table>()) {}

std::unique_ptr<MemoryNodeEnrolments> MemoryNodeEnrolments::Share() const {
  return std::unique_ptr<MemoryNodeEnrolments>(new MemoryNodeEnrolments(table_));
}

Result<std::optional<NodeEnrolment>> MemoryNodeEnrolments::Get(const std::string& node) {
  MutexLock lock(&table_->mu);
  auto it = table_->rows.find(node);
  if (it == table_->rows.end()) return std::optional<NodeEnrolment>();
  return std::optional<NodeEnrolment>(it->second);
}

Status MemoryNodeEnrolments::Bind(const NodeEnrolment& e, const std::string& expected_serial) {
  GPUPOOL_RETURN_IF_ERROR(CheckRow(e));
  MutexLock lock(&table_->mu);
  auto it = table_->rows.find(e.node);
  const bool live = it != table_->rows.end() && !it->second.revoked;
  const bool matches =
      expected_serial.empty() ? !live : live && it->second.serial_hex == expected_serial;
  if (!matches) {
    return Status::FailedPrecondition("node '" + e.node + "': its binding has changed");
  }
  NodeEnrolment row = e;
  row.revoked = false;
  table_->rows[e.node] = std::move(row);
  return Status::Ok();
}

Status MemoryNodeEnrolments::Revoke(const std::string& node) {
  MutexLock lock(&table_->mu);
  auto it = table_->rows.find(node);
  if (it == table_->rows.end()) return Status::NotFound("node '" + node + "' was never enrolled");
  it->second.revoked = true;
  return Status::Ok();
}

Result<int> MemoryNodeEnrolments::Import(const std::vector<NodeEnrolment>& rows) {
  for (const NodeEnrolment& e : rows) GPUPOOL_RETURN_IF_ERROR(CheckRow(e));
  MutexLock lock(&table_->mu);
  int added = 0;
  for (const NodeEnrolment& e : rows) added += table_->rows.emplace(e.node, e).second ? 1 : 0;
  return added;
}

}  // namespace gpupool
