// tfrecord: frames {u64 length, u32 masked crc32c(length), data, u32 masked
// crc32c(data)} holding tf.Example protos. The schema (features sorted by
// name, kind, fixed count or packed) is inferred from the first records at
// plan time.
#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>

#include "readers/crc32c.h"
#include "readers/example_proto.h"
#include "readers/file_io.h"

namespace goldminer::readers::internal {

const char* feature_kind_name(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kBytes: return "bytes";
    case FeatureKind::kFloat: return "float";
    case FeatureKind::kInt64: return "int64";
    case FeatureKind::kNone: break;
  }
  return "empty";
}

namespace {

constexpr const char* kFormat = "tfrecord";
constexpr size_t kHeader = 12;
constexpr size_t kFooter = 4;
// Schema inference reads at most this many records (over the files in order).
constexpr uint64_t kInferRecords = 1000;

struct Feature {
  std::string name;
  FeatureKind kind = FeatureKind::kNone;
  // Numbers: values per record when fixed, -1 when packed. Bytes: 1 when
  // every record has at most one value, -1 when some have more.
  int64_t count = -1;
};

uint64_t load_le64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t load_le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Why the frame at window's cursor is unusable, or "" if it is whole; sets
// *length. `rest` is how many bytes the file has from the cursor.
std::string check_header(const char* p, size_t available, uint64_t rest, uint64_t* length) {
  if (available < kHeader) {
    return "truncated record header (" + std::to_string(available) + " of 12 bytes)";
  }
  *length = load_le64(p);
  if (mask_crc(crc32c(p, 8)) != load_le32(p + 8)) return "length CRC mismatch";
  if (*length > rest - kHeader || rest - kHeader - *length < kFooter) {
    return "truncated record (length " + std::to_string(*length) + ", " +
           std::to_string(rest - kHeader) + " bytes left)";
  }
  return "";
}

std::string encode_schema(const std::vector<Feature>& features) {
  FieldWriter w;
  w.put("features", static_cast<uint64_t>(features.size()));
  for (const Feature& f : features) {
    w.put("name", f.name);
    w.put("kind", std::string_view(feature_kind_name(f.kind)));
    w.put("count", f.count);
  }
  return w.text();
}

Expected<std::vector<Feature>> decode_schema(const std::string& schema) {
  FieldReader r("tfrecord schema", schema);
  auto n = r.get_uint("features");
  if (!n.ok()) return n.status();
  if (*n > schema.size()) return r.error("implausible feature count");
  std::vector<Feature> features(*n);
  for (Feature& f : features) {
    auto name = r.get_string("name");
    if (!name.ok()) return name.status();
    auto kind = r.get_string("kind");
    if (!kind.ok()) return kind.status();
    auto count = r.get_int("count");
    if (!count.ok()) return count.status();
    f.name = std::move(*name);
    if (*kind == "int64") f.kind = FeatureKind::kInt64;
    else if (*kind == "float") f.kind = FeatureKind::kFloat;
    else if (*kind == "bytes") f.kind = FeatureKind::kBytes;
    else return r.error("bad feature kind " + quote_value(*kind));
    f.count = *count;
  }
  if (!r.done()) return r.error("trailing bytes");
  return features;
}

// Reads a split's frames. One instance per split; thread-compatible.
class TfRecordSource : public RecordSource {
 public:
  explicit TfRecordSource(std::vector<Feature> features)
      : features_(std::move(features)), found_(features_.size()), kinds_(features_.size()) {}

  Status open(const std::string& path, const SplitRange& split) {
    split_ = split;
    Status s = window_.open(kFormat, path, split.byte_offset);
    if (!s.ok()) return s;
    auto size = window_.file_size();
    if (!size.ok()) return size.status();
    file_size_ = *size;
    return Status();
  }

  Expected<Outcome> next(Sample* sample, std::string* what) override {
    if (read_ == split_.records) return Outcome::kEnd;
    const uint64_t record = split_.first_record + read_;
    const uint64_t offset = window_.offset();
    auto got = window_.ensure(kHeader);
    if (!got.ok()) return got.status();
    if (*got == 0 || broken_) {
      return Status::error(std::string(kFormat) + ": " + window_.path() + ": file ends at record " +
                           std::to_string(record) + ", before the end of its split: file changed "
                           "since the plan?");
    }
    ++read_;
    sample->record = record;
    uint64_t length = 0;
    const uint64_t rest = offset < file_size_ ? file_size_ - offset : 0;
    std::string why = check_header(window_.data(), *got, rest, &length);
    if (!why.empty()) {
      // The plan counted the rest of the file as this one record.
      broken_ = true;
      *what = record_error(kFormat, window_.path(), offset, record, why);
      return Outcome::kCorrupt;
    }
    const size_t frame = kHeader + static_cast<size_t>(length) + kFooter;
    got = window_.ensure(frame);
    if (!got.ok()) return got.status();
    if (*got < frame) {
      broken_ = true;
      *what = record_error(kFormat, window_.path(), offset, record, "truncated record");
      return Outcome::kCorrupt;
    }
    const char* data = window_.data() + kHeader;
    if (mask_crc(crc32c(data, length)) != load_le32(data + length)) {
      window_.consume(frame);
      *what = record_error(kFormat, window_.path(), offset, record, "data CRC mismatch");
      return Outcome::kCorrupt;
    }
    bool ok = decode(std::string_view(data, length), sample, &why);
    window_.consume(frame);
    if (!ok) {
      *what = record_error(kFormat, window_.path(), offset, record, why);
      return Outcome::kCorrupt;
    }
    return Outcome::kRecord;
  }

  std::vector<HostTensor> assemble(const std::vector<const Sample*>& samples) override;

 private:
  // Sample layout, per schema feature: u64 count, then the values (int64,
  // float, or for bytes u64 length + bytes each).
  bool decode(std::string_view example, Sample* sample, std::string* why);

  std::vector<Feature> features_;
  std::vector<std::string_view> found_;  // per feature: its list in this record
  std::vector<FeatureKind> kinds_;
  SplitRange split_;
  FileWindow window_;
  uint64_t file_size_ = 0;
  uint64_t read_ = 0;
  bool broken_ = false;  // the frame can't be delimited: nothing follows
  size_t hint_ = 0;      // where the next feature name is likely to be
};

bool TfRecordSource::decode(std::string_view example, Sample* sample, std::string* why) {
  std::fill(kinds_.begin(), kinds_.end(), FeatureKind::kNone);
  std::fill(found_.begin(), found_.end(), std::string_view());
  bool ok = for_each_feature(
      example,
      [&](std::string_view name, FeatureKind kind, std::string_view list) {
        // Writers emit features in the same order every record: try the
        // successor of the last match before a binary search.
        size_t i = hint_ < features_.size() && features_[hint_].name == name ? hint_ : features_.size();
        if (i == features_.size()) {
          auto it = std::lower_bound(features_.begin(), features_.end(), name,
                                     [](const Feature& f, std::string_view n) { return f.name < n; });
          if (it == features_.end() || it->name != name) return true;  // not in the schema
          i = static_cast<size_t>(it - features_.begin());
        }
        hint_ = i + 1 < features_.size() ? i + 1 : 0;
        kinds_[i] = kind;
        found_[i] = list;
        return true;
      },
      why);
  if (!ok) {
    *why = "malformed tf.Example: " + *why;
    return false;
  }
  ByteBuffer& out = sample->bytes;
  out.clear();
  for (size_t i = 0; i < features_.size(); ++i) {
    const Feature& f = features_[i];
    if (kinds_[i] != FeatureKind::kNone && kinds_[i] != f.kind) {
      *why = "feature '" + f.name + "': " + feature_kind_name(kinds_[i]) + " values, the schema has " +
             feature_kind_name(f.kind);
      return false;
    }
    // Every value takes at least one byte of the list and at most 9 times
    // that decoded: size once for the bound, write, then trim.
    const size_t count_at = out.size();
    out.resize(count_at + 8 + 9 * found_[i].size());
    uint8_t* w = out.data() + count_at + 8;
    uint64_t count = 0;
    bool list_ok = kinds_[i] == FeatureKind::kNone ||
                   for_each_value(f.kind, found_[i], [&](auto v) {
                     ++count;
                     if constexpr (std::is_same_v<decltype(v), std::string_view>) {
                       uint64_t len = v.size();
                       std::memcpy(w, &len, 8);
                       if (len > 0) std::memcpy(w + 8, v.data(), len);
                       w += 8 + len;
                     } else {
                       std::memcpy(w, &v, sizeof v);
                       w += sizeof v;
                     }
                   });
    out.resize(static_cast<size_t>(w - out.data()));
    if (!list_ok) {
      *why = "malformed tf.Example: feature '" + f.name + "': bad " + feature_kind_name(f.kind) + " list";
      return false;
    }
    if (f.kind != FeatureKind::kBytes && f.count >= 0 && count != static_cast<uint64_t>(f.count)) {
      *why = "feature '" + f.name + "': " + std::to_string(count) + " values, the schema has " +
             std::to_string(f.count);
      return false;
    }
    if (f.kind == FeatureKind::kBytes && f.count == 1 && count > 1) {
      *why = "feature '" + f.name + "': " + std::to_string(count) +
             " values, the schema allows one (inferred from the first records)";
      return false;
    }
    std::memcpy(out.data() + count_at, &count, sizeof count);
  }
  return true;
}

std::vector<HostTensor> TfRecordSource::assemble(const std::vector<const Sample*>& samples) {
  const size_t b = samples.size();
  std::vector<size_t> cursor(b, 0);
  auto u64_at = [&](size_t i) {
    uint64_t v;
    std::memcpy(&v, samples[i]->bytes.data() + cursor[i], 8);
    return v;
  };
  std::vector<HostTensor> out;
  for (const Feature& f : features_) {
    // Pass 1: sizes.
    uint64_t values = 0, bytes = 0;
    for (size_t i = 0; i < b; ++i) {
      uint64_t n = u64_at(i);
      values += n;
      if (f.kind == FeatureKind::kBytes) {
        size_t c = cursor[i] + 8;
        for (uint64_t k = 0; k < n; ++k) {
          uint64_t len;
          std::memcpy(&len, samples[i]->bytes.data() + c, 8);
          bytes += len;
          c += 8 + len;
        }
      }
    }
    const int64_t sb = static_cast<int64_t>(b);
    if (f.kind != FeatureKind::kBytes) {
      const size_t width = f.kind == FeatureKind::kInt64 ? 8 : 4;
      const auto dtype = f.kind == FeatureKind::kInt64 ? wire::DType::kInt64 : wire::DType::kFloat32;
      HostTensor v = f.count >= 0 ? make_tensor(dtype, {sb, f.count})
                                  : make_tensor(dtype, {static_cast<int64_t>(values)});
      HostTensor lengths = make_tensor(wire::DType::kInt64, {f.count >= 0 ? 0 : sb});
      uint8_t* dst = v.data.data();
      for (size_t i = 0; i < b; ++i) {
        uint64_t n = u64_at(i);
        if (n > 0) std::memcpy(dst, samples[i]->bytes.data() + cursor[i] + 8, n * width);
        dst += n * width;
        if (f.count < 0) std::memcpy(lengths.data.data() + i * 8, &n, 8);
        cursor[i] += 8 + n * width;
      }
      out.push_back(std::move(v));
      if (f.count < 0) out.push_back(std::move(lengths));
    } else {
      const bool multi = f.count < 0;
      HostTensor data = make_tensor(wire::DType::kUInt8, {static_cast<int64_t>(bytes)});
      HostTensor lengths = make_tensor(wire::DType::kInt64, {multi ? static_cast<int64_t>(values) : sb});
      HostTensor counts = make_tensor(wire::DType::kInt64, {multi ? sb : 0});
      uint8_t* dst = data.data.data();
      size_t value_index = 0;
      for (size_t i = 0; i < b; ++i) {
        uint64_t n = u64_at(i);
        size_t c = cursor[i] + 8;
        uint64_t sample_bytes = 0;
        for (uint64_t k = 0; k < n; ++k) {
          uint64_t len;
          std::memcpy(&len, samples[i]->bytes.data() + c, 8);
          if (len > 0) std::memcpy(dst, samples[i]->bytes.data() + c + 8, len);
          dst += len;
          sample_bytes += len;
          if (multi) std::memcpy(lengths.data.data() + 8 * value_index++, &len, 8);
          c += 8 + len;
        }
        if (multi) std::memcpy(counts.data.data() + i * 8, &n, 8);
        else std::memcpy(lengths.data.data() + i * 8, &sample_bytes, 8);
        cursor[i] = c;
      }
      out.push_back(std::move(data));
      out.push_back(std::move(lengths));
      if (multi) out.push_back(std::move(counts));
    }
  }
  return out;
}

}  // namespace

Expected<std::string> tfrecord_plan_schema(const std::vector<std::string>& files) {
  struct Seen {
    FeatureKind kind = FeatureKind::kNone;
    uint64_t records = 0, min_count = UINT64_MAX, max_count = 0;
  };
  std::map<std::string, Seen> seen;  // sorted by name
  uint64_t scanned = 0;
  std::string why;
  for (const std::string& path : files) {
    if (scanned >= kInferRecords) break;
    FileWindow window;
    Status s = window.open(kFormat, path, 0);
    if (!s.ok()) return s;
    auto size = window.file_size();
    if (!size.ok()) return size.status();
    while (scanned < kInferRecords) {
      const uint64_t offset = window.offset();
      auto got = window.ensure(kHeader);
      if (!got.ok()) return got.status();
      if (*got == 0) break;
      uint64_t length = 0;
      if (!check_header(window.data(), *got, *size - offset, &length).empty()) break;
      const size_t frame = kHeader + static_cast<size_t>(length) + kFooter;
      got = window.ensure(frame);
      if (!got.ok()) return got.status();
      if (*got < frame) break;
      const char* data = window.data() + kHeader;
      std::string_view example(data, length);
      bool intact = mask_crc(crc32c(data, length)) == load_le32(data + length);
      std::string conflict;
      // Corrupt records are left for the reader to report.
      if (intact && for_each_feature(
                        example,
                        [&](std::string_view name, FeatureKind kind, std::string_view list) {
                          if (kind == FeatureKind::kNone) return true;
                          Seen& st = seen[std::string(name)];
                          if (st.kind != FeatureKind::kNone && st.kind != kind) {
                            conflict = "feature '" + std::string(name) + "' is " +
                                       feature_kind_name(st.kind) + " in an earlier record and " +
                                       feature_kind_name(kind) + " in record " + std::to_string(scanned);
                            return false;
                          }
                          st.kind = kind;
                          uint64_t n = 0;
                          for_each_value(kind, list, [&](auto) { ++n; });
                          ++st.records;
                          st.min_count = std::min(st.min_count, n);
                          st.max_count = std::max(st.max_count, n);
                          return true;
                        },
                        &why)) {
        ++scanned;
      }
      if (!conflict.empty()) {
        return Status::error(std::string(kFormat) + ": " + path + ": byte " + std::to_string(offset) +
                             ": " + conflict);
      }
      window.consume(frame);
    }
  }
  std::vector<Feature> features;
  for (const auto& [name, st] : seen) {
    Feature f;
    f.name = name;
    f.kind = st.kind;
    if (st.kind == FeatureKind::kBytes) {
      f.count = st.max_count <= 1 ? 1 : -1;
    } else {
      f.count = st.records == scanned && st.min_count == st.max_count ? static_cast<int64_t>(st.min_count) : -1;
    }
    features.push_back(std::move(f));
  }
  return encode_schema(features);
}

Expected<FilePlan> tfrecord_plan_file(const std::string& path, uint64_t step) {
  FileWindow window;
  Status s = window.open(kFormat, path, 0);
  if (!s.ok()) return s;
  auto size = window.file_size();
  if (!size.ok()) return size.status();
  FilePlan plan;
  for (;;) {
    const uint64_t offset = window.offset();
    auto got = window.ensure(kHeader);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    if (plan.records % step == 0) plan.split_offsets.push_back(offset);
    ++plan.records;
    uint64_t length = 0;
    // A frame that can't be delimited makes the rest of the file one
    // (corrupt) record, which the reader reports or skips.
    if (!check_header(window.data(), *got, *size - offset, &length).empty()) break;
    s = window.skip(kHeader + length + kFooter);
    if (!s.ok()) return s;
  }
  return plan;
}

Expected<std::unique_ptr<RecordSource>> open_tfrecord_source(const DatasetConfig& config,
                                                             const SplitRange& split) {
  auto features = decode_schema(config.schema);
  if (!features.ok()) return features.status();
  auto source = std::make_unique<TfRecordSource>(std::move(*features));
  Status s = source->open(config.files[split.file_index], split);
  if (!s.ok()) return s;
  return std::unique_ptr<RecordSource>(std::move(source));
}

}  // namespace goldminer::readers::internal
