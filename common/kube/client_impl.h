// ClientImpl: kube::Client over an http::Transport (REST + JSON), plus a non-blocking API for the
// apply engine. Thread-safe; in-flight async calls keep working after the client is destroyed,
// except requests still held back by the QPS limit, which get kCancelled.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/http/transport.h"
#include "common/kube/client.h"
#include "common/kube/config.h"
#include "common/kube/exec_credential.h"

namespace syncbus::kube {

// The Accept headers of metadata-only reads, as client-go's metadata client sends them (JSON
// only): the PartialObjectMetadata form first, then the object itself for a server that does
// not offer that form.
inline constexpr char kAcceptMetadataList[] =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
inline constexpr char kAcceptMetadata[] =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

// `object` reduced to its metadata, as a PartialObjectMetadata (meta.k8s.io/v1); one already
// in that form is returned as it is.
Json MetadataOnly(Json object);

// Splits a watch response body, arriving in chunks with arbitrary boundaries, into events
// (newline-delimited JSON). An ERROR event or a malformed line becomes one terminal error (an
// ERROR event carrying a 410 Status is kGone); input after it is ignored. With `metadata_only`
// every event's object is reduced to its metadata (MetadataOnly) as it is decoded.
// Not thread-safe.
class WatchDecoder {
 public:
  explicit WatchDecoder(bool metadata_only = false) : metadata_only_(metadata_only) {}
  void Feed(std::string_view chunk, std::vector<Result<WatchEvent>>& out);

 private:
  std::string partial_;  // bytes after the last complete line
  bool failed_ = false;
  bool metadata_only_;
};

// A token bucket: `qps` tokens per second, at most `burst` stored, starting full. Not thread-safe.
class TokenBucket {
 public:
  TokenBucket(double qps, double burst, SteadyTime now)
      : qps_(qps), burst_(burst), tokens_(burst), last_(now) {}
  // Takes one token (possibly going into debt); returns how long to wait before using it.
  Duration Reserve(SteadyTime now);

 private:
  double qps_, burst_, tokens_;
  SteadyTime last_;
};

// Query parameters in order; values are percent-encoded when the URL is built.
using Query = std::vector<std::pair<std::string, std::string>>;

class ClientImpl final : public Client {
 public:
  template <typename T>
  using Callback = std::function<void(Result<T>)>;
  using StatusCallback = std::function<void(Status)>;

  // With config.qps > 0 requests are paced by a token bucket (burst: one second's worth) and
  // held-back requests are sent from a pacing thread. Credentials: the config's token (or token
  // file), else its basic authentication, else its exec plugin, which runs on the thread that
  // makes a request when no unexpired credential is cached (`clock` tells expiry; it must
  // outlive the client); a 401 answer to a plugin's credential makes the next request run it
  // again.
  ClientImpl(ClusterConfig config, std::shared_ptr<http::Transport> transport,
             const Clock& clock = RealClock());
  ~ClientImpl() override;
  ClientImpl(const ClientImpl&) = delete;
  ClientImpl& operator=(const ClientImpl&) = delete;

  const ClusterConfig& config() const { return config_; }
  // Another client of the same server over the same transport whose every request gives up
  // after `request_timeout` (a QPS limit of the config is its own: a second token bucket).
  std::shared_ptr<ClientImpl> WithRequestTimeout(std::chrono::milliseconds request_timeout,
                                                 const Clock& clock = RealClock()) const;

  // Client. Blocking: must not run on the transport's thread.
  Result<Json> Get(const ObjectRef& object) override;
  Result<ObjectList> List(const ObjectRef& collection, const ListOptions& options) override;
  Result<std::unique_ptr<WatchStream>> Watch(const ObjectRef& collection,
                                             const WatchOptions& options) override;
  Result<Json> Create(const ObjectRef& collection, const Json& object,
                      const WriteOptions& options = {}) override;
  Result<Json> Update(const ObjectRef& ref, const Json& object) override;
  Result<Json> Apply(const ObjectRef& ref, const Json& object,
                     const ApplyOptions& options) override;
  Result<Json> Patch(const ObjectRef& ref, PatchType type, const std::string& body,
                     const WriteOptions& options = {}) override;
  Status Delete(const ObjectRef& ref, const DeleteOptions& options) override;
  Result<Json> GetPath(const std::string& path) override;

  // Non-blocking forms. `done` runs exactly once, on the transport's thread (kCancelled from the
  // destructor's thread for requests the QPS limit still held back), and must not block. A write
  // with a `guard` is sent only if the guard still says OK at the moment it would go out (on the
  // transport's thread; it must not block); otherwise `done` gets the guard's failure.
  void GetAsync(const ObjectRef& ref, Callback<Json> done);
  void CreateAsync(const ObjectRef& collection, const Json& object, Callback<Json> done,
                   http::SendGuard guard = nullptr, const WriteOptions& options = {});
  void UpdateAsync(const ObjectRef& ref, const Json& object, Callback<Json> done,
                   http::SendGuard guard = nullptr);
  void ApplyAsync(const ObjectRef& ref, const Json& object, const ApplyOptions& options,
                  Callback<Json> done, http::SendGuard guard = nullptr);
  void PatchAsync(const ObjectRef& ref, PatchType type, std::string body, Callback<Json> done,
                  http::SendGuard guard = nullptr, const WriteOptions& options = {});
  void DeleteAsync(const ObjectRef& ref, const DeleteOptions& options, StatusCallback done,
                   http::SendGuard guard = nullptr);

  // The absolute URL of an API path: server (with its path prefix) + path + encoded query.
  std::string Url(const std::string& path, const Query& query = {}) const;

 private:
  class Pacer;
  struct TokenSource;

  // A request with its headers, and the plugin credential it carries (null without a plugin).
  struct Prepared {
    http::Request request;
    std::shared_ptr<const ExecCredentialPlugin::Credential> credential;
  };
  // Fails when the exec plugin cannot give a credential.
  Result<Prepared> NewRequest(std::string method, std::string url, std::string content_type,
                              std::string body) const;
  // Sends through the QPS limit; `done` gets the parsed body of a 2xx answer, the mapped error
  // otherwise (the error of `prepared` when it holds one).
  void CallJson(Result<Prepared> prepared, Callback<Json> done, http::SendGuard guard = nullptr);
  // List with a resource_version: one response from the watch cache, split into items as it
  // arrives (Fetch).
  Result<ObjectList> ListFromCache(const ObjectRef& collection, const ListOptions& options);

  const ClusterConfig config_;
  const std::string base_url_;
  std::shared_ptr<http::Transport> transport_;
  std::unique_ptr<TokenSource> token_;
  std::shared_ptr<ExecCredentialPlugin> exec_;  // null without an exec plugin
  http::Headers fixed_headers_;                 // basic authentication, impersonation
  std::unique_ptr<Pacer> pacer_;                // null without a QPS limit
};

}  // namespace syncbus::kube
