// The built-in resource types the simulator serves (namespaces, configmaps, secrets,
// serviceaccounts, services, leases, deployments, RBAC roles and bindings, CRDs, validating
// webhook configurations): their schemas
// (types, patch merge keys, list semantics), defaults and validation. Built once per process;
// immutable and shared.
#pragma once

#include <vector>

#include "common/json.h"
#include "tests/kubesim/resource_registry.h"

namespace syncbus::kubesim {

const std::vector<TypePtr>& BuiltinTypes();

// The OpenAPI schema of ObjectMeta (labels, annotations, finalizers as a set, ownerReferences
// keyed by uid), spliced into every type's schema for apply and strategic merge.
const Json& ObjectMetaSchema();

}  // namespace syncbus::kubesim
