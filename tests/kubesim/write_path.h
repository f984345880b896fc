// WritePath: create, update (PUT), patch (JSON, merge, strategic, server-side apply) and delete
// of one simulated API server, with a kube-apiserver's order of work: decode (unknown fields
// pruned, Warning headers), preconditions, field ownership, defaults, status subresource and
// generation rules, validation, then an optimistic commit retried when another write won.
// Thread-safe (stateless beyond the shared registry and store).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "tests/kubesim/api_server.h"
#include "tests/kubesim/apply.h"
#include "tests/kubesim/journal.h"
#include "tests/kubesim/object_store.h"
#include "tests/kubesim/request_target.h"
#include "tests/kubesim/resource_registry.h"
#include "tests/kubesim/selector.h"

namespace syncbus::kubesim {

struct WriteRequest {
  TypePtr type;
  std::string ns, name, subresource;
  const ApiRequest* http = nullptr;
  const QueryParams* query = nullptr;
  Journal* journal = nullptr;  // records what the request commits, when set
};

class WritePath {
 public:
  // `server_name`: the API server's name in journal entries.
  WritePath(ResourceRegistry* registry, ObjectStore* store, const Clock* clock,
            std::string server_name);

  ApiResponse Create(const WriteRequest& r);
  ApiResponse Update(const WriteRequest& r);
  ApiResponse Patch(const WriteRequest& r);
  ApiResponse Delete(const WriteRequest& r);
  // DELETE on a collection: every object matching the selectors; answers the deleted items.
  ApiResponse DeleteCollection(const WriteRequest& r, const LabelSelector& labels,
                               const FieldSelector& fields);
  // Creates a CustomResourceDefinition at startup (Options::crd_files).
  Outcome<ObjectPtr> CreateCrd(const Json& crd);

 private:
  struct Options;
  struct CreateResult {
    ObjectPtr object;                  // null on a dry run
    std::string body;                  // the response body
    bool exists = false;               // the name is taken (error is AlreadyExists)
    std::optional<StatusError> error;  // AlreadyExists
  };
  struct UpdateResult {
    ObjectStore::Code code = ObjectStore::Code::kOk;  // kStale: retry with a fresh read
    std::string body;
  };

  Outcome<Options> ParseOptions(const WriteRequest& r) const;
  Outcome<Json> DecodeBody(const WriteRequest& r) const;
  // Decodes a POST body (or an applied configuration) into a creatable object.
  Outcome<Json> CreateCandidate(const WriteRequest& r, Json object, const Options& opts,
                                std::vector<std::string>* warnings) const;
  // System fields, defaults, managedFields (`apply_entries` from an apply, else an Update entry
  // for `manager`), generation, validation, commit.
  Outcome<CreateResult> CommitCreate(const WriteRequest& r, const Json& object,
                                     const std::string& manager, bool dry_run,
                                     const std::vector<ManagedEntry>* apply_entries);
  // The shared tail of PUT, PATCH and apply: turns the decoded `candidate` into the next state
  // of `current` (parsed: `old`) and commits it.
  Outcome<UpdateResult> UpdateFrom(const WriteRequest& r, const ObjectPtr& current, const Json& old,
                                   const Json& candidate, const std::string& manager,
                                   const std::vector<ManagedEntry>* apply_entries, bool dry_run);
  ApiResponse Apply(const WriteRequest& r, const Options& opts);
  // CustomResourceDefinitions: (un)registers their types and marks them Established.
  void AfterCommit(const TypePtr& type, const ObjectStore::Committed& committed);
  // Validating admission webhooks, for DELETE only: the simulator calls no webhook, so a
  // configuration whose rules and selectors match fails the request as an unreachable endpoint
  // does on a real server (failurePolicy Fail, in its words); Ignore lets it through.
  std::optional<StatusError> RejectedByWebhook(const std::string& operation,
                                               const ResourceType& type, const std::string& ns,
                                               const Json& object) const;
  // What journals a commit of `r` answered with HTTP `code` (null when `r` is not journaled).
  ObjectStore::OnCommit Journaling(const WriteRequest& r, int code) const;
  std::string Now() const;

  ResourceRegistry* registry_;
  ObjectStore* store_;
  const Clock* clock_;
  const std::string server_name_;
};

}  // namespace syncbus::kubesim
