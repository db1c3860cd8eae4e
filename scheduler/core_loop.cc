#include "scheduler/core_loop.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace gpupool {

namespace asio = boost::asio;

struct CoreLoop::Impl {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
  asio::steady_timer timer{io};
  std::function<void()> tick;
  std::chrono::milliseconds interval{1000};
  std::thread thread;
  std::thread::id thread_id;
  bool stopped = false;
  // Set on the loop's thread by Stop's posted step. A tick whose timer had already fired when
  // Stop cancelled it still runs its handler with success; it must not arm the timer again,
  // or run() never runs out of work and Stop's join waits for ever.
  bool stopping = false;

  void Arm() {
    if (!tick) return;
    timer.expires_after(interval);
    timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping) return;
      tick();
      Arm();
    });
  }
};

CoreLoop::CoreLoop() : impl_(std::make_unique<Impl>()) {}

CoreLoop::~CoreLoop() { Stop(); }

void CoreLoop::Start(std::function<void()> tick, std::chrono::milliseconds interval) {
  impl_->tick = std::move(tick);
  impl_->interval = interval;
  impl_->thread = std::thread([this] {
    impl_->thread_id = std::this_thread::get_id();
    impl_->Arm();
    impl_->io.run();
  });
}

void CoreLoop::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  asio::post(impl_->io, [this] {
    impl_->stopping = true;
    impl_->timer.cancel();
    impl_->guard.reset();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

void CoreLoop::Post(std::function<void()> fn) { asio::post(impl_->io, std::move(fn)); }

Executor CoreLoop::executor() {
  return [this](std::function<void()> fn) { Post(std::move(fn)); };
}

bool CoreLoop::InLoopThread() const { return std::this_thread::get_id() == impl_->thread_id; }

}  // namespace gpupool
