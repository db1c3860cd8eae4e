// Child processes for the embedded PostgreSQL: run a program to completion with its output in a
// log file, and read the tail of that log for error messages.
//
// Children get stdin from /dev/null, stdout and stderr appended to a log file, no file
// descriptor of ours above 2 (so a server we start never holds the daemon's sockets or locks),
// an empty signal mask with default handlers, and a session of their own (so a Ctrl-C meant for
// the daemon does not stop the database under it).
//
// Thread safety: free functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool {

// Runs argv (argv[0] an absolute path) and waits for it. Returns its exit code (128 + signal
// number when killed by a signal); an error only when it could not be started.
Result<int> RunProcess(const std::vector<std::string>& argv, const std::string& log_path);

// Starts argv in a new session with `stdin_fd` as its standard input and does not wait.
// Returns the child's pid.
Result<int> SpawnDetached(const std::vector<std::string>& argv, int stdin_fd);

// The last `lines` lines of a text file, joined with " | "; "" when unreadable.
std::string TailOfFile(const std::string& path, int lines);

// "'text'" with embedded single quotes escaped for /bin/sh.
std::string ShellQuote(const std::string& text);

}  // namespace gpupool
