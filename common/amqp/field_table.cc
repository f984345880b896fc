#include "common/amqp/field_table.h"

#include <cstring>
#include <limits>
#include <string_view>

#include "common/base64.h"

namespace syncbus::amqp {
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxShortString = 255;
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = uint8_t(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      auto cc = uint8_t(s[i + j]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

class Encoder {
 public:
  explicit Encoder(amqp_pool_t* pool) : pool_(pool) {}

  Status Table(const Json& object, amqp_table_t* out, int depth) {
    if (!object.is_object()) return InvalidArgument("a field table must be a JSON object");
    if (depth > kMaxDepth) return InvalidArgument("field table nested too deeply");
    out->num_entries = static_cast<int>(object.size());
    out->entries = nullptr;
    if (object.empty()) return Status::Ok();
    out->entries =
        static_cast<amqp_table_entry_t*>(Alloc(sizeof(amqp_table_entry_t) * object.size()));
    int i = 0;
    for (const auto& [key, value] : object.items()) {
      if (key.size() > kMaxShortString) {
        return InvalidArgument("field table key longer than 255 bytes: " + key.substr(0, 40));
      }
      amqp_table_entry_t& entry = out->entries[i++];
      entry.key = Bytes(key);
      SYNCBUS_RETURN_IF_ERROR(Value(value, &entry.value, depth + 1).Annotate("key '" + key + "'"));
    }
    return Status::Ok();
  }

 private:
  void* Alloc(size_t n) {
    void* p = amqp_pool_alloc(pool_, n);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }

  amqp_bytes_t Bytes(std::string_view s) {
    amqp_bytes_t b{s.size(), nullptr};
    if (!s.empty()) {
      b.bytes = Alloc(s.size());
      std::memcpy(b.bytes, s.data(), s.size());
    }
    return b;
  }

  Status Tagged(const std::string& tag, const Json& v, amqp_field_value_t* out) {
    if (tag == kTimestampTag) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        return InvalidArgument("$timestamp must be a non-negative integer");
      }
      out->kind = AMQP_FIELD_KIND_TIMESTAMP;
      out->value.u64 = v.get<uint64_t>();
      return Status::Ok();
    }
    if (tag == kBytesTag) {
      if (!v.is_string()) return InvalidArgument("$bytes must be a base64 string");
      auto raw = DecodeBase64(v.get_ref<const std::string&>());
      if (!raw) return InvalidArgument("$bytes is not valid base64");
      out->kind = AMQP_FIELD_KIND_BYTES;
      out->value.bytes = Bytes(*raw);
      return Status::Ok();
    }
    // kDecimalTag
    auto in_range = [&](const char* key, int64_t max) {
      return v.contains(key) && v[key].is_number_integer() && v[key].get<int64_t>() >= 0 &&
             v[key].get<int64_t>() <= max;
    };
    if (!v.is_object() || !in_range("scale", 255) ||
        !in_range("value", std::numeric_limits<uint32_t>::max())) {
      return InvalidArgument("$decimal must be {\"scale\": 0..255, \"value\": uint32}");
    }
    out->kind = AMQP_FIELD_KIND_DECIMAL;
    out->value.decimal.decimals = static_cast<uint8_t>(v["scale"].get<int64_t>());
    out->value.decimal.value = static_cast<uint32_t>(v["value"].get<int64_t>());
    return Status::Ok();
  }

  Status Value(const Json& v, amqp_field_value_t* out, int depth) {
    if (depth > kMaxDepth) return InvalidArgument("field table nested too deeply");
    switch (v.type()) {
      case Json::value_t::null: out->kind = AMQP_FIELD_KIND_VOID; return Status::Ok();
      case Json::value_t::boolean:
        out->kind = AMQP_FIELD_KIND_BOOLEAN;
        out->value.boolean = v.get<bool>() ? 1 : 0;
        return Status::Ok();
      case Json::value_t::number_integer:
        out->kind = AMQP_FIELD_KIND_I64;
        out->value.i64 = v.get<int64_t>();
        return Status::Ok();
      case Json::value_t::number_unsigned:
        if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
          return InvalidArgument("integer " + v.dump() + " does not fit a signed 64-bit field");
        }
        out->kind = AMQP_FIELD_KIND_I64;
        out->value.i64 = static_cast<int64_t>(v.get<uint64_t>());
        return Status::Ok();
      case Json::value_t::number_float:
        out->kind = AMQP_FIELD_KIND_F64;
        out->value.f64 = v.get<double>();
        return Status::Ok();
      case Json::value_t::string:
        out->kind = AMQP_FIELD_KIND_UTF8;
        out->value.bytes = Bytes(v.get_ref<const std::string&>());
        return Status::Ok();
      case Json::value_t::binary: {
        const auto& bin = v.get_binary();
        out->kind = AMQP_FIELD_KIND_BYTES;
        out->value.bytes =
            Bytes(std::string_view(reinterpret_cast<const char*>(bin.data()), bin.size()));
        return Status::Ok();
      }
      case Json::value_t::array: {
        out->kind = AMQP_FIELD_KIND_ARRAY;
        out->value.array.num_entries = static_cast<int>(v.size());
        out->value.array.entries = nullptr;
        if (v.empty()) return Status::Ok();
        out->value.array.entries =
            static_cast<amqp_field_value_t*>(Alloc(sizeof(amqp_field_value_t) * v.size()));
        for (size_t i = 0; i < v.size(); ++i) {
          SYNCBUS_RETURN_IF_ERROR(Value(v[i], &out->value.array.entries[i], depth + 1)
                                      .Annotate("element " + std::to_string(i)));
        }
        return Status::Ok();
      }
      case Json::value_t::object:
        if (v.size() == 1) {
          const std::string& key = v.begin().key();
          if (key == kTimestampTag || key == kBytesTag || key == kDecimalTag) {
            return Tagged(key, v.begin().value(), out);
          }
        }
        out->kind = AMQP_FIELD_KIND_TABLE;
        return Table(v, &out->value.table, depth + 1);
      case Json::value_t::discarded: break;
    }
    return InvalidArgument("value cannot be encoded in a field table");
  }

  amqp_pool_t* pool_;
};

std::string_view View(amqp_bytes_t b) {
  return b.len == 0 ? std::string_view()
                    : std::string_view(static_cast<const char*>(b.bytes), b.len);
}

Result<Json> DecodeValue(const amqp_field_value_t& v, int depth);

Result<Json> DecodeTable(const amqp_table_t& table, int depth) {
  if (depth > kMaxDepth) return InvalidArgument("field table nested too deeply");
  Json out = Json::object();
  for (int i = 0; i < table.num_entries; ++i) {
    const amqp_table_entry_t& entry = table.entries[i];
    std::string key(View(entry.key));
    auto value = DecodeValue(entry.value, depth + 1);
    if (!value.ok()) return value.status().Annotate("key '" + key + "'");
    out[key] = std::move(*value);
  }
  return out;
}

Result<Json> DecodeValue(const amqp_field_value_t& v, int depth) {
  if (depth > kMaxDepth) return InvalidArgument("field table nested too deeply");
  switch (v.kind) {
    case AMQP_FIELD_KIND_BOOLEAN: return Json(v.value.boolean != 0);
    case AMQP_FIELD_KIND_I8: return Json(v.value.i8);
    case AMQP_FIELD_KIND_U8: return Json(v.value.u8);
    case AMQP_FIELD_KIND_I16: return Json(v.value.i16);
    case AMQP_FIELD_KIND_U16: return Json(v.value.u16);
    case AMQP_FIELD_KIND_I32: return Json(v.value.i32);
    case AMQP_FIELD_KIND_U32: return Json(v.value.u32);
    case AMQP_FIELD_KIND_I64: return Json(v.value.i64);
    case AMQP_FIELD_KIND_U64: return Json(v.value.u64);
    case AMQP_FIELD_KIND_F32: return Json(static_cast<double>(v.value.f32));
    case AMQP_FIELD_KIND_F64: return Json(v.value.f64);
    case AMQP_FIELD_KIND_DECIMAL:
      return Json{
          {kDecimalTag, {{"scale", v.value.decimal.decimals}, {"value", v.value.decimal.value}}}};
    case AMQP_FIELD_KIND_UTF8: {
      std::string_view s = View(v.value.bytes);
      if (IsValidUtf8(s)) return Json(std::string(s));
      return Json{{kBytesTag, EncodeBase64(s)}};
    }
    case AMQP_FIELD_KIND_BYTES: return Json{{kBytesTag, EncodeBase64(View(v.value.bytes))}};
    case AMQP_FIELD_KIND_TIMESTAMP: return TimestampValue(static_cast<int64_t>(v.value.u64));
    case AMQP_FIELD_KIND_VOID: return Json(nullptr);
    case AMQP_FIELD_KIND_TABLE: return DecodeTable(v.value.table, depth + 1);
    case AMQP_FIELD_KIND_ARRAY: {
      Json out = Json::array();
      for (int i = 0; i < v.value.array.num_entries; ++i) {
        auto element = DecodeValue(v.value.array.entries[i], depth + 1);
        if (!element.ok()) return element.status().Annotate("element " + std::to_string(i));
        out.push_back(std::move(*element));
      }
      return out;
    }
    default: return InvalidArgument("unknown field kind '" + std::string(1, char(v.kind)) + "'");
  }
}

}  // namespace

Json TimestampValue(int64_t seconds_since_epoch) {
  return Json{{kTimestampTag, seconds_since_epoch}};
}

void FieldTable::PoolDeleter::operator()(amqp_pool_t* pool) const {
  empty_amqp_pool(pool);
  delete pool;
}

FieldTable::FieldTable() : pool_(new amqp_pool_t) {
  init_amqp_pool(pool_.get(), 4096);
}

Result<FieldTable> FieldTable::FromJson(const Json& object) {
  FieldTable t;
  SYNCBUS_RETURN_IF_ERROR(Encoder(t.pool_.get()).Table(object, &t.table_, 0));
  return t;
}

Result<Json> TableToJson(const amqp_table_t& table) {
  return DecodeTable(table, 0);
}

}  // namespace syncbus::amqp
