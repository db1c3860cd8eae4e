#include "api/client/leader_follow.h"

#include <algorithm>

namespace gpupool::api {

namespace {
constexpr char kNotLeaderType[] = "type.googleapis.com/gpupool.v1.NotLeader";
}  // namespace

grpc::Status NotLeaderStatus(const v1::NotLeader& hint, const std::string& message) {
  v1::RpcStatus details;
  details.set_code(static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  details.set_message(message);
  google::protobuf::Any* any = details.add_details();
  any->set_type_url(kNotLeaderType);
  any->set_value(hint.SerializeAsString());
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, message, details.SerializeAsString());
}

std::optional<v1::NotLeader> NotLeaderOf(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE || status.error_details().empty()) {
    return std::nullopt;
  }
  v1::RpcStatus details;
  if (!details.ParseFromString(status.error_details())) return std::nullopt;
  for (const google::protobuf::Any& any : details.details()) {
    if (any.type_url() != kNotLeaderType) continue;
    v1::NotLeader hint;
    if (hint.ParseFromString(any.value())) return hint;
  }
  return std::nullopt;
}

bool IsConnectFailure(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  // gRPC's own wording for a call that found no connection; a server's UNAVAILABLE (its database
  // is down) says something else and may have been executed in part, so it is never retried here.
  const std::string& m = status.error_message();
  return m.find("failed to connect") != std::string::npos ||
         m.find("Connection refused") != std::string::npos;
}

LeaderFollower::LeaderFollower(std::string addresses, ChannelMaker make,
                               std::chrono::milliseconds max_pause)
    : addresses_(std::move(addresses)),
      make_(std::move(make)),
      max_pause_(max_pause),
      target_(addresses_) {}

std::shared_ptr<grpc::Channel> LeaderFollower::channel() {
  if (!channel_) channel_ = make_(target_);
  return channel_;
}

void LeaderFollower::SwitchTo(const std::string& target) {
  if (target == target_ && channel_) return;
  target_ = target;
  channel_.reset();
}

std::chrono::milliseconds LeaderFollower::Pause() {
  const int64_t ms = std::min<int64_t>(max_pause_.count(), 50LL << std::min(pauses_, 10));
  ++pauses_;
  return std::chrono::milliseconds(std::max<int64_t>(1, ms));
}

LeaderFollower::Next LeaderFollower::OnFailure(const grpc::Status& status) {
  if (std::optional<v1::NotLeader> hint = NotLeaderOf(status)) {
    const std::string& leader = hint->leader_address();
    if (leader.empty()) {  // nobody leads: a takeover is under way
      SwitchTo(addresses_);
      return {true, Pause()};
    }
    if (leader == target_) {
      // The replica we were sent to won the lease and is still recovering: ask it again shortly.
      // Naming itself in any other role, it is confused: start over from the list.
      if (hint->role() != "leader-starting") SwitchTo(addresses_);
      return {true, Pause()};
    }
    // A leader we have not just failed to reach: at once. The one that just refused us (the
    // lease row names a killed leader until its lease runs out): only after a pause.
    const bool known_gone = leader == gone_;
    SwitchTo(leader);
    return {true, known_gone ? Pause() : std::chrono::milliseconds(0)};
  }
  if (following() && IsConnectFailure(status)) {
    gone_ = target_;
    SwitchTo(addresses_);
    return {true, Pause()};
  }
  return {};
}

}  // namespace gpupool::api
