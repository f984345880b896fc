// Object diff: the compact field diff a preview shows between an object as it is on a cluster and
// as a dry run of a write returns it. One line per changed leaf, "path: old -> new", values as
// compact JSON and "<none>" for an absent side; paths are dotted keys (a key that is not a plain
// word, such as a label key, in brackets: metadata.labels["app.kubernetes.io/name"]) and list
// elements by index (spec.ports[0].port). Fields the server manages itself (resourceVersion,
// generation, managedFields, creationTimestamp, uid, selfLink, the whole status) and kubectl's
// last-applied annotation (it changes with any content change) are left out. Pure functions;
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace syncbus::consumer {

// The changed leaves from `before` to `after`, in key order; empty when they are the same but for
// the fields left out. Either may be null (absent): every leaf of the other is then a line.
std::vector<std::string> ObjectDiff(const Json& before, const Json& after);

}  // namespace syncbus::consumer
