// Client: the Kubernetes REST API as syncbus uses it (one API server: the hub or one target).
// ClientImpl (client_impl.h) speaks HTTP(S) through an http::Transport; tests use the same
// ClientImpl over the in-process transport into the simulator, so every request is real REST.
// Implementations are thread-safe; blocking calls must not run on the transport's thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/kube/resource.h"
#include "common/status.h"

namespace syncbus::kube {

// Where a paged list stands, kept up to date by List as each page is handed to on_page: a list
// that failed on a page can be resumed from that page (ListOptions::continue_token) while the
// server still honours the token, instead of being started over.
struct ListProgress {
  std::string resource_version;  // of the list, from its first page
  std::string next_continue;     // the token of the page after the last one delivered; "" = none
  int pages = 0;                 // pages delivered
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int limit = 500;  // page size; List follows `continue` until the end
  // Set: the whole collection as the API server's watch cache holds it, in one response (the
  // cache ignores `limit`; `on_page` still gets at most `limit` objects at a time, and the
  // response is split as it arrives, never held whole), at the cache's version: "0" whatever
  // it is (possibly a little older than the latest write), else no older than this version
  // (the server waits a moment for its cache to reach it, then fails). What client-go's
  // informers list with, and much cheaper for the server than a read from etcd. "" (the
  // default): the latest state, read from etcd page by page.
  std::string resource_version;
  // Called with each page's objects as they arrive, in list order; what it leaves in the vector
  // is returned in ObjectList::items. A caller that converts objects into a smaller form of its
  // own takes them here, so a large collection is never held as JSON all at once.
  std::function<void(std::vector<Json>& page)> on_page;
  // Metadata only (PartialObjectMetadataList, as client-go's metadata client asks): each item is
  // {"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{...}}, never the
  // object's body (a Secret's data). A server that answers in full instead (one that does not
  // know the form) has the bodies dropped from each page as it arrives.
  bool metadata_only = false;
  // Resume a list at this page (ListProgress::next_continue of an earlier call); "" = from the
  // start. A token the server no longer honours fails with kGone: the list must start over.
  std::string continue_token;
  ListProgress* progress = nullptr;  // updated after each page's on_page; may be null
};

struct ObjectList {
  std::vector<Json> items;
  std::string resource_version;  // the list's resourceVersion: start a watch from here
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };
const char* WatchEventTypeName(WatchEventType t);

struct WatchEvent {
  WatchEventType type;
  Json object;  // the object; for kError the metav1.Status
};

struct WatchOptions {
  std::string resource_version;  // start after this version (from a list or a bookmark)
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // server-side watch timeout
  std::string label_selector;
  bool metadata_only = false;  // events carry PartialObjectMetadata (see ListOptions)
};

// One open watch. Next() is called from a single consumer thread. Destroying it cancels.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // Waits up to `timeout` for the next event. nullopt: nothing yet. Errors end the stream:
  // kGone (410, from the response or an ERROR event: relist), kUnavailable (connection ended or
  // the server closed the watch: rewatch from the last seen resourceVersion), kTimeout (no
  // response headers within the request timeout, or still open that long past timeoutSeconds:
  // rewatch), others (an ERROR event is never delivered as an event: it ends the stream as its
  // mapped error).
  virtual Result<std::optional<WatchEvent>> Next(std::chrono::milliseconds timeout) = 0;
  // Ends the watch from any thread: a Next() blocked in another thread returns kCancelled at
  // once. The stream must outlive both calls.
  virtual void Cancel() = 0;
};

enum class PatchType { kJson, kMerge, kStrategicMerge };
const char* PatchContentType(PatchType t);

// dry_run: the server runs the whole write (admission, validation, defaulting, conflicts) and
// answers as if it were stored, and stores nothing (query parameter dryRun=All).
struct WriteOptions {
  bool dry_run = false;
};

struct ApplyOptions {
  std::string field_manager = "syncbus";
  bool force = true;
  bool dry_run = false;  // as WriteOptions::dry_run
};

struct DeleteOptions {
  std::string precondition_uid;               // empty = none
  std::string precondition_resource_version;  // empty = none
  std::string propagation_policy;             // "", "Background", "Foreground", "Orphan"
  bool dry_run = false;                       // as WriteOptions::dry_run
};

class Client {
 public:
  virtual ~Client() = default;

  virtual Result<Json> Get(const ObjectRef& object) = 0;
  // All pages of a collection, consistent at the returned resourceVersion. A continue token that
  // expired mid-list is kGone: the caller lists again.
  virtual Result<ObjectList> List(const ObjectRef& collection, const ListOptions& options) = 0;
  virtual Result<std::unique_ptr<WatchStream>> Watch(const ObjectRef& collection,
                                                     const WatchOptions& options) = 0;
  // POST to the collection of `object.resource` in `object.ns`; returns the stored object.
  virtual Result<Json> Create(const ObjectRef& collection, const Json& object,
                              const WriteOptions& options = {}) = 0;
  // PUT; `object.metadata.resourceVersion`, when set, is a precondition (kConflict on mismatch).
  // With ref.subresource == "status" this is the status update.
  virtual Result<Json> Update(const ObjectRef& ref, const Json& object) = 0;
  // Server-side apply (PATCH application/apply-patch+yaml with fieldManager and force).
  virtual Result<Json> Apply(const ObjectRef& ref, const Json& object,
                             const ApplyOptions& options) = 0;
  virtual Result<Json> Patch(const ObjectRef& ref, PatchType type, const std::string& body,
                             const WriteOptions& options = {}) = 0;
  // NotFound is returned as kNotFound (callers that treat it as success check for it).
  virtual Status Delete(const ObjectRef& ref, const DeleteOptions& options) = 0;
  // GET of an arbitrary API path (discovery: "/api", "/apis", "/apis/apps/v1").
  virtual Result<Json> GetPath(const std::string& path) = 0;
};

}  // namespace syncbus::kube
