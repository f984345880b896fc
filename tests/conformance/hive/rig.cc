#include "tests/conformance/hive/rig.h"

#include <mutex>
#include <optional>
#include <random>

#include "common/base64.h"
#include "common/hive/desired_state.h"
#include "common/time_format.h"
#include "consumer/hub_reader.h"
#include "consumer/target_clients.h"
#include "publisher/sync_decision.h"
#include "tests/support/kube_clients.h"
#include "tests/support/wait.h"

namespace syncbus::conformance::hive {
namespace {

namespace res = kube::resources;

const kube::Resource kWebhooks{"admissionregistration.k8s.io", "v1",
                               "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
                               false};
constexpr char kWebhookName[] = "hive-conformance-fail-delete";

std::string RandomPrefix() {
  static std::mutex mu;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard lock(mu);
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out = "h";
  for (int i = 0; i < 6; ++i) out += kAlphabet[engine() % 36];
  return out;
}

Json Must(Result<Json> r, const std::string& what) {
  return Ok(std::move(r), what);
}

Json OwnerRef(const char* api_version, const char* kind, const std::string& name,
              const std::string& uid) {
  return {{"apiVersion", api_version},
          {"kind", kind},
          {"name", name},
          {"uid", uid},
          {"blockOwnerDeletion", true}};
}

WallTime TruncateToSecond(WallTime t) {
  return std::chrono::floor<std::chrono::seconds>(t);
}

// The stored form of Hive's SyncStatus options ("now" stored as the past: only an expectation
// may say "now").
Json StoredTime(SyncStatus::When when, const std::string& at) {
  switch (when) {
    case SyncStatus::When::kNone: return nullptr;
    case SyncStatus::When::kAt: return at;
    default: return kTimeInThePast;
  }
}

}  // namespace

Json SyncStatus::ToJson() const {
  Json j = {{"name", name},
            {"observedGeneration", observed_generation},
            {"result", success ? "Success" : "Failure"},
            {"lastTransitionTime", StoredTime(last_transition, "")}};
  if (!success) j["failureMessage"] = failure_message;
  if (!resources_to_delete.empty()) j["resourcesToDelete"] = resources_to_delete;
  Json fst = StoredTime(first_success, first_success_at);
  if (!fst.is_null()) j["firstSuccessTime"] = fst;
  return j;
}

Json ConfigMapRef(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"namespace", ns}, {"name", name}};
}

Json SecretRef(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Secret"}, {"namespace", ns}, {"name", name}};
}

Json ConfigMap(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"namespace", ns}, {"name", name}}}};
}

Json SecretMapping(const std::string& source_name, const std::string& target_ns,
                   const std::string& target_name) {
  return {{"sourceRef", {{"name", source_name}}},
          {"targetRef", {{"namespace", target_ns}, {"name", target_name}}}};
}

Json Resources(std::initializer_list<Json> objects) {
  Json out = Json::array();
  for (const Json& o : objects) out.push_back(o);
  return out;
}

Json Ok(Result<Json> r, const std::string& what) {
  REQUIRE_MESSAGE(r.ok(), what << ": " << r.status().ToString());
  return std::move(r).value();
}

bool Between(const std::string& time, WallTime start, WallTime end) {
  auto t = ParseRfc3339(time);
  return t.ok() && *t >= start && *t <= end;
}

Rig::Rig() : servers_(StartServers()), prefix_(RandomPrefix()) {
  REQUIRE(servers_ != nullptr);
  hub_ = std::make_unique<kube::ClientImpl>(servers_->hub, servers_->transport);
  target_ = std::make_unique<kube::ClientImpl>(servers_->target, servers_->transport);
  ns_ = U("test-namespace");
  Must(hub_->Create(kube::Collection(res::kNamespaces),
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}}),
       "hub namespace");
  CreateHubSecret(ns_, std::string(kCdName) + "-admin-kubeconfig",
                  {{"kubeconfig", EncodeBase64(servers_->target_kubeconfig)}});
  targets_ = std::make_unique<consumer::TargetClients>(servers_->transport, 0);
  reader_ = std::make_unique<consumer::DirectHubReader>(*hub_);
  consumer::SyncerOptions options;
  options.per_cluster_qps = 0;
  syncer_ = std::make_unique<consumer::ClusterSyncer>(options, *hub_, *reader_, *targets_,
                                                      RealClock(), registry_);
  consumer::LeaseOptions lease_options;
  lease_options.identity = "conformance";
  lease_options.release_by_status = false;  // no mirror
  leases_ = std::make_unique<consumer::ClusterLeases>(lease_options, *hub_, RealClock(), registry_);
}

Rig::~Rig() = default;

void Rig::CreateCd(const Cd& o) {
  Json cd = {
      {"apiVersion", "hive.openshift.io/v1"},
      {"kind", "ClusterDeployment"},
      {"metadata", {{"name", kCdName}, {"namespace", ns_}}},
      {"spec",
       {{"baseDomain", "conformance.syncbus.io"},
        {"clusterName", kCdName},
        {"platform", {{"none", Json::object()}}},
        {"installed", o.installed},
        {"clusterMetadata",
         {{"clusterID", prefix_},
          {"infraID", prefix_},
          {"adminKubeconfigSecretRef", {{"name", std::string(kCdName) + "-admin-kubeconfig"}}}}}}}};
  if (!o.labels.empty()) cd["metadata"]["labels"] = o.labels;
  if (!o.annotations.empty()) cd["metadata"]["annotations"] = o.annotations;
  if (o.deleted) cd["metadata"]["finalizers"] = Json::array({"test-finalizer"});
  if (!o.control_plane.is_null()) cd["spec"]["controlPlaneConfig"] = o.control_plane;
  Json made =
      Must(hub_->Create(kube::Collection(res::kClusterDeployments, ns_), cd), "ClusterDeployment");
  cd_uid_ = made["metadata"]["uid"].get<std::string>();
  Json status = {{"conditions", o.extra_conditions}};
  if (o.unreachable) {
    status["conditions"].push_back({{"type", "Unreachable"},
                                    {"status", *o.unreachable},
                                    {"reason", "Test"},
                                    {"message", "test"},
                                    {"lastTransitionTime", kTimeInThePast},
                                    {"lastProbeTime", kTimeInThePast}});
  }
  if (o.installed_timestamp) {
    status["installedTimestamp"] =
        o.installed_at.empty() ? FormatRfc3339(RealClock().WallNow()) : o.installed_at;
  }
  made["status"] = status;
  Must(hub_->Update(kube::StatusOf(res::kClusterDeployments, ns_, kCdName), made),
       "ClusterDeployment status");
  if (o.deleted) {
    Status deleted = hub_->Delete(kube::Object(res::kClusterDeployments, ns_, kCdName), {});
    REQUIRE_MESSAGE(deleted.ok(), deleted.ToString());
  }
}

std::string Rig::Start(const std::string& ns) {
  CreateCd();
  CreateClusterSync();
  std::string name = T(ns);
  CreateTargetNamespace(name);
  return name;
}

void Rig::CreateClusterSync(const std::vector<SyncStatus>& sync_sets,
                            const std::vector<SyncStatus>& selector_sync_sets, Json conditions) {
  REQUIRE_MESSAGE(!cd_uid_.empty(), "create the ClusterDeployment first");
  Json cs = {
      {"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
      {"kind", "ClusterSync"},
      {"metadata",
       {{"name", kCdName},
        {"namespace", ns_},
        {"ownerReferences",
         Json::array({OwnerRef("hive.openshift.io/v1", "ClusterDeployment", kCdName, cd_uid_)})}}},
      {"spec", Json::object()}};
  Json made = Must(hub_->Create(kube::Collection(res::kClusterSyncs, ns_), cs), "ClusterSync");
  cluster_sync_uid_ = made["metadata"]["uid"].get<std::string>();
  Json status = Json::object();
  auto list = [](const std::vector<SyncStatus>& v) {
    Json a = Json::array();
    for (const auto& s : v) a.push_back(s.ToJson());
    return a;
  };
  if (!sync_sets.empty()) status["syncSets"] = list(sync_sets);
  if (!selector_sync_sets.empty()) status["selectorSyncSets"] = list(selector_sync_sets);
  if (!conditions.is_null()) status["conditions"] = conditions;
  if (status.empty()) return;
  made["status"] = status;
  Must(hub_->Update(kube::StatusOf(res::kClusterSyncs, ns_, kCdName), made), "ClusterSync status");
}

void Rig::CreateLease(WallTime renew) {
  CreateLease(FormatRfc3339Micro(renew));
}

void Rig::CreateLease(const std::string& renew_time) {
  REQUIRE_MESSAGE(!cluster_sync_uid_.empty(), "create the ClusterSync first");
  Json lease = {
      {"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
      {"kind", "ClusterSyncLease"},
      {"metadata",
       {{"name", kCdName},
        {"namespace", ns_},
        {"ownerReferences", Json::array({OwnerRef("hiveinternal.openshift.io/v1alpha1",
                                                  "ClusterSync", kCdName, cluster_sync_uid_)})}}},
      {"spec", {{"renewTime", renew_time}}}};
  Must(hub_->Create(kube::Collection(res::kClusterSyncLeases, ns_), lease), "ClusterSyncLease");
}

namespace {

// Writes `object` (a set) so that its generation ends at `generation`: created with a filler
// resource, replaced once per generation, the last time with the real spec.
void WriteAtGeneration(kube::ClientImpl& hub, const kube::Resource& resource, const std::string& ns,
                       Json object, int64_t generation) {
  const std::string name = object["metadata"]["name"];
  Json spec = object["spec"];
  auto with_filler = [&](int64_t n) {
    Json s = spec;
    if (!s.contains("resources")) s["resources"] = Json::array();
    s["resources"].push_back(
        {{"apiVersion", "v1"},
         {"kind", "ConfigMap"},
         {"metadata",
          {{"name", "generation-filler-" + std::to_string(n)}, {"namespace", "default"}}}});
    return s;
  };
  object["spec"] = generation > 1 ? with_filler(1) : spec;
  Json made = Must(hub.Create(kube::Collection(resource, ns), object), resource.kind + " " + name);
  for (int64_t g = 2; g <= generation; ++g) {
    made["spec"] = g == generation ? spec : with_filler(g);
    made = Must(hub.Update(kube::Object(resource, ns, name), made), resource.kind + " " + name);
  }
  REQUIRE(made["metadata"]["generation"].get<int64_t>() == generation);
}

}  // namespace

void Rig::CreateSyncSet(const std::string& name, Json spec, int64_t generation) {
  if (!spec.contains("clusterDeploymentRefs"))
    spec["clusterDeploymentRefs"] = Json::array({{{"name", kCdName}}});
  Json ss = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "SyncSet"},
             {"metadata", {{"name", name}, {"namespace", ns_}}},
             {"spec", spec}};
  WriteAtGeneration(*hub_, res::kSyncSets, ns_, ss, generation);
}

void Rig::CreateSelectorSyncSet(const std::string& name, Json spec, int64_t generation) {
  Json sss = {{"apiVersion", "hive.openshift.io/v1"},
              {"kind", "SelectorSyncSet"},
              {"metadata", {{"name", name}}},
              {"spec", spec}};
  WriteAtGeneration(*hub_, res::kSelectorSyncSets, "", sss, generation);
}

void Rig::CreateHubSecret(const std::string& ns, const std::string& name, const Json& data) {
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", name}, {"namespace", ns}}},
                 {"data", data}};
  Must(hub_->Create(kube::Collection(res::kSecrets, ns), secret), "hub Secret " + ns + "/" + name);
}

void Rig::CreateTargetNamespace(const std::string& name) {
  syncbus::testing::CreateObject(
      *target_, res::kNamespaces,
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}},
      /*exists_ok=*/true);
}

void Rig::CreateHubNamespace(const std::string& name) {
  syncbus::testing::CreateObject(
      *hub_, res::kNamespaces,
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
}

void Rig::CreateTargetObject(const kube::Resource& resource, const Json& object) {
  std::string ns = resource.namespaced ? object["metadata"].value("namespace", "") : "";
  Must(target_->Create(kube::Collection(resource, ns), object),
       "target " + object["metadata"].dump());
}

void Rig::FailLabelledDeletes() {
  Json webhook = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "ValidatingWebhookConfiguration"},
      {"metadata", {{"name", kWebhookName}}},
      {"webhooks",
       Json::array({{{"name", "fail-delete.hive-conformance.syncbus.io"},
                     {"clientConfig", {{"url", "https://127.0.0.1:1/fail-delete"}}},
                     {"rules", Json::array({{{"operations", {"DELETE"}},
                                             {"apiGroups", {""}},
                                             {"apiVersions", {"v1"}},
                                             {"resources", {"configmaps"}}}})},
                     {"objectSelector", {{"matchLabels", {{kFailDeleteLabel, "true"}}}}},
                     {"failurePolicy", "Fail"},
                     {"sideEffects", "None"},
                     {"admissionReviewVersions", {"v1"}},
                     {"timeoutSeconds", 2}}})}};
  auto made = target_->Create(kube::Collection(kWebhooks), webhook);
  REQUIRE_MESSAGE((made.ok() || made.status().code() == Code::kAlreadyExists),
                  made.status().ToString());
  // A real API server takes the configuration up a moment later: wait until a probe's deletion
  // fails.
  const std::string probe_ns = T("fail-delete-probe");
  CreateTargetNamespace(probe_ns);
  int attempt = 0;
  bool effective = testing::WaitFor(
      [&] {
        Json probe = ConfigMap(probe_ns, "probe-" + std::to_string(attempt++));
        probe["metadata"]["labels"] = {{kFailDeleteLabel, "true"}};
        if (!target_->Create(kube::Collection(res::kConfigMaps, probe_ns), probe).ok())
          return false;
        return !target_
                    ->Delete(kube::Object(res::kConfigMaps, probe_ns, probe["metadata"]["name"]),
                             {})
                    .ok();
      },
      std::chrono::seconds(20), std::chrono::milliseconds(100));
  REQUIRE_MESSAGE(effective, "the fail-delete webhook never took effect");
}

Reconciled Rig::Reconcile() {
  Reconciled r;
  r.start = TruncateToSecond(RealClock().WallNow());
  Json lease_before = GetLease();
  if (!lease_before.is_null())
    r.lease_renew_time_before = lease_before["spec"].value("renewTime", "");
  // What the publisher sees of the cluster.
  auto cd_json = hub_->Get(kube::Object(res::kClusterDeployments, ns_, kCdName));
  if (cd_json.ok()) {
    auto cd = syncbus::hive::ClusterDeployment::FromJson(*cd_json);
    REQUIRE_MESSAGE(cd.ok(), cd.status().ToString());
    auto ss_list = hub_->List(kube::Collection(res::kSyncSets, ns_), {});
    auto sss_list = hub_->List(kube::Collection(res::kSelectorSyncSets), {});
    REQUIRE(ss_list.ok());
    REQUIRE(sss_list.ok());
    std::vector<syncbus::hive::SyncSet> ss;
    std::vector<syncbus::hive::SelectorSyncSet> sss;
    for (const auto& item : ss_list->items) {
      if (auto parsed = syncbus::hive::SyncSet::FromJson(item); parsed.ok()) ss.push_back(*parsed);
    }
    for (const auto& item : sss_list->items) {
      if (auto parsed = syncbus::hive::SelectorSyncSet::FromJson(item); parsed.ok())
        sss.push_back(*parsed);
    }
    std::vector<const syncbus::hive::SyncSet*> ss_ptrs;
    std::vector<const syncbus::hive::SelectorSyncSet*> sss_ptrs;
    for (const auto& s : ss) ss_ptrs.push_back(&s);
    for (const auto& s : sss) sss_ptrs.push_back(&s);
    syncbus::hive::DesiredState desired = syncbus::hive::ComputeDesired(*cd, ss_ptrs, sss_ptrs);
    std::optional<publisher::SyncReport> status;  // as the publisher's cache keeps it
    if (Json cs = GetClusterSync(); !cs.is_null()) {
      auto parsed = syncbus::hive::ClusterSync::FromJson(cs);
      REQUIRE(parsed.ok());
      status = publisher::SyncReport::Of(*parsed);
    }
    std::optional<WallTime> lease_renewal;  // as the publisher's cache keeps it
    if (!lease_before.is_null()) {
      auto parsed = syncbus::hive::ClusterSyncLease::FromJson(lease_before);
      REQUIRE(parsed.ok());
      lease_renewal = publisher::LeaseRenewal(*parsed);
    }
    publisher::ReapplyPolicy policy;
    const WallTime now = RealClock().WallNow();
    publisher::SyncNeed need =
        publisher::DecideSync(desired, status ? &*status : nullptr, lease_renewal, now, policy);
    // A failed set is retried by the consumer's retry of the request that failed it.
    if (need.kind != publisher::NeedKind::kNone) {
      r.sent = true;
      r.full_reapply = need.kind == publisher::NeedKind::kReapply ||
                       publisher::FullReapplyDue(desired.cluster_key, lease_renewal, now, policy);
      SyncRequest request;
      request.cluster_namespace = ns_;
      request.cluster_name = kCdName;
      request.full_reapply = r.full_reapply;
      request.reason = std::string(SyncReasonName(*need.reason));
      // As a consumer runs it: the claim on the cluster is taken at the sync's first write and
      // given back after it; it is what writes the ClusterSyncLease.
      consumer::ClusterClaim claim(*leases_, ns_, kCdName, request.full_reapply, RealClock());
      auto outcome = syncer_->Sync(request, [&] { return claim.Check(); });
      claim.Finish(outcome.ok() ? outcome->status_version : "");
      r.sync_status = outcome.status();
      if (outcome.ok()) r.outcome = *outcome;
    }
  }
  r.end = TruncateToSecond(RealClock().WallNow() + std::chrono::seconds(1));
  return r;
}

Json Rig::GetClusterSync() {
  auto cs = hub_->Get(kube::Object(res::kClusterSyncs, ns_, kCdName));
  if (!cs.ok() && cs.status().code() == Code::kNotFound) return nullptr;
  return Must(std::move(cs), "ClusterSync");
}

Json Rig::GetLease() {
  auto lease = hub_->Get(kube::Object(res::kClusterSyncLeases, ns_, kCdName));
  if (!lease.ok() && lease.status().code() == Code::kNotFound) return nullptr;
  return Must(std::move(lease), "ClusterSyncLease");
}

Json Rig::TargetGet(const kube::Resource& resource, const std::string& ns,
                    const std::string& name) {
  auto got = target_->Get(kube::Object(resource, resource.namespaced ? ns : "", name));
  if (!got.ok() && got.status().code() == Code::kNotFound) return nullptr;
  return Must(std::move(got), "target " + ns + "/" + name);
}

std::vector<Json> Rig::Entries(const char* list) {
  Json cs = GetClusterSync();
  if (cs.is_null() || !cs.contains("status") || !cs["status"].contains(list)) return {};
  return cs["status"][list].get<std::vector<Json>>();
}

namespace {

void CheckTime(const char* what, const Json& actual, SyncStatus::When when, const std::string& at,
               WallTime start, WallTime end) {
  INFO(what);
  switch (when) {
    case SyncStatus::When::kNone: CHECK(actual.is_null()); break;
    case SyncStatus::When::kPast: CHECK(actual == kTimeInThePast); break;
    case SyncStatus::When::kAt: CHECK(actual == at); break;
    case SyncStatus::When::kNow:
      REQUIRE(actual.is_string());
      CHECK_MESSAGE(Between(actual.get<std::string>(), start, end), actual.get<std::string>()
                                                                        << " is not now");
      break;
  }
}

void CheckStatuses(const char* list, const std::vector<SyncStatus>& expected,
                   const std::vector<Json>& actual, WallTime start, WallTime end) {
  INFO(list);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const SyncStatus& e = expected[i];
    const Json& a = actual[i];
    INFO("entry " << i << ": " << a.dump());
    CHECK(a.value("name", "") == e.name);
    CHECK(a.value("observedGeneration", int64_t{-1}) == e.observed_generation);
    CHECK(a.value("result", "") == (e.success ? "Success" : "Failure"));
    CHECK(a.value("failureMessage", "") == e.failure_message);
    Json rtd = a.contains("resourcesToDelete") ? a["resourcesToDelete"] : Json::array();
    CHECK(rtd == Json(e.resources_to_delete));
    CheckTime("lastTransitionTime",
              a.contains("lastTransitionTime") ? a["lastTransitionTime"] : Json(),
              e.last_transition, "", start, end);
    CheckTime("firstSuccessTime", a.contains("firstSuccessTime") ? a["firstSuccessTime"] : Json(),
              e.first_success, e.first_success_at, start, end);
  }
}

}  // namespace

void Rig::Check(const Reconciled& r, const Expect& expect) {
  REQUIRE_MESSAGE(r.sync_status.ok(), r.sync_status.ToString());
  if (expect.no_work) {
    CHECK((!r.sent || r.outcome.kind == consumer::SyncOutcome::Kind::kSkipped));
    CHECK(GetLease().is_null());
    CHECK(GetClusterSync().is_null());
    return;
  }
  // Not sent: the publisher saw nothing to do, as Hive's reconcile found none (then nothing is
  // written, which the checks below see).
  if (expect.requeue) {
    CHECK_FALSE(r.outcome.failed_sets.empty());
    CHECK_MESSAGE(r.outcome.transient, "a failure Hive requeues at once is retried soon");
  } else if (!expect.failed_message.empty()) {
    CHECK_FALSE(r.outcome.failed_sets.empty());
    CHECK_MESSAGE(!r.outcome.transient,
                  "a failure Hive does not requeue waits for an edit (slow tier)");
  } else {
    CHECK(r.outcome.failed_sets.empty());
  }

  Json lease = GetLease();
  REQUIRE_MESSAGE(!lease.is_null(), "expected a ClusterSyncLease");
  std::string renew = lease["spec"].value("renewTime", "");
  if (expect.unchanged_lease_renew_time) {
    CHECK(renew == r.lease_renew_time_before);
  } else {
    CHECK_MESSAGE(Between(renew, r.start, r.end), "renewTime " << renew << " is not now");
    // metav1.MicroTime: six fraction digits, which Hive insists on.
    CHECK(renew.size() == std::string("2024-01-02T03:04:05.000000Z").size());
  }
  Json cs = GetClusterSync();
  REQUIRE(!cs.is_null());
  const std::string cs_uid = cs["metadata"]["uid"];
  CHECK(cs["metadata"]["ownerReferences"] ==
        Json::array({OwnerRef("hive.openshift.io/v1", "ClusterDeployment", kCdName, cd_uid_)}));
  bool owned = false;
  for (const auto& ref : lease["metadata"].value("ownerReferences", Json::array())) {
    owned = owned ||
            ref == OwnerRef("hiveinternal.openshift.io/v1alpha1", "ClusterSync", kCdName, cs_uid);
  }
  CHECK_MESSAGE(owned, "the lease is owned by the ClusterSync: " << lease["metadata"].dump());

  const Json& status = cs.contains("status") ? cs["status"] : Json::object();
  std::optional<Json> failed;
  for (const auto& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == "Failed") failed = c;
  }
  REQUIRE_MESSAGE(failed.has_value(), "expected a Failed condition");
  std::string message = expect.failed_message.empty()
                            ? "All SyncSets and SelectorSyncSets have been applied to the cluster"
                            : expect.failed_message;
  CHECK(failed->value("status", "") == (expect.failed_message.empty() ? "False" : "True"));
  CHECK(failed->value("message", "") == message);
  CheckStatuses("syncSets", expect.sync_sets, Entries("syncSets"), r.start, r.end);
  CheckStatuses("selectorSyncSets", expect.selector_sync_sets, Entries("selectorSyncSets"), r.start,
                r.end);
}

}  // namespace syncbus::conformance::hive
