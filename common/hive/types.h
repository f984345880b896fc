// Hive API types syncbus reads and writes, matching upstream Hive's CRDs (hive.openshift.io/v1
// SyncSet, SelectorSyncSet, ClusterDeployment; hiveinternal.openshift.io/v1alpha1 ClusterSync,
// ClusterSyncLease) field for field, with their defaults. Parsing never throws: malformed input is
// an InvalidArgument naming the field. Value types; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/hive/label_selector.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::hive {

inline constexpr char kHiveApiVersion[] = "hive.openshift.io/v1";
inline constexpr char kHiveInternalApiVersion[] = "hiveinternal.openshift.io/v1alpha1";
inline constexpr char kSyncSetPauseAnnotation[] = "hive.openshift.io/syncset-pause";
inline constexpr char kReconcilePauseAnnotation[] = "hive.openshift.io/reconcile-pause";
inline constexpr char kRelocateAnnotation[] = "hive.openshift.io/relocate";
inline constexpr char kFakeClusterAnnotation[] = "hive.openshift.io/fake-cluster";
inline constexpr char kSyncSetMetricsGroupAnnotation[] = "hive.openshift.io/syncset-metrics-group";
inline constexpr char kManagedLabel[] = "hive.openshift.io/managed";

// Go's strconv.ParseBool, as Hive reads its boolean annotations: "1", "t", "T", "TRUE", "true",
// "True" are true; "0", "f", "F", "FALSE", "false", "False" are false; anything else is not a
// boolean (nullopt).
std::optional<bool> ParseGoBool(const std::string& text);

struct ObjectMeta {
  std::string name;
  std::string ns;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;  // RFC 3339, as the server wrote it
  Labels labels;
  Labels annotations;
  bool deleting = false;  // metadata.deletionTimestamp is set

  static Result<ObjectMeta> FromJson(const Json& object);
  std::string Key() const { return ns.empty() ? name : ns + "/" + name; }
};

enum class ResourceApplyMode { kUpsert, kSync };  // anything but "Sync" is Upsert
// "" and any value Hive does not know are Apply (Hive's switch falls through to Apply).
enum class ApplyBehavior { kApply, kCreateOnly, kCreateOrUpdate };
// "" is strategic. An unknown value is kept (kInvalid, its text in patch_type_text): that patch
// fails when the set reaches it, as in Hive, instead of making the whole set unreadable.
enum class PatchType { kStrategic, kMerge, kJson, kInvalid };

struct SyncObjectPatch {
  std::string api_version, kind, name, ns, patch;
  PatchType patch_type = PatchType::kStrategic;
  std::string patch_type_text;  // as written
};

struct SecretReference {
  std::string name, ns;
};

struct SecretMapping {
  SecretReference source, target;
};

// One object of a set's spec.resources, kept as its compact JSON text: a parsed tree takes
// about ten times the text's memory, and a consumer's hub mirror holds every set of the fleet
// (10,000 clusters x 2 SyncSets x 10 objects: ~300 MB as trees, ~50 MB as text). Parsed again
// when a sync plans its applies. Immutable.
class EmbeddedObject {
 public:
  explicit EmbeddedObject(const Json& object);
  Json Parse() const;  // the object (parsing its own dump cannot fail)
  const std::string& api_version() const { return api_version_; }  // "" when not a string

 private:
  std::string text_;
  std::string api_version_;
};

// The spec shared by SyncSet and SelectorSyncSet.
struct SyncSetCommonSpec {
  std::vector<EmbeddedObject> resources;
  ResourceApplyMode resource_apply_mode = ResourceApplyMode::kUpsert;
  std::vector<SyncObjectPatch> patches;
  std::vector<SecretMapping> secret_mappings;
  ApplyBehavior apply_behavior = ApplyBehavior::kApply;
  bool enable_resource_templates = false;
  bool enable_patch_templates = false;
};

// What a set's FromJson does with spec.resources: keeps them (what a sync applies), or only
// checks that each is an object, as a reader that never applies them does (the publisher's
// cache), without the cost of keeping each one's text.
enum class SetResources { kKeep, kCheckOnly };

struct SyncSet {
  ObjectMeta meta;
  SyncSetCommonSpec spec;
  std::vector<std::string> cluster_deployment_refs;  // names in meta.ns
  static Result<SyncSet> FromJson(const Json& object, SetResources resources = SetResources::kKeep);
};

struct SelectorSyncSet {
  ObjectMeta meta;
  SyncSetCommonSpec spec;
  LabelSelector selector;
  static Result<SelectorSyncSet> FromJson(const Json& object,
                                          SetResources resources = SetResources::kKeep);
};

struct Condition {
  std::string type, status, reason, message, last_transition_time, last_probe_time;
  static Result<Condition> FromJson(const Json& c);
  Json ToJson() const;
};

struct ClusterDeployment {
  ObjectMeta meta;
  bool installed = false;
  std::string admin_kubeconfig_secret;  // spec.clusterMetadata.adminKubeconfigSecretRef.name
  std::string api_url_override;         // spec.controlPlaneConfig.apiURLOverride
  std::string api_server_ip_override;   // spec.controlPlaneConfig.apiServerIPOverride
  std::string installed_timestamp;      // status.installedTimestamp (RFC 3339), "" when unset
  std::vector<Condition> conditions;

  static Result<ClusterDeployment> FromJson(const Json& object);
  const Condition* FindCondition(const std::string& type) const;
  // hive.openshift.io/syncset-pause is a true Go boolean.
  bool paused() const;
  // hive.openshift.io/reconcile-pause is a true Go boolean.
  bool reconcile_paused() const;
  // hive.openshift.io/relocate is present (whatever its value).
  bool relocating() const;
  // hive.openshift.io/fake-cluster is a true Go boolean: no target traffic, every set succeeds.
  bool fake() const;
  // Hive's remoteclient.Unreachable: the Unreachable condition is True, Unknown or absent.
  bool unreachable() const;
  // The API URL Hive uses: apiURLOverride while it is active (no override: the kubeconfig's
  // server, empty here). Active means: set, and the ActiveAPIURLOverride condition is True.
  std::string ActiveApiUrl() const;
  // Why syncing is skipped (upstream's rules and order), or empty when the cluster is eligible:
  // paused, reconcile-paused, relocating, deleting, not-installed, unreachable.
  std::string SkipReason() const;
};

// resourcesToDelete entry.
struct SyncResourceReference {
  std::string api_version, kind, name, ns;
  Json ToJson() const;
  static Result<SyncResourceReference> FromJson(const Json& j);
};

enum class SyncResult { kSuccess, kFailure };

// One entry of status.syncSets / status.selectorSyncSets.
struct SyncStatus {
  std::string name;
  int64_t observed_generation = 0;
  std::vector<SyncResourceReference> resources_to_delete;
  SyncResult result = SyncResult::kSuccess;
  std::string failure_message;
  std::string last_transition_time;
  std::string first_success_time;  // empty = never succeeded
  Json ToJson() const;
  static Result<SyncStatus> FromJson(const Json& j);
};

struct ClusterSyncStatus {
  std::vector<SyncStatus> sync_sets;
  std::vector<SyncStatus> selector_sync_sets;
  std::vector<Condition> conditions;
  std::string first_success_time;
  std::optional<int64_t> controlled_by_replica;
  Json ToJson() const;
  static Result<ClusterSyncStatus> FromJson(const Json& status);
};

struct ClusterSync {
  ObjectMeta meta;
  ClusterSyncStatus status;
  static Result<ClusterSync> FromJson(const Json& object);
};

struct ClusterSyncLease {
  ObjectMeta meta;
  std::string renew_time;  // "" when absent or null
  static Result<ClusterSyncLease> FromJson(const Json& object);
};

const char* SyncResultName(SyncResult r);

}  // namespace syncbus::hive
