// Preview messages: `syncbusctl preview` asks the consumers what a changed SyncSet or
// SelectorSyncSet would do on a batch of clusters (PreviewRequest, on the preview queue), and
// each consumer answers per cluster (PreviewReply, to the request's reply queue). Unlike a
// SyncRequest a preview request carries the set: the change is not on the hub yet, and the
// preview must not put it there. Bodies are small versioned JSON; decoding is strict and says
// exactly what is wrong. Value types and pure functions; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/amqp/session.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus {

inline constexpr int kPreviewVersion = 1;
// A set is at most what etcd stores (1.5 MiB) and a batch's cluster names are small.
inline constexpr size_t kMaxPreviewRequestBytes = size_t{2} << 20;
inline constexpr size_t kMaxPreviewReplyBytes = size_t{4} << 20;
inline constexpr size_t kMaxPreviewClusters = 1000;  // per request
inline constexpr size_t kMaxPreviewIdBytes = 128;

struct PreviewCluster {
  std::string ns;
  std::string name;
  std::string Key() const { return ns + "/" + name; }
  bool operator==(const PreviewCluster&) const = default;
};

struct PreviewRequest {
  std::string preview_id;  // names one preview run (1..kMaxPreviewIdBytes); echoed in replies
  // The set as the operator would apply it: a hive.openshift.io/v1 SyncSet or SelectorSyncSet
  // (apiVersion, kind, metadata.name, metadata.namespace for a SyncSet, spec).
  Json set;
  std::vector<PreviewCluster> clusters;  // 1..kMaxPreviewClusters
  bool operator==(const PreviewRequest&) const = default;
};

// What the sync of the changed set would do to one object of one cluster.
enum class ObjectOutcome {
  kCreated,     // absent now; the dry run creates it
  kChanged,     // present; the dry run changes the fields in `diff`
  kUnchanged,   // present; the dry run changes nothing
  kDeleted,     // Sync mode: dropped from the set, present now, would be deleted
  kRefused,     // the cluster refuses the write (admission, conflict, missing namespace,
                // unknown kind) or the set cannot be applied there: `message` says why
  kNotReached,  // an earlier object of the set was refused: Hive stops the set's applies there
};
const char* ObjectOutcomeName(ObjectOutcome outcome);  // "created", "changed", ..., "not-reached"

struct ObjectPreview {
  std::string api_version, kind, ns, name;
  ObjectOutcome outcome = ObjectOutcome::kUnchanged;
  // kChanged: one line per changed leaf field, "path: old -> new" (compact JSON values; "<none>"
  // for an absent side), server-managed fields left out.
  std::vector<std::string> diff;
  std::string message;  // kRefused: the apiserver's (or Hive's) message
  bool operator==(const ObjectPreview&) const = default;
};

struct PreviewReply {
  std::string preview_id;
  PreviewCluster cluster;
  // Non-empty when the cluster could not be previewed at all (it answers nothing, the set does
  // not apply to it, Hive skips it): why. `objects` is then empty.
  std::string error;
  std::vector<ObjectPreview> objects;  // in the order the sync would write them
  bool operator==(const PreviewReply&) const = default;
};

std::string EncodePreviewRequest(const PreviewRequest& request);
// Rejects: not JSON, not an object, over kMaxPreviewRequestBytes, unsupported version, missing
// or mistyped fields, a set that is not a hive.openshift.io/v1 SyncSet or SelectorSyncSet with a
// valid name (and namespace for a SyncSet) and an object spec, no cluster or more than
// kMaxPreviewClusters, cluster names that are not valid Kubernetes names.
Result<PreviewRequest> DecodePreviewRequest(std::string_view body);

std::string EncodePreviewReply(const PreviewReply& reply);
// Rejects: not JSON, over kMaxPreviewReplyBytes, unsupported version, missing or mistyped
// fields, an unknown outcome.
Result<PreviewReply> DecodePreviewReply(std::string_view body);

// The AMQP message of a request (published to the preview queue): JSON body, content_type,
// message_id, app_id, type, timestamp, persistent, reply_to `reply_queue` and correlation_id =
// the preview id.
amqp::Message ToAmqpMessage(const PreviewRequest& request, const std::string& app_id,
                            const std::string& message_id, const std::string& reply_queue,
                            WallTime now);
// The AMQP message of a reply (published to the request's reply_to queue through the default
// exchange): as above without reply_to, and transient, like the queue it goes to.
amqp::Message ToAmqpMessage(const PreviewReply& reply, const std::string& app_id, WallTime now);

}  // namespace syncbus
