// Structured logging: one line per event, "message key=value ..." (text) or one JSON object
// (json), on stderr through spdlog (thread-safe sink, level filtering). Init once in main; the
// functions are thread-safe and cheap when the level is disabled.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

namespace syncbus::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError };

struct Field {
  Field(std::string_view k, std::string v) : key(k), value(std::move(v)) {}
  Field(std::string_view k, const char* v) : key(k), value(v) {}
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Field(std::string_view k, T v) : key(k), value(std::to_string(v)) {}

  std::string_view key;
  std::string value;
};

// level: trace|debug|info|warn|error; format: text|json; component appears on every line.
void Init(const std::string& level, const std::string& format, const std::string& component);
bool Enabled(Level level);
void Write(Level level, std::string_view message, std::initializer_list<Field> fields);

inline void Debug(std::string_view m, std::initializer_list<Field> f = {}) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, m, f);
}
inline void Info(std::string_view m, std::initializer_list<Field> f = {}) {
  if (Enabled(Level::kInfo)) Write(Level::kInfo, m, f);
}
inline void Warn(std::string_view m, std::initializer_list<Field> f = {}) {
  if (Enabled(Level::kWarn)) Write(Level::kWarn, m, f);
}
inline void Error(std::string_view m, std::initializer_list<Field> f = {}) {
  if (Enabled(Level::kError)) Write(Level::kError, m, f);
}

}  // namespace syncbus::log
