#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

Json ClusterDeployment(const std::string& name, const std::string& ns) {
  return {{"apiVersion", "hive.openshift.io/v1"},
          {"kind", "ClusterDeployment"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"baseDomain", "example.com"},
            {"clusterName", name},
            {"platform", {{"aws", {{"region", "us-east-1"}}}}},
            {"installed", true}}}};
}

const std::string kCdPath = "/apis/hive.openshift.io/v1/namespaces/ns/clusterdeployments";
const std::string kSsPath = "/apis/hive.openshift.io/v1/namespaces/ns/syncsets";
const std::string kCsPath = "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/ns/clustersyncs";

Json SyncSet(const std::string& name) {
  return {{"apiVersion", "hive.openshift.io/v1"},
          {"kind", "SyncSet"},
          {"metadata", {{"name", name}, {"namespace", "ns"}}},
          {"spec", {{"clusterDeploymentRefs", {{{"name", "c1"}}}}}}};
}

void MakeNamespace(ApiServer& s, const std::string& ns) {
  auto r = s.Call("POST", "/api/v1/namespaces",
                  {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  REQUIRE(r.status == 201);
}

TEST_CASE("create, get and the system fields of a new object") {
  Fixture f;
  auto created = f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {{"k", "v"}}));
  REQUIRE(created.status == 201);
  Json obj = Body(created);
  CHECK(obj["metadata"]["uid"].get<std::string>().size() == 36);
  CHECK(obj["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z");
  CHECK(!obj["metadata"].contains("generation"));
  CHECK(obj["kind"] == "ConfigMap");
  auto got = f.server->Call("GET", CmPath("default", "a"));
  REQUIRE(got.status == 200);
  CHECK(Body(got) == obj);
  CHECK(http::FindHeader(got.headers, "Content-Type") == "application/json");
}

TEST_CASE("create conflicts, missing namespaces, bad bodies and unknown paths") {
  Fixture f;
  REQUIRE(f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {})).status == 201);
  auto dup = f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {}));
  CHECK(dup.status == 409);
  CHECK(Body(dup)["reason"] == "AlreadyExists");
  CHECK(Body(dup)["message"] == "configmaps \"a\" already exists");

  auto no_ns = f.server->Call("POST", CmPath("nope"), ConfigMap("a", "nope", {}));
  CHECK(no_ns.status == 404);
  CHECK(Body(no_ns)["message"] == "namespaces \"nope\" not found");
  CHECK(Body(no_ns)["details"]["kind"] == "namespaces");

  auto bad_json = Raw(*f.server, "POST", CmPath("default"), "{not json", "application/json");
  CHECK(bad_json.status == 400);
  CHECK(Body(bad_json)["reason"] == "BadRequest");

  Json wrong_kind = ConfigMap("b", "default", {});
  wrong_kind["kind"] = "Secret";
  CHECK(f.server->Call("POST", CmPath("default"), wrong_kind).status == 400);

  Json other_ns = ConfigMap("b", "kube-system", {});
  CHECK(f.server->Call("POST", CmPath("default"), other_ns).status == 400);

  auto unknown = f.server->Call("GET", "/api/v1/namespaces/default/widgets");
  CHECK(unknown.status == 404);
  CHECK(Body(unknown)["kind"] == "Status");
  CHECK(f.server->Call("GET", "/nothing/here").status == 404);

  Json with_rv = ConfigMap("c", "default", {});
  with_rv["metadata"]["resourceVersion"] = "5";
  auto rv_create = f.server->Call("POST", CmPath("default"), with_rv);
  CHECK(rv_create.status == 500);
  CHECK(Body(rv_create)["message"] == "resourceVersion should not be set on objects to be created");
}

TEST_CASE("names are validated and generateName fills them") {
  Fixture f;
  auto bad = f.server->Call("POST", CmPath("default"), ConfigMap("Bad_Name", "default", {}));
  CHECK(bad.status == 422);
  Json status = Body(bad);
  CHECK(status["reason"] == "Invalid");
  CHECK(status["details"]["causes"][0]["field"] == "metadata.name");
  CHECK(status["message"].get<std::string>().rfind(
            "ConfigMap \"Bad_Name\" is invalid: metadata.name: "
            "Invalid value: \"Bad_Name\": a lowercase RFC "
            "1123 subdomain",
            0) == 0);
  Json gen = ConfigMap("", "default", {});
  gen["metadata"].erase("name");
  gen["metadata"]["generateName"] = "cm-";
  auto created = f.server->Call("POST", CmPath("default"), gen);
  REQUIRE(created.status == 201);
  std::string name = Body(created)["metadata"]["name"];
  CHECK(name.size() == 8);
  CHECK(name.rfind("cm-", 0) == 0);
  Json bad_key = ConfigMap("k", "default", {{"bad key", "v"}});
  auto r = f.server->Call("POST", CmPath("default"), bad_key);
  CHECK(r.status == 422);
  CHECK(Body(r)["details"]["causes"][0]["field"] == "data[bad key]");
  Json bad_ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "a.b"}}}};
  CHECK(f.server->Call("POST", "/api/v1/namespaces", bad_ns).status == 422);
}

TEST_CASE("update: resourceVersion preconditions, unconditional PUT, no-op and 404") {
  Fixture f;
  Json obj =
      Body(f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {{"k", "1"}})));
  Json stale = obj;
  obj["data"]["k"] = "2";
  auto updated = f.server->Call("PUT", CmPath("default", "a"), obj);
  REQUIRE(updated.status == 200);
  CHECK(Rv(Body(updated)) != Rv(obj));

  stale["data"]["k"] = "3";
  auto conflict = f.server->Call("PUT", CmPath("default", "a"), stale);
  CHECK(conflict.status == 409);
  CHECK(Body(conflict)["reason"] == "Conflict");
  CHECK(Body(conflict)["message"] ==
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please "
        "apply your changes to the latest version and try again");

  stale["metadata"].erase("resourceVersion");
  auto unconditional = f.server->Call("PUT", CmPath("default", "a"), stale);
  REQUIRE(unconditional.status == 200);
  std::string rv = Rv(Body(unconditional));
  auto noop = f.server->Call("PUT", CmPath("default", "a"), Body(unconditional));
  CHECK(noop.status == 200);
  CHECK(Rv(Body(noop)) == rv);

  auto missing = f.server->Call("PUT", CmPath("default", "zz"), ConfigMap("zz", "default", {}));
  CHECK(missing.status == 404);
  auto wrong_name = f.server->Call("PUT", CmPath("default", "a"), ConfigMap("b", "default", {}));
  CHECK(wrong_name.status == 400);
}

TEST_CASE("custom resource generation and the status subresource") {
  Fixture f(true);
  MakeNamespace(*f.server, "ns");
  auto created = f.server->Call("POST", kSsPath, [] {
    Json ss = SyncSet("s");
    ss["status"] = {{"ignored", true}};
    return ss;
  }());
  REQUIRE(created.status == 201);
  Json ss = Body(created);
  CHECK(ss["metadata"]["generation"] == 1);
  CHECK(!ss.contains("status"));

  ss["metadata"]["labels"] = {{"a", "b"}};
  Json labelled = Body(f.server->Call("PUT", kSsPath + "/s", ss));
  CHECK(labelled["metadata"]["generation"] == 1);

  labelled["spec"]["resourceApplyMode"] = "Sync";
  labelled["status"] = {{"x", 1}};
  Json spec_changed = Body(f.server->Call("PUT", kSsPath + "/s", labelled));
  CHECK(spec_changed["metadata"]["generation"] == 2);
  CHECK(!spec_changed.contains("status"));

  Json with_status = spec_changed;
  with_status["status"] = {{"unknown", "pruned"}};
  with_status["spec"]["resourceApplyMode"] = "Upsert";
  auto status_put = f.server->Call("PUT", kSsPath + "/s/status", with_status);
  REQUIRE(status_put.status == 200);
  Json after = Body(status_put);
  CHECK(after["status"] == Json::object());  // SyncSet status has no declared fields
  CHECK(http::FindHeader(status_put.headers, "Warning") ==
        "299 - \"unknown field \\\"status.unknown\\\"\"");
  CHECK(after["spec"]["resourceApplyMode"] == "Sync");
  CHECK(after["metadata"]["generation"] == 2);
  CHECK(Rv(after) != Rv(spec_changed));

  Json cs = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
             {"kind", "ClusterSync"},
             {"metadata", {{"name", "c1"}, {"namespace", "ns"}}},
             {"status", {{"controlledByReplica", 7}}}};
  Json created_cs = Body(f.server->Call("POST", kCsPath, cs));
  CHECK(!created_cs.contains("status"));
  created_cs["status"] = {{"controlledByReplica", 2}};
  Json main_put = Body(f.server->Call("PUT", kCsPath + "/c1", created_cs));
  CHECK(!main_put.contains("status"));
  CHECK(Rv(main_put) == Rv(created_cs));  // nothing changed: no new resourceVersion
  auto cs_status = f.server->Call("PUT", kCsPath + "/c1/status", created_cs);
  REQUIRE(cs_status.status == 200);
  CHECK(Body(cs_status)["status"]["controlledByReplica"] == 2);
  CHECK(Body(cs_status)["metadata"]["generation"] == 1);

  CHECK(f.server->Call("GET", kSsPath + "/s/status").status == 200);
  CHECK(f.server->Call("GET", "/api/v1/namespaces/ns/configmaps/x/status").status == 404);
}

TEST_CASE("deployments track generation, config maps do not") {
  Fixture f;
  Json deploy = {{"apiVersion", "apps/v1"},
                 {"kind", "Deployment"},
                 {"metadata", {{"name", "d"}, {"namespace", "default"}}},
                 {"spec",
                  {{"selector", {{"matchLabels", {{"app", "d"}}}}},
                   {"template",
                    {{"metadata", {{"labels", {{"app", "d"}}}}},
                     {"spec", {{"containers", {{{"name", "c"}, {"image", "nginx:1"}}}}}}}}}}};
  auto created = f.server->Call("POST", "/apis/apps/v1/namespaces/default/deployments", deploy);
  REQUIRE(created.status == 201);
  Json d = Body(created);
  CHECK(d["metadata"]["generation"] == 1);
  CHECK(d["spec"]["replicas"] == 1);
  CHECK(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent");
  d["spec"]["replicas"] = 3;
  Json scaled = Body(f.server->Call("PUT", "/apis/apps/v1/namespaces/default/deployments/d", d));
  CHECK(scaled["metadata"]["generation"] == 2);

  Json bad = deploy;
  bad["metadata"]["name"] = "e";
  bad["spec"]["template"]["metadata"]["labels"]["app"] = "other";
  auto invalid = f.server->Call("POST", "/apis/apps/v1/namespaces/default/deployments", bad);
  CHECK(invalid.status == 422);
  CHECK(Body(invalid)["details"]["causes"][0]["field"] == "spec.template.metadata.labels");

  Json cm =
      Body(f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {{"k", "1"}})));
  cm["data"]["k"] = "2";
  CHECK(
      !Body(f.server->Call("PUT", CmPath("default", "a"), cm))["metadata"].contains("generation"));
}

TEST_CASE("secrets: stringData, base64 and decode errors") {
  Fixture f;
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", "s"}}},
                 {"stringData", {{"user", "admin"}}}};
  auto created = f.server->Call("POST", "/api/v1/namespaces/default/secrets", secret);
  REQUIRE(created.status == 201);
  Json s = Body(created);
  CHECK(s["data"]["user"] == "YWRtaW4=");
  CHECK(!s.contains("stringData"));
  CHECK(s["type"] == "Opaque");
  Json bad = {{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata", {{"name", "t"}}},
              {"data", {{"x", "not base64!"}}}};
  auto r = f.server->Call("POST", "/api/v1/namespaces/default/secrets", bad);
  CHECK(r.status == 400);
  Json wrong_type = {{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", {{"name", "u"}}},
                     {"data", {{"x", 5}}}};
  auto decode = f.server->Call("POST", CmPath("default"), wrong_type);
  CHECK(decode.status == 400);
  CHECK(Body(decode)["message"].get<std::string>().find("cannot unmarshal number") !=
        std::string::npos);
}

TEST_CASE("unknown fields of built-in types are dropped with a warning, or rejected when strict") {
  Fixture f;
  Json cm = ConfigMap("a", "default", {{"k", "v"}});
  cm["extra"] = 1;
  auto r = f.server->Call("POST", CmPath("default"), cm);
  REQUIRE(r.status == 201);
  CHECK(!Body(r).contains("extra"));
  CHECK(http::FindHeader(r.headers, "Warning") == "299 - \"unknown field \\\"extra\\\"\"");
  cm["metadata"]["name"] = "b";
  auto strict =
      f.server->Call("POST", CmPath("default"), cm, "application/json", "fieldValidation=Strict");
  CHECK(strict.status == 400);
  CHECK(Body(strict)["message"] == "strict decoding error: unknown field \"extra\"");
}

TEST_CASE("dry run changes nothing") {
  Fixture f;
  auto r = f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {}),
                          "application/json", "dryRun=All");
  CHECK(r.status == 201);
  CHECK(f.server->Call("GET", CmPath("default", "a")).status == 404);
}

TEST_CASE(
    "dry runs of create, apply, patch and delete answer as the write would, storing nothing") {
  Fixture f;
  Json stored =
      Body(f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {{"k", "1"}})));
  auto list_rv = [&] {
    return Body(f.server->Call("GET", CmPath("default")))["metadata"]["resourceVersion"];
  };
  const Json rv = list_rv();
  auto unchanged = [&] {
    CHECK(list_rv() == rv);
    CHECK(Body(f.server->Call("GET", CmPath("default", "a"))) == stored);
    CHECK(f.server->Call("GET", CmPath("default", "b")).status == 404);
  };
  // Refused as the create would be: an object that exists, a namespace that does not.
  auto dup = f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {}),
                            "application/json", "dryRun=All");
  CHECK(dup.status == 409);
  CHECK(Body(dup)["message"] == "configmaps \"a\" already exists");
  auto no_ns = f.server->Call("POST", CmPath("nope"), ConfigMap("a", "nope", {}),
                              "application/json", "dryRun=All");
  CHECK(no_ns.status == 404);
  CHECK(Body(no_ns)["message"] == "namespaces \"nope\" not found");
  auto apply_no_ns = Raw(*f.server, "PATCH", "/api/v1/namespaces/nope/configmaps/b",
                         ConfigMap("b", "nope", {}).dump(), "application/apply-patch+yaml",
                         "fieldManager=m&dryRun=All");
  CHECK(apply_no_ns.status == 404);
  unchanged();

  auto apply_new = Raw(*f.server, "PATCH", "/api/v1/namespaces/default/configmaps/b",
                       ConfigMap("b", "default", {{"k", "2"}}).dump(),
                       "application/apply-patch+yaml", "fieldManager=m&dryRun=All");
  CHECK(apply_new.status == 201);
  CHECK(Body(apply_new)["data"]["k"] == "2");
  auto apply_old = Raw(*f.server, "PATCH", "/api/v1/namespaces/default/configmaps/a",
                       ConfigMap("a", "default", {{"k", "3"}}).dump(),
                       "application/apply-patch+yaml", "fieldManager=m&force=true&dryRun=All");
  CHECK(apply_old.status == 200);
  CHECK(Body(apply_old)["data"]["k"] == "3");
  auto patch = Raw(*f.server, "PATCH", CmPath("default", "a"), R"({"data":{"k":"4"}})",
                   "application/merge-patch+json", "dryRun=All");
  CHECK(patch.status == 200);
  CHECK(Body(patch)["data"]["k"] == "4");
  auto gone = Raw(*f.server, "DELETE", CmPath("default", "a"), "", "", "dryRun=All");
  CHECK(gone.status == 200);
  unchanged();
}

TEST_CASE("delete: preconditions, finalizers and the deleted object") {
  Fixture f;
  Json cm = ConfigMap("a", "default", {});
  cm["metadata"]["finalizers"] = {"example.com/hold"};
  Json obj = Body(f.server->Call("POST", CmPath("default"), cm));

  Json wrong_uid = {{"kind", "DeleteOptions"},
                    {"apiVersion", "v1"},
                    {"preconditions", {{"uid", "00000000-0000-0000-0000-000000000000"}}}};
  auto r = f.server->Call("DELETE", CmPath("default", "a"), wrong_uid);
  CHECK(r.status == 409);
  CHECK(Body(r)["message"].get<std::string>().find("Precondition failed: UID in precondition") !=
        std::string::npos);
  Json wrong_rv = {{"preconditions", {{"resourceVersion", "1"}}}};
  CHECK(f.server->Call("DELETE", CmPath("default", "a"), wrong_rv).status == 409);

  auto pending = f.server->Call("DELETE", CmPath("default", "a"));
  REQUIRE(pending.status == 200);
  Json deleting = Body(pending);
  CHECK(deleting["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z");
  CHECK(deleting["metadata"]["deletionGracePeriodSeconds"] == 0);
  CHECK(f.server->Call("GET", CmPath("default", "a")).status == 200);

  Json again = Body(f.server->Call("DELETE", CmPath("default", "a")));
  CHECK(Rv(again) == Rv(deleting));

  deleting["metadata"]["finalizers"] = {"example.com/hold", "example.com/new"};
  auto add = f.server->Call("PUT", CmPath("default", "a"), deleting);
  CHECK(add.status == 422);

  deleting["metadata"]["finalizers"] = Json::array();
  CHECK(f.server->Call("PUT", CmPath("default", "a"), deleting).status == 200);
  CHECK(f.server->Call("GET", CmPath("default", "a")).status == 404);

  Json plain = Body(f.server->Call("POST", CmPath("default"), ConfigMap("b", "default", {})));
  auto gone = f.server->Call("DELETE", CmPath("default", "b"));
  CHECK(gone.status == 200);
  CHECK(Body(gone)["kind"] == "Status");
  CHECK(Body(gone)["status"] == "Success");
  CHECK(Body(gone)["details"]["uid"] == plain["metadata"]["uid"]);
  CHECK(f.server->Call("DELETE", CmPath("default", "b")).status == 404);
}

TEST_CASE("deleting a ClusterDeployment collects its owned ClusterSync") {
  Fixture f(true);
  MakeNamespace(*f.server, "ns");
  Json cd = Body(f.server->Call("POST", kCdPath, ClusterDeployment("c1", "ns")));
  REQUIRE(cd["metadata"].contains("uid"));
  Json cs = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
             {"kind", "ClusterSync"},
             {"metadata",
              {{"name", "c1"},
               {"namespace", "ns"},
               {"ownerReferences",
                {{{"apiVersion", "hive.openshift.io/v1"},
                  {"kind", "ClusterDeployment"},
                  {"name", "c1"},
                  {"uid", cd["metadata"]["uid"]},
                  {"controller", true},
                  {"blockOwnerDeletion", true}}}}}}};
  REQUIRE(f.server->Call("POST", kCsPath, cs).status == 201);
  Json unowned = cs;
  unowned["metadata"]["name"] = "other";
  unowned["metadata"].erase("ownerReferences");
  REQUIRE(f.server->Call("POST", kCsPath, unowned).status == 201);

  auto deleted = f.server->Call("DELETE", kCdPath + "/c1");
  CHECK(deleted.status == 200);
  CHECK(f.server->Call("GET", kCsPath + "/c1").status == 404);
  CHECK(f.server->Call("GET", kCsPath + "/other").status == 200);
}

TEST_CASE("orphan propagation keeps dependents and drops the owner reference") {
  Fixture f;
  Json owner = Body(f.server->Call("POST", CmPath("default"), ConfigMap("owner", "default", {})));
  Json dep = ConfigMap("dep", "default", {});
  dep["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                         {"kind", "ConfigMap"},
                                         {"name", "owner"},
                                         {"uid", owner["metadata"]["uid"]}}};
  REQUIRE(f.server->Call("POST", CmPath("default"), dep).status == 201);
  auto r = f.server->Call("DELETE", CmPath("default", "owner"), nullptr, "application/json",
                          "propagationPolicy=Orphan");
  CHECK(r.status == 200);
  Json kept = Body(f.server->Call("GET", CmPath("default", "dep")));
  CHECK(!kept["metadata"].contains("ownerReferences"));
}

TEST_CASE("deleting a namespace removes its contents, creates in a terminating one are refused") {
  Fixture f;
  MakeNamespace(*f.server, "gone");
  REQUIRE(f.server->Call("POST", CmPath("gone"), ConfigMap("a", "gone", {})).status == 201);
  Json held = ConfigMap("held", "gone", {});
  held["metadata"]["finalizers"] = {"example.com/x"};
  REQUIRE(f.server->Call("POST", CmPath("gone"), held).status == 201);

  auto r = f.server->Call("DELETE", "/api/v1/namespaces/gone");
  REQUIRE(r.status == 200);
  CHECK(Body(r)["status"]["phase"] == "Terminating");
  CHECK(f.server->Call("GET", CmPath("gone", "a")).status == 404);
  Json still = Body(f.server->Call("GET", CmPath("gone", "held")));
  CHECK(still["metadata"].contains("deletionTimestamp"));
  auto refused = f.server->Call("POST", CmPath("gone"), ConfigMap("b", "gone", {}));
  CHECK(refused.status == 403);
  CHECK(Body(refused)["details"]["causes"][0]["reason"] == "NamespaceTerminating");

  still["metadata"].erase("finalizers");
  CHECK(f.server->Call("PUT", CmPath("gone", "held"), still).status == 200);
  CHECK(f.server->Call("GET", "/api/v1/namespaces/gone").status == 404);

  MakeNamespace(*f.server, "fin");
  Json ns = Body(f.server->Call("GET", "/api/v1/namespaces/fin"));
  CHECK(ns["spec"]["finalizers"] == Json::array({"kubernetes"}));
  CHECK(ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == "fin");
  ns["spec"]["finalizers"] = Json::array();
  Json main_put = Body(f.server->Call("PUT", "/api/v1/namespaces/fin", ns));
  CHECK(main_put["spec"]["finalizers"] == Json::array({"kubernetes"}));
  auto finalized = f.server->Call("PUT", "/api/v1/namespaces/fin/finalize", ns);
  REQUIRE(finalized.status == 200);
  CHECK(!Body(finalized)["spec"].contains("finalizers"));
}

TEST_CASE("delete collection by selector, and field selectors of secrets") {
  Fixture f;
  ApiServer& s = *f.server;
  for (const char* name : {"a", "b", "c"}) {
    Json labels = std::string(name) == "c" ? Json{{"keep", "yes"}} : Json{{"drop", "yes"}};
    REQUIRE(s.Call("POST", CmPath("default"), ConfigMap(name, "default", {}, labels)).status ==
            201);
  }
  auto r =
      s.Call("DELETE", CmPath("default"), nullptr, "application/json", "labelSelector=drop%3Dyes");
  REQUIRE(r.status == 200);
  CHECK(Body(r)["kind"] == "ConfigMapList");
  CHECK(Body(r)["items"].size() == 2);
  CHECK(Body(s.Call("GET", CmPath("default")))["items"].size() == 1);

  Json tls = {{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata", {{"name", "tls"}}},
              {"type", "kubernetes.io/tls"},
              {"data", {{"tls.crt", "Y2VydA=="}, {"tls.key", "a2V5"}}}};
  REQUIRE(s.Call("POST", "/api/v1/namespaces/default/secrets", tls).status == 201);
  Json opaque = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", "o"}}}};
  REQUIRE(s.Call("POST", "/api/v1/namespaces/default/secrets", opaque).status == 201);
  Json list = Body(s.Call("GET", "/api/v1/namespaces/default/secrets", nullptr, "application/json",
                          "fieldSelector=type%3Dkubernetes.io%2Ftls"));
  REQUIRE(list["items"].size() == 1);
  CHECK(list["items"][0]["metadata"]["name"] == "tls");
  tls["metadata"]["name"] = "broken";
  tls["data"].erase("tls.key");
  CHECK(s.Call("POST", "/api/v1/namespaces/default/secrets", tls).status == 422);
}

TEST_CASE("discovery documents") {
  Fixture f(true);
  Json api = Body(f.server->Call("GET", "/api"));
  CHECK(api["kind"] == "APIVersions");
  CHECK(api["versions"] == Json::array({"v1"}));

  Json groups = Body(f.server->Call("GET", "/apis"));
  CHECK(groups["kind"] == "APIGroupList");
  bool hive = false;
  for (const auto& g : groups["groups"]) {
    if (g["name"] == "hive.openshift.io") {
      hive = true;
      CHECK(g["preferredVersion"]["groupVersion"] == "hive.openshift.io/v1");
    }
  }
  CHECK(hive);

  Json core = Body(f.server->Call("GET", "/api/v1"));
  CHECK(core["kind"] == "APIResourceList");
  CHECK(core["groupVersion"] == "v1");
  bool configmaps = false;
  for (const auto& r : core["resources"]) {
    if (r["name"] == "configmaps") {
      configmaps = true;
      CHECK(r["namespaced"] == true);
      CHECK(r["kind"] == "ConfigMap");
      CHECK(r["shortNames"] == Json::array({"cm"}));
      CHECK(r["verbs"].size() == 8);
    }
  }
  CHECK(configmaps);

  Json hive_v1 = Body(f.server->Call("GET", "/apis/hive.openshift.io/v1"));
  std::vector<std::string> names;
  for (const auto& r : hive_v1["resources"]) names.push_back(r["name"]);
  CHECK(std::find(names.begin(), names.end(), "syncsets") != names.end());
  CHECK(std::find(names.begin(), names.end(), "syncsets/status") != names.end());
  CHECK(std::find(names.begin(), names.end(), "selectorsyncsets") != names.end());
  Json internal = Body(f.server->Call("GET", "/apis/hiveinternal.openshift.io/v1alpha1"));
  CHECK(internal["resources"].size() == 3);  // clustersyncs, clustersyncs/status, leases

  Json version = Body(f.server->Call("GET", "/version"));
  CHECK(version["minor"] == "26");
  CHECK(f.server->Call("GET", "/apis/nothing.example.com/v1").status == 404);
  CHECK(f.server->Call("POST", "/api").status == 405);
}

TEST_CASE("custom resource definitions can be created at runtime") {
  Fixture f;
  Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
                {"versions",
                 {{{"name", "v1"},
                   {"served", true},
                   {"storage", true},
                   {"schema",
                    {{"openAPIV3Schema",
                      {{"type", "object"},
                       {"properties",
                        {{"spec",
                          {{"type", "object"},
                           {"properties", {{"size", {{"type", "integer"}}}}}}}}}}}}}}}}}}};
  auto r = f.server->Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  REQUIRE(r.status == 201);
  Json stored = Body(f.server->Call(
      "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"));
  CHECK(stored["status"]["conditions"][1]["type"] == "Established");
  Json widget = {{"apiVersion", "example.com/v1"},
                 {"kind", "Widget"},
                 {"metadata", {{"name", "w"}}},
                 {"spec", {{"size", "big"}}}};
  auto bad = f.server->Call("POST", "/apis/example.com/v1/namespaces/default/widgets", widget);
  CHECK(bad.status == 422);
  widget["spec"]["size"] = 3;
  CHECK(f.server->Call("POST", "/apis/example.com/v1/namespaces/default/widgets", widget).status ==
        201);
  // Updating the CRD (a new optional field) keeps the stored objects.
  stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["color"] = {{"type", "string"}};
  REQUIRE(f.server
              ->Call("PUT",
                     "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                     "widgets.example.com",
                     stored)
              .status == 200);
  Json kept = Body(f.server->Call("GET", "/apis/example.com/v1/namespaces/default/widgets/w"));
  CHECK(kept["spec"]["size"] == 3);
  widget["metadata"]["name"] = "v";
  widget["spec"]["color"] = "red";
  auto colored = f.server->Call("POST", "/apis/example.com/v1/namespaces/default/widgets", widget);
  CHECK(Body(colored)["spec"]["color"] == "red");
  CHECK(f.server
            ->Call("DELETE",
                   "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                   "widgets.example.com")
            .status == 200);
  CHECK(f.server->Call("GET", "/apis/example.com/v1/namespaces/default/widgets/w").status == 404);
}

TEST_CASE("services: DNS-1035 names, allocated cluster IPs nobody owns, kept across PUT") {
  Fixture f;
  const std::string services = "/api/v1/namespaces/default/services";
  Json svc = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", {{"name", "1web"}}},
              {"spec", {{"selector", {{"app", "web"}}}, {"ports", {{{"port", 80}}}}}}};
  CHECK(f.server->Call("POST", services, svc).status == 422);
  svc["metadata"]["name"] = "web";
  auto created = f.server->Call("POST", services, svc, "application/json", "fieldManager=me");
  REQUIRE(created.status == 201);
  Json obj = Body(created);
  std::string ip = obj["spec"]["clusterIP"];
  CHECK(ip.rfind("10.96.", 0) == 0);
  CHECK(obj["spec"]["ports"][0]["targetPort"] == 80);
  CHECK(obj["spec"]["ports"][0]["protocol"] == "TCP");
  Json owned = obj["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"];
  CHECK(owned.contains("f:selector"));
  CHECK(!owned.contains("f:clusterIP"));
  Json put = svc;  // no clusterIP in the body
  put["spec"]["ports"][0]["port"] = 8080;
  auto updated = f.server->Call("PUT", services + "/web", put);
  REQUIRE(updated.status == 200);
  CHECK(Body(updated)["spec"]["clusterIP"] == ip);
  put["spec"]["clusterIP"] = "10.0.0.1";
  CHECK(f.server->Call("PUT", services + "/web", put).status == 422);
  CHECK(f.server->Call("POST", "/api/v1/configmaps", ConfigMap("x", "default", {})).status == 405);
}

TEST_CASE("leases and RBAC validation") {
  Fixture f;
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "l"}}},
                {"spec",
                 {{"holderIdentity", "me"},
                  {"leaseDurationSeconds", 15},
                  {"renewTime", "2026-01-01T00:00:00.000000Z"}}}};
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
  CHECK(f.server->Call("POST", leases, lease).status == 201);
  lease["metadata"]["name"] = "m";
  lease["spec"]["leaseDurationSeconds"] = 0;
  CHECK(f.server->Call("POST", leases, lease).status == 422);
  lease["spec"]["leaseDurationSeconds"] = "15";
  CHECK(f.server->Call("POST", leases, lease).status == 400);
  lease["spec"]["leaseDurationSeconds"] = 15;
  lease["spec"]["renewTime"] = "yesterday";
  CHECK(f.server->Call("POST", leases, lease).status == 400);

  Json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
               {"kind", "Role"},
               {"metadata", {{"name", "r"}}},
               {"rules", {{{"apiGroups", {""}}, {"resources", {"configmaps"}}}}}};
  auto r =
      f.server->Call("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", role);
  CHECK(r.status == 422);
  CHECK(Body(r)["details"]["causes"][0]["field"] == "rules[0].verbs");
}

}  // namespace
}  // namespace syncbus::kubesim::testing
