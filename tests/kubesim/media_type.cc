#include "tests/kubesim/media_type.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace syncbus::kubesim {
namespace {

std::string Trim(std::string_view s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  size_t end = s.find_last_not_of(" \t");
  return std::string(s.substr(begin, end - begin + 1));
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t next = s.find(sep, start);
    out.push_back(Trim(s.substr(start, next == std::string_view::npos ? next : next - start)));
    if (next == std::string_view::npos) return out;
    start = next + 1;
  }
}

struct MediaRange {
  std::string type;  // "application/json", "*/*"
  std::string as, group, version;
  double q = 1;
  int specificity = 2;  // */* 0, application/* 1, exact 2
  size_t order = 0;
};

std::vector<MediaRange> ParseAccept(const std::string& header) {
  std::vector<MediaRange> out;
  for (const std::string& clause : Split(header, ',')) {
    if (clause.empty()) continue;
    std::vector<std::string> parts = Split(clause, ';');
    MediaRange range;
    range.type = Lower(parts[0]);
    range.order = out.size();
    if (range.type == "*/*") {
      range.specificity = 0;
    } else if (range.type.size() > 2 && range.type.substr(range.type.size() - 2) == "/*") {
      range.specificity = 1;
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      size_t eq = parts[i].find('=');
      if (eq == std::string::npos) continue;
      std::string key = Lower(Trim(parts[i].substr(0, eq)));
      std::string value = Trim(parts[i].substr(eq + 1));
      if (key == "as") range.as = value;
      if (key == "g") range.group = value;
      if (key == "v") range.version = value;
      if (key == "q") range.q = std::strtod(value.c_str(), nullptr);
    }
    out.push_back(std::move(range));
  }
  std::stable_sort(out.begin(), out.end(), [](const MediaRange& a, const MediaRange& b) {
    if (a.q != b.q) return a.q > b.q;
    return a.specificity > b.specificity;
  });
  return out;
}

bool ServedType(const std::string& type) {
  return type == "application/json" || type == "application/yaml" ||
         type == "application/vnd.kubernetes.protobuf" || type == "application/*" || type == "*/*";
}

// The Go type kube-apiserver holds an answer of `type` in, as its NotAcceptable messages name it.
std::string GoTypeName(const ResourceType& type, bool list) {
  std::string suffix = list ? "List" : "";
  if (type.custom) return "*unstructured.Unstructured" + suffix;
  std::string package = type.group.empty() ? "core" : type.group.substr(0, type.group.find('.'));
  return "*" + package + "." + type.kind + suffix;
}

StatusError NotAcceptable(std::string message) {
  StatusError e;
  e.code = 406;
  e.reason = "NotAcceptable";
  e.message = std::move(message);
  return e;
}

}  // namespace

Outcome<ResponseForm> NegotiateForm(const http::Headers& headers) {
  std::optional<std::string> accept = http::FindHeader(headers, "Accept");
  if (!accept || Trim(*accept).empty()) return ResponseForm{};
  for (const MediaRange& range : ParseAccept(*accept)) {
    if (range.q <= 0 || !ServedType(range.type)) continue;
    if (range.as.empty()) return ResponseForm{};
    bool object = range.as == "PartialObjectMetadata";
    bool list = range.as == "PartialObjectMetadataList";
    if ((object || list) && range.group == "meta.k8s.io" &&
        (range.version == "v1" || range.version == "v1beta1")) {
      ResponseForm form;
      form.kind = list ? ResponseForm::Kind::kMetadataList : ResponseForm::Kind::kMetadata;
      form.version = range.version;
      return form;
    }
  }
  return NotAcceptable(
      "only the following media types are accepted: application/json, application/yaml, "
      "application/vnd.kubernetes.protobuf");
}

std::optional<StatusError> FormMismatch(const ResponseForm& form, const ResourceType& type,
                                        bool list) {
  if (form.kind == ResponseForm::Kind::kMetadata && list) {
    return NotAcceptable(
        "you requested PartialObjectMetadata, but the requested object is a list (" +
        GoTypeName(type, true) + ")");
  }
  if (form.kind == ResponseForm::Kind::kMetadataList && !list) {
    return NotAcceptable(
        "you requested PartialObjectMetadataList, but the requested object is not a list (" +
        GoTypeName(type, false) + ")");
  }
  return std::nullopt;
}

std::string MetadataJson(const ResponseForm& form, const StoredObject& object) {
  Json body = Json::parse(object.body, nullptr, /*allow_exceptions=*/false);
  Json metadata =
      body.is_object() && body.contains("metadata") ? std::move(body["metadata"]) : Json::object();
  std::string out = "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"";
  out += form.ApiVersion();
  out += "\",\"metadata\":";
  out += metadata.dump();
  out += '}';
  return out;
}

}  // namespace syncbus::kubesim
