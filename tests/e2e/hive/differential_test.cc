// The same scenarios through upstream Hive's clustersync controller and through syncbus, on the
// same real API servers: first every scenario with Hive running alone (its clusters in hub
// namespace hd-hive), then every scenario again with syncbus alone (hd-sb), step by step; the
// ClusterSync, ClusterSyncLease and target objects each left must be the same once names are
// normalised. Needs ../shared/hive (a user's clone has none: the test says it did not run).
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>

#include "common/base64.h"
#include "tests/e2e/hive/hive_world.h"

namespace syncbus::testing {
namespace {

namespace res = kube::resources;
using namespace std::chrono_literals;
using SetList = std::vector<std::pair<std::string, std::string>>;
const kube::Resource kServices{"", "v1", "services", "Service", true};

// One phase's names: the hub namespace, and target names carrying the phase token.
struct Phase {
  std::string token;  // "hd-hive" / "hd-sb"
  std::string ns() const { return token; }
  std::string T(const std::string& name) const { return token + "-" + name; }
};

struct Scenario {
  std::string cluster;
  Json labels = Json::object(), annotations = Json::object();
  bool running = true;
  // How the cluster is reached, when not simply through its kubeconfig (the overrides).
  std::function<void(HiveWorld&, HiveWorld::ClusterOptions&)> reach = nullptr;
  // Makes the hub and target objects of step `step` (0: the start).
  std::function<void(HiveWorld&, const Phase&, int step)> setup;
  // The sets the cluster's ClusterSync must report after `step`; nullopt: the cluster is skipped.
  std::function<std::optional<SetList>(const Phase&, int step)> sets;
  std::function<std::vector<TargetRef>(const Phase&)> targets;
};

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> all;
  auto always = [](SetList s) {
    return [s](const Phase&, int) { return std::optional<SetList>(s); };
  };
  auto none = [](const Phase&) { return std::vector<TargetRef>{}; };

  all.push_back(
      {.cluster = "basic",
       .setup =
           [](HiveWorld& w, const Phase& p, int step) {
             if (step > 0) return;
             w.CreateTargetNamespace(p.T("basic"));
             w.PutTargetObject(res::kConfigMaps,
                               ConfigMapObject("default", p.T("basic-patched"), {{"x", "1"}}));
             w.PutHubObject(res::kSecrets, {{"apiVersion", "v1"},
                                            {"kind", "Secret"},
                                            {"metadata",
                                             {{"name", "basic-src"},
                                              {"namespace", p.ns()},
                                              {"labels", {{"l", "v"}}},
                                              {"annotations", {{"a", "v"}}}}},
                                            {"type", "Opaque"},
                                            {"immutable", true},
                                            {"data", {{"k", EncodeBase64("v")}}}});
             w.PutSyncSet(p.ns(), "basic-set", "basic",
                          {{"resources", Json::array({ConfigMapObject(
                                             p.T("basic"), "cm-a", {{"a", "1"}, {"b", "<&>"}})})},
                           {"secretMappings",
                            Json::array({{{"sourceRef", {{"name", "basic-src"}}},
                                          {"targetRef",
                                           {{"name", "copied"}, {"namespace", p.T("basic")}}}}})},
                           {"patches", Json::array({{{"apiVersion", "v1"},
                                                     {"kind", "ConfigMap"},
                                                     {"name", p.T("basic-patched")},
                                                     {"patchType", "merge"},
                                                     {"patch", "data:\n  p: yaml\n"}}})}});
           },
       .sets = always({{"SyncSet", "basic-set"}}),
       .targets =
           [](const Phase& p) {
             return std::vector<TargetRef>{{res::kConfigMaps, p.T("basic"), "cm-a"},
                                           {res::kSecrets, p.T("basic"), "copied"},
                                           {res::kConfigMaps, "default", p.T("basic-patched")}};
           }});

  all.push_back(
      {.cluster = "sync-removal",
       .setup =
           [](HiveWorld& w, const Phase& p, int step) {
             if (step == 0) w.CreateTargetNamespace(p.T("sync-removal"));
             Json resources = Json::array(
                 {ConfigMapObject(p.T("sync-removal"), "cm-1",
                                  step == 0 ? Json{{"k1", "1"}, {"k2", "2"}} : Json{{"k1", "1"}})});
             if (step == 0)
               resources.push_back(ConfigMapObject(p.T("sync-removal"), "cm-2", {{"k", "v"}}));
             w.PutSyncSet(p.ns(), "tracked", "sync-removal",
                          {{"resourceApplyMode", "Sync"}, {"resources", resources}});
           },
       .sets = always({{"SyncSet", "tracked"}}),
       .targets =
           [](const Phase& p) {
             return std::vector<TargetRef>{{res::kConfigMaps, p.T("sync-removal"), "cm-1"},
                                           {res::kConfigMaps, p.T("sync-removal"), "cm-2"}};
           }});

  all.push_back(
      {.cluster = "failures",
       .setup =
           [](HiveWorld& w, const Phase& p, int step) {
             if (step > 0) return;
             w.CreateTargetNamespace(p.T("failures"));
             w.PutSyncSet(p.ns(), "a-missing-namespace", "failures",
                          {{"resources",
                            Json::array({ConfigMapObject(p.T("missing"), "x", {{"k", "v"}})})}});
             w.PutSyncSet(p.ns(), "b-unknown-kind", "failures",
                          {{"resources",
                            Json::array({{{"apiVersion", "example.com/v1"},
                                          {"kind", "Nope"},
                                          {"metadata",
                                           {{"name", "n"}, {"namespace", p.T("failures")}}}}})}});
             w.PutSyncSet(p.ns(), "c-missing-secret", "failures",
                          {{"secretMappings",
                            Json::array({{{"sourceRef", {{"name", "nosuch"}}},
                                          {"targetRef",
                                           {{"name", "t"}, {"namespace", p.T("failures")}}}}})}});
             w.PutSyncSet(
                 p.ns(), "d-secret-elsewhere", "failures",
                 {{"secretMappings",
                   Json::array(
                       {{{"sourceRef", {{"name", "s"}, {"namespace", "kube-system"}}},
                         {"targetRef", {{"name", "t2"}, {"namespace", p.T("failures")}}}}})}});
             w.PutSyncSet(p.ns(), "e-patch-missing", "failures",
                          {{"patches", Json::array({{{"apiVersion", "v1"},
                                                     {"kind", "ConfigMap"},
                                                     {"name", "absent"},
                                                     {"namespace", p.T("failures")},
                                                     {"patchType", "merge"},
                                                     {"patch", R"({"data":{"x":"y"}})"}}})}});
             w.PutSyncSet(
                 p.ns(), "f-no-namespace", "failures",
                 {{"resources",
                   Json::array({ConfigMapObject("", p.T("no-namespace"), {{"k", "v"}})})}});
             w.PutSyncSet(p.ns(), "g-patch-unknown-kind", "failures",
                          {{"patches", Json::array({{{"apiVersion", "example.com/v1"},
                                                     {"kind", "Nope"},
                                                     {"name", "n"},
                                                     {"namespace", p.T("failures")},
                                                     {"patchType", "merge"},
                                                     {"patch", R"({"spec":{"x":"y"}})"}}})}});
           },
       .sets = always({{"SyncSet", "a-missing-namespace"},
                       {"SyncSet", "b-unknown-kind"},
                       {"SyncSet", "c-missing-secret"},
                       {"SyncSet", "d-secret-elsewhere"},
                       {"SyncSet", "e-patch-missing"},
                       {"SyncSet", "f-no-namespace"},
                       {"SyncSet", "g-patch-unknown-kind"}}),
       .targets = none});

  all.push_back({.cluster = "no-sets",
                 .setup = [](HiveWorld&, const Phase&, int) {},
                 .sets = always({}),
                 .targets = none});

  for (auto [cluster, annotations, running] : std::vector<std::tuple<std::string, Json, bool>>{
           {"paused-true", {{"hive.openshift.io/syncset-pause", "True"}}, true},
           {"reconcile-paused", {{"hive.openshift.io/reconcile-pause", "1"}}, true},
           {"relocating", {{"hive.openshift.io/relocate", "elsewhere/outgoing"}}, true},
           {"no-unreachable", Json::object(), false}}) {
    std::string name = cluster;
    all.push_back({.cluster = name,
                   .annotations = annotations,
                   .running = running,
                   .setup =
                       [name](HiveWorld& w, const Phase& p, int step) {
                         if (step > 0) return;
                         w.CreateTargetNamespace(p.T(name));
                         w.PutSyncSet(
                             p.ns(), name + "-set", name,
                             {{"resources",
                               Json::array({ConfigMapObject(p.T(name), "never", {{"k", "v"}})})}});
                       },
                   .sets = [](const Phase&, int) { return std::optional<SetList>(); },
                   .targets =
                       [name](const Phase& p) {
                         return std::vector<TargetRef>{{res::kConfigMaps, p.T(name), "never"}};
                       }});
  }

  all.push_back(
      {.cluster = "order",
       .setup =
           [](HiveWorld& w, const Phase& p, int step) {
             if (step > 0) return;
             w.PutSyncSet(
                 p.ns(), "a-makes-namespace", "order",
                 {{"resources",
                   Json::array({ConfigMapObject("default", p.T("order-first"), {{"k", "v"}}),
                                {{"apiVersion", "v1"},
                                 {"kind", "Namespace"},
                                 {"metadata", {{"name", p.T("order-made")}}}}})}});
             w.PutSyncSet(
                 p.ns(), "b-uses-namespace", "order",
                 {{"resources",
                   Json::array({ConfigMapObject(p.T("order-made"), "inside", {{"k", "v"}})})}});
           },
       .sets = always({{"SyncSet", "a-makes-namespace"}, {"SyncSet", "b-uses-namespace"}}),
       .targets =
           [](const Phase& p) {
             return std::vector<TargetRef>{{res::kConfigMaps, p.T("order-made"), "inside"}};
           }});

  all.push_back(
      {.cluster = "behaviors",
       .setup =
           [](HiveWorld& w, const Phase& p, int step) {
             if (step > 0) return;
             const std::string ns = p.T("behaviors");
             w.CreateTargetNamespace(ns);
             w.PutTargetObject(res::kConfigMaps,
                               ConfigMapObject(ns, "cou", {{"theirs", "x"}, {"k", "old"}}));
             w.PutTargetObject(res::kConfigMaps, ConfigMapObject(ns, "co", {{"theirs", "x"}}));
             w.PutTargetObject(res::kConfigMaps,
                               ConfigMapObject(ns, "applied-over", {{"theirs", "x"}}));
             Json svc = {{"apiVersion", "v1"},
                         {"kind", "Service"},
                         {"metadata", {{"name", "svc"}, {"namespace", ns}}},
                         {"spec", {{"ports", Json::array({{{"name", "a"}, {"port", 80}}})}}}};
             w.PutTargetObject(kServices, svc);
             Json svc_set = svc;
             svc_set["spec"]["ports"] = Json::array({{{"name", "b"}, {"port", 81}}});
             w.PutSyncSet(p.ns(), "create-or-update", "behaviors",
                          {{"applyBehavior", "CreateOrUpdate"},
                           {"resources",
                            Json::array({ConfigMapObject(ns, "cou", {{"k", "new"}}), svc_set})}});
             w.PutSyncSet(
                 p.ns(), "create-only", "behaviors",
                 {{"applyBehavior", "CreateOnly"},
                  {"resources", Json::array({ConfigMapObject(ns, "co", {{"k", "ours"}})})}});
             w.PutSyncSet(p.ns(), "z-apply", "behaviors",
                          {{"resources",
                            Json::array({ConfigMapObject(ns, "applied-over", {{"k", "ours"}})})}});
           },
       .sets = always(
           {{"SyncSet", "create-only"}, {"SyncSet", "create-or-update"}, {"SyncSet", "z-apply"}}),
       .targets =
           [](const Phase& p) {
             const std::string ns = p.T("behaviors");
             return std::vector<TargetRef>{{res::kConfigMaps, ns, "cou"},
                                           {res::kConfigMaps, ns, "co"},
                                           {res::kConfigMaps, ns, "applied-over"},
                                           {kServices, ns, "svc"}};
           }});

  all.push_back(
      {.cluster = "selectors",
       .labels = Json::object(),
       .setup =
           [](HiveWorld& w, const Phase& p, int step) {
             if (step > 0) return;
             w.CreateTargetNamespace(p.T("selectors"));
             Json selector = {{"matchLabels", {{"hive-differential", p.T("selectors")}}}};
             w.PutSelectorSyncSet(
                 p.T("sss-good"),
                 {{"clusterDeploymentSelector", selector},
                  {"resources",
                   Json::array({ConfigMapObject(p.T("selectors"), "from-sss", {{"k", "v"}})})}});
             w.PutSelectorSyncSet(
                 p.T("sss-bad-1"),
                 {{"clusterDeploymentSelector", selector},
                  {"resources",
                   Json::array({ConfigMapObject(p.T("nowhere"), "x", {{"k", "v"}})})}});
             w.PutSelectorSyncSet(
                 p.T("sss-bad-2"),
                 {{"clusterDeploymentSelector", selector},
                  {"secretMappings",
                   Json::array(
                       {{{"sourceRef", {{"name", "x"}}},
                         {"targetRef", {{"name", "x"}, {"namespace", p.T("selectors")}}}}})}});
             w.PutSyncSet(p.ns(), "ss-bad", "selectors",
                          {{"resources",
                            Json::array({ConfigMapObject(p.T("nowhere"), "y", {{"k", "v"}})})}});
           },
       .sets =
           [](const Phase& p, int) {
             return std::optional<SetList>(SetList{{"SelectorSyncSet", p.T("sss-good")},
                                                   {"SelectorSyncSet", p.T("sss-bad-1")},
                                                   {"SelectorSyncSet", p.T("sss-bad-2")},
                                                   {"SyncSet", "ss-bad"}});
           },
       .targets =
           [](const Phase& p) {
             return std::vector<TargetRef>{{res::kConfigMaps, p.T("selectors"), "from-sss"}};
           }});

  all.push_back({.cluster = "cluster-scoped",
                 .setup =
                     [](HiveWorld& w, const Phase& p, int step) {
                       if (step > 0) return;
                       w.PutSyncSet(
                           p.ns(), "namespaces", "cluster-scoped",
                           {{"resourceApplyMode", "Sync"},
                            {"resources",
                             Json::array({{{"apiVersion", "v1"},
                                           {"kind", "Namespace"},
                                           {"metadata",
                                            {{"name", p.T("cs-ns")}, {"namespace", "bogus"}}}}})}});
                     },
                 .sets = always({{"SyncSet", "namespaces"}}),
                 .targets = none});

  // Reached only through spec.controlPlaneConfig: the kubeconfig's server is not there (the
  // API URL override, while its condition is True), or does not resolve (the IP override).
  auto one_cm = [](const std::string& name) {
    return [name](HiveWorld& w, const Phase& p, int step) {
      if (step > 0) return;
      w.CreateTargetNamespace(p.T(name));
      w.PutSyncSet(
          p.ns(), name + "-set", name,
          {{"resources", Json::array({ConfigMapObject(p.T(name), "reached", {{"k", "v"}})})}});
    };
  };
  auto reached = [](const std::string& name) {
    return [name](const Phase& p) {
      return std::vector<TargetRef>{{res::kConfigMaps, p.T(name), "reached"}};
    };
  };
  all.push_back({.cluster = "api-url-override",
                 .reach =
                     [](HiveWorld& w, HiveWorld::ClusterOptions& o) {
                       o.server = "https://127.0.0.1:1";
                       o.control_plane = {{"apiURLOverride", w.target().config().server}};
                       o.conditions.push_back({{"type", "ActiveAPIURLOverride"},
                                               {"status", "True"},
                                               {"reason", "ClusterReachable"},
                                               {"message", "cluster is reachable"},
                                               {"lastTransitionTime", "2024-01-01T00:00:00Z"},
                                               {"lastProbeTime", "2024-01-01T00:00:00Z"}});
                     },
                 .setup = one_cm("api-url-override"),
                 .sets = always({{"SyncSet", "api-url-override-set"}}),
                 .targets = reached("api-url-override")});
  all.push_back(
      {.cluster = "ip-override",
       .reach =
           [](HiveWorld& w, HiveWorld::ClusterOptions& o) {
             const std::string real = w.target().config().server;  // https://127.0.0.1:PORT
             o.server = "https://syncbus-ip-override.invalid:" + real.substr(real.rfind(':') + 1);
             o.tls_server_name = "localhost";
             o.control_plane = {{"apiServerIPOverride", "127.0.0.1"}};
           },
       .setup = one_cm("ip-override"),
       .sets = always({{"SyncSet", "ip-override-set"}}),
       .targets = reached("ip-override")});

  // Nothing answers at the kubeconfig's server: Hive's OpenAPI read fails first, and neither
  // writes anything (no ClusterSync, no lease).
  all.push_back(
      {.cluster = "unanswered",
       .reach = [](HiveWorld&, HiveWorld::ClusterOptions& o) { o.server = "https://127.0.0.1:1"; },
       .setup = one_cm("unanswered"),
       .sets = [](const Phase&, int) { return std::optional<SetList>(); },
       .targets = none});

  all.push_back(
      {.cluster = "removed-set",
       .setup =
           [](HiveWorld& w, const Phase& p, int step) {
             if (step == 0) {
               w.CreateTargetNamespace(p.T("removed-set"));
               w.PutSyncSet(p.ns(), "goes", "removed-set",
                            {{"resourceApplyMode", "Sync"},
                             {"resources", Json::array({ConfigMapObject(
                                               p.T("removed-set"), "gone-soon", {{"k", "v"}})})}});
               w.PutSyncSet(
                   p.ns(), "stays", "removed-set",
                   {{"resources",
                     Json::array({ConfigMapObject(p.T("removed-set"), "stays", {{"k", "v"}})})}});
             } else {
               w.DeleteSyncSet(p.ns(), "goes");
             }
           },
       .sets =
           [](const Phase&, int step) {
             return std::optional<SetList>(step == 0
                                               ? SetList{{"SyncSet", "goes"}, {"SyncSet", "stays"}}
                                               : SetList{{"SyncSet", "stays"}});
           },
       .targets =
           [](const Phase& p) {
             return std::vector<TargetRef>{{res::kConfigMaps, p.T("removed-set"), "gone-soon"},
                                           {res::kConfigMaps, p.T("removed-set"), "stays"}};
           }});
  return all;
}

constexpr int kSteps = 2;
// How long a cluster that must be left alone (its `sets` nullopt) is watched in each step, once
// every other scenario of the step has settled: its snapshot, read every half second, must show
// nothing written (no ClusterSync, no lease, no target object) every time. A write that comes
// late is seen, not missed by a snapshot taken at once.
constexpr auto kNothingWrittenFor = 10s;

// Whether a snapshot shows nothing written: no ClusterSync, no lease, every target object absent.
bool NothingWritten(const Json& snapshot) {
  if (!snapshot["status"]["clusterSync"].is_null() || !snapshot["status"]["lease"].is_null()) {
    return false;
  }
  for (const auto& [key, object] : snapshot["target"].items()) {
    if (!object.is_null()) return false;
  }
  return true;
}

// Every scenario's snapshots after each step, with `run` started and stopped around them.
std::vector<std::vector<Json>> RunPhase(HiveWorld& w, const Phase& p,
                                        const std::vector<Scenario>& scenarios,
                                        const std::function<void()>& start,
                                        const std::function<void()>& stop,
                                        const std::function<std::string()>& logs,
                                        const std::function<void()>& before_stop) {
  w.CreateHubNamespace(p.ns());
  for (const Scenario& s : scenarios) {
    Json labels = s.labels;
    labels["hive-differential"] = p.T(s.cluster);
    HiveWorld::ClusterOptions options;
    options.labels = labels;
    options.annotations = s.annotations;
    options.running = s.running;
    if (s.reach) s.reach(w, options);
    w.AddCluster(p.ns(), s.cluster, options);
    s.setup(w, p, 0);
  }
  start();
  std::vector<std::vector<Json>> out(scenarios.size());
  for (int step = 0; step < kSteps; ++step) {
    if (step > 0) {
      for (const Scenario& s : scenarios) s.setup(w, p, step);
    }
    auto snapshot = [&](const Scenario& s) {
      return Json{{"status", w.Snapshot(p.ns(), s.cluster, p.token)},
                  {"target", w.TargetSnapshot(s.targets(p), p.token)}};
    };
    std::vector<Json> taken(scenarios.size());
    std::vector<size_t> left_alone;
    for (size_t i = 0; i < scenarios.size(); ++i) {
      const Scenario& s = scenarios[i];
      INFO(p.token << " " << s.cluster << " step " << step);
      std::optional<SetList> sets = s.sets(p, step);
      if (!sets) {
        left_alone.push_back(i);
        continue;
      }
      bool settled = w.WaitSettled([&] { return w.Converged(p.ns(), s.cluster, *sets); },
                                   [&] { return snapshot(s); }, 90s);
      CHECK_MESSAGE(settled, "did not settle: " << snapshot(s).dump(2) << "\n" << logs());
      taken[i] = snapshot(s);
    }
    // The clusters left alone, watched together for kNothingWrittenFor.
    const auto until = std::chrono::steady_clock::now() + kNothingWrittenFor;
    std::set<size_t> written;
    do {
      for (size_t i : left_alone) {
        Json now = snapshot(scenarios[i]);
        if (!NothingWritten(now) && written.insert(i).second) {
          CHECK_MESSAGE(false, p.token << " " << scenarios[i].cluster << " step " << step
                                       << ": written although it must be left alone:\n"
                                       << now.dump(2) << "\n"
                                       << logs());
        }
        taken[i] = now;
      }
      std::this_thread::sleep_for(500ms);
    } while (std::chrono::steady_clock::now() < until);
    for (size_t i = 0; i < scenarios.size(); ++i) out[i].push_back(taken[i]);
  }
  before_stop();
  stop();
  return out;
}

// Hive's clustersync metrics as a page exports them: per family its type, label names and
// histogram buckets, from the series of the clustersync controller (controller="clustersync") and,
// for the client families, its requests to target clusters (remote="true").
Json MetricShapes(const std::string& page) {
  static const std::set<std::string> kFamilies = {"hive_syncset_apply_duration_seconds",
                                                  "hive_selectorsyncset_apply_duration_seconds",
                                                  "hive_syncsetinstance_resources_applied_total",
                                                  "hive_syncsetinstance_apply_duration_seconds",
                                                  "hive_clustersync_first_success_duration_seconds",
                                                  "hive_controller_reconcile_seconds",
                                                  "hive_kube_client_requests_total",
                                                  "hive_kube_client_request_seconds"};
  Json out = Json::object();
  std::istringstream lines(page);
  std::string line;
  const std::regex type_line(R"(^# TYPE (\S+) (\S+)$)");
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? )");
  const std::regex label(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, type_line)) {
      if (kFamilies.count(m[1])) out[m[1].str()]["type"] = m[2].str();
      continue;
    }
    if (line.empty() || line[0] == '#' || !std::regex_search(line, m, sample)) continue;
    std::string name = m[1];
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string sfx = suffix;
      if (!kFamilies.count(family) && name.size() > sfx.size() &&
          name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
        family = name.substr(0, name.size() - sfx.size());
      }
    }
    if (!kFamilies.count(family)) continue;
    std::map<std::string, std::string> labels;
    std::string text = m[3];
    for (auto it = std::sregex_iterator(text.begin(), text.end(), label);
         it != std::sregex_iterator(); ++it) {
      labels[(*it)[1]] = (*it)[2];
    }
    if (labels.count("controller") && labels["controller"] != "clustersync") continue;
    if (labels.count("remote") && labels["remote"] != "true") continue;
    Json& shape = out[family];
    if (labels.count("le")) {
      shape["buckets"][labels["le"]] = true;
      labels.erase("le");
    }
    Json names = Json::array();
    for (const auto& [k, v] : labels) names.push_back(k);
    shape["labels"][names.dump()] = true;
  }
  return out;
}

}  // namespace

TEST_CASE(
    "differential: Hive's clustersync and syncbus leave the same ClusterSync, lease and target "
    "objects") {
  std::string why;
  std::optional<std::string> hive_dir = HiveManager::Dir(&why);
  if (!hive_dir) ExitDidNotRun(why);
  HiveWorld w("hive-differential");
  std::vector<Scenario> scenarios = Scenarios();
  Phase hive{"hd-hive"}, syncbus{"hd-sb"};
  std::string hive_metrics, syncbus_metrics;
  auto from_hive = RunPhase(
      w, hive, scenarios, [&] { w.StartHive(*hive_dir); }, [&] { w.StopHive(); },
      [&] { return w.HiveLog(); }, [&] { hive_metrics = w.HiveMetricsPage(); });
  auto from_syncbus = RunPhase(
      w, syncbus, scenarios, [&] { w.StartSyncbus(syncbus.ns()); }, [&] { w.StopSyncbus(); },
      [&] { return w.SyncbusLogs(); }, [&] { syncbus_metrics = w.ConsumerMetricsPage(); });
  int same = 0;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    for (int step = 0; step < kSteps; ++step) {
      INFO("scenario " << scenarios[i].cluster << " step " << step);
      const Json& h = from_hive[i][step];
      const Json& s = from_syncbus[i][step];
      CHECK_MESSAGE(h == s, "Hive:\n" << h.dump(2) << "\nsyncbus:\n" << s.dump(2));
      same += h == s;
    }
  }
  MESSAGE("scenario steps the same: " << same << "/" << scenarios.size() * kSteps);

  // Hive's metrics: every family Hive's clustersync exported in these scenarios, with the same
  // type, label names and buckets, from syncbus's consumer.
  const Json hive_shapes = MetricShapes(hive_metrics),
             syncbus_shapes = MetricShapes(syncbus_metrics);
  CHECK_MESSAGE(hive_shapes.size() == 8, "Hive exported: " << hive_shapes.dump(2));
  for (const auto& [family, shape] : hive_shapes.items()) {
    INFO("metric " << family);
    REQUIRE_MESSAGE(syncbus_shapes.contains(family), "syncbus exports no " << family);
    CHECK(syncbus_shapes[family] == shape);
  }
}

}  // namespace syncbus::testing
