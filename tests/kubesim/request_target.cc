#include "tests/kubesim/request_target.h"

namespace syncbus::kubesim {
namespace {

std::vector<std::string> Segments(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t start = i;
    while (i < path.size() && path[i] != '/') ++i;
    if (i > start) out.emplace_back(path.substr(start, i - start));
  }
  return out;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size() && Hex(in[i + 1]) >= 0 && Hex(in[i + 2]) >= 0) {
      out += static_cast<char>(Hex(in[i + 1]) * 16 + Hex(in[i + 2]));
      i += 2;
    } else if (plus_is_space && in[i] == '+') {
      out += ' ';
    } else {
      out += in[i];
    }
  }
  return out;
}

RequestTarget ParseTarget(std::string_view path) {
  RequestTarget t;
  std::vector<std::string> s = Segments(path);
  if (s.empty()) return t;
  if (s.size() == 1 && s[0] == "version") {
    t.kind = RequestTarget::Kind::kVersion;
    return t;
  }
  if (s.size() == 1 && (s[0] == "healthz" || s[0] == "livez" || s[0] == "readyz")) {
    t.kind = RequestTarget::Kind::kHealth;
    return t;
  }
  size_t rest = 0;
  if (s[0] == "api") {
    if (s.size() == 1) {
      t.kind = RequestTarget::Kind::kCoreVersions;
      return t;
    }
    t.version = s[1];
    rest = 2;
  } else if (s[0] == "apis") {
    if (s.size() == 1) {
      t.kind = RequestTarget::Kind::kGroupList;
      return t;
    }
    t.group = s[1];
    if (s.size() == 2) {
      t.kind = RequestTarget::Kind::kGroup;
      return t;
    }
    t.version = s[2];
    rest = 3;
  } else {
    return t;
  }
  std::vector<std::string> r(s.begin() + static_cast<long>(rest), s.end());
  if (r.empty()) {
    t.kind = RequestTarget::Kind::kResourceList;
    return t;
  }
  if (r[0] == "namespaces" && r.size() >= 3 && r[2] != "status" && r[2] != "finalize") {
    t.ns = r[1];
    t.namespaced_path = true;
    r.erase(r.begin(), r.begin() + 2);
  }
  if (r.size() > 3) return t;
  t.kind = RequestTarget::Kind::kResource;
  t.plural = r[0];
  if (r.size() >= 2) t.name = r[1];
  if (r.size() == 3) t.subresource = r[2];
  return t;
}

QueryParams::QueryParams(std::string_view raw) {
  size_t i = 0;
  while (i <= raw.size() && !raw.empty()) {
    size_t amp = raw.find('&', i);
    std::string_view part = raw.substr(i, amp == std::string_view::npos ? raw.npos : amp - i);
    if (!part.empty()) {
      size_t eq = part.find('=');
      std::string key = PercentDecode(part.substr(0, eq), true);
      std::string value =
          eq == std::string_view::npos ? "" : PercentDecode(part.substr(eq + 1), true);
      params_.emplace_back(std::move(key), std::move(value));
    }
    if (amp == std::string_view::npos) break;
    i = amp + 1;
  }
}

std::optional<std::string> QueryParams::Get(std::string_view name) const {
  for (const auto& [k, v] : params_) {
    if (k == name) return v;
  }
  return std::nullopt;
}

bool QueryParams::Flag(std::string_view name) const {
  auto v = Get(name);
  return v.has_value() && *v != "false" && *v != "0";
}

}  // namespace syncbus::kubesim
