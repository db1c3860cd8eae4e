// Following the leader among gpupoold replicas (docs/ha.md, "Clients and agents follow the
// leader"): the status a standby answers with, how a client reads it, and LeaderFollower, which
// decides where a client's next attempt goes.
//
// A standby serves its ports but executes nothing: every call gets UNAVAILABLE carrying a
// v1::NotLeader in the status details (and the leader's address in the `gpupool-leader`
// trailer). Such an answer proves the call was not executed, so any call — a submission too — may
// be sent again, to the address it names.
//
// LeaderFollower holds the configured address list ("a:7070,b:7070" or one address) and the
// channel in use. Its rule after a failed call:
//   - a NotLeader naming another address: follow it, at once — or after a pause when that is the
//     address that just refused our connection (the lease row names a killed leader until its
//     lease runs out);
//   - a NotLeader naming no leader (a takeover is under way): back to the list, after a pause;
//   - a NotLeader from the address we are on, naming itself as "leader-starting" (it won the
//     lease and is recovering): the same address again, after a pause;
//   - a connection failure on a followed address (the leader we were sent to is gone): back to
//     the list, after a pause;
//   - anything else: not ours to retry (the caller decides, as with one server).
// Pauses grow 50 ms, 100 ms, … up to `max_pause` (250 ms by default: a takeover is about a lease
// long, and a client that pauses longer only arrives later); a success resets them. Callers bound
// the whole by their own deadline.
//
// This file needs nothing but gRPC and the generated code, so gpupoolctl, the agent, tests and
// benchmarks share it; it is built into gpupool_proto.
//
// Thread safety: NotLeaderStatus and NotLeaderOf are pure; a LeaderFollower is used by one thread
// (or strand) at a time.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gpupool/v1/leader.pb.h"

namespace gpupool::api {

inline constexpr char kLeaderTrailer[] = "gpupool-leader";

// The UNAVAILABLE status a standby answers with; `message` is for people.
grpc::Status NotLeaderStatus(const v1::NotLeader& hint, const std::string& message);

// The NotLeader a status carries, if it came from a standby.
std::optional<v1::NotLeader> NotLeaderOf(const grpc::Status& status);

// True for gRPC's own "could not connect" UNAVAILABLE (the call never reached a server).
bool IsConnectFailure(const grpc::Status& status);

class LeaderFollower {
 public:
  // Makes a channel for a target: the configured list or one followed address.
  using ChannelMaker = std::function<std::shared_ptr<grpc::Channel>(const std::string& target)>;

  LeaderFollower(std::string addresses, ChannelMaker make,
                 std::chrono::milliseconds max_pause = std::chrono::milliseconds(250));

  // The channel to call on now (made on first use and after a switch).
  std::shared_ptr<grpc::Channel> channel();
  // Where calls go now: the configured list, or the leader address being followed.
  const std::string& target() const { return target_; }
  bool following() const { return target_ != addresses_; }

  struct Next {
    bool retry = false;
    std::chrono::milliseconds delay{0};
  };
  // After a failed call: whether to send it again (on channel(), which may have changed) and how
  // long to wait first.
  Next OnFailure(const grpc::Status& status);
  void OnSuccess() {
    pauses_ = 0;
    gone_.clear();
  }

 private:
  void SwitchTo(const std::string& target);
  std::chrono::milliseconds Pause();

  const std::string addresses_;
  const ChannelMaker make_;
  const std::chrono::milliseconds max_pause_;
  std::string target_;
  std::string gone_;  // the followed address whose connection failed last
  std::shared_ptr<grpc::Channel> channel_;
  int pauses_ = 0;
};

}  // namespace gpupool::api
