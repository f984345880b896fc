#include "tests/kubesim/request_tally.h"

namespace syncbus::kubesim {

std::string RequestVerb(std::string_view method, const RequestTarget& target,
                        const QueryParams& query, std::string_view content_type) {
  if (target.kind != RequestTarget::Kind::kResource) return "";
  const bool collection = target.name.empty();
  if (method == "GET") {
    if (query.Flag("watch")) return "watch";
    return collection ? "list" : "get";
  }
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH")
    return content_type.starts_with("application/apply-patch") ? "apply" : "patch";
  if (method == "DELETE") return collection ? "deletecollection" : "delete";
  return std::string(method);
}

std::string RequestResource(const RequestTarget& target) {
  return target.subresource.empty() ? target.plural : target.plural + "/" + target.subresource;
}

void RequestTally::Count(const std::string& verb, const std::string& resource) {
  if (verb.empty()) return;
  std::lock_guard lock(mu_);
  ++counts_[{verb, resource}];
}

void RequestTally::AddTo(std::map<std::pair<std::string, std::string>, uint64_t>& sum) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, n] : counts_) sum[key] += n;
}

Json RequestTally::ToJson() const {
  std::map<std::pair<std::string, std::string>, uint64_t> copy;
  AddTo(copy);
  return ToJson(copy);
}

Json RequestTally::ToJson(const std::map<std::pair<std::string, std::string>, uint64_t>& counts) {
  Json out = Json::object();
  for (const auto& [key, n] : counts) out[key.first][key.second] = n;
  return out;
}

}  // namespace syncbus::kubesim
