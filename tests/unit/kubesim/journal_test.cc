// Tests for the write journal: the lines of creates, updates, patches, applies (status
// subresource included) and deletes on the hub and the targets, Lease and claim fields (liveness
// Leases, sticky claims), one object's lines in commit order under concurrent writers, what is
// not journaled (reads, refused and failed writes), the flush endpoint, flushing on
// SimServer::Stop and failing writes.
#include "tests/kubesim/journal.h"

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include "common/http/curl_transport.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/kubesim/sim_server.h"
#include "tests/kubesim/sim_simulation.h"
#include "tests/support/files.h"
#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim {
namespace {

using namespace std::chrono_literals;

constexpr char kUserAgent[] = "journal-test/1.0 (linux/amd64)";
const std::string kConfigMaps = "/clusters/cluster-0001/api/v1/namespaces/default/configmaps";
const std::string kLeases =
    "/clusters/cluster-0000/apis/coordination.k8s.io/v1/namespaces/default/leases";
const std::string kClusterSyncs =
    "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/cluster-0000/clustersyncs";

std::string JournalPath() {
  return syncbus::testing::MakeTempDir("kubesim-journal") + "/j.jsonl";
}

std::vector<Json> ReadLines(const std::string& path) {
  std::vector<Json> lines;
  std::string content = syncbus::testing::ReadFile(path);
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    REQUIRE(end != std::string::npos);  // whole lines only
    lines.push_back(Json::parse(content.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

// A simulation with two targets on a FakeClock, journaling to a fresh file; requests go
// through Dispatch as over HTTP, with `token` when set.
struct Rig {
  explicit Rig(std::string required_token = {}) : path(JournalPath()), token(required_token) {
    Simulation::Options options;
    options.fleet = {.clusters = 2};
    options.clock = &clock;
    options.journal_path = path;
    options.token = std::move(required_token);
    auto created = Simulation::Create(options);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    sim = std::move(created).value();
    REQUIRE(sim->GenerateFleet("http://sim.test").ok());
  }

  http::ServerRequest Request(const std::string& method, const std::string& path,
                              const std::string& body, const std::string& content_type,
                              const std::string& query) {
    http::ServerRequest request;
    request.method = method;
    request.path = path;
    request.query = query;
    request.body = body;
    request.headers = {{"User-Agent", kUserAgent}};
    if (!content_type.empty()) request.headers.emplace_back("Content-Type", content_type);
    if (!token.empty()) request.headers.emplace_back("Authorization", "Bearer " + token);
    return request;
  }
  ApiResponse Send(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& content_type = "application/json",
                   const std::string& query = {}) {
    Plan plan = sim->Dispatch(Request(method, path, body, content_type, query));
    if (plan.kind == Plan::Kind::kRespond) return plan.response;
    REQUIRE(plan.kind == Plan::Kind::kApi);
    return plan.api->Handle(plan.api_request);
  }
  ApiResponse Apply(const std::string& path, const Json& body, const std::string& manager) {
    return Send("PATCH", path, body.dump(), "application/apply-patch+yaml",
                "fieldManager=" + manager + "&force=true");
  }

  std::vector<Json> Lines() {
    REQUIRE(sim->FlushJournal().ok());
    return ReadLines(path);
  }

  FakeClock clock;
  std::string path;
  std::string token;
  std::unique_ptr<Simulation> sim;
};

using testing::Body;
using testing::ConfigMap;
using testing::Rv;
using testing::SendAndWait;

long long UnixMillis(const FakeClock& clock) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch())
      .count();
}

// What identifies a line: cluster, verb, resource, subresource, namespace, name, code.
using JournalKey =
    std::tuple<std::string, std::string, std::string, std::string, std::string, std::string, int>;
JournalKey JournalKeyOf(const Json& line) {
  return {line["cluster"],   line["verb"], line["resource"],       line["subresource"],
          line["namespace"], line["name"], line["code"].get<int>()};
}

TEST_CASE("The journal records creates, updates, patches, applies and deletes, status included") {
  Rig rig;
  std::vector<std::string> rvs;  // of each write's answer, in order
  auto expect = [&](const ApiResponse& response, int status) {
    REQUIRE_MESSAGE(response.status == status, response.body);
    Json body = Body(response);
    rvs.push_back(body["kind"] == "Status" ? "" : Rv(body));
  };
  long long t0 = UnixMillis(rig.clock);
  expect(rig.Send("POST", kConfigMaps, ConfigMap("a", "default", {{"k", "1"}}).dump()), 201);
  rig.clock.Advance(1500ms);
  expect(rig.Send("PUT", kConfigMaps + "/a", ConfigMap("a", "default", {{"k", "2"}}).dump()), 200);
  expect(rig.Send("PATCH", kConfigMaps + "/a", R"({"data":{"k":"3"}})",
                  "application/merge-patch+json"),
         200);
  expect(rig.Apply(kConfigMaps + "/b", ConfigMap("b", "default", {{"k", "1"}}), "tester"), 201);
  expect(rig.Apply(kConfigMaps + "/b", ConfigMap("b", "default", {{"k", "2"}}), "tester"), 200);
  expect(rig.Send("DELETE", kConfigMaps + "/a", ""), 200);

  Json cs = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
             {"kind", "ClusterSync"},
             {"metadata", {{"name", "c1"}, {"namespace", "cluster-0000"}}}};
  expect(rig.Send("POST", kClusterSyncs, cs.dump()), 201);
  cs["metadata"]["resourceVersion"] = rvs.back();
  cs["status"] = {{"controlledByReplica", 1}};
  expect(rig.Send("PUT", kClusterSyncs + "/c1/status", cs.dump()), 200);
  cs["metadata"].erase("resourceVersion");
  cs["status"] = {{"controlledByReplica", 2}};
  expect(rig.Apply(kClusterSyncs + "/c1/status", cs, "syncer"), 200);
  expect(rig.Send("PATCH", kClusterSyncs + "/c1/status", R"({"status":{"controlledByReplica":3}})",
                  "application/merge-patch+json"),
         200);
  expect(rig.Send("DELETE", kClusterSyncs + "/c1", ""), 200);
  // A DELETE of a collection: one line per object.
  expect(rig.Send("DELETE", kConfigMaps, ""), 200);

  std::vector<Json> lines = rig.Lines();
  REQUIRE(lines.size() == 12);
  std::vector<JournalKey> keys;
  for (const Json& line : lines) keys.push_back(JournalKeyOf(line));
  std::vector<JournalKey> expected = {
      {"cluster-0001", "create", "configmaps", "", "default", "a", 201},
      {"cluster-0001", "update", "configmaps", "", "default", "a", 200},
      {"cluster-0001", "patch", "configmaps", "", "default", "a", 200},
      {"cluster-0001", "apply", "configmaps", "", "default", "b", 201},
      {"cluster-0001", "apply", "configmaps", "", "default", "b", 200},
      {"cluster-0001", "delete", "configmaps", "", "default", "a", 200},
      {"hub", "create", "clustersyncs", "", "cluster-0000", "c1", 201},
      {"hub", "update", "clustersyncs", "status", "cluster-0000", "c1", 200},
      {"hub", "apply", "clustersyncs", "status", "cluster-0000", "c1", 200},
      {"hub", "patch", "clustersyncs", "status", "cluster-0000", "c1", 200},
      {"hub", "delete", "clustersyncs", "", "cluster-0000", "c1", 200},
      {"cluster-0001", "delete", "configmaps", "", "default", "b", 200}};
  CHECK(keys == expected);

  CHECK(lines[0]["t"] == t0);
  CHECK(lines[1]["t"] == t0 + 1500);
  for (size_t i = 0; i < lines.size(); ++i) {
    CAPTURE(lines[i].dump());
    CHECK(lines[i]["userAgent"] == kUserAgent);
    CHECK(lines[i]["resourceVersion"].is_string());
    if (!rvs[i].empty()) CHECK(lines[i]["resourceVersion"] == rvs[i]);
    // ConfigMaps have no generation; a ClusterSync's stays 1 through status writes.
    CHECK(lines[i].contains("generation") == (lines[i]["resource"] == "clustersyncs"));
    if (lines[i].contains("generation")) CHECK(lines[i]["generation"] == 1);
    CHECK_FALSE(lines[i].contains("holder"));
  }
  // The delete's resourceVersion is the deletion's own.
  CHECK(std::stoull(lines[5]["resourceVersion"].get<std::string>()) >
        std::stoull(lines[4]["resourceVersion"].get<std::string>()));
}

Json Lease(const std::string& holder, const std::string& renew, const std::string& acquire) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", "leader"}, {"namespace", "default"}}},
          {"spec",
           {{"holderIdentity", holder},
            {"leaseDurationSeconds", 15},
            {"acquireTime", acquire},
            {"renewTime", renew}}}};
}

TEST_CASE("Journal lines of Leases carry the holder and times, in the order of the writes") {
  Rig rig;
  const std::string t0 = "2026-01-01T00:00:00.000000Z";
  const std::string t1 = "2026-01-01T00:00:05.000000Z";
  const std::string t2 = "2026-01-01T00:00:30.000000Z";
  ApiResponse created = rig.Send("POST", kLeases, Lease("a", t0, t0).dump());
  REQUIRE(created.status == 201);
  Json renewed = Lease("a", t1, t0);
  renewed["metadata"]["resourceVersion"] = Rv(Body(created));
  REQUIRE(rig.Send("PUT", kLeases + "/leader", renewed.dump()).status == 200);
  REQUIRE(rig.Apply(kLeases + "/leader", Lease("b", t2, t2), "b").status == 200);
  REQUIRE(rig.Send("PATCH", kLeases + "/leader",
                   R"({"spec":{"holderIdentity":null,"acquireTime":null}})",
                   "application/merge-patch+json")
              .status == 200);
  REQUIRE(rig.Send("DELETE", kLeases + "/leader", "").status == 200);

  std::vector<Json> lines = rig.Lines();
  REQUIRE(lines.size() == 5);
  std::vector<std::string> verbs, holders;
  for (const Json& line : lines) {
    CHECK(line["cluster"] == "cluster-0000");
    CHECK(line["resource"] == "leases");
    CHECK(line["leaseDurationSeconds"] == 15);
    CHECK_FALSE(line.contains("liveness"));  // no consumer's liveness Lease
    verbs.push_back(line["verb"]);
    holders.push_back(line["holder"]);
  }
  CHECK(verbs == std::vector<std::string>{"create", "update", "apply", "patch", "delete"});
  CHECK(holders == std::vector<std::string>{"a", "a", "b", "", ""});
  CHECK(lines[0]["renewTime"] == t0);
  CHECK(lines[1]["renewTime"] == t1);
  CHECK(lines[1]["acquireTime"] == t0);
  CHECK(lines[2]["renewTime"] == t2);
  CHECK(lines[2]["acquireTime"] == t2);
  CHECK(lines[3]["acquireTime"].is_null());
  for (size_t i = 1; i < lines.size(); ++i) {
    CHECK(std::stoull(lines[i]["resourceVersion"].get<std::string>()) >
          std::stoull(lines[i - 1]["resourceVersion"].get<std::string>()));
  }
}

TEST_CASE("Journal lines of ClusterSyncLeases carry a consumer's claim as a Lease's fields") {
  Rig rig;
  const std::string path =
      "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/default/clustersyncleases";
  Json lease = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                {"kind", "ClusterSyncLease"},
                {"metadata",
                 {{"name", "c1"},
                  {"namespace", "default"},
                  {"annotations",
                   {{"syncbus.io/holder", "consumer-a"},
                    {"syncbus.io/renew-time", "2026-01-01T00:00:05.000000Z"},
                    {"syncbus.io/lease-duration-seconds", "20"}}}}},
                {"spec", {{"renewTime", "2026-01-01T00:00:00.000000Z"}}}};
  REQUIRE(rig.Send("POST", path, lease.dump()).status == 201);
  std::vector<Json> lines = rig.Lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["resource"] == "clustersyncleases");
  CHECK(lines[0]["holder"] == "consumer-a");
  CHECK(lines[0]["leaseDurationSeconds"] == 20);
  CHECK(lines[0]["renewTime"] == "2026-01-01T00:00:05.000000Z");  // the claim's, not Hive's
  CHECK(lines[0]["claim"] == "");                                 // a claim of one sync
  CHECK(lines[0]["epoch"].is_null());

  Json sticky = lease;
  sticky["metadata"]["name"] = "c2";
  sticky["metadata"]["annotations"]["syncbus.io/claim"] = "sticky";
  sticky["metadata"]["annotations"]["syncbus.io/epoch"] = "3";
  REQUIRE(rig.Send("POST", path, sticky.dump()).status == 201);
  lines = rig.Lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[1]["holder"] == "consumer-a");
  CHECK(lines[1]["claim"] == "sticky");
  CHECK(lines[1]["epoch"] == 3);
}

TEST_CASE("Journal lines of consumers' liveness Leases carry the holder, times and epoch") {
  Rig rig;
  const std::string path = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
  const std::string t0 = "2026-01-01T00:00:00.000000Z";
  const std::string t1 = "2026-01-01T00:00:30.000000Z";
  Json lease = Lease("consumer-a", t0, t0);
  lease["metadata"]["name"] = "consumer-a";
  lease["metadata"]["labels"] = {{"syncbus.io/consumer-liveness", "true"}};
  lease["metadata"]["annotations"] = {{"syncbus.io/epoch", "1"}};
  ApiResponse created = rig.Send("POST", path, lease.dump());
  REQUIRE(created.status == 201);
  lease["spec"]["renewTime"] = t1;
  lease["metadata"]["annotations"]["syncbus.io/epoch"] = "2";
  lease["metadata"]["resourceVersion"] = Rv(Body(created));
  REQUIRE(rig.Send("PUT", path + "/consumer-a", lease.dump()).status == 200);
  REQUIRE(rig.Send("DELETE", path + "/consumer-a", "").status == 200);

  std::vector<Json> lines = rig.Lines();
  REQUIRE(lines.size() == 3);
  std::vector<std::string> verbs;
  for (const Json& line : lines) {
    CHECK(line["cluster"] == "hub");
    CHECK(line["liveness"] == true);
    CHECK(line["holder"] == "consumer-a");  // a deletion's line has the last state
    CHECK(line["leaseDurationSeconds"] == 15);
    verbs.push_back(line["verb"]);
  }
  CHECK(verbs == std::vector<std::string>{"create", "update", "delete"});
  CHECK(lines[0]["epoch"] == 1);
  CHECK(lines[0]["renewTime"] == t0);
  CHECK(lines[1]["epoch"] == 2);
  CHECK(lines[1]["renewTime"] == t1);
  CHECK(lines[2]["epoch"] == 2);
}

TEST_CASE("Journal lines of SelectorSyncSets carry the rollout state as written") {
  Rig rig;
  const std::string path = "/apis/hive.openshift.io/v1/selectorsyncsets";
  const std::string state = R"({"generation":1,"wave":2,"waves":3,"phase":"Progressing"})";
  Json set = {{"apiVersion", "hive.openshift.io/v1"},
              {"kind", "SelectorSyncSet"},
              {"metadata", {{"name", "rolled"}}},
              {"spec", {{"clusterDeploymentSelector", Json::object()}}}};
  REQUIRE(rig.Send("POST", path, set.dump()).status == 201);
  set["metadata"]["annotations"] = {{"syncbus.io/rollout-state", state}};
  Json patch = {{"metadata", set["metadata"]}};
  REQUIRE(
      rig.Send("PATCH", path + "/rolled", patch.dump(), "application/merge-patch+json").status ==
      200);
  std::vector<Json> lines = rig.Lines();
  REQUIRE(lines.size() == 2);
  CHECK_FALSE(lines[0].contains("rolloutState"));  // none yet
  CHECK(lines[1]["resource"] == "selectorsyncsets");
  CHECK(lines[1]["rolloutState"] == state);
  CHECK(lines[1]["generation"] == 1);  // an annotation is no change of the spec
}

TEST_CASE("Reads, refused and failed writes, dry runs and no-op writes are not journaled") {
  Rig rig("s3cret");
  ApiResponse created =
      rig.Send("POST", kConfigMaps, ConfigMap("x", "default", {{"k", "1"}}).dump());
  REQUIRE(created.status == 201);
  const std::string old_rv = Rv(Body(created));
  REQUIRE(
      rig.Send("PATCH", kConfigMaps + "/x", R"({"data":{"k":"2"}})", "application/merge-patch+json")
          .status == 200);
  REQUIRE(rig.Lines().size() == 2);

  // Reads.
  CHECK(rig.Send("GET", kConfigMaps + "/x", "").status == 200);
  CHECK(rig.Send("GET", kConfigMaps, "").status == 200);
  Plan watch_plan = rig.sim->Dispatch(rig.Request("GET", kConfigMaps, "", "", "watch=1"));
  REQUIRE(watch_plan.kind == Plan::Kind::kWatch);
  auto sink = std::make_shared<testing::RecordingSink>();
  auto started = watch_plan.api->StartWatch(watch_plan.api_request, sink);
  REQUIRE(std::holds_alternative<uint64_t>(started));
  watch_plan.api->StopWatch(std::get<uint64_t>(started));

  // Refused writes: 409 (exists, stale resourceVersion), 422, 404, 401.
  CHECK(rig.Send("POST", kConfigMaps, ConfigMap("x", "default", {}).dump()).status == 409);
  Json stale = ConfigMap("x", "default", {{"k", "3"}});
  stale["metadata"]["resourceVersion"] = old_rv;
  CHECK(rig.Send("PUT", kConfigMaps + "/x", stale.dump()).status == 409);
  CHECK(rig.Send("POST", kConfigMaps, ConfigMap("Not_Valid", "default", {}).dump()).status == 422);
  CHECK(rig.Send("DELETE", kConfigMaps + "/missing", "").status == 404);
  rig.token = "wrong";
  CHECK(rig.Send("POST", kConfigMaps, ConfigMap("y", "default", {}).dump()).status == 401);
  rig.token = "s3cret";
  // A dry run and a write that changes nothing succeed without a trace.
  CHECK(rig.Send("POST", kConfigMaps, ConfigMap("z", "default", {}).dump(), "application/json",
                 "dryRun=All")
            .status == 201);
  CHECK(
      rig.Send("PATCH", kConfigMaps + "/x", R"({"data":{"k":"2"}})", "application/merge-patch+json")
          .status == 200);

  // Injected faults answer before the API server sees the request.
  http::ServerRequest faults;
  faults.method = "PUT";
  faults.path = "/_sim/faults";
  faults.body = R"({"clusters": ["cluster-0001"], "errorRate": 1})";
  REQUIRE(rig.sim->Dispatch(faults).response.status == 200);
  CHECK(rig.Send("POST", kConfigMaps, ConfigMap("w", "default", {}).dump()).status >= 500);
  CHECK(rig.Send("DELETE", kConfigMaps + "/x", "").status >= 500);

  CHECK(rig.Lines().size() == 2);
}

TEST_CASE("POST /_sim/journal/flush writes out the journal, or is 404 without one") {
  Rig rig;
  REQUIRE(rig.Send("POST", kConfigMaps, ConfigMap("a", "default", {}).dump()).status == 201);
  http::ServerRequest flush;
  flush.method = "POST";
  flush.path = "/_sim/journal/flush";
  Plan flushed = rig.sim->Dispatch(flush);
  REQUIRE(flushed.response.status == 200);
  CHECK(Json::parse(flushed.response.body)["journal"] == rig.path);
  // Written by the endpoint, not by this test.
  std::vector<Json> lines = ReadLines(rig.path);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["name"] == "a");

  flush.method = "GET";
  CHECK(rig.sim->Dispatch(flush).response.status == 405);

  auto plain = testing::MakeSimulation({.clusters = 1});
  flush.method = "POST";
  Plan missing = plain->Dispatch(flush);
  CHECK(missing.response.status == 404);
  CHECK(Json::parse(missing.response.body)["reason"] == "NotFound");
  CHECK(plain->FlushJournal().ok());
}

TEST_CASE("The journal is written when the simulation goes away") {
  std::string path;
  {
    Rig rig;
    path = rig.path;
    REQUIRE(rig.Send("POST", kConfigMaps, ConfigMap("a", "default", {}).dump()).status == 201);
  }
  CHECK(ReadLines(path).size() == 1);
}

TEST_CASE("One object's journal lines follow its writes under concurrent writers [concurrent]") {
  Rig rig;
  REQUIRE(
      rig.Send("POST", kConfigMaps, ConfigMap("hot", "default", {{"n", "start"}}).dump()).status ==
      201);
  constexpr int kThreads = 4;
  constexpr int kWrites = 50;
  std::vector<std::thread> writers;
  for (int w = 0; w < kThreads; ++w) {
    writers.emplace_back([&rig, w] {
      for (int i = 0; i < kWrites; ++i) {
        std::string patch = Json({{"data", {{"n", std::to_string(w * kWrites + i)}}}}).dump();
        ApiResponse r =
            rig.Send("PATCH", kConfigMaps + "/hot", patch, "application/merge-patch+json");
        CHECK(r.status == 200);
      }
    });
  }
  for (auto& writer : writers) writer.join();
  std::vector<Json> lines = rig.Lines();
  REQUIRE(lines.size() == 1 + kThreads * kWrites);
  for (size_t i = 1; i < lines.size(); ++i) {
    CAPTURE(i);
    CHECK(std::stoull(lines[i]["resourceVersion"].get<std::string>()) >
          std::stoull(lines[i - 1]["resourceVersion"].get<std::string>()));
  }
}

TEST_CASE("SimServer journals requests over HTTP, flushes on request and on Stop [concurrent]") {
  SimServer::Options options;
  options.simulation.fleet = {.clusters = 1};
  options.simulation.journal_path = JournalPath();
  auto started = SimServer::Start(options);
  REQUIRE_MESSAGE(started.ok(), started.status().ToString());
  SimServer& sim = **started;
  auto curl = http::CurlTransport::Create({});
  REQUIRE(curl.ok());
  auto create = [&](const std::string& name) {
    http::Request request;
    request.method = "POST";
    request.url = sim.base_url() + "/clusters/cluster-0000/api/v1/namespaces/default/configmaps";
    request.headers = {{"Content-Type", "application/json"}, {"User-Agent", kUserAgent}};
    request.body = ConfigMap(name, "default", {}).dump();
    auto response = SendAndWait(**curl, std::move(request));
    REQUIRE(response.ok());
    CHECK(response->status == 201);
  };
  create("first");
  http::Request flush;
  flush.method = "POST";
  flush.url = sim.base_url() + "/_sim/journal/flush";
  auto flushed = SendAndWait(**curl, flush);
  REQUIRE(flushed.ok());
  CHECK(flushed->status == 200);
  std::vector<Json> lines = ReadLines(options.simulation.journal_path);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["cluster"] == "cluster-0000");
  CHECK(lines[0]["userAgent"] == kUserAgent);

  create("second");
  sim.Stop();
  lines = ReadLines(options.simulation.journal_path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1]["name"] == "second");
}

TEST_CASE("A journal that cannot be written fails flushes but not requests") {
  Simulation::Options options;
  options.fleet = {.clusters = 1};
  options.journal_path = "/dev/full";  // every write fails with ENOSPC
  auto created = Simulation::Create(options);
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  Simulation& sim = **created;
  ApiResponse response = sim.hub().Handle({"POST",
                                           "/api/v1/namespaces/default/configmaps",
                                           "",
                                           {{"Content-Type", "application/json"}},
                                           ConfigMap("a", "default", {}).dump()});
  CHECK(response.status == 201);
  Status flushed = sim.FlushJournal();
  CHECK_FALSE(flushed.ok());
  CHECK(flushed.message().find("/dev/full") != std::string::npos);
  http::ServerRequest flush;
  flush.method = "POST";
  flush.path = "/_sim/journal/flush";
  CHECK(sim.Dispatch(flush).response.status == 500);
  CHECK(sim.hub().Call("GET", "/api/v1/namespaces/default/configmaps/a").status == 200);

  options.journal_path = "/nonexistent-dir/journal.jsonl";
  auto refused = Simulation::Create(options);
  CHECK(refused.status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace syncbus::kubesim
