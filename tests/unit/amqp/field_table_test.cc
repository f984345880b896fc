#include "common/amqp/field_table.h"

#include <cstring>
#include <limits>

#include <doctest/doctest.h>

namespace syncbus::amqp {
namespace {

// Encodes to the AMQP wire format and decodes again, as the broker would see and return it.
Json WireRoundTrip(const Json& in) {
  auto table = FieldTable::FromJson(in);
  REQUIRE(table.ok());
  std::string buffer(65536, '\0');
  amqp_bytes_t encoded{buffer.size(), buffer.data()};
  size_t offset = 0;
  REQUIRE(amqp_encode_table(encoded, const_cast<amqp_table_t*>(&table->table()), &offset) ==
          AMQP_STATUS_OK);
  amqp_pool_t pool;
  init_amqp_pool(&pool, 4096);
  amqp_table_t decoded;
  size_t read = 0;
  amqp_bytes_t wire{offset, buffer.data()};
  int rc = amqp_decode_table(wire, &pool, &decoded, &read);
  REQUIRE(rc == AMQP_STATUS_OK);
  auto out = TableToJson(decoded);
  empty_amqp_pool(&pool);
  REQUIRE(out.ok());
  return *out;
}

amqp_field_value_t Field(uint8_t kind) {
  amqp_field_value_t v;
  std::memset(&v, 0, sizeof v);
  v.kind = kind;
  return v;
}

TEST_CASE("scalars, strings and nested tables survive the wire") {
  Json in = {
      {"s", "hello"},
      {"empty", ""},
      {"t", true},
      {"f", false},
      {"i", -42},
      {"u", 42u},
      {"big", std::numeric_limits<int64_t>::max()},
      {"small", std::numeric_limits<int64_t>::min()},
      {"d", 1.5},
      {"null", nullptr},
      {"nested", {{"a", {{"b", {1, 2, "three"}}}}}},
      {"empty-table", Json::object()},
      {"empty-array", Json::array()},
  };
  CHECK(WireRoundTrip(in) == in);
}

TEST_CASE("x-death as the broker writes it round-trips with its timestamp") {
  Json x_death = Json::array({
      {{"count", 2},
       {"reason", "expired"},
       {"queue", "syncbus.retry.5s"},
       {"time", TimestampValue(1767225600)},
       {"exchange", "syncbus.retry"},
       {"routing-keys", {"resync"}}},
      {{"count", 1},
       {"reason", "delivery_limit"},
       {"queue", "syncbus.work.resync"},
       {"time", TimestampValue(1767225500)},
       {"exchange", "syncbus.work"},
       {"routing-keys", {"resync"}}},
  });
  Json in = {{"x-death", x_death}, {"x-first-death-reason", "delivery_limit"}};
  Json out = WireRoundTrip(in);
  CHECK(out == in);
  CHECK(out["x-death"][0]["time"] == Json{{"$timestamp", 1767225600}});
}

TEST_CASE("timestamps encode as AMQP timestamps") {
  auto table = FieldTable::FromJson({{"when", TimestampValue(1700000000)}});
  REQUIRE(table.ok());
  REQUIRE(table->table().num_entries == 1);
  CHECK(table->table().entries[0].value.kind == AMQP_FIELD_KIND_TIMESTAMP);
  CHECK(table->table().entries[0].value.value.u64 == 1700000000u);
}

TEST_CASE("integers encode as signed 64-bit") {
  auto table = FieldTable::FromJson({{"x-message-ttl", 5000}});
  REQUIRE(table.ok());
  CHECK(table->table().entries[0].value.kind == AMQP_FIELD_KIND_I64);
  CHECK(table->table().entries[0].value.value.i64 == 5000);
}

TEST_CASE("every integer width decodes to its value") {
  amqp_table_entry_t entries[9];
  const char* keys[] = {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32"};
  amqp_field_value_t values[9] = {
      Field(AMQP_FIELD_KIND_I8),  Field(AMQP_FIELD_KIND_U8),  Field(AMQP_FIELD_KIND_I16),
      Field(AMQP_FIELD_KIND_U16), Field(AMQP_FIELD_KIND_I32), Field(AMQP_FIELD_KIND_U32),
      Field(AMQP_FIELD_KIND_I64), Field(AMQP_FIELD_KIND_U64), Field(AMQP_FIELD_KIND_F32)};
  values[0].value.i8 = -128;
  values[1].value.u8 = 255;
  values[2].value.i16 = -32768;
  values[3].value.u16 = 65535;
  values[4].value.i32 = std::numeric_limits<int32_t>::min();
  values[5].value.u32 = std::numeric_limits<uint32_t>::max();
  values[6].value.i64 = std::numeric_limits<int64_t>::min();
  values[7].value.u64 = std::numeric_limits<uint64_t>::max();
  values[8].value.f32 = 0.25f;
  for (int i = 0; i < 9; ++i) {
    entries[i].key = amqp_cstring_bytes(keys[i]);
    entries[i].value = values[i];
  }
  amqp_table_t table{9, entries};
  auto json = TableToJson(table);
  REQUIRE(json.ok());
  CHECK((*json)["i8"] == -128);
  CHECK((*json)["u8"] == 255);
  CHECK((*json)["i16"] == -32768);
  CHECK((*json)["u16"] == 65535);
  CHECK((*json)["i32"] == std::numeric_limits<int32_t>::min());
  CHECK((*json)["u32"] == std::numeric_limits<uint32_t>::max());
  CHECK((*json)["i64"] == std::numeric_limits<int64_t>::min());
  CHECK((*json)["u64"] == std::numeric_limits<uint64_t>::max());
  CHECK((*json)["f32"] == 0.25);
}

TEST_CASE("byte arrays, invalid UTF-8 and decimals use tagged objects") {
  std::string raw("\x00\xff\x10 bin", 7);
  Json in = {{"blob", {{"$bytes", "AP8QIGJpbg=="}}},
             {"price", {{"$decimal", {{"scale", 2}, {"value", 1234}}}}}};
  auto table = FieldTable::FromJson(in);
  REQUIRE(table.ok());
  CHECK(table->table().entries[0].value.kind == AMQP_FIELD_KIND_BYTES);
  amqp_bytes_t blob = table->table().entries[0].value.value.bytes;
  CHECK(std::string(static_cast<const char*>(blob.bytes), blob.len) == raw);
  CHECK(table->table().entries[1].value.kind == AMQP_FIELD_KIND_DECIMAL);
  CHECK(WireRoundTrip(in) == in);

  amqp_table_entry_t entry;
  entry.key = amqp_cstring_bytes("s");
  entry.value = Field(AMQP_FIELD_KIND_UTF8);
  entry.value.value.bytes = amqp_bytes_t{raw.size(), raw.data()};
  auto json = TableToJson(amqp_table_t{1, &entry});
  REQUIRE(json.ok());
  CHECK((*json)["s"] == Json{{"$bytes", "AP8QIGJpbg=="}});
}

TEST_CASE("base64 of every padding length round-trips") {
  for (std::string s : {"", "a", "ab", "abc", "abcd"}) {
    // Decode raw bytes to base64 and encode them back.
    amqp_table_entry_t entry;
    entry.key = amqp_cstring_bytes("b");
    entry.value = Field(AMQP_FIELD_KIND_BYTES);
    entry.value.value.bytes = amqp_bytes_t{s.size(), s.data()};
    auto json = TableToJson(amqp_table_t{1, &entry});
    REQUIRE(json.ok());
    auto back = FieldTable::FromJson(*json);
    REQUIRE(back.ok());
    amqp_bytes_t b = back->table().entries[0].value.value.bytes;
    CHECK(std::string(static_cast<const char*>(b.bytes), b.len) == s);
  }
}

TEST_CASE("invalid input is rejected with InvalidArgument") {
  CHECK(FieldTable::FromJson(Json::array()).status().code() == Code::kInvalidArgument);
  CHECK(FieldTable::FromJson({{std::string(256, 'k'), 1}}).status().code() ==
        Code::kInvalidArgument);
  CHECK(FieldTable::FromJson({{"n", std::numeric_limits<uint64_t>::max()}}).status().code() ==
        Code::kInvalidArgument);
  CHECK(FieldTable::FromJson({{"t", {{"$timestamp", "soon"}}}}).status().code() ==
        Code::kInvalidArgument);
  CHECK(FieldTable::FromJson({{"b", {{"$bytes", "not base64!"}}}}).status().code() ==
        Code::kInvalidArgument);
  CHECK(FieldTable::FromJson({{"d", {{"$decimal", {{"scale", 300}, {"value", 1}}}}}})
            .status()
            .code() == Code::kInvalidArgument);
  auto nested = FieldTable::FromJson({{"outer", {{"inner", {{"$bytes", 7}}}}}});
  CHECK(nested.status().message().find("inner") != std::string::npos);
}

}  // namespace
}  // namespace syncbus::amqp
