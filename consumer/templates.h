// Templates in SyncSet resources and patches (enableResourceTemplates / enablePatchTemplates):
// upstream Hive's only template function, `{{ fromCDLabel "key" }}`, replaced by the value of the
// ClusterDeployment's label (empty when absent). Any other action is an error, so a typo fails the
// set instead of reaching the target. Pure functions; thread-safe.
#pragma once

#include <string>

#include "common/hive/label_selector.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::consumer {

// Expands every `{{ ... }}` action in `text`.
Result<std::string> ExpandTemplate(const std::string& text, const hive::Labels& cd_labels);

// Expands the templates in every string value of `value` (object keys are left alone).
Status ExpandTemplates(Json& value, const hive::Labels& cd_labels);

}  // namespace syncbus::consumer
