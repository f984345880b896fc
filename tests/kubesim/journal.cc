// Journal: entries buffered under a mutex, rendered and written by one thread at a time.
#include "tests/kubesim/journal.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "common/bus/cluster_claim.h"
#include "common/bus/rollout.h"
#include "common/json.h"
#include "common/log.h"

namespace syncbus::kubesim {
namespace {

using Line = nlohmann::ordered_json;  // keys in the documented order

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// `object[key]` when it is a string or integer, else null.
Line Scalar(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !(it->is_string() || it->is_number_integer())) return nullptr;
  return Line(*it);
}

// `object[key]` when it is an object, else an empty one.
const Json& ObjectAt(const Json& object, const char* key) {
  static const Json kNone = Json::object();
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : kNone;
}

// The number an annotation's text holds ("20" -> 20), or null when it has none.
Line NumberAnnotation(const Json& annotations, const char* key) {
  Line text = Scalar(annotations, key);
  return text.is_string() ? Line(std::atoll(text.get<std::string>().c_str())) : Line(nullptr);
}

void AddLeaseFields(const Json& body, Line& line) {
  const Json& spec = ObjectAt(body, "spec");
  Line holder = Scalar(spec, "holderIdentity");
  line["holder"] = holder.is_string() ? holder : Line("");
  line["leaseDurationSeconds"] = Scalar(spec, "leaseDurationSeconds");
  line["renewTime"] = Scalar(spec, "renewTime");
  line["acquireTime"] = Scalar(spec, "acquireTime");
  const Json& meta = ObjectAt(body, "metadata");
  if (Scalar(ObjectAt(meta, "labels"), kLivenessLabel) == "true") {
    line["liveness"] = true;
    line["epoch"] = NumberAnnotation(ObjectAt(meta, "annotations"), kEpochAnnotation);
  }
}

// A consumer's claim on a ClusterSyncLease (common/bus/cluster_claim.h), in the fields a Lease's
// line has: its holder, the claim's renew time and duration; then its kind and epoch.
void AddClaimFields(const Json& body, Line& line) {
  const Json& annotations = ObjectAt(ObjectAt(body, "metadata"), "annotations");
  Line holder = Scalar(annotations, kClaimHolderAnnotation);
  line["holder"] = holder.is_string() ? holder : Line("");
  line["leaseDurationSeconds"] = NumberAnnotation(annotations, kClaimDurationAnnotation);
  line["renewTime"] = Scalar(annotations, kClaimRenewTimeAnnotation);
  line["acquireTime"] = nullptr;
  Line kind = Scalar(annotations, kClaimKindAnnotation);
  line["claim"] = kind.is_string() ? kind : Line("");
  line["epoch"] = NumberAnnotation(annotations, kEpochAnnotation);
}

// A SyncSet's or SelectorSyncSet's rollout state (common/bus/rollout.h), as written: what a
// rollout released when, in the order of the set's writes.
void AddRolloutState(const Json& body, Line& line) {
  Line state =
      Scalar(ObjectAt(ObjectAt(body, "metadata"), "annotations"), rollout::kStateAnnotation);
  if (state.is_string()) line["rolloutState"] = state;
}

}  // namespace

std::string JournalLine(const JournalEntry& entry) {
  const StoredObject& object = *entry.object;
  Line line = {
      {"t", std::chrono::duration_cast<std::chrono::milliseconds>(entry.time.time_since_epoch())
                .count()},
      {"cluster", entry.cluster},
      {"verb", entry.verb},
      {"resource", entry.type->plural},
      {"subresource", entry.subresource},
      {"namespace", object.index.ns},
      {"name", object.index.name},
      {"code", entry.code},
      {"userAgent", entry.user_agent},
      {"resourceVersion", std::to_string(object.rv)}};
  Json body = Json::parse(object.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object()) {
    auto meta = body.find("metadata");
    if (meta != body.end() && meta->is_object()) {
      auto generation = meta->find("generation");
      if (generation != meta->end() && generation->is_number_integer()) {
        line["generation"] = *generation;
      }
    }
    if (entry.type->group == "coordination.k8s.io" && entry.type->plural == "leases") {
      AddLeaseFields(body, line);
    } else if (entry.type->group == "hiveinternal.openshift.io" &&
               entry.type->plural == "clustersyncleases") {
      AddClaimFields(body, line);
    } else if (entry.type->group == "hive.openshift.io" &&
               (entry.type->plural == "syncsets" || entry.type->plural == "selectorsyncsets")) {
      AddRolloutState(body, line);
    }
  }
  // A client's User-Agent need not be UTF-8.
  return line.dump(-1, ' ', false, Line::error_handler_t::replace);
}

Result<std::unique_ptr<Journal>> Journal::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InvalidArgument(Errno("opening the journal " + path));
  std::unique_ptr<Journal> journal(new Journal(path, fd));
  journal->writer_ = std::thread([raw = journal.get()] { raw->Run(); });
  return journal;
}

Journal::Journal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

Journal::~Journal() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  WriteBuffered(/*sync=*/true);  // a failure is logged there
  ::close(fd_);
}

void Journal::Append(JournalEntry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  buffer_.push_back(std::move(entry));
}

Status Journal::Flush() {
  return WriteBuffered(/*sync=*/true);
}

void Journal::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, kInterval, [this] { return stopping_; });
    lock.unlock();
    WriteBuffered(/*sync=*/false);  // a failure is logged there
    lock.lock();
  }
}

Status Journal::WriteBuffered(bool sync) {
  std::lock_guard<std::mutex> write_lock(write_mu_);
  std::vector<JournalEntry> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(buffer_);
  }
  std::string data;
  for (const JournalEntry& entry : batch) {
    data += JournalLine(entry);
    data += '\n';
  }
  Status status = WriteAll(data);
  if (status.ok() && sync && ::fdatasync(fd_) != 0) status = Unavailable(Errno("syncing"));
  if (status.ok() && failure_.ok()) return status;
  if (failure_.ok()) {
    failure_ = status.Annotate("journal " + path_);
    log::Error(
        "kubesim: writing the journal failed; entries are lost (later failures are not logged)",
        {{"path", path_}, {"error", status.message()}});
  }
  return failure_;
}

Status Journal::WriteAll(const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(Errno("writing"));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace syncbus::kubesim
