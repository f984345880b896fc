// AMQP field tables (headers, queue/exchange/binding arguments) <-> Json, over rabbitmq-c types.
// FieldTable owns the memory its amqp_table_t points into; it is movable, not copyable, and
// thread-compatible. The conversion functions are pure.
//
// Json mapping. Tables are objects and arrays are arrays; booleans, strings and doubles map
// directly; every integer width decodes to a Json integer and Json integers encode as signed
// 64-bit ('l'; RabbitMQ compares integer arguments by value, not width). AMQP types that Json
// cannot express are single-key objects:
//   timestamp (T)  {"$timestamp": <seconds since the epoch>}
//   byte array (x) {"$bytes": "<base64>"}   (also a long string that is not valid UTF-8)
//   decimal (D)    {"$decimal": {"scale": <0..255>, "value": <uint32>}}
//   void (V)       null
#pragma once

#include <memory>
#include <string>

#include <amqp.h>

#include "common/json.h"
#include "common/status.h"

namespace syncbus::amqp {

inline constexpr char kTimestampTag[] = "$timestamp";
inline constexpr char kBytesTag[] = "$bytes";
inline constexpr char kDecimalTag[] = "$decimal";

// Json {"$timestamp": seconds}: how an AMQP timestamp appears in headers (x-death "time").
Json TimestampValue(int64_t seconds_since_epoch);

class FieldTable {
 public:
  // Encodes a Json object. kInvalidArgument for non-objects, keys longer than 255 bytes,
  // integers beyond int64, or malformed "$..." tags.
  static Result<FieldTable> FromJson(const Json& object);

  FieldTable(FieldTable&&) noexcept = default;
  FieldTable& operator=(FieldTable&&) noexcept = default;

  // Valid while this FieldTable lives.
  const amqp_table_t& table() const { return table_; }

 private:
  struct PoolDeleter {
    void operator()(amqp_pool_t* pool) const;
  };
  FieldTable();

  std::unique_ptr<amqp_pool_t, PoolDeleter> pool_;
  amqp_table_t table_{0, nullptr};
};

// Decodes a table received from the broker (any field kind rabbitmq-c knows).
Result<Json> TableToJson(const amqp_table_t& table);

}  // namespace syncbus::amqp
