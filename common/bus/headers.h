// Every AMQP header a sync message can carry, in one place: syncbus's own (x-syncbus-*, visible
// in the management UI), the broker's that syncbus reads or removes, and the readers of the
// counts they carry. Publisher, consumer and syncbusctl all spell them from here. Pure.
#pragma once

#include "common/amqp/session.h"

namespace syncbus {

// On every sync message.
inline constexpr char kClusterHeader[] = "x-syncbus-cluster";  // "namespace/name"
inline constexpr char kAttemptHeader[] = "x-syncbus-attempt";  // 0 on first publish
inline constexpr char kLaneHeader[] = "x-syncbus-lane";
inline constexpr char kRevisionHeader[] = "x-syncbus-revision";

// Its failure history, set by the consumer that retries or parks it.
inline constexpr char kFirstFailureHeader[] = "x-syncbus-first-failure";  // RFC 3339
inline constexpr char kLastErrorHeader[] = "x-syncbus-last-error";        // short, no secrets
// The delay tier a retry or deferral waits in ("30s"): the retry exchange routes on it.
inline constexpr char kRetryTierHeader[] = "x-syncbus-retry-tier";
// Why and when it was parked in the dead-letter queue (`syncbusctl dlq` reasons and ages).
inline constexpr char kDeadReasonHeader[] = "x-syncbus-dead-reason";
inline constexpr char kDeadAtHeader[] = "x-syncbus-dead-at";  // RFC 3339
// Deliveries of earlier copies that ended unsettled (a consumer crashed, was killed or lost its
// connection holding them), carried across deferrals so a poison message is still parked.
inline constexpr char kUnsettledHeader[] = "x-syncbus-unsettled";
// Of those, the carried count of forwards the consumer they were forwarded to died holding (a
// return from its own queue, see UnsettledDeliveries), for `syncbusctl dlq list`.
inline constexpr char kReturnedHeader[] = "x-syncbus-returned";
// The unsettled count a message was last held back for (quarantine).
inline constexpr char kQuarantinedHeader[] = "x-syncbus-quarantined";
// A request forwarded to the consumer that holds its cluster: that consumer's identity (the
// forward exchange routes on it and on kLaneHeader) and how often the request was forwarded so far.
inline constexpr char kForwardToHeader[] = "x-syncbus-to";
inline constexpr char kHopsHeader[] = "x-syncbus-hops";

// The dead-letter index's records (syncbusctl: ctl/dead_letter_index.h).
inline constexpr char kIndexRecordHeader[] = "x-syncbus-index";  // removed, reset, barrier
inline constexpr char kIndexKeyHeader[] =
    "x-syncbus-index-key";  // removed: the copy; barrier: a nonce
inline constexpr char kIndexByHeader[] = "x-syncbus-index-by";  // removed: replay, purge, reindex

// The broker's: a quorum queue's count of earlier unsettled deliveries of this copy, and the
// dead-lettering history (x-death, and the x-first-death-* / x-last-death-* summaries, which are
// all RabbitMQ 3.10 keeps in a stream).
inline constexpr char kDeliveryCountHeader[] = "x-delivery-count";
inline constexpr char kDeathHeader[] = "x-death";
inline constexpr char kFirstDeathExchangeHeader[] = "x-first-death-exchange";
inline constexpr char kFirstDeathQueueHeader[] = "x-first-death-queue";
inline constexpr char kFirstDeathReasonHeader[] = "x-first-death-reason";
inline constexpr char kLastDeathExchangeHeader[] = "x-last-death-exchange";
inline constexpr char kLastDeathQueueHeader[] = "x-last-death-queue";
inline constexpr char kLastDeathReasonHeader[] = "x-last-death-reason";

// The attempt number recorded on a message (0 for a fresh request).
int AttemptOf(const amqp::Message& message);
// The consumers' own queues (topology.h): "syncbus.consumer.<identity>.<lane>".
inline constexpr char kConsumerQueuePrefix[] = "syncbus.consumer.";

// Unsettled deliveries so far: the carried count, the broker's count for this copy, and the
// returns from consumers' own queues in its x-death (each dead-letters an unsettled return to
// the copy's lane at once), each delivery once where the broker's count holds those returns too
// (RabbitMQ 4.x).
int UnsettledDeliveries(const amqp::Message& message);
// Of those, the returns from consumers' own queues: the carried count and those in its x-death.
int ReturnsFromConsumers(const amqp::Message& message);
// The unsettled count the message was last held back for (0: never).
int QuarantinedFor(const amqp::Message& message);
// How often the message was forwarded to a cluster's holder (0: never).
int HopsOf(const amqp::Message& message);

}  // namespace syncbus
