// A minimal decoder of tf.Example protos (no protobuf library):
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }
//   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
//                      Int64List int64_list = 3; } }
//   XList    { repeated X value = 1; }  (numbers packed or not)
// Unknown fields are skipped. Every length is checked against the input.
// Internal.
#ifndef GOLDMINER_READERS_EXAMPLE_PROTO_H_
#define GOLDMINER_READERS_EXAMPLE_PROTO_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace goldminer::readers::internal {

enum class FeatureKind : uint8_t { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

const char* feature_kind_name(FeatureKind kind);

class ProtoCursor {
 public:
  explicit ProtoCursor(std::string_view data) : p_(data.data()), end_(data.data() + data.size()) {}
  bool done() const { return p_ == end_; }
  bool varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      uint8_t b = static_cast<uint8_t>(*p_++);
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  // Reads a tag; false at a malformed one.
  bool tag(uint32_t* field, uint32_t* wire_type) {
    uint64_t t;
    if (!varint(&t) || (t >> 3) == 0 || (t >> 3) > 0x1fffffff) return false;
    *field = static_cast<uint32_t>(t >> 3);
    *wire_type = static_cast<uint32_t>(t & 7);
    return true;
  }
  bool bytes(std::string_view* out) {
    uint64_t len;
    if (!varint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
    *out = std::string_view(p_, static_cast<size_t>(len));
    p_ += len;
    return true;
  }
  bool fixed32(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    std::memcpy(v, p_, 4);  // little-endian hosts only (x86-64, aarch64)
    p_ += 4;
    return true;
  }
  bool skip(uint32_t wire_type) {
    uint64_t v;
    std::string_view s;
    switch (wire_type) {
      case 0: return varint(&v);
      case 1: if (end_ - p_ < 8) return false; p_ += 8; return true;
      case 2: return bytes(&s);
      case 5: if (end_ - p_ < 4) return false; p_ += 4; return true;
      default: return false;  // groups (3, 4) are not used by tf.Example
    }
  }

 private:
  const char* p_;
  const char* end_;
};

// Calls fn(bytes) for each length-delimited field 1 of `message` (named
// `what` in errors; `overrun`: the error of a field 1 that overruns it),
// skipping the other fields. False with *why on a malformed proto, or
// false as soon as fn returns false.
template <typename Fn>
bool for_each_field_1(std::string_view message, const char* what, const char* overrun, Fn fn, std::string* why) {
  ProtoCursor c(message);
  uint32_t field, wt;
  while (!c.done()) {
    if (!c.tag(&field, &wt)) return *why = std::string("bad tag in ") + what, false;
    if (field != 1 || wt != 2) {
      if (!c.skip(wt)) return *why = std::string("bad field in ") + what, false;
      continue;
    }
    std::string_view bytes;
    if (!c.bytes(&bytes)) return *why = overrun, false;
    if (!fn(bytes)) return false;
  }
  return true;
}

// Calls fn(name, kind, list) for each entry of the Example's feature map,
// where `list` is the serialized BytesList/FloatList/Int64List. False with
// *why on a malformed proto.
template <typename Fn>
bool for_each_feature(std::string_view example, Fn fn, std::string* why) {
  const auto each_entry = [&fn, why](std::string_view entry) -> bool {
    uint32_t field, wt;
    ProtoCursor en(entry);
    std::string_view name, feature;
    while (!en.done()) {
      if (!en.tag(&field, &wt)) return *why = "bad tag in a feature map entry", false;
      if (field == 1 && wt == 2) {
        if (!en.bytes(&name)) return *why = "feature name overruns its entry", false;
      } else if (field == 2 && wt == 2) {
        if (!en.bytes(&feature)) return *why = "Feature overruns its entry", false;
      } else if (!en.skip(wt)) {
        return *why = "bad field in a feature map entry", false;
      }
    }
    FeatureKind kind = FeatureKind::kNone;
    std::string_view list;
    ProtoCursor fe(feature);
    while (!fe.done()) {
      if (!fe.tag(&field, &wt)) return *why = "bad tag in Feature '" + std::string(name) + "'", false;
      if (field >= 1 && field <= 3 && wt == 2) {
        if (!fe.bytes(&list)) return *why = "Feature '" + std::string(name) + "' overruns", false;
        kind = static_cast<FeatureKind>(field);
      } else if (!fe.skip(wt)) {
        return *why = "bad field in Feature '" + std::string(name) + "'", false;
      }
    }
    return fn(name, kind, list);
  };
  const auto each_feature_map = [&each_entry, why](std::string_view features) {
    return for_each_field_1(features, "Features", "Features.feature entry overruns its message", each_entry, why);
  };
  return for_each_field_1(example, "Example", "Example.features overruns the record", each_feature_map, why);
}

// Calls fn(value) for each value of a list of `kind`: int64_t for kInt64,
// float for kFloat, std::string_view for kBytes. False on a malformed list.
template <typename Fn>
bool for_each_value(FeatureKind kind, std::string_view list, Fn fn) {
  ProtoCursor c(list);
  uint32_t field, wt;
  while (!c.done()) {
    if (!c.tag(&field, &wt)) return false;
    if (field != 1) {
      if (!c.skip(wt)) return false;
      continue;
    }
    if (kind == FeatureKind::kInt64) {
      uint64_t v;
      if (wt == 0) {
        if (!c.varint(&v)) return false;
        fn(static_cast<int64_t>(v));
      } else if (wt == 2) {
        std::string_view packed;
        if (!c.bytes(&packed)) return false;
        ProtoCursor pc(packed);
        while (!pc.done()) {
          if (!pc.varint(&v)) return false;
          fn(static_cast<int64_t>(v));
        }
      } else {
        return false;
      }
    } else if (kind == FeatureKind::kFloat) {
      uint32_t bits;
      float f;
      if (wt == 5) {
        if (!c.fixed32(&bits)) return false;
        std::memcpy(&f, &bits, 4);
        fn(f);
      } else if (wt == 2) {
        std::string_view packed;
        if (!c.bytes(&packed) || packed.size() % 4 != 0) return false;
        for (size_t i = 0; i < packed.size(); i += 4) {
          std::memcpy(&f, packed.data() + i, 4);
          fn(f);
        }
      } else {
        return false;
      }
    } else if (kind == FeatureKind::kBytes) {
      std::string_view s;
      if (wt != 2 || !c.bytes(&s)) return false;
      fn(s);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace goldminer::readers::internal

#endif  // GOLDMINER_READERS_EXAMPLE_PROTO_H_
