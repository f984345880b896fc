// Journal: the simulator's record of the API requests that changed state, one JSON object per
// line in a file, for whole-system tests to replay (a Lease's holders, who wrote what when).
// Append() only moves an entry into a buffer under a mutex, cheap enough for the object store to
// call while it holds its lock, so one object's entries are in the order its writes were
// applied; a writer thread renders and writes the buffer at least every kInterval, on Flush()
// and on destruction. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "tests/kubesim/resource_registry.h"
#include "tests/kubesim/stored_object.h"

namespace syncbus::kubesim {

// One successful write, as the API server committed it.
struct JournalEntry {
  WallTime time;
  std::string cluster;    // "hub" or the target's name
  const char* verb = "";  // "create", "update", "patch", "apply" or "delete"
  TypePtr type;
  std::string subresource;  // "" or "status" ("finalize" for a namespace)
  int code = 200;           // the HTTP status of the answer
  std::string user_agent;
  ObjectPtr object;  // the state after the write; for a removal, the last state
};

// The entry's line, without the newline: {"t":<unix ms>,"cluster":..,"verb":..,"resource":..,
// "subresource":..,"namespace":..,"name":..,"code":..,"userAgent":..,"resourceVersion":..,
// "generation":<when the object has one>}, and for coordination.k8s.io Leases "holder" (""
// when none), "leaseDurationSeconds", "renewTime" and "acquireTime" (null when unset), and for a
// consumer's liveness Lease (labelled kLivenessLabel: "true") "liveness": true and "epoch" (its
// kEpochAnnotation, null when unset); for ClusterSyncLeases the same fields from a consumer's
// claim (common/bus/cluster_claim.h: its holder, duration and renew time; acquireTime null), its
// "claim" kind ("sticky", or "" for a claim of one sync) and "epoch"; for SyncSets and
// SelectorSyncSets "rolloutState", the syncbus.io/rollout-state annotation as written, when the set
// has one.
std::string JournalLine(const JournalEntry& entry);

class Journal {
 public:
  static constexpr std::chrono::milliseconds kInterval{100};

  // Creates or truncates `path` and starts the writer thread.
  static Result<std::unique_ptr<Journal>> Open(const std::string& path);
  // Writes what is still buffered, then stops the writer thread.
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void Append(JournalEntry entry);
  // Returns once every entry appended before the call is written and synced to disk; once a
  // write has failed (entries were lost), that error.
  Status Flush();
  const std::string& path() const { return path_; }

 private:
  Journal(std::string path, int fd);
  void Run();
  // Writes out the buffer (and syncs the file when `sync`).
  Status WriteBuffered(bool sync);
  Status WriteAll(const std::string& data);

  const std::string path_;
  const int fd_;
  std::mutex mu_;  // guards buffer_ and stopping_
  std::condition_variable wake_;
  std::vector<JournalEntry> buffer_;
  bool stopping_ = false;
  std::mutex write_mu_;  // one writer at a time, so batches reach the file in order
  Status failure_;       // the first write error (logged once); guarded by write_mu_
  std::thread writer_;
};

}  // namespace syncbus::kubesim
