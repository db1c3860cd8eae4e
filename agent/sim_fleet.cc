#include "agent/sim_fleet.h"

#include <grpcpp/grpcpp.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

#include "base/log.h"

namespace gpupool::agent {

struct SimFleet::Io {
  boost::asio::io_context context;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
};

std::string SimFleet::NodeName(const std::string& prefix, int32_t index, int32_t count) {
  const size_t width = std::to_string(std::max(1, count - 1)).size();
  std::string n = std::to_string(index);
  if (n.size() < width) n.insert(0, width - n.size(), '0');
  return prefix + n;
}

SimFleet::SimFleet(SimFleetOptions options) : options_(std::move(options)), io_(new Io) {
  TaskRunnerOptions ro;
  ro.data_dir = options_.base.data_dir;
  ro.default_grace_ms = options_.base.stop_grace_period_ms;
  ro.tail_bytes = options_.base.output_tail_bytes;
  runner_ = std::make_unique<TaskRunner>(ro);
}

SimFleet::~SimFleet() { Shutdown(false); }

Status SimFleet::Start() {
  io_->work.emplace(io_->context.get_executor());
  for (int32_t i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] { io_->context.run(); });
  }
  const bool explicit_nodes = !options_.nodes.empty();
  const int32_t count =
      explicit_nodes ? static_cast<int32_t>(options_.nodes.size()) : options_.agents;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  const int32_t per = std::max(1, options_.agents_per_channel);
  for (int32_t i = 0; i < count; i += per) {
    channels.push_back(MakeAgentChannel(options_.base, /*own_connection=*/true));
  }
  for (int32_t i = 0; i < count; ++i) {
    AgentConfig c = options_.base;
    if (explicit_nodes) {
      const SimNodeSpec& n = options_.nodes[static_cast<size_t>(i)];
      c.node_name = n.name;
      if (!n.pool.empty()) c.pool = n.pool;
      c.sim = n.layout;
      for (const auto& [k, v] : n.labels) c.labels[k] = v;
    } else {
      c.node_name = NodeName(options_.name_prefix, i, count);
      if (!options_.pools.empty()) {
        c.pool = options_.pools[static_cast<size_t>(i) % options_.pools.size()];
      }
      c.sim.seed = options_.base.sim.seed + static_cast<uint64_t>(i);
    }
    GPUPOOL_RETURN_IF_ERROR(ValidateAgentConfig(&c));
    backends_.push_back(std::make_unique<SimulatedBackend>(c.node_name, c.sim, c.models));
    agents_.push_back(std::make_unique<Agent>(c, backends_.back().get(), runner_.get(),
                                              channels[static_cast<size_t>(i / per)],
                                              io_->context));
    GPUPOOL_RETURN_IF_ERROR(agents_.back()->Start());
  }
  LogInfo("agent.fleet", "started",
          {{"agents", std::to_string(agents_.size())},
           {"channels", std::to_string(channels.size())},
           {"threads", std::to_string(threads_.size())}});
  return Status::Ok();
}

void SimFleet::Shutdown(bool stop_tasks) {
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& a : agents_) a->Shutdown(stop_tasks);
  agents_.clear();
  io_->work.reset();
  io_->context.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

FleetStats SimFleet::stats() const {
  FleetStats f;
  f.agents = static_cast<int32_t>(agents_.size());
  for (const auto& a : agents_) {
    const AgentStats s = a->stats();
    f.connected += s.connected ? 1 : 0;
    f.registered += s.registered ? 1 : 0;
    f.registrations += s.registrations;
    f.heartbeats += s.heartbeats;
    f.updates += s.updates;
    f.ignored_commands += s.ignored_commands;
    if (f.heartbeat_interval_ms == 0) f.heartbeat_interval_ms = s.heartbeat_interval_ms;
  }
  return f;
}

}  // namespace gpupool::agent
