// Least privilege on a real API server. deploy/rbac.yaml and deploy/liveness/rbac.yaml (the
// consumers' liveness Leases) are applied unchanged to the envtest hub (which enforces
// owner-reference permissions, as OpenShift hubs do), and the daemons act as the ServiceAccounts
// they bind (the envtest's bearer-token users of those names and groups):
//   - nothing is granted beyond an allowlist: a SubjectAccessReview for every resource the hub
//     serves and every verb that writes, in a cluster's namespace, kube-system, syncbus and
//     syncbus-liveness, and for the reads of Secrets and Leases;
//   - the same as real requests: the consumer cannot list or watch a Secret, neither daemon can
//     touch a Lease in kube-system, the publisher cannot read a Secret by name;
//   - every right of those files is needed: with the right removed, the hub answers 403 to a
//     request of the daemon's work — run through the daemon's own components as its identity — of
//     that verb on that resource (any other failure proves nothing), and with all of them the work
//     succeeds and nothing is refused;
//   - the publisher's Secret list and watch carry no Secret data (the hub's own metrics).
#include <algorithm>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>
#include <prometheus/registry.h>
#include <signal.h>

#include "common/base64.h"
#include "common/bus/rollout.h"
#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "common/yaml_json.h"
#include "consumer/cluster_lease.h"
#include "consumer/cluster_syncer.h"
#include "consumer/consumer_liveness.h"
#include "consumer/event_recorder.h"
#include "consumer/hub_reader.h"
#include "consumer/rest_mapper.h"
#include "consumer/target_clients.h"
#include "publisher/hive_config.h"
#include "publisher/leader_elector.h"
#include "publisher/rollout_keeper.h"
#include "tests/support/child_process.h"
#include "tests/support/envtest_env.h"
#include "tests/support/files.h"
#include "tests/support/hive_objects.h"
#include "tests/support/kube_clients.h"
#include "tests/support/test_broker.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;
using kube::Collection;
using kube::Object;
namespace res = kube::resources;

namespace {

const kube::Resource kSubjectAccessReviews{"authorization.k8s.io", "v1", "subjectaccessreviews",
                                           "SubjectAccessReview", false};
constexpr char kSyncbus[] = "syncbus";
constexpr char kLiveness[] = "syncbus-liveness";  // the consumers' liveness Leases
const Json kServiceAccountGroups = {"system:serviceaccounts", "system:serviceaccounts:syncbus",
                                    "system:authenticated"};

// The daemons' users, and "nobody": authenticated, bound to nothing (what every user may).
std::string UserOf(const std::string& daemon) {
  return daemon == "nobody" ? "envtest-nobody" : "system:serviceaccount:syncbus:syncbus-" + daemon;
}
Json GroupsOf(const std::string& daemon) {
  return daemon == "nobody" ? Json::array({"system:authenticated"}) : kServiceAccountGroups;
}

// One request as RBAC sees it.
struct Access {
  std::string verb, group, resource, subresource, ns, name;

  std::string Describe() const {
    std::string what = verb + " " + (group.empty() ? "" : group + "/") + resource +
                       (subresource.empty() ? "" : "/" + subresource);
    if (!name.empty()) what += " " + name;
    return what + (ns.empty() ? " (cluster)" : " in " + ns);
  }
};

// The request `method` `url` as RBAC sees it: verb (get, list, watch, create, update, patch,
// delete, deletecollection), group, resource, subresource, namespace and name, from the path
// (/api/v1/... or /apis/GROUP/VERSION/..., then namespaces/NS/ for a namespaced resource).
Access AccessOf(const std::string& method, const std::string& url) {
  std::string path = url.substr(0, url.find('?'));
  const std::string query = url.size() > path.size() ? url.substr(path.size()) : "";
  size_t scheme = path.find("://");
  if (scheme != std::string::npos) path = path.substr(path.find('/', scheme + 3));
  std::vector<std::string> segments;
  std::istringstream in(path);
  for (std::string segment; std::getline(in, segment, '/');) {
    if (!segment.empty()) segments.push_back(segment);
  }
  Access access;
  size_t i = 0;
  if (!segments.empty() && segments[0] == "api") {
    i = 2;  // api, v1
  } else if (segments.size() > 2 && segments[0] == "apis") {
    access.group = segments[1];
    i = 3;  // apis, GROUP, VERSION
  }
  if (segments.size() > i + 2 && segments[i] == "namespaces") {
    access.ns = segments[i + 1];
    i += 2;
  }
  if (i < segments.size()) access.resource = segments[i];
  if (i + 1 < segments.size()) access.name = segments[i + 1];
  if (i + 2 < segments.size()) access.subresource = segments[i + 2];
  const bool named = !access.name.empty();
  if (method == "GET") {
    access.verb = named ? "get" : query.find("watch=1") != std::string::npos ? "watch" : "list";
  } else if (method == "POST") {
    access.verb = "create";
  } else if (method == "PUT") {
    access.verb = "update";
  } else if (method == "PATCH") {
    access.verb = "patch";
  } else if (method == "DELETE") {
    access.verb = named ? "delete" : "deletecollection";
  }
  return access;
}

// A request the hub refused with 403, and the message of its answer (watches: none kept).
struct Refusal {
  Access access;
  std::string message;

  // Whether it shows that `right` is needed: a request of that verb on that resource was
  // refused, or one that needs it. A server-side apply (PATCH) that would create the object needs
  // "create" as well, and kube-apiserver refuses the PATCH (with an empty reason) when only that
  // is missing; an ownerReference that blocks its owner's deletion needs "update" of the owner's
  // finalizers, and OwnerReferencesPermissionEnforcement refuses the write that sets it ("can't
  // set finalizers on").
  bool Shows(const Access& right) const {
    const bool same_resource = access.group == right.group && access.resource == right.resource &&
                               access.subresource == right.subresource;
    if (same_resource && access.verb == right.verb) return true;
    if (same_resource && right.verb == "create" && access.verb == "patch") return true;
    return right.verb == "update" && right.subresource == "finalizers" &&
           message.find("can't set finalizers on") != std::string::npos;
  }
};

std::string Describe(const std::vector<Refusal>& refused) {
  std::string out;
  for (const Refusal& r : refused) {
    out += "\n    refused: " + r.access.Describe() + (r.message.empty() ? "" : ": " + r.message);
  }
  return out;
}

// A transport that passes every request on and keeps those the server refused (HTTP 403), as
// RBAC sees them: what a daemon's work was refused, told apart from its other failures.
class RefusalLog final : public http::Transport {
 public:
  explicit RefusalLog(std::shared_ptr<http::Transport> inner) : inner_(std::move(inner)) {}

  void Send(http::Request request, DoneCallback done) override {
    Access access = AccessOf(request.method, request.url);
    inner_->Send(std::move(request),
                 [this, access, done = std::move(done)](Result<http::Response> result) {
                   if (result.ok() && result->status == 403) {
                     Json status = Json::parse(result->body, nullptr, false);
                     Add({access, status.is_object() ? status.value("message", "") : result->body});
                   }
                   done(std::move(result));
                 });
  }
  std::unique_ptr<http::StreamHandle> Stream(http::Request request,
                                             StreamCallbacks callbacks) override {
    Access access = AccessOf(request.method, request.url);
    auto on_headers = std::move(callbacks.on_headers);
    callbacks.on_headers = [this, access, on_headers](int status, const http::Headers& headers) {
      if (status == 403) Add({access, ""});
      if (on_headers) on_headers(status, headers);
    };
    return inner_->Stream(std::move(request), std::move(callbacks));
  }

  std::vector<Refusal> refused() const {
    std::lock_guard lock(mu_);
    return refused_;
  }

 private:
  void Add(Refusal refusal) {
    std::lock_guard lock(mu_);
    refused_.push_back(std::move(refusal));
  }

  std::shared_ptr<http::Transport> inner_;
  mutable std::mutex mu_;
  std::vector<Refusal> refused_;
};

// The hub, as the admin and as the daemons' identities.
struct Hub : EnvtestClients {
  std::unique_ptr<kube::ClientImpl>& admin = EnvtestClients::hub;

  std::unique_ptr<kube::ClientImpl> As(const std::string& daemon) {
    return ClientFromKubeconfig(daemon == "publisher" ? env.publisher_kubeconfig
                                                      : env.consumer_kubeconfig);
  }
  // The same, its requests the hub refuses kept in `log`.
  std::unique_ptr<kube::ClientImpl> As(const std::string& daemon,
                                       std::shared_ptr<RefusalLog>& log) {
    Result<kube::ClusterConfig> config = kube::LoadKubeconfigFile(
        daemon == "publisher" ? env.publisher_kubeconfig : env.consumer_kubeconfig);
    REQUIRE_MESSAGE(config.ok(), config.status().ToString());
    log = std::make_shared<RefusalLog>(transport);
    return std::make_unique<kube::ClientImpl>(*config, log);
  }

  // Server-side applies `docs` as the admin (field manager syncbus-rbac-proof, forced).
  void Apply(const std::vector<Json>& docs) {
    consumer::RestMapper mapper(*admin);
    for (const Json& doc : docs) {
      Result<kube::Resource> resource =
          mapper.Map(doc["apiVersion"].get<std::string>(), doc["kind"].get<std::string>());
      REQUIRE_MESSAGE(resource.ok(), resource.status().ToString());
      const Json& meta = doc["metadata"];
      kube::ObjectRef ref =
          Object(*resource, resource->namespaced ? meta.value("namespace", "") : "",
                 meta["name"].get<std::string>());
      Result<Json> applied = admin->Apply(ref, doc, {"syncbus-rbac-proof", true});
      REQUIRE_MESSAGE(applied.ok(), ref.Describe() << ": " << applied.status().ToString());
    }
  }

  // Whether `daemon` may do `access`, as the hub's authorizer answers a SubjectAccessReview.
  bool Allowed(const std::string& daemon, const Access& access) {
    Json attributes = {
        {"verb", access.verb}, {"group", access.group}, {"resource", access.resource}};
    if (!access.subresource.empty()) attributes["subresource"] = access.subresource;
    if (!access.ns.empty()) attributes["namespace"] = access.ns;
    if (!access.name.empty()) attributes["name"] = access.name;
    Json review = {{"apiVersion", "authorization.k8s.io/v1"},
                   {"kind", "SubjectAccessReview"},
                   {"spec",
                    {{"user", UserOf(daemon)},
                     {"groups", GroupsOf(daemon)},
                     {"resourceAttributes", attributes}}}};
    Result<Json> answer = admin->Create(Collection(kSubjectAccessReviews), review);
    REQUIRE_MESSAGE(answer.ok(), answer.status().ToString());
    return (*answer)["status"].value("allowed", false);
  }

  void CreateNamespace(kube::Client& client, const std::string& name) {
    CreateObject(client, res::kNamespaces,
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}},
                 /*exists_ok=*/true);
  }
  void Create(kube::Client& client, const kube::Resource& resource, const Json& object) {
    CreateObject(client, resource, object);
  }

  // A cluster as Hive makes one: namespace, ClusterDeployment, admin kubeconfig Secret (the
  // target's), a secretMappings source Secret and one SyncSet using it; its namespace on the
  // target.
  void AddCluster(const std::string& name) {
    CreateNamespace(*admin, name);
    CreateNamespace(*target, name);
    Create(*admin, res::kClusterDeployments,
           {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "ClusterDeployment"},
            {"metadata", {{"name", name}, {"namespace", name}}},
            {"spec",
             {{"baseDomain", "envtest.syncbus.io"},
              {"clusterName", name},
              {"platform", {{"none", Json::object()}}},
              {"installed", true},
              {"clusterMetadata",
               {{"clusterID", "5e1f0000-0000-4000-8000-000000000000"},
                {"infraID", name},
                {"adminKubeconfigSecretRef", {{"name", name + "-admin-kubeconfig"}}}}}}}});
    MarkClusterRunning(*admin, name, name);  // Hive syncs no other
    Create(*admin, res::kSecrets,
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", name + "-admin-kubeconfig"}, {"namespace", name}}},
            {"data", {{"kubeconfig", EncodeBase64(ReadFile(env.target_kubeconfig))}}}});
    Create(*admin, res::kSecrets,
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", "source"}, {"namespace", name}}},
            {"data", {{"token", EncodeBase64("t0ken")}}}});
    Create(*admin, res::kSyncSets,
           {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "SyncSet"},
            {"metadata", {{"name", "set"}, {"namespace", name}}},
            {"spec",
             {{"clusterDeploymentRefs", {{{"name", name}}}},
              {"resources",
               {{{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", "from-set"}, {"namespace", name}}},
                 {"data", {{"k", "v"}}}}}},
              {"secretMappings",
               {{{"sourceRef", {{"name", "source"}}},
                 {"targetRef", {{"name", "copied"}, {"namespace", name}}}}}}}}});
  }
};

// The documents of deploy/`files`, in order.
std::vector<Json> DeployDocuments(std::initializer_list<const char*> files) {
  std::vector<Json> docs;
  for (const char* file : files) {
    Result<std::vector<Json>> more = YamlDocumentsToJson(ReadFile(SourceDir() + "/deploy/" + file));
    REQUIRE_MESSAGE(more.ok(), file << ": " << more.status().ToString());
    docs.insert(docs.end(), more->begin(), more->end());
  }
  return docs;
}

std::vector<Json> RbacDocuments() {
  return DeployDocuments({"rbac.yaml", "liveness/rbac.yaml"});
}

void ApplyRbac(Hub& hub) {
  hub.Apply(DeployDocuments({"namespace.yaml", "liveness/namespace.yaml"}));
  hub.Apply(RbacDocuments());
}

// ---------------------------------------------------------------------------------------------
// The daemons' work, as their identities, through their own components. Each step returns what
// refused it; a scenario fails when any step does. `refused` is every request of the work that
// the hub answered with 403.

struct Step {
  std::string name;
  Status result;
};

struct Work {
  std::vector<Step> steps;
  std::vector<Refusal> refused;
};

std::string Failures(const std::vector<Step>& steps) {
  std::string out;
  for (const Step& s : steps) {
    if (!s.result.ok()) out += "\n    " + s.name + ": " + s.result.ToString();
  }
  return out;
}

bool AllOk(const std::vector<Step>& steps) {
  return std::all_of(steps.begin(), steps.end(), [](const Step& s) { return s.result.ok(); });
}

// What a reflector does: a list, then a watch from its resourceVersion (held for a second: a
// refused watch ends at once with its error, an allowed one when the server closes it).
Status ListAndWatch(kube::Client& client, const kube::ObjectRef& collection, bool metadata_only,
                    const std::string& selector = "") {
  kube::ListOptions list_options;
  list_options.metadata_only = metadata_only;
  list_options.label_selector = selector;
  Result<kube::ObjectList> list = client.List(collection, list_options);
  if (!list.ok()) return list.status();
  kube::WatchOptions watch_options;
  watch_options.resource_version = list->resource_version;
  watch_options.metadata_only = metadata_only;
  watch_options.label_selector = selector;
  watch_options.timeout_seconds = 1;
  Result<std::unique_ptr<kube::WatchStream>> watch = client.Watch(collection, watch_options);
  if (!watch.ok()) return watch.status();
  while (true) {
    Result<std::optional<kube::WatchEvent>> next = (*watch)->Next(10s);
    if (next.ok()) continue;
    if (next.status().code() == Code::kUnavailable) return Status::Ok();  // closed at its timeout
    return next.status().Annotate("watch " + collection.Describe());
  }
}

std::vector<Step> Concurrently(std::vector<std::pair<std::string, std::function<Status()>>> work) {
  std::vector<std::future<Status>> running;
  for (auto& [name, fn] : work) running.push_back(std::async(std::launch::async, fn));
  std::vector<Step> steps;
  for (size_t i = 0; i < work.size(); ++i) steps.push_back({work[i].first, running[i].get()});
  return steps;
}

// The rollout keeper's work as `publisher`: on a fresh SyncSet and SelectorSyncSet with a rollout
// annotation, it starts each rollout (writes its state on the set) and records an Event on it.
Status RolloutWork(Hub& hub, kube::Client& publisher) {
  static int runs = 0;
  const std::string name = "rbac-rollout-" + std::to_string(runs++);
  const std::string ns = "rbac-rollouts";
  hub.CreateNamespace(*hub.admin, ns);
  const Json annotations = {{rollout::kSpecAnnotation, R"({"waves": [{"clusters": 1}]})"}};
  Json ss = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "SyncSet"},
             {"metadata", {{"name", name}, {"namespace", ns}, {"annotations", annotations}}},
             {"spec", {{"clusterDeploymentRefs", Json::array()}}}};
  Json sss = {{"apiVersion", "hive.openshift.io/v1"},
              {"kind", "SelectorSyncSet"},
              {"metadata", {{"name", name}, {"annotations", annotations}}},
              {"spec", {{"clusterDeploymentSelector", {{"matchLabels", {{"rbac", name}}}}}}}};
  Result<Json> stored_ss = hub.admin->Create(Collection(res::kSyncSets, ns), ss);
  Result<Json> stored_sss = hub.admin->Create(Collection(res::kSelectorSyncSets), sss);
  REQUIRE_MESSAGE(stored_ss.ok(), stored_ss.status().ToString());
  REQUIRE_MESSAGE(stored_sss.ok(), stored_sss.status().ToString());
  publisher::HubCache cache(1000);
  cache.Replace(publisher::HubKind::kSyncSet, {*stored_ss});
  cache.Replace(publisher::HubKind::kSelectorSyncSet, {*stored_sss});
  prometheus::Registry registry;
  publisher::RolloutKeeper keeper(cache, publisher, RealClock(), registry, "rbac-proof");
  return keeper.Tick();
}

Work PublisherWork(Hub& hub) {
  std::shared_ptr<RefusalLog> log;
  std::unique_ptr<kube::ClientImpl> client = hub.As("publisher", log);
  kube::Client& c = *client;
  std::vector<Step> steps = Concurrently({
      {"watch ClusterDeployments",
       [&] { return ListAndWatch(c, Collection(res::kClusterDeployments), false); }},
      {"watch SyncSets", [&] { return ListAndWatch(c, Collection(res::kSyncSets), false); }},
      {"watch SelectorSyncSets",
       [&] { return ListAndWatch(c, Collection(res::kSelectorSyncSets), false); }},
      {"watch ClusterSyncs",
       [&] { return ListAndWatch(c, Collection(res::kClusterSyncs), false); }},
      {"watch ClusterSyncLeases",
       [&] { return ListAndWatch(c, Collection(res::kClusterSyncLeases), false); }},
      {"watch Secrets (metadata)",
       [&] { return ListAndWatch(c, Collection(res::kSecrets), true); }},
      // HiveConfig "hive" for its syncSetReapplyInterval (this hub serves no HiveConfig: a
      // granted read is a 404, which counts as no interval; a refused one is a 403).
      {"read HiveConfig", [&] { return publisher::ReadHiveReapplyInterval(c).status(); }},
  });
  // Leader election: take the Lease (it does not exist yet), renew it, give it back.
  Status gone = hub.admin->Delete(Object(res::kLeases, kSyncbus, "syncbus-publisher"), {});
  REQUIRE((gone.ok() || gone.code() == Code::kNotFound));
  LeaderElectionConfig election;
  publisher::LeaderElector elector(c, election, "rbac-proof", RealClock());
  auto attempt = [&](const char* what) {
    bool leading = elector.Tick();
    Status s = leading && elector.problem().empty()
                   ? Status::Ok()
                   : Status(Code::kUnavailable, std::string(what) + ": " + elector.problem());
    steps.push_back({std::string("leader election: ") + what, s});
  };
  attempt("take the Lease");
  attempt("renew it");
  steps.push_back({"leader election: give it back", elector.Release()});
  steps.push_back(
      {"rollouts: state and Event on a SyncSet and a SelectorSyncSet", RolloutWork(hub, c)});
  return {steps, log->refused()};
}

Work ConsumerWork(Hub& hub, const std::string& cluster) {
  std::shared_ptr<RefusalLog> log;
  std::unique_ptr<kube::ClientImpl> client = hub.As("consumer", log);
  kube::Client& c = *client;
  std::vector<Step> steps = Concurrently({
      {"mirror ClusterDeployments",
       [&] { return ListAndWatch(c, Collection(res::kClusterDeployments), false); }},
      {"mirror SyncSets", [&] { return ListAndWatch(c, Collection(res::kSyncSets), false); }},
      {"mirror SelectorSyncSets",
       [&] { return ListAndWatch(c, Collection(res::kSelectorSyncSets), false); }},
      {"mirror ClusterSyncs",
       [&] { return ListAndWatch(c, Collection(res::kClusterSyncs), false); }},
      {"mirror ClusterSyncLeases",
       [&] { return ListAndWatch(c, Collection(res::kClusterSyncLeases), false); }},
  });
  SyncRequest request;
  request.cluster_namespace = request.cluster_name = cluster;
  request.full_reapply = true;
  prometheus::Registry registry;

  // A sync that reads the hub directly (no mirror, or one behind the publisher).
  consumer::DirectHubReader direct(c);
  Result<consumer::ClusterState> state = direct.Read(request);
  steps.push_back({"read the cluster's state from the hub",
                   !state.ok() ? state.status()
                   : state->cd ? Status::Ok()
                               : NotFound("no ClusterDeployment read")});

  // The sync itself, as a consumer runs it: kubeconfig and source Secrets, the ClusterSync
  // (created, owned by the ClusterDeployment), the claim on the cluster (its ClusterSyncLease,
  // created with renewTime now: a full reapply; read from the hub after a lost race), then the
  // ClusterSync's status.
  consumer::LeaseOptions lease_options;
  lease_options.identity = "rbac-proof";
  lease_options.renew_interval = 1ms;       // the renewal below is due at once
  lease_options.release_by_status = false;  // no mirror: given back with a write
  consumer::ClusterLeases leases(lease_options, c, RealClock(), registry);
  consumer::ClusterClaim claim(leases, cluster, cluster, request.full_reapply, RealClock());
  consumer::TargetClients targets(hub.transport, 0);
  consumer::ClusterSyncer syncer({}, c, direct, targets, RealClock(), registry);
  Result<consumer::SyncOutcome> synced = syncer.Sync(request, [&] { return claim.Check(); });
  Status sync_status = synced.status();
  if (synced.ok() && !synced->failed_sets.empty()) sync_status = Unavailable(synced->detail);
  steps.push_back({"sync the cluster under its claim", sync_status});
  // The claim renewed while it is held (an update), then given back (an update).
  kube::ObjectRef lease_ref = Object(res::kClusterSyncLeases, cluster, cluster);
  // The claim as the hub has it (none where the lease could not be made).
  auto claim_now = [&] {
    Result<Json> lease = hub.admin->Get(lease_ref);
    return lease.ok() ? ClaimOf(*lease) : ClaimRecord{};
  };
  auto claimed_at = [&] { return claim_now().renew_time; };
  std::string before = claimed_at();
  std::this_thread::sleep_for(5ms);  // a renewal writes a later renew time (microseconds)
  leases.RenewHeld();
  steps.push_back({"renew the claim", claimed_at() != before
                                          ? Status::Ok()
                                          : Unavailable("the claim's renew time not written")});
  claim.Finish(synced.ok() ? synced->status_version : "");
  ClaimRecord given_back = claim_now();
  steps.push_back({"give it back", !given_back.renew_time.empty() && given_back.holder.empty()
                                       ? Status::Ok()
                                       : Unavailable("holder still '" + given_back.holder + "'")});

  // Its liveness Lease: created at start (read first: a restart takes its own over), renewed,
  // the others' listed and watched (its view of who is alive), deleted at exit.
  consumer::LivenessOptions liveness_options;
  liveness_options.identity = "rbac-proof-" + cluster;
  liveness_options.ns = kLiveness;
  consumer::ConsumerLiveness liveness(liveness_options, c, RealClock(), registry);
  steps.push_back({"liveness: create the Lease", liveness.Start()});
  steps.push_back({"liveness: renew it", liveness.Renew()});
  steps.push_back({"liveness: list and watch the Leases",
                   ListAndWatch(c, Collection(res::kLeases, kLiveness), false, kLivenessSelector)});
  steps.push_back({"liveness: delete it at exit", liveness.Stop()});
  steps.push_back(
      {"liveness: no Lease left",
       hub.admin->Get(Object(res::kLeases, kLiveness, liveness.lease_name())).status().code() ==
               Code::kNotFound
           ? Status::Ok()
           : Unavailable("the liveness Lease is still there")});

  // Events about it: a failure recorded twice is one Event, created, then its count patched.
  consumer::EventRecorder::Options event_options;
  event_options.max_tries = 1;
  {
    consumer::EventRecorder events(event_options, c, nullptr, RealClock(), RealRandom(), registry);
    consumer::SyncEvent event{consumer::SyncEvent::Kind::kFailed, cluster, cluster, "rbac proof"};
    events.Record(event);
    REQUIRE(events.WaitIdle(30s));
    events.Record(event);
    REQUIRE(events.WaitIdle(30s));
  }
  kube::ListOptions by_reason;
  by_reason.field_selector = "reason=SyncFailed";
  Result<kube::ObjectList> written = hub.admin->List(Collection(res::kEvents, cluster), by_reason);
  REQUIRE(written.ok());
  int64_t count = 0;
  for (const Json& e : written->items) count = std::max<int64_t>(count, e.value("count", 0));
  steps.push_back({"record an Event, then count its repeat",
                   count == 2
                       ? Status::Ok()
                       : Unavailable("the Event's count is " + std::to_string(count) + ", not 2")});
  return {steps, log->refused()};
}

// ---------------------------------------------------------------------------------------------
// The rights of deploy/rbac.yaml, one verb of one resource of one rule at a time.

struct Right {
  std::string daemon;  // publisher, consumer
  size_t doc = 0;      // index in RbacDocuments()
  size_t rule = 0;
  std::string resource, verb;
  Access access;  // a request this right allows (for waiting on the authorizer)

  std::string Describe() const {
    return daemon + ": " + access.Describe() + " (RBAC document " + std::to_string(doc) + ")";
  }
};

std::vector<Right> RightsOf(const std::vector<Json>& docs, const std::string& probe_ns) {
  std::vector<Right> rights;
  for (size_t d = 0; d < docs.size(); ++d) {
    const Json& doc = docs[d];
    std::string kind = doc.value("kind", "");
    if (kind != "ClusterRole" && kind != "Role") continue;
    std::string daemon = doc["metadata"]["labels"].value("app.kubernetes.io/component", "");
    const Json& rules = doc["rules"];
    for (size_t r = 0; r < rules.size(); ++r) {
      const Json& rule = rules[r];
      std::string name =
          rule.contains("resourceNames") ? rule["resourceNames"][0].get<std::string>() : "";
      for (const Json& resource : rule["resources"]) {
        for (const Json& verb : rule["verbs"]) {
          Right right{daemon, d, r, resource.get<std::string>(), verb.get<std::string>(), {}};
          std::string plural = right.resource, sub;
          if (size_t slash = plural.find('/'); slash != std::string::npos) {
            sub = plural.substr(slash + 1);
            plural = plural.substr(0, slash);
          }
          right.access = {
              right.verb,
              rule["apiGroups"][0].get<std::string>(),
              plural,
              sub,
              kind == "Role" ? doc["metadata"]["namespace"].get<std::string>() : probe_ns,
              name};
          rights.push_back(right);
        }
      }
    }
  }
  return rights;
}

// `doc` without `right`: its rule split so that only that verb of that resource goes.
Json Without(Json doc, const Right& right) {
  Json rules = Json::array();
  for (size_t r = 0; r < doc["rules"].size(); ++r) {
    Json rule = doc["rules"][r];
    if (r != right.rule) {
      rules.push_back(rule);
      continue;
    }
    Json others = Json::array();
    for (const Json& resource : rule["resources"]) {
      if (resource != right.resource) others.push_back(resource);
    }
    if (!others.empty()) {
      Json rest = rule;
      rest["resources"] = others;
      rules.push_back(rest);
    }
    Json verbs = Json::array();
    for (const Json& verb : rule["verbs"]) {
      if (verb != right.verb) verbs.push_back(verb);
    }
    if (!verbs.empty()) {
      Json kept = rule;
      kept["resources"] = Json::array({right.resource});
      kept["verbs"] = verbs;
      rules.push_back(kept);
    }
  }
  doc["rules"] = rules;
  return doc;
}

// The hub's authorizer follows RBAC objects through a watch: wait until it answers as expected.
void AwaitAuthorizer(Hub& hub, const Right& right, bool allowed) {
  bool settled =
      WaitFor([&] { return hub.Allowed(right.daemon, right.access) == allowed; }, 10s, 20ms);
  REQUIRE_MESSAGE(settled, right.Describe() << " is still " << (allowed ? "refused" : "allowed"));
}

// ---------------------------------------------------------------------------------------------

// The resources the hub serves (preferred versions, subresources included), from discovery.
struct Served {
  std::string group, resource, subresource;
  bool namespaced;
  std::set<std::string> verbs;
};

std::vector<Served> Discover(kube::Client& admin) {
  std::vector<std::string> paths = {"/api/v1"};
  Result<Json> groups = admin.GetPath("/apis");
  REQUIRE(groups.ok());
  for (const Json& g : (*groups)["groups"]) {
    paths.push_back("/apis/" + g["preferredVersion"]["groupVersion"].get<std::string>());
  }
  std::vector<Served> served;
  for (const std::string& path : paths) {
    Result<Json> list = admin.GetPath(path);
    REQUIRE_MESSAGE(list.ok(), path << ": " << list.status().ToString());
    std::string gv = (*list)["groupVersion"].get<std::string>();
    std::string group = gv.find('/') == std::string::npos ? "" : gv.substr(0, gv.find('/'));
    for (const Json& r : (*list)["resources"]) {
      std::string name = r["name"].get<std::string>();
      Served s{group, name, "", r.value("namespaced", false), {}};
      if (size_t slash = name.find('/'); slash != std::string::npos) {
        s.resource = name.substr(0, slash);
        s.subresource = name.substr(slash + 1);
      }
      for (const Json& v : r.value("verbs", Json::array())) s.verbs.insert(v.get<std::string>());
      served.push_back(s);
      // Owner-reference enforcement asks for `update` on an owner's finalizers, a subresource
      // discovery does not list.
      if (s.subresource.empty() && s.verbs.count("update")) {
        served.push_back({group, s.resource, "finalizers", s.namespaced, {"update"}});
      }
    }
  }
  return served;
}

}  // namespace

TEST_CASE(
    "deploy/rbac.yaml grants the daemons no write but their own objects, and no Secret list") {
  Hub hub;
  ApplyRbac(hub);
  const std::string cluster_ns = "rbac-allowlist";
  hub.CreateNamespace(*hub.admin, cluster_ns);
  std::vector<Served> served = Discover(*hub.admin);
  // What each identity may write, "*" for any namespace.
  const std::set<std::string> expected = {
      "consumer create hiveinternal.openshift.io/clustersyncs *",
      "consumer update hiveinternal.openshift.io/clustersyncs/status *",
      "consumer create hiveinternal.openshift.io/clustersyncleases *",
      "consumer update hiveinternal.openshift.io/clustersyncleases *",
      "consumer update hive.openshift.io/clusterdeployments/finalizers *",
      "consumer update hiveinternal.openshift.io/clustersyncs/finalizers *",
      "consumer create events *",
      "consumer patch events *",
      "consumer create coordination.k8s.io/leases syncbus-liveness",
      "consumer update coordination.k8s.io/leases syncbus-liveness",
      "consumer delete coordination.k8s.io/leases syncbus-liveness",
      "publisher create coordination.k8s.io/leases syncbus",
      "publisher patch hive.openshift.io/syncsets *",
      "publisher patch hive.openshift.io/selectorsyncsets (cluster)",
      "publisher create events *",
  };
  const std::vector<std::string> write_verbs = {"create", "update", "patch", "delete",
                                                "deletecollection"};
  std::map<std::string, std::set<std::string>>
      allowed;  // "daemon verb group/resource" -> namespaces
  std::vector<std::future<void>> running;
  std::mutex mu;
  size_t reviews = 0;
  for (const std::string daemon : {"publisher", "consumer", "nobody"}) {
    for (const Served& s : served) {
      for (const std::string& verb : write_verbs) {
        if (!s.verbs.count(verb)) continue;
        std::vector<std::string> namespaces =
            s.namespaced ? std::vector<std::string>{cluster_ns, "kube-system", kSyncbus, kLiveness}
                         : std::vector<std::string>{""};
        for (const std::string& ns : namespaces) {
          Access access{verb, s.group, s.resource, s.subresource, ns, ""};
          ++reviews;
          running.push_back(std::async(std::launch::async, [&hub, &mu, &allowed, daemon, access] {
            if (!hub.Allowed(daemon, access)) return;
            std::string key = daemon + " " + access.verb + " " +
                              (access.group.empty() ? "" : access.group + "/") + access.resource +
                              (access.subresource.empty() ? "" : "/" + access.subresource);
            std::lock_guard lock(mu);
            allowed[key].insert(access.ns.empty() ? "(cluster)" : access.ns);
          }));
          if (running.size() >= 16) {
            for (auto& r : running) r.get();
            running.clear();
          }
        }
      }
    }
  }
  for (auto& r : running) r.get();
  // What every authenticated user may (Kubernetes' defaults: self access reviews) is no grant
  // of deploy/rbac.yaml.
  auto everyone = [&](const std::string& key) {
    return allowed.count("nobody" + key.substr(key.find(' ')));
  };
  std::set<std::string> granted;
  for (const auto& [key, namespaces] : allowed) {
    if (key.rfind("nobody ", 0) == 0 || everyone(key)) continue;
    bool everywhere = namespaces.count(cluster_ns) && namespaces.count("kube-system") &&
                      namespaces.count(kSyncbus) && namespaces.count(kLiveness);
    if (everywhere) {
      granted.insert(key + " *");
    } else {
      for (const std::string& ns : namespaces) granted.insert(key + " " + ns);
    }
  }
  MESSAGE(reviews << " SubjectAccessReviews over " << served.size() << " resources");
  std::ostringstream diff;
  for (const std::string& g : granted) {
    if (!expected.count(g)) diff << "\n  granted beyond the allowlist: " << g;
  }
  for (const std::string& e : expected) {
    if (!granted.count(e)) diff << "\n  not granted: " << e;
  }
  CHECK_MESSAGE(diff.str().empty(), diff.str());

  // Reads: Secrets by name only for the consumer, as metadata (list, watch) only for the
  // publisher; Leases outside syncbus's namespace for neither.
  for (const std::string& ns : {cluster_ns, std::string("kube-system"), std::string(kSyncbus)}) {
    INFO("namespace " << ns);
    CHECK(hub.Allowed("consumer", {"get", "", "secrets", "", ns, "any"}));
    CHECK_FALSE(hub.Allowed("consumer", {"list", "", "secrets", "", ns, ""}));
    CHECK_FALSE(hub.Allowed("consumer", {"watch", "", "secrets", "", ns, ""}));
    CHECK_FALSE(hub.Allowed("publisher", {"get", "", "secrets", "", ns, "any"}));
    CHECK(hub.Allowed("publisher", {"list", "", "secrets", "", ns, ""}));
  }
  for (const std::string daemon : {"publisher", "consumer"}) {
    for (const std::string verb : {"get", "list", "watch", "create", "update", "patch", "delete"}) {
      CHECK_FALSE_MESSAGE(
          hub.Allowed(daemon, {verb, "coordination.k8s.io", "leases", "", "kube-system", ""}),
          daemon << " may " << verb << " Leases in kube-system");
    }
  }
  // The consumer's Lease rights stay in the liveness namespace: the publisher's leader-election
  // Lease is out of its reach; the publisher has none there.
  for (const std::string verb : {"get", "list", "watch", "create", "update", "patch", "delete"}) {
    CHECK(hub.Allowed("consumer", {verb, "coordination.k8s.io", "leases", "", kLiveness, ""}) ==
          (verb != "patch"));
    CHECK_FALSE_MESSAGE(
        hub.Allowed(
            "consumer",
            {verb, "coordination.k8s.io", "leases", "", kSyncbus,
             verb == "list" || verb == "watch" || verb == "create" ? "" : "syncbus-publisher"}),
        "consumer may " << verb << " Leases in syncbus");
    CHECK_FALSE_MESSAGE(
        hub.Allowed("publisher", {verb, "coordination.k8s.io", "leases", "", kLiveness, ""}),
        "publisher may " << verb << " Leases in " << kLiveness);
  }
  // The publisher's Lease rights stop at its own Lease.
  CHECK(hub.Allowed(
      "publisher", {"update", "coordination.k8s.io", "leases", "", kSyncbus, "syncbus-publisher"}));
  CHECK_FALSE(hub.Allowed("publisher",
                          {"update", "coordination.k8s.io", "leases", "", kSyncbus, "another"}));
  CHECK_FALSE(
      hub.Allowed("publisher", {"get", "coordination.k8s.io", "leases", "", kSyncbus, "another"}));
}

TEST_CASE(
    "as their ServiceAccounts the daemons cannot list Secrets, read them by name, or touch "
    "kube-system's Leases") {
  Hub hub;
  ApplyRbac(hub);
  const std::string ns = "rbac-requests";
  hub.CreateNamespace(*hub.admin, ns);
  Result<Json> secret =
      hub.admin->Create(Collection(res::kSecrets, ns),
                        {{"apiVersion", "v1"},
                         {"kind", "Secret"},
                         {"metadata", {{"name", "kubeconfig"}, {"namespace", ns}}},
                         {"data", {{"kubeconfig", EncodeBase64("admin credentials")}}}});
  REQUIRE((secret.ok() || secret.status().code() == Code::kAlreadyExists));
  std::unique_ptr<kube::ClientImpl> consumer = hub.As("consumer");
  std::unique_ptr<kube::ClientImpl> publisher = hub.As("publisher");
  auto refused = [](const Status& s) { return s.http_status() == 403; };

  // The consumer reads a Secret by name, and no other way.
  Result<Json> by_name = consumer->Get(Object(res::kSecrets, ns, "kubeconfig"));
  REQUIRE_MESSAGE(by_name.ok(), by_name.status().ToString());
  CHECK((*by_name)["data"]["kubeconfig"] == EncodeBase64("admin credentials"));
  CHECK(refused(consumer->List(Collection(res::kSecrets), {}).status()));
  CHECK(refused(consumer->List(Collection(res::kSecrets, ns), {}).status()));
  kube::ListOptions metadata;
  metadata.metadata_only = true;
  CHECK(refused(consumer->List(Collection(res::kSecrets, ns), metadata).status()));
  kube::WatchOptions watch_options;
  watch_options.timeout_seconds = 5;
  Result<std::unique_ptr<kube::WatchStream>> watch =
      consumer->Watch(Collection(res::kSecrets, ns), watch_options);
  REQUIRE(watch.ok());
  Result<std::optional<kube::WatchEvent>> first = (*watch)->Next(10s);
  REQUIRE_FALSE(first.ok());
  CHECK(refused(first.status()));

  // The publisher learns of Secrets as metadata and cannot read one.
  CHECK(refused(publisher->Get(Object(res::kSecrets, ns, "kubeconfig")).status()));
  Result<kube::ObjectList> listed = publisher->List(Collection(res::kSecrets, ns), metadata);
  REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
  REQUIRE_FALSE(listed->items.empty());
  CHECK_FALSE(listed->items[0].contains("data"));

  // kube-system's Leases (the control plane's leader elections) are out of reach.
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "syncbus-rbac-probe"}, {"namespace", "kube-system"}}},
                {"spec", {{"holderIdentity", "intruder"}}}};
  for (kube::ClientImpl* client : {consumer.get(), publisher.get()}) {
    CHECK(refused(
        client->Get(Object(res::kLeases, "kube-system", "kube-controller-manager")).status()));
    CHECK(refused(client->List(Collection(res::kLeases, "kube-system"), {}).status()));
    CHECK(refused(client->Create(Collection(res::kLeases, "kube-system"), lease).status()));
  }
  // Writes beyond their own objects are refused too.
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "x"}, {"namespace", ns}}}};
  CHECK(refused(consumer->Create(Collection(res::kConfigMaps, ns), cm).status()));
  CHECK(refused(consumer->Delete(Object(res::kClusterSyncs, ns, "any"), {})));
  CHECK(refused(publisher->Create(Collection(res::kConfigMaps, ns), cm).status()));
}

TEST_CASE("every right of deploy/rbac.yaml is needed: without it the daemon's work is refused") {
  Hub hub;
  ApplyRbac(hub);
  const std::vector<Json> docs = RbacDocuments();
  const std::string probe_ns = "rbac-needed-0";
  int clusters = 0;
  auto fresh_cluster = [&] {
    std::string name = "rbac-needed-" + std::to_string(clusters++);
    hub.AddCluster(name);
    return name;
  };

  // With every right, both daemons do their work, and the hub refuses nothing.
  Work publisher = PublisherWork(hub);
  REQUIRE_MESSAGE(
      AllOk(publisher.steps),
      "the publisher failed with every right of deploy/rbac.yaml:" << Failures(publisher.steps));
  CHECK_MESSAGE(publisher.refused.empty(), Describe(publisher.refused));
  Work consumer = ConsumerWork(hub, fresh_cluster());
  REQUIRE_MESSAGE(AllOk(consumer.steps), "the consumer failed with every right of deploy/rbac.yaml:"
                                             << Failures(consumer.steps));
  CHECK_MESSAGE(consumer.refused.empty(), Describe(consumer.refused));

  std::vector<Right> rights = RightsOf(docs, probe_ns);
  REQUIRE(rights.size() > 20);
  std::ostringstream needed;
  for (const Right& right : rights) {
    hub.Apply({Without(docs[right.doc], right)});
    AwaitAuthorizer(hub, right, false);
    Work work =
        right.daemon == "publisher" ? PublisherWork(hub) : ConsumerWork(hub, fresh_cluster());
    hub.Apply({docs[right.doc]});
    AwaitAuthorizer(hub, right, true);
    // Refused by the hub (403) for that right (Refusal::Shows): a step that failed for another
    // reason (a timeout, a conflict, the test's own mistake) shows nothing about the right.
    const bool refused = std::any_of(work.refused.begin(), work.refused.end(),
                                     [&](const Refusal& r) { return r.Shows(right.access); });
    CHECK_MESSAGE(refused, "not shown needed: " << right.Describe()
                                                << " (the hub refused no request for it with 403; "
                                                   "the work's failures:"
                                                << Failures(work.steps) << Describe(work.refused)
                                                << ")");
    needed << "\n  " << right.Describe() << ":" << Failures(work.steps) << Describe(work.refused);
  }
  MESSAGE("each right, and what failed without it:" << needed.str());
}

TEST_CASE("the publisher's Secret list and watch carry no Secret data") {
  Hub hub;
  ApplyRbac(hub);
  const std::string ns = "rbac-secret-bytes";
  hub.CreateNamespace(*hub.admin, ns);
  // A secretMappings source of 1 MiB: if the publisher's list or watch carried Secret data, the
  // hub would send at least that much of it.
  const std::string big(1 << 20, 'x');
  kube::ObjectRef ref = Object(res::kSecrets, ns, "large-source");
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", "large-source"}, {"namespace", ns}}},
                 {"data", {{"blob", EncodeBase64(big)}}}};
  REQUIRE(hub.admin->Create(Collection(res::kSecrets, ns), secret).ok());

  // A series of the hub's /metrics, summed over the lines whose labels contain `match`.
  auto metric = [&](const std::string& name, const std::string& match) {
    http::Request request;
    Result<kube::ClusterConfig> config = kube::LoadKubeconfigFile(hub.env.hub_kubeconfig);
    REQUIRE(config.ok());
    request.url = config->server + "/metrics";
    request.headers = {{"Authorization", "Bearer " + config->bearer_token}};
    request.tls = config->tls;
    Result<http::Response> response = hub.transport->Call(std::move(request));
    REQUIRE(response.ok());
    double sum = 0;
    std::istringstream lines(response->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name + "{", 0) != 0 || line.find(match) == std::string::npos) continue;
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  };
  auto listed = [&] {
    return metric("apiserver_response_sizes_sum",
                  "resource=\"secrets\",scope=\"cluster\",subresource=\"\",verb=\"LIST\"");
  };
  auto watched = [&] { return metric("apiserver_watch_events_sizes_sum", "kind=\"Secret\""); };
  auto watch_events = [&] {
    return metric("apiserver_watch_events_sizes_count", "kind=\"Secret\"");
  };

  // kube-apiserver watches every Secret itself (its service account token lookup, through its
  // loopback client), and that watch counts in apiserver_watch_events_sizes too: touch the
  // Secret once without the publisher and once with it; the publisher's share is the
  // difference.
  auto touch = [&](const std::string& value) {
    double before = watched();
    Json patch = {{"metadata", {{"labels", {{"touched", value}}}}}};
    REQUIRE(hub.admin->Patch(ref, kube::PatchType::kMerge, patch.dump()).ok());
    REQUIRE(WaitFor([&] { return watched() - before >= big.size(); }, 30s, 100ms));
    std::this_thread::sleep_for(1s);  // the other watchers' events of this change land too
    return watched() - before;
  };
  double without_publisher = touch("without-publisher");

  TestVhost vhost = NewTestVhost();
  std::string dir = MakeTempDir("syncbus-rbac-secret-bytes");
  std::ofstream(dir + "/publisher.yaml")
      << vhost.ConfigYaml() << "hub: {kubeconfig: " << hub.env.publisher_kubeconfig << "}\n"
      << "log: {level: info}\nadmin: {listen: \"127.0.0.1:0\"}\n"
      << "publisher: {leaderElection: {enabled: false}}\n";
  double listed_before = listed();
  Result<ChildProcess> daemon = ChildProcess::Start(
      {BinaryDir() + "/publisher/syncbus-publisher", "--config", dir + "/publisher.yaml"},
      dir + "/publisher.log");
  REQUIRE(daemon.ok());
  bool synced = WaitFor([&] { return daemon->Log().find("hub cache synced") != std::string::npos; },
                        60s, 100ms);
  REQUIRE_MESSAGE(synced, daemon->Log());
  double list_delta = listed() - listed_before;
  double events_before = watch_events();
  double with_publisher = touch("with-publisher");
  CHECK(watch_events() - events_before >= 2);  // the publisher's watch got its event too
  double watch_delta = with_publisher - without_publisher;
  CHECK(daemon->Stop(SIGTERM, 30s) == std::optional<int>(0));
  MESSAGE("the hub sent the publisher " << list_delta << " bytes of Secret lists and about "
                                        << watch_delta << " bytes of Secret watch events (its own "
                                        << "watch got " << without_publisher
                                        << "); the Secret holds " << big.size() << " bytes");
  CHECK(list_delta < big.size() / 4.0);
  CHECK(watch_delta < big.size() / 4.0);
  CHECK(daemon->Log().find("forbidden") == std::string::npos);
}
