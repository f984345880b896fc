// Templates in SyncSet resources and patches (enableResourceTemplates / enablePatchTemplates),
// rendered as upstream Hive's clustersync renders them: Go's text/template (consumer/gotemplate)
// with one function, `fromCDLabel "key"` (the ClusterDeployment's label value, empty when
// absent), no data (dot is nil), and Hive's error texts. Pure functions; thread-safe.
#pragma once

#include <string>

#include "common/hive/label_selector.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::consumer {

// Renders one template text (a patch). The error is what Hive's processPatchParameters returns:
// `failed to parse template string "<text>": template: cdParams:1: ...` or `failed to execute
// template on string "<text>": template: cdParams:1:5: executing "cdParams" at <...>: ...`
// (Hive prefixes it with "failed to parameterize patch <i>: "). The output is Go's bytes, which
// need not be valid UTF-8 (e.g. {{"\xff"}}), exactly as Hive would send them.
Result<std::string> ExpandTemplate(const std::string& text, const hive::Labels& cd_labels);

// Renders every string value of `value` (object keys untouched), as Hive's
// processResourceParameters does with an object: each top-level field is rendered with its own
// template set (a {{define}} in one string of a field can be used by later strings of the same
// field: arrays in order, objects by key), and an error reads `Failed to apply template to value
// <Go %#v of the field>: <ExpandTemplate's error>` (Hive prefixes "failed to parameterize
// resource <i>: "). A non-object `value` is rendered as one field, without that prefix. Strings
// that are not valid UTF-8 after rendering get U+FFFD per bad byte, as Go's JSON encoding of the
// object does. On error `value` is left partly rendered.
Status ExpandTemplates(Json& value, const hive::Labels& cd_labels);

}  // namespace syncbus::consumer
