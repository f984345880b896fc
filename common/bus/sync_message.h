// SyncRequest: the message on the work queues. A trigger, never a payload: it names a cluster
// and the desired revision the publisher computed; consumers read the actual desired state from
// the hub, so a stale, duplicated or forged message can only cause a (cheap) re-check.
// Body: small versioned JSON. Decoding is strict and says exactly what is wrong.
// Value types and pure functions; thread-compatible.
#pragma once

#include <string>
#include <string_view>

#include "common/amqp/session.h"
#include "common/bus/headers.h"
#include "common/bus/topology.h"
#include "common/clock.h"
#include "common/status.h"

namespace syncbus {

inline constexpr int kSyncRequestVersion = 1;
inline constexpr size_t kMaxSyncRequestBytes = 4096;

// How far the publisher's cache had got when it decided: the resourceVersion of each collection
// as of its list or its last event (never a bookmark, which other watchers get at other times).
// A consumer applies only from a mirror at least this new (consumer/hub_reader.h). "" = unknown.
struct HubVersions {
  std::string cluster_deployments;
  std::string sync_sets;
  std::string selector_sync_sets;

  bool empty() const {
    return cluster_deployments.empty() && sync_sets.empty() && selector_sync_sets.empty();
  }
  bool operator==(const HubVersions&) const = default;
};

struct SyncRequest {
  std::string cluster_namespace;
  std::string cluster_name;
  std::string revision;  // the publisher's desired-state digest ("" = unknown)
  amqp::Lane lane = amqp::Lane::kChange;
  std::string reason;         // why it was enqueued: SyncReasonName (common/bus/sync_reason.h)
  bool full_reapply = false;  // reapply every set even if its status shows Success
  std::string enqueued_at;    // RFC 3339 with milliseconds
  HubVersions seen;           // optional in the body ("seen"): absent from older publishers
  // The resourceVersion of the cluster's admin kubeconfig Secret as the publisher last saw it
  // ("" = unknown; optional in the body, "kubeconfigVersion"): a consumer whose client was built
  // from an older version reads the Secret again.
  std::string kubeconfig_version;

  std::string ClusterKey() const { return cluster_namespace + "/" + cluster_name; }
  bool operator==(const SyncRequest&) const = default;
};

std::string EncodeSyncRequest(const SyncRequest& request);
// Rejects: not JSON, not an object, over kMaxSyncRequestBytes, missing or mistyped fields,
// unsupported version, names that are not valid Kubernetes names, unknown lane, a "seen" that is
// not an object of decimal resourceVersions, a kubeconfigVersion that is not one.
Result<SyncRequest> DecodeSyncRequest(std::string_view body);

// The AMQP message for a request: JSON body, content_type, message_id, timestamp, app_id,
// persistent delivery, and the cluster/attempt/lane/revision headers.
amqp::Message ToAmqpMessage(const SyncRequest& request, const std::string& app_id,
                            const std::string& message_id, WallTime now);

// The outer checks of a versioned JSON body: at most `max_bytes`, a JSON object, an integer
// "version" equal to `version`. Errors say which, without naming the message kind.
Result<Json> ParseVersionedBody(std::string_view body, size_t max_bytes, int version);

// True when `name` is a DNS-1123 subdomain (Kubernetes object names), `label` a DNS-1123 label.
bool IsDnsSubdomain(std::string_view name);
bool IsDnsLabel(std::string_view label);

}  // namespace syncbus
