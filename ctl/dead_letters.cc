#include "ctl/dead_letters.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include "common/amqp/field_table.h"
#include "common/bus/headers.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/bus/trace_event.h"
#include "common/time_format.h"
#include "ctl/dead_letter_index.h"
#include "ctl/text_table.h"

namespace syncbus::ctl {
namespace {

std::optional<WallTime> TimestampOf(const Json& value) {
  if (value.is_object() && value.contains(amqp::kTimestampTag) &&
      value[amqp::kTimestampTag].is_number_integer()) {
    return WallTime(std::chrono::seconds(value[amqp::kTimestampTag].get<int64_t>()));
  }
  return std::nullopt;
}

// Best effort: a replay shows in the cluster's trace. Letters without a valid cluster are not
// traced (the event would not decode).
void RecordReplay(amqp::Session& session, const DeadLetter& letter, const amqp::Publication& replay,
                  WallTime now, std::chrono::milliseconds timeout) {
  TraceEvent e;
  e.step = TraceStep::kReplayed;
  e.cluster = letter.cluster;
  e.request = replay.message.message_id;
  e.at = now;
  e.actor = "syncbusctl";
  e.lane = replay.routing_key;
  e.reason = letter.reason;
  if (!DecodeTraceEvent(EncodeTraceEvent(e)).ok()) return;
  (void)session.Publish(TraceBatches({&e}).front().publication, timeout);
}

std::string DeadAge(std::optional<WallTime> dead_at, WallTime now) {
  if (!dead_at) return "-";
  auto s = std::chrono::duration_cast<std::chrono::seconds>(now - *dead_at).count();
  if (s < 0) s = 0;
  char buf[32];
  if (s < 120)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%lldm", static_cast<long long>(s / 60));
  else if (s < 172800)
    std::snprintf(buf, sizeof buf, "%lldh", static_cast<long long>(s / 3600));
  else
    std::snprintf(buf, sizeof buf, "%lldd", static_cast<long long>(s / 86400));
  return buf;
}

}  // namespace

Json DeadLetter::ToJson(WallTime now, bool with_message) const {
  Json out = {{"cluster", cluster},
              {"lane", lane},
              {"reason", reason},
              {"parkedBy", by_broker ? "broker" : "syncbus"},
              {"attempts", attempts},
              {"unsettled", unsettled},
              {"returnsFromConsumers", returns_from_consumers},
              {"firstFailure", first_failure},
              {"lastError", last_error},
              {"messageId", message_id}};
  if (with_message) out["message"] = {{"headers", message.headers}, {"body", message.body}};
  if (dead_at) {
    out["deadAt"] = FormatRfc3339(*dead_at);
    out["ageSeconds"] = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::seconds>(now - *dead_at).count());
  } else {
    out["deadAt"] = nullptr;
    out["ageSeconds"] = nullptr;
  }
  return out;
}

DeadLetter DescribeDeadLetter(const amqp::Delivery& delivery) {
  const Json& h = delivery.message.headers.is_object() ? delivery.message.headers : Json::object();
  DeadLetter d;
  d.delivery_tag = delivery.delivery_tag;
  d.message_id = delivery.message.message_id;
  d.cluster = StringHeader(h, kClusterHeader);
  d.lane = StringHeader(h, kLaneHeader);
  auto request = DecodeSyncRequest(delivery.message.body);
  if (request.ok()) {
    if (d.cluster.empty()) d.cluster = request->ClusterKey();
    if (d.lane.empty()) d.lane = amqp::LaneName(request->lane);
  }
  if (d.lane != "change" && d.lane != "resync") d.lane = "change";
  d.reason = StringHeader(h, kDeadReasonHeader);
  d.attempts = AttemptOf(delivery.message);
  d.first_failure = StringHeader(h, kFirstFailureHeader);
  d.last_error = StringHeader(h, kLastErrorHeader);
  if (auto at = ParseRfc3339(StringHeader(h, kDeadAtHeader)); at.ok()) d.dead_at = *at;
  if (auto it = h.find(kUnsettledHeader); it != h.end() && it->is_number_integer()) {
    d.unsettled = static_cast<int>(it->get<int64_t>());
  }
  d.returns_from_consumers = ReturnsFromConsumers(delivery.message);
  // Parked by the broker (the work queue's delivery limit): the newest x-death entry says so.
  auto deaths = h.find(kDeathHeader);
  if (deaths != h.end() && deaths->is_array() && !deaths->empty()) {
    const Json& newest = deaths->front();
    if (d.reason.empty()) {
      d.reason = newest.value("reason", "");
      d.by_broker = !d.reason.empty();
    }
    if (!d.dead_at && newest.contains("time")) d.dead_at = TimestampOf(newest["time"]);
  }
  // RabbitMQ 3.10 keeps no x-death array in a stream (the index's copy), only the x-first-death-*
  // headers; a message parked by the broker was dead-lettered once, so the first is the one.
  if (d.reason.empty()) {
    d.reason = StringHeader(h, kFirstDeathReasonHeader);
    d.by_broker = !d.reason.empty();
  }
  if (d.reason.empty()) d.reason = "unknown";
  if (request.ok()) d.full_reapply = request->full_reapply;
  d.message = delivery.message;
  return d;
}

std::string DeadLetter::ReplayKey() const {
  if (cluster.empty()) return "";
  return cluster + " " + lane + (full_reapply ? " full" : "");
}

std::vector<DeadLetterGroup> GroupDeadLetters(const std::vector<DeadLetter>& letters) {
  std::vector<DeadLetterGroup> groups;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const DeadLetter& letter : letters) {
    if (letter.cluster.empty()) {
      groups.push_back({"", letter.reason, {&letter}});
      continue;
    }
    auto [it, added] = index.emplace(std::pair{letter.cluster, letter.reason}, groups.size());
    if (added) groups.push_back({letter.cluster, letter.reason, {}});
    groups[it->second].copies.push_back(&letter);
  }
  return groups;
}

bool DeadLetterFilter::Matches(const DeadLetter& letter, WallTime now) const {
  if (!cluster.empty()) {
    bool qualified = cluster.find('/') != std::string::npos;
    std::string name = letter.cluster.substr(letter.cluster.find('/') + 1);
    if (qualified ? letter.cluster != cluster : name != cluster) return false;
  }
  if (!reason.empty() && letter.reason != reason) return false;
  if (older_than || newer_than) {
    if (!letter.dead_at) return false;
    auto age = now - *letter.dead_at;
    if (older_than && age < *older_than) return false;
    if (newer_than && age >= *newer_than) return false;
  }
  return true;
}

amqp::Publication ReplayPublication(const amqp::Delivery& delivery) {
  DeadLetter d = DescribeDeadLetter(delivery);
  amqp::Publication p;
  p.exchange = amqp::kWorkExchange;
  p.routing_key = d.lane;
  p.message = delivery.message;
  p.message.persistent = true;
  p.message.expiration.clear();
  Json& h = p.message.headers;
  if (!h.is_object()) h = Json::object();
  for (const char* name :
       {kDeathHeader, kFirstDeathExchangeHeader, kFirstDeathQueueHeader, kFirstDeathReasonHeader,
        kLastDeathExchangeHeader, kLastDeathQueueHeader, kLastDeathReasonHeader,
        kFirstFailureHeader, kLastErrorHeader, kDeadReasonHeader, kDeadAtHeader, kRetryTierHeader,
        kUnsettledHeader, kReturnedHeader, kDeliveryCountHeader}) {
    h.erase(name);
  }
  h[kAttemptHeader] = 0;
  return p;
}

std::string DlqListing::Discrepancy() const {
  std::string text;
  if (trimmed) {
    text =
        "the dead-letter index has been trimmed to its size limit, so requests parked long ago may "
        "be missing "
        "from this list; ";
  }
  if (queue_depth && *queue_depth > listed) {
    text += std::string(amqp::kDeadQueue) + " holds " + std::to_string(*queue_depth) +
            " messages and the index lists " + std::to_string(listed) +
            ": the others were parked before the index existed (or taken out of it by hand); ";
  } else if (queue_depth && *queue_depth < listed) {
    text += std::string(amqp::kDeadQueue) + " holds " + std::to_string(*queue_depth) +
            " ready messages and the index lists " + std::to_string(listed) +
            ": the others are being replayed or purged right now, or were removed without "
            "syncbusctl; ";
  }
  if (!text.empty())
    text +=
        "`syncbusctl dlq reindex` rebuilds the index from the queue (run it when nothing else "
        "works the queue)";
  return text;
}

Result<DlqListing> ListDeadLetters(amqp::Session& session, const DeadLetterFilter& filter,
                                   size_t limit, const Clock& clock,
                                   std::chrono::milliseconds timeout) {
  auto index = ReadDeadLetterIndex(session, timeout);
  if (!index.ok()) return index.status();
  DlqListing out;
  out.listed = index->parked.size();
  out.trimmed = index->trimmed;
  const WallTime now = clock.WallNow();
  for (const amqp::Delivery& copy : index->parked) {
    DeadLetter letter = DescribeDeadLetter(copy);
    if (!filter.Matches(letter, now)) continue;
    if (limit != 0 && out.matched.size() >= limit) break;
    out.matched.push_back(std::move(letter));
  }
  if (auto info = session.Inspect(amqp::kDeadQueue); info.ok()) out.queue_depth = info->messages;
  return out;
}

namespace {

// The next message of syncbus.dead (basic.get, unacked), counted as scanned; nullopt when the
// queue has none left or reading failed (`result.error` says why).
std::optional<amqp::Delivery> TakeParked(amqp::Session& session, DlqResult& result) {
  auto got = session.Get(amqp::kDeadQueue);
  if (!got.ok()) {
    result.error = got.status();
    return std::nullopt;
  }
  if (!got->has_value()) return std::nullopt;
  ++result.progress.scanned;
  return std::move(**got);
}

// Publishes the replay of `delivery` (at most options.rate_per_second) and records it in the
// trace; an error when the broker did not confirm it.
Status Replay(amqp::Session& session, const DlqScanOptions& options, const Clock& clock,
              const amqp::Delivery& delivery, const DeadLetter& letter, bool& published_before,
              std::chrono::milliseconds pause) {
  if (published_before && pause.count() > 0) {
    if (options.sleep)
      options.sleep(pause);
    else
      std::this_thread::sleep_for(pause);
  }
  published_before = true;
  amqp::Publication replay = ReplayPublication(delivery);
  const WallTime replay_at = clock.WallNow();  // before a consumer can record its delivery
  Status published = session.Publish(replay, options.confirm_timeout);
  if (!published.ok()) return published.Annotate("replaying " + letter.cluster);
  if (options.trace_replays)
    RecordReplay(session, letter, replay, replay_at, options.confirm_timeout);
  return Status::Ok();
}

// Acks the dead copy (it leaves the queue) and records the removal in the index.
Status Remove(amqp::Session& session, const DlqScanOptions& options, const amqp::Delivery& delivery,
              const DeadLetter& letter) {
  Status acked = session.Ack(delivery.delivery_tag);
  if (!acked.ok()) return acked.Annotate("removing the dead copy of " + letter.cluster);
  if (!options.record_removals) return Status::Ok();
  const char* by = options.action == DlqAction::kReplay ? "replay" : "purge";
  if (Status recorded = RecordRemoval(session, delivery.message, by, options.confirm_timeout);
      !recorded.ok()) {
    // The copy is gone from the queue; the index still lists it until it is rebuilt.
    return recorded.Annotate(letter.cluster +
                             " left the dead-letter queue, but the index still lists it "
                             "(`syncbusctl dlq reindex` rebuilds it)");
  }
  return Status::Ok();
}

}  // namespace

Result<DlqResult> ScanDeadLetters(amqp::Session& session, const DlqScanOptions& options,
                                  const Clock& clock) {
  if (options.action != DlqAction::kReplay && options.action != DlqAction::kPurge) {
    return InvalidArgument(
        "a pass over the dead-letter queue replays or purges; lists come from the index");
  }
  auto info = session.Inspect(amqp::kDeadQueue);
  if (!info.ok()) return info.status().Annotate("inspecting " + std::string(amqp::kDeadQueue));
  DlqResult result;
  result.progress.total = info->messages;
  std::vector<uint64_t> keep;  // unacked until the end, then requeued in order
  // Replay: the newest matching copy of each key, unacked until the end of the pass.
  struct Held {
    amqp::Delivery delivery;
    DeadLetter letter;
  };
  std::map<std::string, Held> newest;
  std::vector<std::string> held_order;  // keys in the order they were first met
  bool published_before = false;
  auto pause =
      options.rate_per_second > 0
          ? std::chrono::milliseconds(static_cast<int64_t>(1000.0 / options.rate_per_second))
          : std::chrono::milliseconds(0);
  // Until the queue has nothing more to give: messages kept back stay unacked meanwhile, so
  // each is seen once (the count above may lag a requeue that has just happened).
  while (true) {
    auto next = TakeParked(session, result);
    if (!next) break;
    const amqp::Delivery& delivery = *next;
    result.progress.total = std::max(result.progress.total, result.progress.scanned);
    DeadLetter letter = DescribeDeadLetter(delivery);
    bool matches = options.filter.Matches(letter, clock.WallNow()) &&
                   (options.limit == 0 || result.matched.size() < options.limit);
    if (!matches) {
      keep.push_back(delivery.delivery_tag);
      if (options.progress) options.progress(result.progress);
      continue;
    }
    result.matched.push_back(letter);
    ++result.progress.matched;
    if (options.action == DlqAction::kReplay) {
      const std::string key = letter.ReplayKey();
      if (!key.empty()) {
        auto it = newest.find(key);
        if (it == newest.end()) {
          held_order.push_back(key);
          newest.emplace(key, Held{delivery, letter});
        } else {
          // A newer copy of the same sync: the older one goes, the newer one is held.
          Held older = std::exchange(it->second, Held{delivery, letter});
          if (Status s = Remove(session, options, older.delivery, older.letter); !s.ok()) {
            result.error = s;
            break;
          }
          ++result.progress.coalesced;
        }
        if (options.progress) options.progress(result.progress);
        continue;
      }
      if (Status s = Replay(session, options, clock, delivery, letter, published_before, pause);
          !s.ok()) {
        keep.push_back(delivery.delivery_tag);  // not confirmed: the dead copy stays
        result.error = s;
        break;
      }
    }
    if (Status s = Remove(session, options, delivery, letter); !s.ok()) {
      result.error = s;
      break;
    }
    ++result.progress.done;
    if (options.progress) options.progress(result.progress);
  }
  // The held copies, each the newest of its cluster and lane: replayed now, in the order their
  // clusters were met (after a broker error, kept parked).
  for (const std::string& key : held_order) {
    const Held& held = newest.at(key);
    if (!result.error.ok()) {
      keep.push_back(held.delivery.delivery_tag);
      continue;
    }
    if (Status s =
            Replay(session, options, clock, held.delivery, held.letter, published_before, pause);
        !s.ok()) {
      keep.push_back(held.delivery.delivery_tag);
      result.error = s;
      continue;
    }
    if (Status s = Remove(session, options, held.delivery, held.letter); !s.ok()) {
      result.error = s;
      continue;
    }
    ++result.progress.done;
    if (options.progress) options.progress(result.progress);
  }
  for (uint64_t tag : keep) {
    if (!session.connected()) break;  // the broker requeues them with the connection
    Status s = session.Nack(tag, true);
    if (!s.ok() && result.error.ok()) result.error = s.Annotate("requeueing");
  }
  return result;
}

Result<DlqResult> ReindexDeadLetters(amqp::Session& session,
                                     std::chrono::milliseconds confirm_timeout,
                                     const std::function<void(const DlqProgress&)>& progress) {
  auto info = session.Inspect(amqp::kDeadQueue);
  if (!info.ok()) return info.status().Annotate("inspecting " + std::string(amqp::kDeadQueue));
  if (auto index = session.Inspect(amqp::kDeadIndexQueue); !index.ok()) {
    return index.status().Annotate("inspecting the dead-letter index " +
                                   std::string(amqp::kDeadIndexQueue));
  }
  SYNCBUS_RETURN_IF_ERROR(RecordReset(session, confirm_timeout));
  DlqResult result;
  result.progress.total = info->messages;
  // The moved copies come back at the end of the queue: stop after the messages that were there.
  while (result.progress.scanned < result.progress.total) {
    auto next = TakeParked(session, result);
    if (!next) break;
    const amqp::Delivery& delivery = *next;
    amqp::Publication copy;
    copy.exchange = amqp::kDeadExchange;
    copy.routing_key = delivery.routing_key;
    copy.message = delivery.message;
    // The queue's count of this copy is not the new copy's.
    if (copy.message.headers.is_object()) copy.message.headers.erase(kDeliveryCountHeader);
    if (Status moved = session.Publish(copy, confirm_timeout); !moved.ok()) {
      (void)session.Nack(delivery.delivery_tag, true);
      result.error = moved.Annotate("moving a parked message (run reindex again)");
      break;
    }
    if (Status acked = session.Ack(delivery.delivery_tag); !acked.ok()) {
      // Both copies stay: the next reindex or replay sees it twice (a replayed trigger twice
      // costs one up-to-date check).
      result.error = acked.Annotate("removing a moved message's old copy");
      break;
    }
    ++result.progress.done;
    result.matched.push_back(DescribeDeadLetter(delivery));
    if (progress) progress(result.progress);
  }
  return result;
}

namespace {

// "parked: 5 copies of 2 clusters (max-attempts: 2 clusters, 4 copies; undecodable: 1 copy)".
std::string ParkedSummary(const std::vector<DeadLetter>& letters,
                          const std::vector<DeadLetterGroup>& groups) {
  auto count = [](size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::map<std::string, std::pair<size_t, size_t>> by_reason;  // clusters, copies
  size_t clusters = 0;
  for (const DeadLetterGroup& g : groups) {
    auto& [reason_clusters, reason_copies] = by_reason[g.reason];
    if (!g.cluster.empty()) {
      ++reason_clusters;
      ++clusters;
    }
    reason_copies += g.copies.size();
  }
  std::string out = "parked: " + count(letters.size(), "copy", "copies") + " of " +
                    count(clusters, "cluster", "clusters");
  std::string separator = " (";
  for (const auto& [reason, counts] : by_reason) {
    out += separator + reason + ": ";
    if (counts.first > 0) out += count(counts.first, "cluster", "clusters") + ", ";
    out += count(counts.second, "copy", "copies");
    separator = "; ";
  }
  if (!by_reason.empty()) out += ")";
  return out + "\n";
}

}  // namespace

std::string FormatDeadLetterTable(const std::vector<DeadLetter>& letters, WallTime now, bool wide) {
  auto text = [](const std::string& value) { return value.empty() ? "-" : value; };
  const std::vector<DeadLetterGroup> groups = GroupDeadLetters(letters);
  std::vector<std::vector<std::string>> rows;
  if (wide) {
    rows.push_back({"CLUSTER", "LANE", "REASON", "ATTEMPTS", "FIRST-FAILURE", "AGE", "PARKED-AT",
                    "MESSAGE-ID", "LAST-ERROR"});
    for (const auto& d : letters) {
      rows.push_back({text(d.cluster), d.lane, d.reason, std::to_string(d.attempts),
                      text(d.first_failure), DeadAge(d.dead_at, now),
                      d.dead_at ? FormatRfc3339(*d.dead_at) : "-", text(d.message_id),
                      text(d.last_error)});
    }
  } else {
    rows.push_back({"CLUSTER", "REASON", "COPIES", "ATTEMPTS", "FIRST-FAILURE", "OLDEST", "NEWEST",
                    "LAST-ERROR"});
    for (const DeadLetterGroup& g : groups) {
      std::string first_failure;
      for (const DeadLetter* d : g.copies) {
        if (!d->first_failure.empty() &&
            (first_failure.empty() || d->first_failure < first_failure))
          first_failure = d->first_failure;
      }
      const DeadLetter& newest = g.newest();
      rows.push_back({text(g.cluster), g.reason, std::to_string(g.copies.size()),
                      std::to_string(newest.attempts), text(first_failure),
                      DeadAge(g.copies.front()->dead_at, now), DeadAge(newest.dead_at, now),
                      text(newest.last_error)});
    }
  }
  return FormatTable(rows) + "\n" + ParkedSummary(letters, groups);
}

}  // namespace syncbus::ctl
