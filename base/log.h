// Structured logging: one line per event, `ts=… level=… component=… msg="…" key=value …`
// (logfmt), written to stderr. Cheap enough for the daemons; the hot scheduling path logs only
// transitions, never per-candidate work.
//
// Thread safety: Log() may be called from any thread; each line is written with one write().
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace gpupool {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warn", "error"; returns false for anything else.
bool ParseLogLevel(std::string_view text, LogLevel* out);

using LogField = std::pair<std::string_view, std::string>;

void Log(LogLevel level, std::string_view component, std::string_view msg,
         std::initializer_list<LogField> fields = {});

inline void LogInfo(std::string_view c, std::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, c, m, f);
}
inline void LogWarn(std::string_view c, std::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarn, c, m, f);
}
inline void LogError(std::string_view c, std::string_view m,
                     std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, c, m, f);
}
inline void LogDebug(std::string_view c, std::string_view m,
                     std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kDebug, c, m, f);
}

}  // namespace gpupool
