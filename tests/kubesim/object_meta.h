// ObjectMeta rules shared by every resource: which metadata fields exist and their types, and
// the checks of k8s.io/apimachinery/pkg/api/validation (names, namespace, labels, annotations,
// ownerReferences, finalizers). Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

// Keeps only ObjectMeta's fields (recording dropped paths under `path`). A field of the wrong
// JSON type is dropped when `drop_malformed` (custom resources), else reported: the returned
// string is a decoding error ("" = fine).
std::string NormalizeObjectMeta(Json& meta, bool drop_malformed, const std::string& path,
                                std::vector<std::string>* pruned);

enum class NameRule { kDnsSubdomain, kDnsLabel, kDns1035Label, kPathSegment };

// ValidateObjectMetaAccessor: name/generateName, namespace (required or forbidden), labels,
// annotations, ownerReferences, finalizers. `path` is "metadata" or an embedded path.
void ValidateObjectMeta(const Json& meta, bool requires_namespace, NameRule rule,
                        const std::string& path, std::vector<FieldError>* errors);

// ValidateObjectMetaUpdate's rules that matter here: no new finalizers while being deleted.
void ValidateObjectMetaUpdate(const Json& new_meta, const Json& old_meta,
                              std::vector<FieldError>* errors);

}  // namespace syncbus::kubesim
