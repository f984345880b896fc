// The form a read is answered in, negotiated from its Accept header as kube-apiserver 1.26 does
// it for JSON: the object itself, or only its metadata (PartialObjectMetadata and
// PartialObjectMetadataList of meta.k8s.io/v1 or v1beta1, what client-go's metadata client and
// controller-runtime's metadata informers ask for). Pure functions.
#pragma once

#include <optional>
#include <string>

#include "common/http/types.h"
#include "tests/kubesim/resource_registry.h"
#include "tests/kubesim/status_error.h"
#include "tests/kubesim/stored_object.h"

namespace syncbus::kubesim {

struct ResponseForm {
  enum class Kind { kObject, kMetadata, kMetadataList };
  Kind kind = Kind::kObject;
  std::string version = "v1";  // of meta.k8s.io, for the metadata forms

  bool metadata() const { return kind != Kind::kObject; }
  std::string ApiVersion() const { return "meta.k8s.io/" + version; }
};

// The Accept header's media ranges in order of preference (q, then as written); the first one
// the server can produce wins: application/json (or */*, application/*) without `as`, or with
// as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1|v1beta1. The YAML and protobuf media types
// are answered as JSON (the simulator speaks JSON only). No header: the object. Nothing
// acceptable: 406 "only the following media types are accepted: ...".
Outcome<ResponseForm> NegotiateForm(const http::Headers& headers);

// kube-apiserver negotiates before it knows whether the answer is a list, and refuses the
// mismatch afterwards: 406 "you requested PartialObjectMetadata, but the requested object is a
// list (*core.SecretList)" (or "... is not a list (*core.Secret)"), naming the Go type that
// holds the answer (*unstructured.Unstructured for custom resources).
std::optional<StatusError> FormMismatch(const ResponseForm& form, const ResourceType& type,
                                        bool list);

// The object as a PartialObjectMetadata of `form`'s version:
// {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{...}}.
std::string MetadataJson(const ResponseForm& form, const StoredObject& object);

}  // namespace syncbus::kubesim
