#include "common/log.h"

#include <atomic>
#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/time_format.h"

namespace syncbus::log {
namespace {

struct State {
  std::mutex mu;
  std::shared_ptr<spdlog::logger> logger;
  bool json = false;
  std::string component = "syncbus";
};

State& state() {
  static State s;
  return s;
}

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};

const char* LevelName(Level l) {
  switch (l) {
    case Level::kTrace: return "trace";
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n' || c == '\t') return true;
  }
  return false;
}

std::string Quote(std::string_view v) {
  return Json(std::string(v)).dump();
}

std::shared_ptr<spdlog::logger> Logger() {
  auto& s = state();
  std::lock_guard lock(s.mu);
  if (!s.logger) {
    s.logger = std::make_shared<spdlog::logger>("syncbus",
                                                std::make_shared<spdlog::sinks::stderr_sink_mt>());
    s.logger->set_pattern("%v");
    s.logger->set_level(spdlog::level::trace);
    s.logger->flush_on(spdlog::level::trace);
  }
  return s.logger;
}

}  // namespace

void Init(const std::string& level, const std::string& format, const std::string& component) {
  Level l = Level::kInfo;
  if (level == "trace")
    l = Level::kTrace;
  else if (level == "debug")
    l = Level::kDebug;
  else if (level == "warn")
    l = Level::kWarn;
  else if (level == "error")
    l = Level::kError;
  g_level.store(static_cast<int>(l));
  Logger();
  auto& s = state();
  std::lock_guard lock(s.mu);
  s.json = format == "json";
  s.component = component;
}

bool Enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  auto logger = Logger();
  auto& s = state();
  bool json;
  std::string component;
  {
    std::lock_guard lock(s.mu);
    json = s.json;
    component = s.component;
  }
  std::string ts = FormatRfc3339Millis(RealClock().WallNow());
  std::string line;
  if (json) {
    Json j = {{"ts", ts}, {"level", LevelName(level)}, {"component", component}, {"msg", message}};
    for (const auto& f : fields) j[std::string(f.key)] = f.value;
    line = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  } else {
    line.reserve(96);
    line += ts;
    line += ' ';
    line += LevelName(level);
    line += ' ';
    line += component;
    line += ' ';
    line += message;
    for (const auto& f : fields) {
      line += ' ';
      line += f.key;
      line += '=';
      line += NeedsQuotes(f.value) ? Quote(f.value) : f.value;
    }
  }
  logger->log(spdlog::level::info, "{}", line);
}

}  // namespace syncbus::log
