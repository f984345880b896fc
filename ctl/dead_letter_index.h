// The dead-letter index: what `syncbusctl dlq list`, `status` and `trace` read instead of the
// dead-letter queue, so that inspecting it changes nothing there (no order, no delivery count, no
// message hidden from a concurrent replay). The index is the stream syncbus.dead.index: the
// broker writes a copy of every parked message into it in the same routing step as into
// syncbus.dead (the exchange syncbus.dead fans out to both, so a park is confirmed only once both
// hold it; the broker's own dead-lettering goes the same way), and the commands that take
// messages out of syncbus.dead record each removal there. Records, in stream order:
//   a parked copy        the message as parked (no x-syncbus-index header)
//   removed (key)        the oldest listed copy with that key left the queue
//   reset                every earlier record is void (dlq reindex rebuilds the index after it)
//   barrier (nonce)      written by a reader before it reads, so it knows where the end is
// A stream has no end to wait for: a reader appends a barrier, then reads from the first record
// to its barrier, and so sees every request parked before it started. Functions over a
// caller-owned Session; thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/bus/headers.h"
#include "common/status.h"

namespace syncbus::ctl {

// A string-valued AMQP header from a message's decoded headers; "" when absent or not a string.
std::string StringHeader(const Json& headers, const char* name);

// A parked copy's identity in the index: its message id, or (a message without one) the digest
// of its body. Copies with one key are removed oldest first, as a pass over the queue meets them.
std::string ParkedKey(const amqp::Message& message);

struct DeadLetterIndex {
  std::vector<amqp::Delivery> parked;  // the copies still listed, in the order they were parked
  size_t records = 0;                  // records read up to the barrier
  // The stream no longer begins at its first record (its size limit trimmed it) and no reset
  // came since: copies parked long ago may be missing (`dlq reindex` rebuilds it).
  bool trimmed = false;
};

// Reads the index (see above). kNotFound when it does not exist on the vhost (no daemon of this
// version has connected yet); kTimeout when the barrier did not come back within `timeout`.
Result<DeadLetterIndex> ReadDeadLetterIndex(amqp::Session& session,
                                            std::chrono::milliseconds timeout);

// Records that a copy of `message` (as delivered from syncbus.dead) left the dead-letter queue,
// `by` replay, purge or reindex; waits for the broker's confirm.
Status RecordRemoval(amqp::Session& session, const amqp::Message& message, const std::string& by,
                     std::chrono::milliseconds timeout);
// Voids every earlier record (the start of a rebuilt index).
Status RecordReset(amqp::Session& session, std::chrono::milliseconds timeout);

}  // namespace syncbus::ctl
