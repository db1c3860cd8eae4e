#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

#include "base/log_scope.h"

namespace gpupool {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

// Quotes a value when it holds spaces, quotes or '='; escapes embedded quotes and newlines.
void AppendValue(std::string& out, std::string_view v) {
  bool quote = v.empty() || v.find_first_of(" \"=\n\t") != std::string_view::npos;
  if (!quote) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
}

}  // namespace

namespace {
thread_local int t_floor = static_cast<int>(LogLevel::kDebug);  // base/log_scope.h
}  // namespace

ScopedThreadLogFloor::ScopedThreadLogFloor(LogLevel floor) : previous_(t_floor) {
  t_floor = static_cast<int>(floor);
}
ScopedThreadLogFloor::~ScopedThreadLogFloor() { t_floor = previous_; }

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

bool ParseLogLevel(std::string_view text, LogLevel* out) {
  if (text == "debug")
    *out = LogLevel::kDebug;
  else if (text == "info")
    *out = LogLevel::kInfo;
  else if (text == "warn")
    *out = LogLevel::kWarn;
  else if (text == "error")
    *out = LogLevel::kError;
  else
    return false;
  return true;
}

void Log(LogLevel level, std::string_view component, std::string_view msg,
         std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level.load() || static_cast<int>(level) < t_floor) return;
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[64];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  std::string line;
  line.reserve(160);
  line += "ts=";
  line += ts;
  line += " level=";
  line += LevelName(level);
  line += " component=";
  line += component;
  line += " msg=";
  AppendValue(line, msg);
  for (const auto& [k, v] : fields) {
    line += ' ';
    line += k;
    line += '=';
    AppendValue(line, v);
  }
  line += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace gpupool
