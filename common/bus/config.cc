#include "common/bus/config.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/time_format.h"

namespace syncbus {
namespace {

// Where the unknown keys of a parse go: errors in strict mode, else warnings.
struct UnknownKeys {
  bool strict = false;
  std::vector<std::string>* warnings = nullptr;
};

// A YAML mapping being read, with its dotted path for error messages.
class Section {
 public:
  Section(const YAML::Node& node, std::string path, std::string source, UnknownKeys unknown)
      : node_(node), path_(std::move(path)), source_(std::move(source)), unknown_(unknown) {}

  Status Error(const std::string& key, const std::string& what) const {
    return InvalidArgument(source_ + ": " + Path(key) + ": " + what);
  }

  Status CheckKeys(const std::set<std::string>& allowed) const {
    if (!node_ || node_.IsNull()) return Status::Ok();
    if (!node_.IsMap())
      return InvalidArgument(source_ + ": " + (path_.empty() ? "top level" : path_) +
                             ": expected a mapping");
    for (const auto& kv : node_) {
      std::string key = kv.first.as<std::string>();
      if (!allowed.count(key)) {
        std::string known;
        for (const auto& a : allowed) known += (known.empty() ? "" : ", ") + a;
        std::string what = "unknown key (known keys: " + known + ")";
        if (unknown_.strict || unknown_.warnings == nullptr) return Error(key, what);
        unknown_.warnings->push_back(Path(key) + ": " + what + "; ignored");
      }
    }
    return Status::Ok();
  }

  bool Has(const std::string& key) const {
    YAML::Node n = Get(key);
    return n && !n.IsNull();
  }

  Section Child(const std::string& key) const { return {Get(key), Path(key), source_, unknown_}; }

  Status String(const std::string& key, std::string& out) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return Status::Ok();
    if (!n.IsScalar()) return Error(key, "expected a string");
    out = n.as<std::string>();
    return Status::Ok();
  }

  // A non-empty list of strings.
  Status StringList(const std::string& key, std::vector<std::string>& out) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return Status::Ok();
    if (!n.IsSequence() || n.size() == 0) return Error(key, "expected a non-empty list of strings");
    out.clear();
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) return Error(key + "[" + std::to_string(i) + "]", "expected a string");
      out.push_back(n[i].as<std::string>());
    }
    return Status::Ok();
  }

  Status Bool(const std::string& key, bool& out) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return Status::Ok();
    bool v;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
      return Error(key, "expected true or false");
    out = v;
    return Status::Ok();
  }

  Status Int(const std::string& key, int& out, long long min, long long max) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return Status::Ok();
    long long v;
    if (!n.IsScalar() || !YAML::convert<long long>::decode(n, v))
      return Error(key, "expected an integer, got \"" + Scalar(n) + "\"");
    if (v < min || v > max)
      return Error(key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    out = static_cast<int>(v);
    return Status::Ok();
  }

  Status Double(const std::string& key, double& out, double min, double max) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return Status::Ok();
    double v;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v))
      return Error(key, "expected a number, got \"" + Scalar(n) + "\"");
    if (v < min || v > max)
      return Error(key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    out = v;
    return Status::Ok();
  }

  Status Duration(const std::string& key, std::chrono::milliseconds& out,
                  std::chrono::milliseconds min = std::chrono::milliseconds(1)) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return Status::Ok();
    if (!n.IsScalar()) return Error(key, "expected a duration such as 30s");
    auto d = ParseDuration(n.as<std::string>());
    if (!d.ok()) return Error(key, d.status().message());
    if (*d < min) return Error(key, "must be at least " + FormatDuration(min));
    out = *d;
    return Status::Ok();
  }

  YAML::Node Get(const std::string& key) const {
    if (!node_ || !node_.IsMap()) return YAML::Node();
    return node_[key];
  }

 private:
  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  static std::string Scalar(const YAML::Node& n) {
    return n.IsScalar() ? n.Scalar() : "<non-scalar>";
  }

  YAML::Node node_;
  std::string path_;
  std::string source_;
  UnknownKeys unknown_;
};

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status ParseAmqp(const Section& s, amqp::ConnectionOptions& o) {
  SYNCBUS_RETURN_IF_ERROR(
      s.CheckKeys({"host", "port", "addresses", "vhost", "user", "password", "passwordFile",
                   "heartbeatSeconds", "connectTimeout", "tls"}));
  SYNCBUS_RETURN_IF_ERROR(s.String("host", o.host));
  SYNCBUS_RETURN_IF_ERROR(s.Int("port", o.port, 1, 65535));
  std::vector<std::string> addresses;
  SYNCBUS_RETURN_IF_ERROR(s.StringList("addresses", addresses));
  if (!addresses.empty()) {
    YAML::Node host = s.Get("host");
    if (host && !host.IsNull()) {
      return s.Error("addresses", "give either host (and port) or addresses, not both");
    }
    for (size_t i = 0; i < addresses.size(); ++i) {
      auto address = amqp::ParseAddress(addresses[i], o.port);
      if (!address.ok())
        return s.Error("addresses[" + std::to_string(i) + "]", address.status().message());
      o.addresses.push_back(*address);
    }
  }
  SYNCBUS_RETURN_IF_ERROR(s.String("vhost", o.vhost));
  SYNCBUS_RETURN_IF_ERROR(s.String("user", o.user));
  SYNCBUS_RETURN_IF_ERROR(s.String("password", o.password));
  std::string password_file;
  SYNCBUS_RETURN_IF_ERROR(s.String("passwordFile", password_file));
  if (!password_file.empty()) {
    auto pw = ReadFile(password_file);
    if (!pw.ok()) return s.Error("passwordFile", pw.status().message());
    std::string v = *pw;
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
    o.password = v;
  }
  SYNCBUS_RETURN_IF_ERROR(s.Int("heartbeatSeconds", o.heartbeat_seconds, 0, 3600));
  SYNCBUS_RETURN_IF_ERROR(s.Duration("connectTimeout", o.connect_timeout));
  Section tls = s.Child("tls");
  SYNCBUS_RETURN_IF_ERROR(
      tls.CheckKeys({"enabled", "caFile", "certFile", "keyFile", "verifyPeer"}));
  SYNCBUS_RETURN_IF_ERROR(tls.Bool("enabled", o.tls));
  SYNCBUS_RETURN_IF_ERROR(tls.String("caFile", o.tls_ca_file));
  SYNCBUS_RETURN_IF_ERROR(tls.String("certFile", o.tls_cert_file));
  SYNCBUS_RETURN_IF_ERROR(tls.String("keyFile", o.tls_key_file));
  SYNCBUS_RETURN_IF_ERROR(tls.Bool("verifyPeer", o.tls_verify_peer));
  return Status::Ok();
}

Status ParseTopology(const Section& s, amqp::TopologyOptions& o) {
  SYNCBUS_RETURN_IF_ERROR(
      s.CheckKeys({"retryTiers", "deliveryLimit", "maxLength", "traceMaxAge", "traceMaxMiB"}));
  YAML::Node tiers = s.Get("retryTiers");
  if (tiers && !tiers.IsNull()) {
    if (!tiers.IsSequence() || tiers.size() == 0)
      return s.Error("retryTiers", "expected a non-empty list of durations");
    o.retry_tiers.clear();
    for (size_t i = 0; i < tiers.size(); ++i) {
      auto d = ParseDuration(tiers[i].IsScalar() ? tiers[i].as<std::string>() : "");
      std::string key = "retryTiers[" + std::to_string(i) + "]";
      if (!d.ok()) return s.Error(key, d.status().message());
      if (d->count() % 1000 != 0 || *d < std::chrono::seconds(1))
        return s.Error(key, "must be whole seconds, at least 1s");
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(*d);
      if (!o.retry_tiers.empty() && secs <= o.retry_tiers.back())
        return s.Error(key, "tiers must increase");
      o.retry_tiers.push_back(secs);
    }
  }
  SYNCBUS_RETURN_IF_ERROR(s.Int("deliveryLimit", o.delivery_limit, 1, 1000));
  SYNCBUS_RETURN_IF_ERROR(s.Int("maxLength", o.max_length, 1, 100000000));
  std::chrono::milliseconds trace_age = o.trace_max_age;
  SYNCBUS_RETURN_IF_ERROR(s.Duration("traceMaxAge", trace_age, std::chrono::minutes(1)));
  if (trace_age.count() % 1000 != 0) return s.Error("traceMaxAge", "must be whole seconds");
  o.trace_max_age = std::chrono::duration_cast<std::chrono::seconds>(trace_age);
  int trace_mib = static_cast<int>(o.trace_max_bytes >> 20);
  SYNCBUS_RETURN_IF_ERROR(s.Int("traceMaxMiB", trace_mib, 16, 1 << 20));
  o.trace_max_bytes = int64_t{trace_mib} << 20;
  return Status::Ok();
}

Status ParsePublisher(const Section& s, PublisherConfig& o) {
  SYNCBUS_RETURN_IF_ERROR(
      s.CheckKeys({"namespace", "resyncInterval", "resyncJitter", "maxPublishRate",
                   "maxOutstanding", "outstandingTimeout", "bulkEditClusters", "roundClusters",
                   "watchSourceSecrets", "leaderElection"}));
  SYNCBUS_RETURN_IF_ERROR(s.Bool("watchSourceSecrets", o.watch_source_secrets));
  SYNCBUS_RETURN_IF_ERROR(s.String("namespace", o.ns));
  SYNCBUS_RETURN_IF_ERROR(s.Duration("resyncInterval", o.resync_interval, std::chrono::seconds(1)));
  o.resync_interval_set = s.Get("resyncInterval") && !s.Get("resyncInterval").IsNull();
  SYNCBUS_RETURN_IF_ERROR(s.Double("resyncJitter", o.resync_jitter, 0, 0.5));
  SYNCBUS_RETURN_IF_ERROR(s.Double("maxPublishRate", o.max_publish_rate, 0.1, 1e6));
  SYNCBUS_RETURN_IF_ERROR(s.Int("maxOutstanding", o.max_outstanding, 1, 10000000));
  SYNCBUS_RETURN_IF_ERROR(
      s.Duration("outstandingTimeout", o.outstanding_timeout, std::chrono::seconds(1)));
  SYNCBUS_RETURN_IF_ERROR(s.Int("bulkEditClusters", o.bulk_edit_clusters, 1, 10000000));
  SYNCBUS_RETURN_IF_ERROR(s.Int("roundClusters", o.round_clusters, 1, 10000000));
  Section le = s.Child("leaderElection");
  auto& l = o.leader_election;
  SYNCBUS_RETURN_IF_ERROR(le.CheckKeys(
      {"enabled", "namespace", "name", "leaseDuration", "renewDeadline", "retryPeriod"}));
  SYNCBUS_RETURN_IF_ERROR(le.Bool("enabled", l.enabled));
  SYNCBUS_RETURN_IF_ERROR(le.String("namespace", l.ns));
  SYNCBUS_RETURN_IF_ERROR(le.String("name", l.name));
  SYNCBUS_RETURN_IF_ERROR(le.Duration("leaseDuration", l.lease_duration));
  SYNCBUS_RETURN_IF_ERROR(le.Duration("renewDeadline", l.renew_deadline));
  SYNCBUS_RETURN_IF_ERROR(le.Duration("retryPeriod", l.retry_period));
  if (l.renew_deadline >= l.lease_duration)
    return le.Error("renewDeadline", "must be shorter than leaseDuration");
  if (l.retry_period >= l.renew_deadline)
    return le.Error("retryPeriod", "must be shorter than renewDeadline");
  return Status::Ok();
}

Status ParseConsumer(const Section& s, ConsumerConfig& o) {
  SYNCBUS_RETURN_IF_ERROR(s.CheckKeys(
      {"prefetch", "parallelSyncSets", "maxInFlight", "perClusterInFlight", "perClusterQps",
       "requestTimeout", "clusterDeadline", "maxAttempts", "shutdownGrace", "maxConnectionsPerHost",
       "maxIdleConnections", "idleConnectionTimeout", "targetClients", "events", "clusterLease",
       "hubMirror", "takeOverManagers", "previewWorkers"}));
  SYNCBUS_RETURN_IF_ERROR(s.Int("prefetch", o.prefetch, 1, 65535));
  SYNCBUS_RETURN_IF_ERROR(s.Int("parallelSyncSets", o.parallel_sync_sets, 1, 1000));
  SYNCBUS_RETURN_IF_ERROR(s.Int("maxInFlight", o.max_in_flight, 1, 1000000));
  SYNCBUS_RETURN_IF_ERROR(s.Int("perClusterInFlight", o.per_cluster_in_flight, 1, 10000));
  SYNCBUS_RETURN_IF_ERROR(s.Double("perClusterQps", o.per_cluster_qps, 0, 1e6));
  SYNCBUS_RETURN_IF_ERROR(s.Duration("requestTimeout", o.request_timeout));
  SYNCBUS_RETURN_IF_ERROR(s.Duration("clusterDeadline", o.cluster_deadline));
  SYNCBUS_RETURN_IF_ERROR(s.Int("maxAttempts", o.max_attempts, 1, 1000));
  SYNCBUS_RETURN_IF_ERROR(s.Duration("shutdownGrace", o.shutdown_grace));
  SYNCBUS_RETURN_IF_ERROR(s.Int("maxConnectionsPerHost", o.max_connections_per_host, 0, 100000));
  SYNCBUS_RETURN_IF_ERROR(s.Int("maxIdleConnections", o.max_idle_connections, 0, 1000000));
  SYNCBUS_RETURN_IF_ERROR(
      s.Duration("idleConnectionTimeout", o.idle_connection_timeout, std::chrono::milliseconds(0)));
  SYNCBUS_RETURN_IF_ERROR(s.Int("targetClients", o.target_clients, 1, 10000000));
  SYNCBUS_RETURN_IF_ERROR(s.Bool("events", o.events));
  SYNCBUS_RETURN_IF_ERROR(s.Int("previewWorkers", o.preview_workers, 0, 1000));
  SYNCBUS_RETURN_IF_ERROR(s.StringList("takeOverManagers", o.take_over_managers));
  Section ls = s.Child("clusterLease");
  auto& l = o.cluster_lease;
  SYNCBUS_RETURN_IF_ERROR(ls.CheckKeys({"duration", "renewInterval", "safetyMargin",
                                        "releaseByStatus", "sticky", "livenessNamespace"}));
  SYNCBUS_RETURN_IF_ERROR(ls.Bool("releaseByStatus", l.release_by_status));
  // Unset: sticky wherever it can be, that is with the hub mirror (checked below).
  bool sticky = true;
  const bool sticky_set = ls.Has("sticky");
  SYNCBUS_RETURN_IF_ERROR(ls.Bool("sticky", sticky));
  SYNCBUS_RETURN_IF_ERROR(ls.String("livenessNamespace", l.liveness_namespace));
  SYNCBUS_RETURN_IF_ERROR(ls.Duration("duration", l.duration));
  SYNCBUS_RETURN_IF_ERROR(ls.Duration("renewInterval", l.renew_interval));
  SYNCBUS_RETURN_IF_ERROR(ls.Duration("safetyMargin", l.safety_margin));
  if (l.duration.count() % 1000 != 0 || l.duration < std::chrono::seconds(1)) {
    return ls.Error("duration", "must be a whole number of seconds");
  }
  // The holder must renew before its own fence (duration - safetyMargin) closes.
  if (l.safety_margin + l.renew_interval >= l.duration) {
    return ls.Error("renewInterval", "renewInterval + safetyMargin must be shorter than duration");
  }
  Section ms = s.Child("hubMirror");
  SYNCBUS_RETURN_IF_ERROR(ms.CheckKeys({"enabled", "maxWait"}));
  SYNCBUS_RETURN_IF_ERROR(ms.Bool("enabled", o.hub_mirror.enabled));
  SYNCBUS_RETURN_IF_ERROR(
      ms.Duration("maxWait", o.hub_mirror.max_wait, std::chrono::milliseconds(0)));
  if (sticky && sticky_set && !o.hub_mirror.enabled)
    return ls.Error("sticky", "sticky claims need the hub mirror (consumer.hubMirror.enabled)");
  l.sticky = sticky && o.hub_mirror.enabled;
  return Status::Ok();
}

Status ParseAdmin(const Section& s, AdminConfig& o) {
  SYNCBUS_RETURN_IF_ERROR(s.CheckKeys({"listen"}));
  std::string listen;
  SYNCBUS_RETURN_IF_ERROR(s.String("listen", listen));
  if (listen.empty()) return Status::Ok();
  if (listen == "off") {
    o.port = -1;
    return Status::Ok();
  }
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return s.Error("listen", "expected host:port or \"off\"");
  o.host = listen.substr(0, colon);
  try {
    size_t used = 0;
    o.port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1 || o.port < 0 || o.port > 65535)
      throw std::out_of_range("port");
  } catch (const std::exception&) {
    return s.Error("listen", "invalid port in \"" + listen + "\"");
  }
  return Status::Ok();
}

Result<Config> ParseRoot(const YAML::Node& root, const std::string& source,
                         const ConfigOptions& options) {
  Config c;
  c.publisher.leader_election.ns.clear();  // the file's, else own_namespace (below)
  Section top(root, "", source, UnknownKeys{options.strict, &c.warnings});
  SYNCBUS_RETURN_IF_ERROR(
      top.CheckKeys({"log", "admin", "amqp", "hub", "topology", "publisher", "consumer"}));
  Section log = top.Child("log");
  SYNCBUS_RETURN_IF_ERROR(log.CheckKeys({"level", "format"}));
  SYNCBUS_RETURN_IF_ERROR(log.String("level", c.log.level));
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
  if (!kLevels.count(c.log.level))
    return log.Error("level", "must be one of trace, debug, info, warn, error");
  SYNCBUS_RETURN_IF_ERROR(log.String("format", c.log.format));
  if (c.log.format != "text" && c.log.format != "json")
    return log.Error("format", "must be text or json");
  SYNCBUS_RETURN_IF_ERROR(ParseAdmin(top.Child("admin"), c.admin));
  SYNCBUS_RETURN_IF_ERROR(ParseAmqp(top.Child("amqp"), c.amqp));
  Section hub = top.Child("hub");
  SYNCBUS_RETURN_IF_ERROR(hub.CheckKeys({"kubeconfig", "context", "qps"}));
  SYNCBUS_RETURN_IF_ERROR(hub.String("kubeconfig", c.hub.kubeconfig));
  SYNCBUS_RETURN_IF_ERROR(hub.String("context", c.hub.context));
  SYNCBUS_RETURN_IF_ERROR(hub.Double("qps", c.hub.qps, 0, 1e6));
  SYNCBUS_RETURN_IF_ERROR(ParseTopology(top.Child("topology"), c.topology));
  SYNCBUS_RETURN_IF_ERROR(ParsePublisher(top.Child("publisher"), c.publisher));
  SYNCBUS_RETURN_IF_ERROR(ParseConsumer(top.Child("consumer"), c.consumer));
  if (c.publisher.leader_election.ns.empty())
    c.publisher.leader_election.ns = options.own_namespace;
  std::string& liveness = c.consumer.cluster_lease.liveness_namespace;
  if (liveness.empty()) liveness = options.own_namespace + "-liveness";
  for (std::string& warning : c.warnings) warning = source + ": " + warning;
  return c;
}

}  // namespace

Result<Config> ParseConfig(const std::string& yaml_text, const std::string& source,
                           const ConfigOptions& options) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": invalid YAML at line " + std::to_string(e.mark.line + 1) +
                           ": " + e.msg);
  }
  try {
    return ParseRoot(root, source, options);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": " + e.msg);
  }
}

Result<Config> LoadConfigFile(const std::string& path, const ConfigOptions& options) {
  auto text = ReadFile(path);
  if (!text.ok()) return InvalidArgument("config: " + text.status().message());
  return ParseConfig(*text, path, options);
}

}  // namespace syncbus
