#include "tests/fakes/common/amqp/fake_session.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>

#include "common/amqp/field_table.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;

std::string Quote(const std::string& name) {
  return "'" + name + "'";
}

std::vector<std::string> SplitWords(const std::string& key) {
  std::vector<std::string> words;
  size_t start = 0;
  for (;;) {
    size_t dot = key.find('.', start);
    words.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) return words;
    start = dot + 1;
  }
}

bool TopicMatch(const std::vector<std::string>& pattern, size_t p,
                const std::vector<std::string>& key, size_t k) {
  if (p == pattern.size()) return k == key.size();
  if (pattern[p] == "#") {
    for (size_t skip = k; skip <= key.size(); ++skip) {
      if (TopicMatch(pattern, p + 1, key, skip)) return true;
    }
    return false;
  }
  if (k == key.size()) return false;
  if (pattern[p] != "*" && pattern[p] != key[k]) return false;
  return TopicMatch(pattern, p + 1, key, k + 1);
}

// RabbitMQ 3.10 headers-exchange matching: "all"/"any" ignore binding keys starting with "x-";
// "all-with-x"/"any-with-x" include them. A null binding value matches on presence.
bool HeadersMatch(const Json& binding_args, const Json& headers) {
  std::string mode = "all";
  if (binding_args.contains("x-match") && binding_args["x-match"].is_string()) {
    mode = binding_args["x-match"].get<std::string>();
  }
  const bool any = mode == "any" || mode == "any-with-x";
  const bool with_x = mode == "all-with-x" || mode == "any-with-x";
  for (const auto& [key, want] : binding_args.items()) {
    if (key == "x-match") continue;
    if (!with_x && key.rfind("x-", 0) == 0) continue;
    bool match =
        headers.is_object() && headers.contains(key) && (want.is_null() || headers[key] == want);
    if (any && match) return true;
    if (!any && !match) return false;
  }
  return !any;
}

std::optional<int64_t> IntArg(const Json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || !args[key].is_number_integer()) {
    return std::nullopt;
  }
  return args[key].get<int64_t>();
}

std::optional<std::string> StringArg(const Json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || !args[key].is_string()) return std::nullopt;
  return args[key].get<std::string>();
}

struct StoredMessage {
  uint64_t seq = 0;  // arrival order; a requeued message goes back to its place
  std::string exchange;
  std::string routing_key;
  Message message;
  int64_t delivery_count = 0;  // returns so far (quorum queues)
  bool redelivered = false;
  std::optional<SteadyTime> expires_at;
};

struct QueueState {
  QueueSpec spec;
  bool quorum = false;
  std::optional<int64_t> ttl_ms;
  std::optional<std::string> dlx;
  std::optional<std::string> dlrk;
  std::optional<int64_t> max_length;
  bool reject_publish = false;
  std::optional<int64_t> delivery_limit;
  std::deque<StoredMessage> ready;
  size_t unacked = 0;
  size_t consumers = 0;
};

struct ConsumerState {
  std::string tag;
  std::string queue;
  uint16_t prefetch = 0;
  size_t unacked = 0;
  std::optional<size_t> stream_next;  // a stream reader: the offset it reads next
};

struct UnackedMessage {
  std::string queue;
  std::string consumer_tag;  // empty for basic.get
  StoredMessage stored;
  bool stream_copy = false;  // read from a stream: settling it changes nothing there
};

struct Connection {
  std::string name;
  std::optional<Status> dropped;    // why the broker dropped it
  std::optional<Status> cancelled;  // a consumer cancelled by the broker, reported by Next()
  std::vector<ConsumerState> consumers;
  size_t next_consumer = 0;  // round-robin position
  std::map<uint64_t, UnackedMessage> unacked;
  uint64_t publish_channel = 1;  // which publishing channel is open (RenewPublishChannel)
  SteadyTime last_call{};        // Options::heartbeat
};

Status ValidateQueue(const QueueSpec& q) {
  const Json& a = q.arguments;
  if (!a.is_object()) return InvalidArgument("arguments of queue " + Quote(q.name));
  auto type = StringArg(a, "x-queue-type").value_or("classic");
  if (type != "classic" && type != "quorum" && type != "stream") {
    return Status(Code::kUnsupported, "queue type " + Quote(type) + " of queue " + Quote(q.name) +
                                          " is not supported by the fake broker");
  }
  if (type != "classic" && !q.durable) {
    return InvalidArgument("invalid property 'non-durable' for queue " + Quote(q.name));
  }
  for (const char* key : {"x-message-ttl", "x-max-length", "x-delivery-limit"}) {
    if (a.contains(key) && (!a[key].is_number_integer() || a[key].get<int64_t>() < 0)) {
      return InvalidArgument("invalid arg '" + std::string(key) + "' for queue " + Quote(q.name) +
                             ": " + a[key].dump());
    }
  }
  if (auto overflow = StringArg(a, "x-overflow"); overflow && *overflow != "drop-head" &&
                                                  *overflow != "reject-publish" &&
                                                  *overflow != "reject-publish-dlx") {
    return InvalidArgument("invalid arg 'x-overflow' for queue " + Quote(q.name) + ": " +
                           *overflow);
  }
  return Status::Ok();
}

}  // namespace

struct FakeBroker::State {
  State(const Clock& c, Options o) : clock(c), options(o) {}

  const Clock& clock;
  const Options options;
  std::mutex mu;
  std::condition_variable changed;
  bool available = true;
  bool blocked = false;
  std::map<std::string, ExchangeSpec> exchanges;
  std::map<std::string, QueueState> queues;
  std::vector<BindingSpec> bindings;
  std::vector<PolicySpec> policies;
  std::map<uint64_t, Connection> connections;
  // queue -> (connection, publishing channel) that keep being refused (StalePublishChannels)
  std::map<std::string, std::set<std::pair<uint64_t, uint64_t>>> stale;
  uint64_t next_connection = 1;
  uint64_t next_seq = 1;
  uint64_t next_tag = 1;
  uint64_t next_consumer_tag = 1;
  uint64_t next_reply_queue = 1;

  // ---- helpers; the caller holds mu ----

  // A queue's settings from its arguments and the matching policy of the highest priority, as
  // RabbitMQ 3.10 combines them for quorum queues: the lower of argument and policy for numbers.
  void ApplySettings(QueueState& state) const {
    const Json& a = state.spec.arguments;
    const PolicySpec* policy = nullptr;
    for (const auto& p : policies) {
      if (std::regex_search(state.spec.name, std::regex(p.pattern)) &&
          (!policy || p.priority > policy->priority)) {
        policy = &p;
      }
    }
    auto lower = [&](const char* arg, const char* key) {
      std::optional<int64_t> from_arg = IntArg(a, arg);
      std::optional<int64_t> from_policy = policy ? IntArg(policy->definition, key) : std::nullopt;
      if (from_arg && from_policy) return std::optional<int64_t>(std::min(*from_arg, *from_policy));
      return from_arg ? from_arg : from_policy;
    };
    state.quorum = StringArg(a, "x-queue-type").value_or("classic") == "quorum";
    state.ttl_ms = lower("x-message-ttl", "message-ttl");
    state.dlx = StringArg(a, "x-dead-letter-exchange");
    state.dlrk = StringArg(a, "x-dead-letter-routing-key");
    state.max_length = lower("x-max-length", "max-length");
    state.reject_publish = StringArg(a, "x-overflow").value_or("drop-head") != "drop-head";
    state.delivery_limit.reset();
    if (state.quorum) state.delivery_limit = lower("x-delivery-limit", "delivery-limit");
  }

  std::vector<std::string> Route(const std::string& exchange, const std::string& routing_key,
                                 const Json& headers) const {
    std::vector<std::string> out;
    if (exchange.empty()) {
      if (queues.count(routing_key)) out.push_back(routing_key);
      return out;
    }
    auto x = exchanges.find(exchange);
    if (x == exchanges.end()) return out;
    const std::string& type = x->second.type;
    std::set<std::string> seen;
    for (const auto& b : bindings) {
      if (b.source != exchange) continue;
      bool match = false;
      if (type == "fanout") {
        match = true;
      } else if (type == "direct") {
        match = b.routing_key == routing_key;
      } else if (type == "topic") {
        match = TopicMatch(SplitWords(b.routing_key), 0, SplitWords(routing_key), 0);
      } else if (type == "headers") {
        match = HeadersMatch(b.arguments, headers);
      }
      if (match && seen.insert(b.destination).second) out.push_back(b.destination);
    }
    return out;
  }

  std::optional<SteadyTime> ExpiryFor(const QueueState& q, const Message& m) const {
    std::optional<int64_t> ttl = q.ttl_ms;
    if (!m.expiration.empty()) {
      int64_t per_message = std::strtoll(m.expiration.c_str(), nullptr, 10);
      ttl = ttl ? std::min(*ttl, per_message) : per_message;
    }
    if (!ttl) return std::nullopt;
    return clock.Now() + milliseconds(*ttl);
  }

  // Puts a message into a queue. false when the queue refuses it (x-overflow reject-publish).
  // Quorum queues notice that overflow only after the message that crosses the limit, so
  // max_length + 1 messages fit (as on RabbitMQ 3.10).
  bool Enqueue(QueueState& q, StoredMessage m) {
    if (q.max_length) {
      const int64_t limit = *q.max_length;
      if (q.reject_publish) {
        if (static_cast<int64_t>(q.ready.size()) >= limit + (q.quorum ? 1 : 0)) return false;
      } else {
        while (!q.ready.empty() && static_cast<int64_t>(q.ready.size()) >= limit) {
          StoredMessage head = std::move(q.ready.front());
          q.ready.pop_front();
          DeadLetter(q, std::move(head), "maxlen");
        }
        if (limit == 0) return true;
      }
    }
    m.seq = next_seq++;
    m.expires_at = ExpiryFor(q, m.message);
    q.ready.push_back(std::move(m));
    return true;
  }

  // Routes a dead-lettered message as RabbitMQ does: x-death updated (the entry for this queue
  // and reason counts up and moves to the front), x-first-death-* set once, per-message
  // expiration dropped, routing key replaced by x-dead-letter-routing-key if set.
  void DeadLetter(const QueueState& q, StoredMessage m, const std::string& reason) {
    if (!q.dlx) return;
    Message msg = std::move(m.message);
    if (!msg.headers.is_object()) msg.headers = Json::object();
    Json deaths = msg.headers.contains("x-death") && msg.headers["x-death"].is_array()
                      ? msg.headers["x-death"]
                      : Json::array();
    Json entry;
    Json rest = Json::array();
    for (auto& d : deaths) {
      if (entry.is_null() && d.is_object() && d.value("queue", "") == q.spec.name &&
          d.value("reason", "") == reason) {
        entry = d;
      } else {
        rest.push_back(d);
      }
    }
    if (entry.is_null()) {
      entry = {{"count", 1},
               {"reason", reason},
               {"queue", q.spec.name},
               {"time", TimestampValue(std::chrono::duration_cast<std::chrono::seconds>(
                                           clock.WallNow().time_since_epoch())
                                           .count())},
               {"exchange", m.exchange},
               {"routing-keys", Json::array({m.routing_key})}};
      if (!msg.expiration.empty()) entry["original-expiration"] = msg.expiration;
    } else {
      entry["count"] = entry.value("count", int64_t{0}) + 1;
    }
    rest.insert(rest.begin(), entry);
    msg.headers["x-death"] = rest;
    if (!msg.headers.contains("x-first-death-reason")) {
      msg.headers["x-first-death-reason"] = reason;
      msg.headers["x-first-death-queue"] = q.spec.name;
      msg.headers["x-first-death-exchange"] = m.exchange;
    }
    msg.expiration.clear();
    const std::string routing_key = q.dlrk.value_or(m.routing_key);
    for (const auto& target : Route(*q.dlx, routing_key, msg.headers)) {
      if (IsCycle(rest, target, reason)) continue;
      StoredMessage copy;
      copy.exchange = *q.dlx;
      copy.routing_key = routing_key;
      copy.message = msg;
      Enqueue(queues.at(target), std::move(copy));
    }
  }

  // A message dead-lettered back into a queue it died in before, with no rejection on the
  // way, is dropped (RabbitMQ's cycle detection).
  static bool IsCycle(const Json& deaths, const std::string& target, const std::string& reason) {
    if (reason == "rejected") return false;
    for (const auto& d : deaths) {
      if (!d.is_object()) continue;
      if (d.value("reason", "") == "rejected") return false;
      if (d.value("queue", "") == target) return true;
    }
    return false;
  }

  // A delivered message comes back (nack/reject with requeue, channel or connection closed).
  void Return(const std::string& queue, StoredMessage m) {
    auto it = queues.find(queue);
    if (it == queues.end()) return;
    QueueState& q = it->second;
    m.redelivered = true;
    if (q.quorum) {
      ++m.delivery_count;
      if (q.delivery_limit && m.delivery_count > *q.delivery_limit) {
        DeadLetter(q, std::move(m), "delivery_limit");
        return;
      }
    }
    auto pos = std::upper_bound(q.ready.begin(), q.ready.end(), m.seq,
                                [](uint64_t seq, const StoredMessage& s) { return seq < s.seq; });
    q.ready.insert(pos, std::move(m));
  }

  void ExpireDue() {
    const SteadyTime now = clock.Now();
    for (int pass = 0; pass < 100; ++pass) {
      bool any = false;
      for (auto& [name, q] : queues) {
        std::vector<StoredMessage> expired;
        for (auto it = q.ready.begin(); it != q.ready.end();) {
          if (it->expires_at && *it->expires_at <= now) {
            expired.push_back(std::move(*it));
            it = q.ready.erase(it);
          } else {
            ++it;
          }
        }
        for (auto& m : expired) DeadLetter(q, std::move(m), "expired");
        any = any || !expired.empty();
      }
      if (!any) return;
    }
  }

  void ReleaseUnacked(Connection& c, UnackedMessage u) {
    auto q = queues.find(u.queue);
    if (q != queues.end() && q->second.unacked > 0) --q->second.unacked;
    for (auto& consumer : c.consumers) {
      if (consumer.tag == u.consumer_tag && consumer.unacked > 0) --consumer.unacked;
    }
  }

  void RemoveConsumers(Connection& c) {
    for (const auto& consumer : c.consumers) {
      auto q = queues.find(consumer.queue);
      if (q != queues.end() && q->second.consumers > 0) --q->second.consumers;
    }
    c.consumers.clear();
  }

  // The connection's unacked messages go back to their queues; its consumers disappear.
  void Disconnect(Connection& c) {
    auto unacked = std::move(c.unacked);
    c.unacked.clear();
    for (auto& [tag, u] : unacked) {
      ReleaseUnacked(c, u);
      if (!u.stream_copy) Return(u.queue, std::move(u.stored));
    }
    RemoveConsumers(c);
    changed.notify_all();
  }

  Result<Connection*> Live(uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return Unavailable("not connected to the AMQP broker");
    Connection& c = it->second;
    const SteadyTime now = clock.Now();
    if (!c.dropped && options.heartbeat.count() > 0 && now - c.last_call > 2 * options.heartbeat) {
      Disconnect(c);
      c.dropped = Unavailable("connection closed by the broker: missed heartbeats from client");
    }
    if (c.dropped) return *c.dropped;
    c.last_call = now;
    return &c;
  }

  // basic.consume on connection `id`; `stream_next` set: a stream reader from that offset.
  Result<std::string> AddConsumer(uint64_t id, const std::string& queue, uint16_t prefetch,
                                  std::optional<size_t> stream_next) {
    auto c = Live(id);
    if (!c.ok()) return c.status();
    auto q = queues.find(queue);
    if (q == queues.end()) {
      return NotFound("consuming from queue " + Quote(queue) +
                      ": channel closed by the broker: 404 NOT_FOUND - no queue " + Quote(queue));
    }
    if (stream_next &&
        StringArg(q->second.spec.arguments, "x-queue-type").value_or("classic") != "stream") {
      return InvalidArgument("consuming queue " + Quote(queue) + " from an offset: not a stream");
    }
    std::string tag = "amq.ctag-fake-" + std::to_string(next_consumer_tag++);
    (*c)->consumers.push_back(ConsumerState{tag, queue, prefetch, 0, stream_next});
    ++q->second.consumers;
    return tag;
  }

  Status Publish(uint64_t id, const Publication& p, milliseconds timeout,
                 std::unique_lock<std::mutex>& lock) {
    auto c = Live(id);
    if (!c.ok()) return c.status();
    if (blocked) {
      if (options.wait_in_real_time) {
        changed.wait_for(lock, timeout, [&] { return !blocked; });
      }
      if (blocked) return Status(Code::kTimeout, "publishing is blocked by the broker");
      c = Live(id);
      if (!c.ok()) return c.status();
    }
    ExpireDue();
    if (!p.exchange.empty() && !exchanges.count(p.exchange)) {
      return NotFound("channel closed by the broker: 404 NOT_FOUND - no exchange " +
                      Quote(p.exchange));
    }
    auto targets = Route(p.exchange, p.routing_key, p.message.headers);
    if (targets.empty()) {
      if (!p.mandatory) return Status::Ok();
      return NotFound("unroutable message to exchange " + Quote(p.exchange) + " with routing key " +
                      Quote(p.routing_key) + " was returned: 312 NO_ROUTE");
    }
    std::vector<std::string> refused;
    for (const auto& name : targets) {
      if (auto st = stale.find(name);
          st != stale.end() && st->second.count({id, (*c)->publish_channel}) > 0) {
        refused.push_back(name);
        continue;
      }
      StoredMessage m;
      m.exchange = p.exchange;
      m.routing_key = p.routing_key;
      m.message = p.message;
      if (!Enqueue(queues.at(name), std::move(m))) refused.push_back(name);
    }
    changed.notify_all();
    if (!refused.empty()) {
      return Unavailable("the broker refused the message to exchange " + Quote(p.exchange) +
                         " with routing key " + Quote(p.routing_key) + " (basic.nack: queue " +
                         Quote(refused.front()) + " is full)");
    }
    return Status::Ok();
  }

  Delivery MakeDelivery(uint64_t tag, const std::string& queue, const std::string& consumer_tag,
                        const StoredMessage& m) const {
    Delivery d;
    d.delivery_tag = tag;
    d.redelivered = m.redelivered;
    d.exchange = m.exchange;
    d.routing_key = m.routing_key;
    d.consumer_tag = consumer_tag;
    d.queue = queue;
    d.message = m.message;
    // Quorum queues report returns so far; basic.get reports 0 too, basic.deliver omits it.
    if (queues.at(queue).quorum && (m.delivery_count > 0 || consumer_tag.empty())) {
      d.message.headers["x-delivery-count"] = m.delivery_count;
    }
    return d;
  }

  std::optional<Delivery> TryDeliver(Connection& c) {
    const size_t n = c.consumers.size();
    for (size_t i = 0; i < n; ++i) {
      ConsumerState& consumer = c.consumers[(c.next_consumer + i) % n];
      if (consumer.prefetch != 0 && consumer.unacked >= consumer.prefetch) continue;
      auto q = queues.find(consumer.queue);
      const bool stream_copy = consumer.stream_next.has_value();
      StoredMessage m;
      if (stream_copy) {  // a copy of the next record; the stream keeps it
        if (q == queues.end() || *consumer.stream_next >= q->second.ready.size()) continue;
        m = q->second.ready[*consumer.stream_next];
        m.message.headers["x-stream-offset"] = static_cast<int64_t>((*consumer.stream_next)++);
      } else {
        if (q == queues.end() || q->second.ready.empty()) continue;
        m = std::move(q->second.ready.front());
        q->second.ready.pop_front();
        ++q->second.unacked;
      }
      ++consumer.unacked;
      c.next_consumer = (c.next_consumer + i + 1) % n;
      uint64_t tag = next_tag++;
      Delivery d = MakeDelivery(tag, consumer.queue, consumer.tag, m);
      c.unacked.emplace(tag,
                        UnackedMessage{consumer.queue, consumer.tag, std::move(m), stream_copy});
      return d;
    }
    return std::nullopt;
  }

  Status Settle(uint64_t id, uint64_t first_tag, uint64_t tag, const char* what,
                std::optional<bool> requeue) {
    auto c = Live(id);
    if (!c.ok()) return c.status();
    auto it = (*c)->unacked.find(tag);
    if (it == (*c)->unacked.end()) {
      if (tag < first_tag) {
        return Unavailable(std::string(what) + " of delivery " + std::to_string(tag) +
                           ": the tag belongs to a closed channel; the broker has requeued "
                           "the message");
      }
      return InvalidArgument(std::string(what) + ": unknown delivery tag " + std::to_string(tag));
    }
    UnackedMessage u = std::move(it->second);
    (*c)->unacked.erase(it);
    if (u.stream_copy) {
      for (auto& consumer : (*c)->consumers) {
        if (consumer.tag == u.consumer_tag && consumer.unacked > 0) --consumer.unacked;
      }
      changed.notify_all();
      return Status::Ok();
    }
    ReleaseUnacked(**c, u);
    if (requeue.has_value()) {
      if (*requeue) {
        Return(u.queue, std::move(u.stored));
      } else if (auto q = queues.find(u.queue); q != queues.end()) {
        DeadLetter(q->second, std::move(u.stored), "rejected");
      }
    }
    changed.notify_all();
    return Status::Ok();
  }
};

FakeBroker::FakeBroker(const Clock& clock) : FakeBroker(clock, Options{}) {}
FakeBroker::FakeBroker(const Clock& clock, Options options)
    : state_(std::make_unique<State>(clock, options)) {}
FakeBroker::~FakeBroker() = default;

void FakeBroker::SetAvailable(bool available) {
  std::lock_guard lock(state_->mu);
  state_->available = available;
  if (!available) {
    for (auto& [id, c] : state_->connections) {
      if (c.dropped) continue;
      state_->Disconnect(c);
      c.dropped = Unavailable(
          "connection closed by the broker: 320 CONNECTION_FORCED - "
          "broker shutdown");
    }
  }
}

void FakeBroker::DropConnections() {
  std::lock_guard lock(state_->mu);
  for (auto& [id, c] : state_->connections) {
    if (c.dropped) continue;
    state_->Disconnect(c);
    c.dropped = Unavailable(
        "connection closed by the broker: 320 CONNECTION_FORCED - "
        "closed by the test");
  }
}

void FakeBroker::StalePublishChannels(const std::string& queue) {
  std::lock_guard lock(state_->mu);
  for (auto& [id, c] : state_->connections) {
    if (!c.dropped) state_->stale[queue].insert({id, c.publish_channel});
  }
}

void FakeBroker::SetBlocked(bool blocked) {
  std::lock_guard lock(state_->mu);
  state_->blocked = blocked;
  state_->changed.notify_all();
}

void FakeBroker::SetPolicies(std::vector<PolicySpec> policies) {
  std::lock_guard lock(state_->mu);
  state_->policies = std::move(policies);
  for (auto& [name, q] : state_->queues) state_->ApplySettings(q);
}

void FakeBroker::DeleteQueue(const std::string& name) {
  std::lock_guard lock(state_->mu);
  State& s = *state_;
  if (!s.queues.count(name)) return;
  for (auto& [id, c] : s.connections) {
    for (auto it = c.unacked.begin(); it != c.unacked.end();) {
      if (it->second.queue == name) {
        s.ReleaseUnacked(c, it->second);
        it = c.unacked.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = c.consumers.begin(); it != c.consumers.end();) {
      if (it->queue == name) {
        c.cancelled = Unavailable("consumer " + it->tag + " on queue " + Quote(name) +
                                  " was cancelled by the broker (queue deleted or moved)");
        it = c.consumers.erase(it);
      } else {
        ++it;
      }
    }
    c.next_consumer = 0;
  }
  s.queues.erase(name);
  std::erase_if(s.bindings, [&](const BindingSpec& b) { return b.destination == name; });
  s.changed.notify_all();
}

bool FakeBroker::HasExchange(const std::string& name) {
  std::lock_guard lock(state_->mu);
  return state_->exchanges.count(name) > 0;
}

bool FakeBroker::HasQueue(const std::string& name) {
  std::lock_guard lock(state_->mu);
  return state_->queues.count(name) > 0;
}

std::vector<Message> FakeBroker::ReadyMessages(const std::string& queue) {
  std::lock_guard lock(state_->mu);
  state_->ExpireDue();
  std::vector<Message> out;
  auto q = state_->queues.find(queue);
  if (q == state_->queues.end()) return out;
  for (const auto& m : q->second.ready) out.push_back(m.message);
  return out;
}

size_t FakeBroker::UnackedCount(const std::string& queue) {
  std::lock_guard lock(state_->mu);
  state_->ExpireDue();
  auto q = state_->queues.find(queue);
  return q == state_->queues.end() ? 0 : q->second.unacked;
}

size_t FakeBroker::LiveConnections() {
  std::lock_guard lock(state_->mu);
  return static_cast<size_t>(std::count_if(state_->connections.begin(), state_->connections.end(),
                                           [](const auto& c) { return !c.second.dropped; }));
}

FakeSession::FakeSession(FakeBroker& broker, std::string connection_name)
    : broker_(*broker.state_), name_(std::move(connection_name)) {}

FakeSession::~FakeSession() {
  Close();
}

Status FakeSession::Connect() {
  Close();
  std::lock_guard lock(broker_.mu);
  if (!broker_.available) {
    return Unavailable("connecting to the fake AMQP broker: connection refused");
  }
  connection_ = broker_.next_connection++;
  broker_.connections[connection_].name = name_;
  broker_.connections[connection_].last_call = broker_.clock.Now();
  first_tag_ = broker_.next_tag;
  return Status::Ok();
}

bool FakeSession::connected() const {
  std::lock_guard lock(broker_.mu);
  auto it = broker_.connections.find(connection_);
  return it != broker_.connections.end() && !it->second.dropped;
}

void FakeSession::Close() {
  std::lock_guard lock(broker_.mu);
  auto it = broker_.connections.find(connection_);
  if (it != broker_.connections.end()) {
    broker_.Disconnect(it->second);
    broker_.connections.erase(it);
  }
  connection_ = 0;
}

Status FakeSession::RenewPublishChannel() {
  std::lock_guard lock(broker_.mu);
  auto c = broker_.Live(connection_);
  if (!c.ok()) return c.status();
  ++(*c)->publish_channel;
  return Status::Ok();
}

Status FakeSession::Declare(const Topology& topology) {
  std::lock_guard lock(broker_.mu);
  FakeBroker::State& s = broker_;
  auto c = s.Live(connection_);
  if (!c.ok()) return c.status();
  for (const auto& e : topology.exchanges) {
    const std::string what = "declaring exchange " + Quote(e.name);
    if (e.type != "direct" && e.type != "fanout" && e.type != "topic" && e.type != "headers") {
      return InvalidArgument(what + ": unknown exchange type " + Quote(e.type));
    }
    auto it = s.exchanges.find(e.name);
    if (it == s.exchanges.end()) {
      s.exchanges.emplace(e.name, e);
      continue;
    }
    const ExchangeSpec& have = it->second;
    if (have.type != e.type) {
      return Status(Code::kConflict, what + ": inequivalent arg 'type': received " + Quote(e.type) +
                                         " but current is " + Quote(have.type));
    }
    if (have.durable != e.durable || have.arguments != e.arguments) {
      return Status(Code::kConflict,
                    what + ": inequivalent arg '" +
                        std::string(have.durable != e.durable ? "durable" : "arguments") + "'");
    }
  }
  for (const auto& q : topology.queues) {
    const std::string what = "declaring queue " + Quote(q.name);
    SYNCBUS_RETURN_IF_ERROR(ValidateQueue(q));
    auto it = s.queues.find(q.name);
    if (it != s.queues.end()) {
      const QueueSpec& have = it->second.spec;
      if (have.durable != q.durable) {
        return Status(Code::kConflict, what + ": inequivalent arg 'durable'");
      }
      Json keys = Json::object();
      for (const auto& [k, v] : have.arguments.items()) keys[k] = true;
      for (const auto& [k, v] : q.arguments.items()) keys[k] = true;
      for (const auto& [k, unused] : keys.items()) {
        Json want = q.arguments.contains(k) ? q.arguments[k] : Json();
        Json current = have.arguments.contains(k) ? have.arguments[k] : Json();
        if (want != current) {
          return Status(Code::kConflict, what + ": inequivalent arg '" + k + "': received " +
                                             (want.is_null() ? "none" : want.dump()) +
                                             " but current is " +
                                             (current.is_null() ? "none" : current.dump()));
        }
      }
      continue;
    }
    QueueState state;
    state.spec = q;
    s.ApplySettings(state);
    s.queues.emplace(q.name, std::move(state));
  }
  for (const auto& b : topology.bindings) {
    const std::string what =
        "binding queue " + Quote(b.destination) + " to exchange " + Quote(b.source);
    if (!s.exchanges.count(b.source)) {
      return NotFound(what + ": 404 NOT_FOUND - no exchange " + Quote(b.source));
    }
    if (!s.queues.count(b.destination)) {
      return NotFound(what + ": 404 NOT_FOUND - no queue " + Quote(b.destination));
    }
    bool exists = std::any_of(s.bindings.begin(), s.bindings.end(), [&](const BindingSpec& x) {
      return x.source == b.source && x.destination == b.destination &&
             x.routing_key == b.routing_key && x.arguments == b.arguments;
    });
    if (!exists) s.bindings.push_back(b);
  }
  return Status::Ok();
}

Result<std::string> FakeSession::DeclareReplyQueue() {
  std::lock_guard lock(broker_.mu);
  FakeBroker::State& s = broker_;
  auto c = s.Live(connection_);
  if (!c.ok()) return c.status();
  QueueState state;
  state.spec = {"amq.gen-" + std::to_string(s.next_reply_queue++), false, Json::object()};
  s.ApplySettings(state);
  std::string name = state.spec.name;
  s.queues.emplace(name, std::move(state));
  return name;
}

Status FakeSession::Publish(const Publication& publication, milliseconds timeout) {
  std::unique_lock lock(broker_.mu);
  return broker_.Publish(connection_, publication, timeout, lock);
}

std::vector<Status> FakeSession::PublishAll(const std::vector<Publication>& publications,
                                            milliseconds timeout) {
  std::vector<Status> out;
  out.reserve(publications.size());
  std::unique_lock lock(broker_.mu);
  for (const auto& p : publications) out.push_back(broker_.Publish(connection_, p, timeout, lock));
  return out;
}

Result<std::string> FakeSession::Consume(const std::string& queue, uint16_t prefetch) {
  std::lock_guard lock(broker_.mu);
  return broker_.AddConsumer(connection_, queue, prefetch, std::nullopt);
}

Result<std::string> FakeSession::ConsumeStream(const std::string& queue, uint16_t prefetch,
                                               int64_t) {
  std::lock_guard lock(broker_.mu);
  return broker_.AddConsumer(connection_, queue, prefetch, size_t{0});
}

Status FakeSession::Cancel(const std::string& consumer_tag) {
  std::lock_guard lock(broker_.mu);
  auto c = broker_.Live(connection_);
  if (!c.ok()) return c.status();
  auto& consumers = (*c)->consumers;
  auto it = std::find_if(consumers.begin(), consumers.end(),
                         [&](const ConsumerState& x) { return x.tag == consumer_tag; });
  if (it != consumers.end()) {
    auto q = broker_.queues.find(it->queue);
    if (q != broker_.queues.end() && q->second.consumers > 0) --q->second.consumers;
    consumers.erase(it);
    (*c)->next_consumer = 0;
  }
  return Status::Ok();
}

Result<std::optional<Delivery>> FakeSession::Next(milliseconds timeout) {
  std::unique_lock lock(broker_.mu);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto c = broker_.Live(connection_);
    if (!c.ok()) return c.status();
    broker_.ExpireDue();
    if (auto d = broker_.TryDeliver(**c)) return d;
    if ((*c)->cancelled) {
      Status why = *(*c)->cancelled;
      broker_.Disconnect(**c);
      broker_.connections.erase(connection_);
      connection_ = 0;
      return why;
    }
    if (!broker_.options.wait_in_real_time ||
        broker_.changed.wait_until(lock, deadline) == std::cv_status::timeout) {
      auto again = broker_.Live(connection_);
      if (!again.ok()) return again.status();
      broker_.ExpireDue();
      if (auto d = broker_.TryDeliver(**again)) return d;
      return std::optional<Delivery>();
    }
  }
}

Status FakeSession::Ack(uint64_t delivery_tag) {
  std::lock_guard lock(broker_.mu);
  return broker_.Settle(connection_, first_tag_, delivery_tag, "ack", std::nullopt);
}

Status FakeSession::Nack(uint64_t delivery_tag, bool requeue) {
  std::lock_guard lock(broker_.mu);
  return broker_.Settle(connection_, first_tag_, delivery_tag, "nack", requeue);
}

Status FakeSession::Reject(uint64_t delivery_tag, bool requeue) {
  std::lock_guard lock(broker_.mu);
  return broker_.Settle(connection_, first_tag_, delivery_tag, "reject", requeue);
}

Result<std::optional<Delivery>> FakeSession::Get(const std::string& queue) {
  std::lock_guard lock(broker_.mu);
  auto c = broker_.Live(connection_);
  if (!c.ok()) return c.status();
  broker_.ExpireDue();
  auto q = broker_.queues.find(queue);
  if (q == broker_.queues.end()) {
    return NotFound("getting a message from queue " + Quote(queue) +
                    ": channel closed by the broker: 404 NOT_FOUND - no queue " + Quote(queue));
  }
  if (q->second.ready.empty()) return std::optional<Delivery>();
  StoredMessage m = std::move(q->second.ready.front());
  q->second.ready.pop_front();
  ++q->second.unacked;
  uint64_t tag = broker_.next_tag++;
  Delivery d = broker_.MakeDelivery(tag, queue, "", m);
  (*c)->unacked.emplace(tag, UnackedMessage{queue, "", std::move(m), false});
  return std::optional<Delivery>(std::move(d));
}

Result<QueueInfo> FakeSession::Inspect(const std::string& queue) {
  std::lock_guard lock(broker_.mu);
  auto c = broker_.Live(connection_);
  if (!c.ok()) return c.status();
  broker_.ExpireDue();
  auto q = broker_.queues.find(queue);
  if (q == broker_.queues.end()) {
    return NotFound("inspecting queue " + Quote(queue) +
                    ": channel closed by the broker: 404 NOT_FOUND - no queue " + Quote(queue));
  }
  return QueueInfo{static_cast<uint32_t>(q->second.ready.size()),
                   static_cast<uint32_t>(q->second.consumers)};
}

Status FakeSession::Poll() {
  std::lock_guard lock(broker_.mu);
  auto c = broker_.Live(connection_);
  return c.ok() ? Status::Ok() : c.status();
}

}  // namespace syncbus::amqp
