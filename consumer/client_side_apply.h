// What syncbus keeps of kubectl's client-side apply, so that it takes over from Hive (which
// applies with kubectl) and Hive can take over again: the last-applied-configuration annotation
// written byte for byte as kubectl writes it; the hand-over of a client-side applier's fields to
// syncbus's server-side field manager (client-go's csaupgrade, as a JSON patch); and kubectl's
// three-way patch of an existing object (applyBehavior CreateOrUpdate). Pure functions.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "common/json.h"

namespace syncbus::consumer {

inline constexpr char kLastAppliedAnnotation[] = "kubectl.kubernetes.io/last-applied-configuration";

// Sets the last-applied annotation of `object` (an applied object with metadata) to kubectl's
// serialization of it and returns the value; leaves it out ("") when the object's annotations
// would exceed the API's 256 KiB. `typed`: serialize as a Go struct of the kind would (a
// Secret Hive builds: creationTimestamp null).
std::string SetLastApplied(Json& object, bool typed);

// The JSON patch that hands the fields of `live`'s client-side apply managers — Update-operation
// managers of the main resource named in `managers` or owning the last-applied annotation — to
// `applier`'s Apply entry, removing their entries, with `live`'s resourceVersion as precondition.
// nullopt when there is none.
std::optional<std::string> TakeOverPatch(const Json& live, const std::string& applier,
                                         const std::set<std::string>& managers);

// Kinds kubectl knows as Go types (client-go's scheme): patched with strategic merge. Custom
// resources get a JSON merge patch, as kubectl's Patcher falls back to.
bool BuiltinGroup(const std::string& group);

// kubectl's three-way patch of `current` to `modified`, from `current`'s last-applied annotation:
// what differs from current, and null for what the annotation had and `modified` does not. Lists
// are sent whole (a strategic merge merges keyed lists by key). "{}": nothing to change.
std::string UpdatePatch(const Json& modified, const Json& current);

}  // namespace syncbus::consumer
