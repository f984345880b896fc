// The dashboard, the alerts and the prometheus-adapter rule under deploy/ may only name metrics
// that exist. A pipeline (simulator, broker vhost, one publisher, one consumer) syncs a small
// fleet in which one cluster always fails, so that its requests are retried and dead-lettered
// and the metrics that only appear once touched exist. Then the daemons' /metrics and RabbitMQ's
// Prometheus endpoints, as the ServiceMonitor of deploy/components/monitoring/service-monitors.yaml
// scrapes them, are read, and every metric name in the PromQL of the three files must be among what
// they export — or be one of the kube-state-metrics series listed in kExternal. Both daemons must
// also export syncbus_build_info with this build's version and revision.
#include "tests/support/metric_names.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <doctest/doctest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include "common/build_info.h"
#include "ctl/fleet_progress.h"
#include "tests/support/files.h"
#include "tests/support/process_rig.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;

namespace {

// Series that come from kube-state-metrics, not from syncbus or RabbitMQ.
const std::set<std::string> kExternal = {
    "kube_horizontalpodautoscaler_spec_max_replicas",
    "kube_horizontalpodautoscaler_status_current_replicas",
    "kube_statefulset_replicas",
    "kube_statefulset_status_replicas_ready",
};

constexpr int kClusters = 6;
constexpr char kBroken[] = "cluster-0002";

// One PromQL expression and where it is written.
struct Reference {
  std::string where;
  std::string expr;
};

std::string Deploy(const std::string& path) {
  return SourceDir() + "/deploy/" + path;
}

void DashboardPanels(const Json& panels, std::vector<Reference>& out) {
  for (const auto& panel : panels) {
    for (const auto& target : panel.value("targets", Json::array())) {
      if (target.contains("expr")) {
        out.push_back(
            {"dashboard.json panel '" + panel.value("title", "") + "' " + target.value("refId", ""),
             target["expr"].get<std::string>()});
      }
    }
    DashboardPanels(panel.value("panels", Json::array()), out);  // a collapsed row's panels
  }
}

std::vector<Reference> References() {
  std::vector<Reference> refs;
  std::ifstream in(Deploy("components/monitoring/dashboard.json"));
  Json dashboard = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  REQUIRE_MESSAGE(dashboard.is_object(),
                  "deploy/components/monitoring/dashboard.json is not a JSON object");
  DashboardPanels(dashboard.value("panels", Json::array()), refs);
  for (const auto& variable : dashboard["templating"].value("list", Json::array())) {
    if (variable.value("type", "") != "query") continue;
    const Json& query = variable["query"];
    std::string text = query.is_object() ? query.value("query", "") : query.get<std::string>();
    refs.push_back(
        {"dashboard.json variable $" + variable.value("name", ""), GrafanaVariableExpr(text)});
  }

  for (const YAML::Node& doc : YAML::LoadAllFromFile(Deploy("components/monitoring/alerts.yaml"))) {
    if (doc["kind"].as<std::string>() != "PrometheusRule") continue;
    for (const auto& group : doc["spec"]["groups"]) {
      for (const auto& rule : group["rules"]) {
        std::string name =
            rule["alert"] ? rule["alert"].as<std::string>() : rule["record"].as<std::string>();
        refs.push_back({"alerts.yaml " + name, rule["expr"].as<std::string>()});
      }
    }
  }

  YAML::Node adapter = YAML::LoadFile(Deploy("components/hpa/prometheus-adapter-rules.yaml"));
  YAML::Node config = YAML::Load(adapter["data"]["config.yaml"].as<std::string>());
  for (const char* section : {"rules", "externalRules"}) {
    for (const auto& rule : config[section]) {
      std::string name = rule["name"] && rule["name"]["as"] ? rule["name"]["as"].as<std::string>()
                                                            : rule["seriesQuery"].as<std::string>();
      std::string where = std::string("prometheus-adapter-rules.yaml ") + section + " " + name;
      std::string series = rule["seriesQuery"].as<std::string>();
      refs.push_back({where + " seriesQuery", series});
      // <<.Series>> stands for the series the seriesQuery found: with one metric name there,
      // that name.
      std::string metrics = rule["metricsQuery"].as<std::string>();
      std::set<std::string> found = PromqlMetricNames(series);
      const std::string placeholder = "<<.Series>>";
      for (size_t at; found.size() == 1 && (at = metrics.find(placeholder)) != std::string::npos;) {
        metrics.replace(at, placeholder.size(), *found.begin());
      }
      refs.push_back({where + " metricsQuery", metrics});
    }
  }
  return refs;
}

std::string Encode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// The paths and queries the RabbitMQ ServiceMonitor scrapes (port `prometheus-tls`, or
// `prometheus` on a broker without TLS: the same pages), with the vhost parameter pointed at the
// test's vhost.
std::vector<std::string> RabbitmqScrapes(const std::string& vhost) {
  std::vector<std::string> paths;
  for (const YAML::Node& doc :
       YAML::LoadAllFromFile(Deploy("components/monitoring/service-monitors.yaml"))) {
    if (doc["kind"].as<std::string>() != "ServiceMonitor") continue;
    for (const auto& endpoint : doc["spec"]["endpoints"]) {
      const std::string port = endpoint["port"].as<std::string>();
      if (port != "prometheus" && port != "prometheus-tls") continue;
      std::string path = endpoint["path"] ? endpoint["path"].as<std::string>() : "/metrics";
      char separator = '?';
      for (const auto& param : endpoint["params"]) {
        std::string key = param.first.as<std::string>();
        for (const auto& value : param.second) {
          path += separator + Encode(key) + "=" +
                  Encode(key == "vhost" ? vhost : value.as<std::string>());
          separator = '&';
        }
      }
      paths.push_back(path);
    }
  }
  return paths;
}

struct Monitored : ProcessRig {
  Monitored() : ProcessRig("syncbus-monitoring") {}

  std::string Get(const std::string& url) {
    http::Request request;
    request.url = url;
    auto response = transport->Call(request);
    REQUIRE_MESSAGE(response.ok(), url << ": " << response.status().ToString());
    REQUIRE_MESSAGE(response->status == 200,
                    url << ": " << response->status << " " << response->body.substr(0, 500));
    return response->body;
  }

  // The daemon's /metrics URL, from its "admin endpoint listening" log line.
  std::string MetricsUrl(ChildProcess& daemon) {
    std::smatch m;
    std::string log;
    WaitFor(
        [&] {
          log = daemon.Log();
          return std::regex_search(log, m,
                                   std::regex("admin endpoint listening.*port[=\":]+([0-9]+)"));
        },
        20s, 100ms);
    REQUIRE_MESSAGE(!m.empty(), log);
    return "http://127.0.0.1:" + m[1].str() + "/metrics";
  }

  ctl::FleetProgress Progress() {
    auto p = ctl::ReadProgress(*hub, "");
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    return *p;
  }
};

}  // namespace

TEST_CASE(
    "the dashboard, the alerts and the autoscaling rule name only metrics that are exported") {
  std::vector<Reference> refs = References();
  std::map<std::string, std::vector<std::string>> used;  // metric name -> where
  for (const auto& ref : refs) {
    std::set<std::string> names = PromqlMetricNames(ref.expr);
    CHECK_MESSAGE(!names.empty(), ref.where << " names no metric: " << ref.expr);
    for (const auto& name : names) used[name].push_back(ref.where);
  }
  for (const auto& name : kExternal) CHECK_MESSAGE(used.count(name), name << " is used nowhere");

  Monitored rig;
  rig.StartSimulator({"--clusters", std::to_string(kClusters), "--syncsets", "2",
                      "--selector-syncsets", "2", "--resources", "3"});
  // One cluster's apiserver answers every request with a 5xx: its request walks the retry tiers
  // and ends in the dead-letter queue.
  http::Request faults;
  faults.method = "PUT";
  faults.url = "http://127.0.0.1:" + std::to_string(rig.sim_port) + "/_sim/faults";
  faults.headers = {{"Content-Type", "application/json"}};
  faults.body = Json{{"clusters", Json::array({kBroken})}, {"errorRate", 1.0}}.dump();
  auto set = rig.transport->Call(faults);
  REQUIRE_MESSAGE(set.ok(), set.status().ToString());
  REQUIRE_MESSAGE(set->status == 200, set->body);
  rig.WriteConfig(
      "log: {level: info}\n"
      "admin: {listen: \"127.0.0.1:0\"}\n"
      "topology: {retryTiers: [1s, 2s]}\n"
      "publisher: {leaderElection: {enabled: false}}\n"
      "consumer: {prefetch: 4, maxAttempts: 3}\n");
  ChildProcess publisher = rig.StartDaemon("publisher/syncbus-publisher", {}, "publisher.log");
  ChildProcess consumer =
      rig.StartDaemon("consumer/syncbus-consumer", {"--name", "consumer-1"}, "consumer.log");
  std::string publisher_url = rig.MetricsUrl(publisher);
  std::string consumer_url = rig.MetricsUrl(consumer);

  ctl::FleetProgress progress;
  bool settled = WaitFor(
      [&] {
        progress = rig.Progress();
        return progress.synced == kClusters - 1 &&
               rig.Get(consumer_url).find("syncbus_consumer_dead_lettered_total{") !=
                   std::string::npos;
      },
      120s, 250ms);
  REQUIRE_MESSAGE(settled, "synced " << progress.synced << "/" << progress.clusters
                                     << ", the broken cluster not dead-lettered\n"
                                     << consumer.Log().substr(0, 4000));

  // A set rolled out in waves: the publisher's rollout gauges exist once it has one.
  auto sets = rig.hub->List(kube::Collection(kube::resources::kSelectorSyncSets), {});
  REQUIRE(sets.ok());
  REQUIRE_FALSE(sets->items.empty());
  Json gated = {
      {"metadata",
       {{"annotations",
         {{"syncbus.io/rollout", R"({"waves": [{"clusters": 1}], "maxFailures": "100%"})"}}}}}};
  auto annotated =
      rig.hub->Patch(kube::Object(kube::resources::kSelectorSyncSets, "",
                                  sets->items.front()["metadata"]["name"].get<std::string>()),
                     kube::PatchType::kMerge, gated.dump());
  REQUIRE_MESSAGE(annotated.ok(), annotated.status().ToString());
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        return rig.Get(publisher_url).find("syncbus_publisher_rollout_halted{") !=
                               std::string::npos;
                      },
                      30s, 250ms),
                  publisher.Log().substr(0, 4000));

  std::map<std::string, std::string> exported;
  for (const auto& url : {publisher_url, consumer_url}) {
    std::string page = rig.Get(url);
    // Each daemon says which build it runs (the labels of common/build_info.h, value 1).
    const BuildInfo& build = GetBuildInfo();
    std::regex build_info("\\nsyncbus_build_info\\{build_type=\"" + std::string(build.build_type) +
                          "\",compiler=\"[^\"]+\",revision=\"" + std::string(build.revision) +
                          "\",version=\"" + std::string(build.version) + "\"\\} 1\\n");
    CHECK_MESSAGE(std::regex_search(page, build_info),
                  url << " has no syncbus_build_info of this build");
    exported.merge(ExportedMetrics(page));
  }
  const BrokerEnv& broker = rig.vhost.env();
  std::string base = "http://127.0.0.1:" + std::to_string(broker.prometheus_port);
  std::vector<std::string> scrapes = RabbitmqScrapes(rig.vhost.name());
  REQUIRE_FALSE(scrapes.empty());
  for (const auto& path : scrapes) {
    std::string page;
    if (path.find("vhost=") != std::string::npos) {
      // Per-queue series appear once the broker has emitted queue statistics (every 10 s).
      std::string url = base + path;
      std::string sample = "queue=\"syncbus.work.change\"";
      bool found =
          WaitFor([&] { return (page = rig.Get(url)).find(sample) != std::string::npos; }, 60s, 1s);
      CHECK_MESSAGE(found, url << " has no series of syncbus.work.change:\n"
                               << page.substr(0, 2000));
    } else {
      page = rig.Get(base + path);
    }
    exported.merge(ExportedMetrics(page));
  }

  std::vector<std::string> missing;
  for (const auto& [name, where] : used) {
    if (kExternal.count(name) || IsExported(name, exported)) continue;
    std::ostringstream line;
    line << name << " (in";
    for (const auto& w : where) line << " [" << w << "]";
    line << ")";
    missing.push_back(line.str());
  }
  MESSAGE(used.size() << " metric names in " << refs.size() << " expressions, " << exported.size()
                      << " names exported");
  std::ostringstream report;
  for (const auto& m : missing) report << "\n  not exported: " << m;
  CHECK_MESSAGE(missing.empty(), missing.size()
                                     << " metric name(s) not exported by the daemons or RabbitMQ:"
                                     << report.str());

  CHECK(publisher.Stop(SIGTERM, 30s) == std::optional<int>(0));
  CHECK(consumer.Stop(SIGTERM, 30s) == std::optional<int>(0));
}
