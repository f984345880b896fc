// The syncbus topology (exchange, queue, binding and policy names and settings): the one source
// of truth that the daemons declare and that rabbitmq/definitions.json and
// deploy/rabbitmq-topology.yaml mirror.
//
//   syncbus.work (direct) --change--> syncbus.work.change (quorum)   served first
//                         --resync--> syncbus.work.resync (quorum)
//   syncbus.retry (headers, x-syncbus-retry-tier=<tier>) --> syncbus.retry.<tier> (TTL = tier)
//       each dead-letters back to syncbus.work with the original routing key (= lane)
//   syncbus.dead (fanout) --> syncbus.dead (quorum, the parking lot); work queues dead-letter
//                    |        here on their delivery limit (poison messages).
//                    +-----> syncbus.dead.index (stream): a copy of every parked message, plus
//   syncbus.dead.index (fanout) --^  what replays and purges removed: what `syncbusctl dlq list`,
//       `status` and `trace` read, so inspecting never touches the dead-letter queue itself.
//   syncbus.trace (fanout) --> syncbus.trace (stream, bounded by age and size): the requests'
//       timelines (trace_event.h), read without consuming by `syncbusctl trace` and `status`.
//   syncbus.work --preview--> syncbus.preview (quorum, message TTL): `syncbusctl preview`'s
//       dry-run requests (preview_message.h), answered to each request's reply_to queue. Not
//       work to keep: an unanswered request expires, a poison one is dropped at its delivery
//       limit, and nothing dead-letters into the parking lot.
//   syncbus.forward (headers, x-syncbus-to=<identity>, x-syncbus-lane=<lane>)
//       --> syncbus.consumer.<identity>.<lane> (quorum, message TTL, queue expiry): a request
//       forwarded to the consumer that holds its cluster, one queue per lane so that a forwarded
//       change never waits behind a full resync's forwards. Each consumer declares its own
//       queues (ConsumerTopology); what it leaves there past the TTL dead-letters back to
//       syncbus.work with its routing key (= lane), and the queues of a consumer gone for longer
//       than the expiry are deleted (holding nothing by then).
//
// What never changes is a queue argument (queue type, dead-letter target and strategy, overflow,
// a retry tier's TTL, which its name states). Limits that may change later are policies (one per
// kind of queue, "syncbus-*"): RabbitMQ applies a changed policy to live queues, while it refuses
// to redeclare a queue with other arguments. The dead-letter queue also carries its (never
// reached) delivery limit as an argument, so no broker default can drop a parked request.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/amqp/topology.h"
#include "common/bus/headers.h"

namespace syncbus::amqp {

inline constexpr char kWorkExchange[] = "syncbus.work";
inline constexpr char kRetryExchange[] = "syncbus.retry";
inline constexpr char kDeadExchange[] = "syncbus.dead";
inline constexpr char kDeadQueue[] = "syncbus.dead";
inline constexpr char kDeadIndexExchange[] = "syncbus.dead.index";
inline constexpr char kDeadIndexQueue[] = "syncbus.dead.index";
inline constexpr char kTraceExchange[] = "syncbus.trace";
inline constexpr char kTraceQueue[] = "syncbus.trace";
inline constexpr char kPreviewQueue[] = "syncbus.preview";
inline constexpr char kPreviewRoutingKey[] = "preview";  // on kWorkExchange
inline constexpr char kForwardExchange[] = "syncbus.forward";
// The delivery limit of the queues whose messages must never be dropped for being returned (the
// dead-letter queue: a replay or purge returns what it does not take; the retry tiers): set
// explicitly so that RabbitMQ 4.0's default of 20 does not apply, and never reached.
inline constexpr int kNeverReachedDeliveryLimit = 1000000;

enum class Lane { kChange, kResync };
const char* LaneName(Lane lane);       // "change" / "resync" (also the routing key)
std::string WorkQueueName(Lane lane);  // "syncbus.work.change"

struct TopologyOptions {
  std::vector<std::chrono::seconds> retry_tiers{std::chrono::seconds(5), std::chrono::seconds(30),
                                                std::chrono::minutes(2), std::chrono::minutes(6)};
  int delivery_limit = 5;   // redeliveries before a work message is parked (poison)
  int max_length = 100000;  // per work queue; beyond it publishes are rejected
  // The trace stream keeps events this long and at most this many bytes (whichever ends
  // first; RabbitMQ trims whole segments of trace_segment_bytes).
  std::chrono::seconds trace_max_age{std::chrono::hours(6)};
  int64_t trace_max_bytes = int64_t{1} << 30;
  int64_t trace_segment_bytes = int64_t{16} << 20;
  // The dead-letter index keeps parked copies and removals up to this many bytes, with no age
  // limit (a request stays parked until replayed or purged).
  int64_t dead_index_max_bytes = int64_t{1} << 30;
  int64_t dead_index_segment_bytes = int64_t{8} << 20;
  // A preview request nobody took this long is dropped (its caller has given up by then).
  std::chrono::seconds preview_ttl{std::chrono::minutes(30)};
  int preview_delivery_limit = 3;  // a request that kills its consumers is dropped, not parked
  // A request forwarded to a consumer's own queue returns to its lane when that consumer has not
  // taken it within forward_ttl (a dead holder delays its clusters' requests by no more). The
  // queue of a consumer unused this long is deleted; longer than forward_ttl, since a deleted
  // queue drops what it holds.
  std::chrono::seconds forward_ttl{10};
  std::chrono::seconds consumer_queue_expiry{std::chrono::minutes(10)};
};

// "5s", "30s", "2m", "6m", "1h", "90s" (also the stream's x-max-age syntax).
std::string TierName(std::chrono::seconds delay);
std::string RetryQueueName(std::chrono::seconds delay);  // "syncbus.retry.30s"

Topology SyncbusTopology(const TopologyOptions& options = {});

// "syncbus.consumer.<identity>.change" / ".resync".
std::string ConsumerQueueName(const std::string& identity, Lane lane);
// The queues and bindings that the consumer `identity` declares for itself at every connect: the
// requests forwarded to it (kForwardToHeader = identity), one queue per lane (kLaneHeader). Their
// policy is SyncbusTopology's.
Topology ConsumerTopology(const std::string& identity, const TopologyOptions& options = {});

// The topology in the format of `rabbitmqctl import_definitions` for one vhost.
Json ToDefinitions(const Topology& topology, const std::string& vhost);

// Declares `topology` (exchanges, queues, bindings; policies cannot be declared over AMQP) the
// way the daemons do at every connect: a queue that exists with other arguments (declared by an
// older version, or before a setting moved to a policy) is kept as it is and logged with the
// argument the broker named, instead of failing the daemon's start; see docs/operations.md,
// "Changing the topology". Any other failure is returned.
Status DeclareTopology(Session& session, const Topology& topology);

}  // namespace syncbus::amqp
