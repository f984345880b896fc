#include "ctl/dead_letter_index.h"

#include <cstdio>
#include <deque>
#include <list>
#include <map>

#include <unistd.h>

#include "common/bus/topology.h"
#include "common/digest.h"
#include "common/random.h"

namespace syncbus::ctl {
namespace {

Status PublishRecord(amqp::Session& session, const std::string& kind, const std::string& key,
                     const std::string& by, std::chrono::milliseconds timeout) {
  amqp::Publication p;
  p.exchange = amqp::kDeadIndexExchange;
  p.message.content_type = "text/plain";
  p.message.app_id = "syncbusctl";
  p.message.type = "syncbus.dead.index/" + kind;
  p.message.body = kind;
  p.message.headers = {{kIndexRecordHeader, kind}};
  if (!key.empty()) p.message.headers[kIndexKeyHeader] = key;
  if (!by.empty()) p.message.headers[kIndexByHeader] = by;
  return session.Publish(p, timeout)
      .Annotate("writing a " + kind + " record to the dead-letter index " + amqp::kDeadIndexQueue);
}

std::string Nonce() {
  char buf[80];
  auto ns = std::chrono::system_clock::now().time_since_epoch().count();
  std::snprintf(buf, sizeof buf, "%d-%lld-%016llx", static_cast<int>(getpid()),
                static_cast<long long>(ns),
                static_cast<unsigned long long>(RealRandom().Uniform() * 18446744073709551615.0));
  return buf;
}

}  // namespace

std::string StringHeader(const Json& headers, const char* name) {
  if (!headers.is_object()) return "";
  auto it = headers.find(name);
  return it != headers.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string ParkedKey(const amqp::Message& message) {
  return message.message_id.empty() ? "sha256:" + Sha256Hex(message.body)
                                    : "id:" + message.message_id;
}

Result<DeadLetterIndex> ReadDeadLetterIndex(amqp::Session& session,
                                            std::chrono::milliseconds timeout) {
  // A missing stream is reported as such, before a publish to its missing exchange.
  if (auto info = session.Inspect(amqp::kDeadIndexQueue); !info.ok()) {
    if (info.status().code() != Code::kNotFound) return info.status();
    return NotFound(
        std::string("the dead-letter index ") + amqp::kDeadIndexQueue +
        " does not exist on this vhost: no syncbus daemon of this version has connected yet "
        "(they declare it at start)");
  }
  const std::string nonce = Nonce();
  SYNCBUS_RETURN_IF_ERROR(PublishRecord(session, "barrier", nonce, "", timeout));
  auto tag = session.ConsumeStream(amqp::kDeadIndexQueue, 1000, 0);
  if (!tag.ok())
    return tag.status().Annotate(std::string("reading the dead-letter index ") +
                                 amqp::kDeadIndexQueue);

  // Listed copies in park order, and for each key its copies oldest first.
  std::list<amqp::Delivery> listed;
  std::map<std::string, std::deque<std::list<amqp::Delivery>::iterator>> by_key;
  DeadLetterIndex out;
  bool first = true, reset_seen = false, done = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      (void)session.Cancel(*tag);
      return Status(Code::kTimeout,
                    "the dead-letter index did not reach its end (this reader's barrier) within " +
                        std::to_string(timeout.count()) + " ms");
    }
    auto next = session.Next(left);
    if (!next.ok()) return next.status().Annotate("reading the dead-letter index");
    if (!next->has_value()) continue;
    amqp::Delivery d = std::move(**next);
    if (Status acked = session.Ack(d.delivery_tag); !acked.ok())
      return acked.Annotate("reading the dead-letter index");
    ++out.records;
    if (first) {
      first = false;
      auto offset = d.message.headers.find("x-stream-offset");
      out.trimmed = offset != d.message.headers.end() && offset->is_number_integer() &&
                    offset->get<int64_t>() > 0;
    }
    const std::string kind = StringHeader(d.message.headers, kIndexRecordHeader);
    if (kind.empty()) {
      d.message.headers.erase("x-stream-offset");  // the stream's, not the parked copy's
      std::string key = ParkedKey(d.message);
      listed.push_back(std::move(d));
      by_key[key].push_back(std::prev(listed.end()));
    } else if (kind == "removed") {
      auto it = by_key.find(StringHeader(d.message.headers, kIndexKeyHeader));
      if (it != by_key.end() && !it->second.empty()) {
        listed.erase(it->second.front());
        it->second.pop_front();
      }
    } else if (kind == "reset") {
      listed.clear();
      by_key.clear();
      reset_seen = true;
    } else if (kind == "barrier") {
      done = StringHeader(d.message.headers, kIndexKeyHeader) == nonce;
    }
  }
  (void)session.Cancel(*tag);
  out.trimmed = out.trimmed && !reset_seen;
  out.parked.assign(std::make_move_iterator(listed.begin()), std::make_move_iterator(listed.end()));
  return out;
}

Status RecordRemoval(amqp::Session& session, const amqp::Message& message, const std::string& by,
                     std::chrono::milliseconds timeout) {
  return PublishRecord(session, "removed", ParkedKey(message), by, timeout);
}

Status RecordReset(amqp::Session& session, std::chrono::milliseconds timeout) {
  return PublishRecord(session, "reset", "", "reindex", timeout);
}

}  // namespace syncbus::ctl
