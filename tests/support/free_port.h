// Test support: free loopback TCP ports for child servers (gpupoold, agents, a registry).
//
// A port is found by binding port 0 and releasing it, so another process could take it before
// the child binds it (rarely). Within one test process, though, FreePort never hands out the
// same port twice: the kernel may offer a just-released port again, and a daemon given one port
// for both gRPC and HTTP fails to start ("Address already in use").
//
// Thread safety: safe to call from any thread.
#pragma once

namespace gpupool::testing {

// A TCP port on 127.0.0.1 that was free a moment ago and that this process has not been given
// before.
int FreePort();

}  // namespace gpupool::testing
