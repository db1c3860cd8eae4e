// Test support: gRPC calls to whichever gpupoold replica leads, the way gpupoolctl and agents find
// it (api/client/leader_follow.h): start on the address list, follow a standby's NotLeader, go
// back to the list when the named leader is gone.
//
//   LeaderClient client(targets);                 // "127.0.0.1:7001,127.0.0.1:7002,…"
//   grpc::Status st = client.Call([&](auto ch, grpc::ClientContext* ctx) {
//     return v1::PoolService::NewStub(ch)->ListPools(ctx, req, &resp);
//   });
//
// Call() retries only what LeaderFollower says was not executed; every attempt gets a fresh
// context with a 5 s deadline; it gives up after `timeout` with the last status.
//
// Thread safety: one thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "api/client/leader_follow.h"
#include "base/address_list.h"

namespace gpupool::testing {

class LeaderClient {
 public:
  // `credentials`: how to reach every replica (null: plaintext).
  explicit LeaderClient(std::string targets,
                        std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr)
      : follower_(std::move(targets), [credentials](const std::string& t) {
          if (credentials == nullptr) {
            return grpc::CreateChannel(GrpcTargetOf(t), grpc::InsecureChannelCredentials());
          }
          grpc::ChannelArguments args;  // a list: the name every replica's certificate carries
          if (!TlsTargetNameOf(t).empty()) args.SetSslTargetNameOverride(TlsTargetNameOf(t));
          return grpc::CreateCustomChannel(GrpcTargetOf(t), credentials, args);
        }) {}

  using Fn = std::function<grpc::Status(std::shared_ptr<grpc::Channel>, grpc::ClientContext*)>;
  grpc::Status Call(const Fn& fn, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      grpc::Status st = fn(follower_.channel(), &ctx);
      if (st.ok()) {
        follower_.OnSuccess();
        return st;
      }
      const api::LeaderFollower::Next next = follower_.OnFailure(st);
      if (!next.retry || std::chrono::steady_clock::now() + next.delay >= end) return st;
      std::this_thread::sleep_for(next.delay);
    }
  }
  const std::string& target() const { return follower_.target(); }

 private:
  api::LeaderFollower follower_;
};

}  // namespace gpupool::testing
