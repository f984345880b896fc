#include "publisher/hive_config.h"

#include "common/time_format.h"

namespace syncbus::publisher {

Result<std::optional<std::chrono::milliseconds>> ReadHiveReapplyInterval(kube::Client& hub) {
  using Interval = std::optional<std::chrono::milliseconds>;
  auto config = hub.Get(kube::Object(kube::resources::kHiveConfigs, "", kHiveConfigName));
  if (!config.ok()) {
    if (config.status().code() == Code::kNotFound) return Interval();
    return config.status().Annotate("reading HiveConfig " + std::string(kHiveConfigName));
  }
  const Json& spec = config->contains("spec") ? (*config)["spec"] : Json::object();
  auto field = spec.is_object() ? spec.find("syncSetReapplyInterval") : spec.end();
  if (!spec.is_object() || field == spec.end() || field->is_null()) return Interval();
  if (!field->is_string())
    return InvalidArgument("HiveConfig hive spec.syncSetReapplyInterval: expected a string");
  if (field->get_ref<const std::string&>().empty()) return Interval();
  auto parsed = ParseGoDuration(field->get<std::string>());
  if (!parsed.ok()) return parsed.status().Annotate("HiveConfig hive spec.syncSetReapplyInterval");
  if (parsed->count() <= 0)
    return InvalidArgument("HiveConfig hive spec.syncSetReapplyInterval: must be positive");
  return Interval(*parsed);
}

}  // namespace syncbus::publisher
