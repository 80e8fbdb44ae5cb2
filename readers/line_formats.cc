// The line formats without a header: criteo-tsv (label \t I1..I13 \t
// C1..C26, no header; a short row has its trailing fields missing, as in
// the real test file's 37/38-field rows) and text (one record per line).
#include <cmath>
#include <cstring>
#include <limits>

#include "readers/line_source.h"
#include "readers/number.h"

namespace goldminer::readers::internal {
namespace {

constexpr int kDense = 13;
constexpr int kSparse = 26;
constexpr int kFields = 1 + kDense + kSparse;
// Sample layout: float label, float dense[13], int64 sparse[26].
constexpr size_t kSparseAt = sizeof(float) * (1 + kDense);
constexpr size_t kSampleBytes = kSparseAt + sizeof(int64_t) * kSparse;

std::string field_name(int field) {
  if (field == 0) return "label";
  if (field <= kDense) return "I" + std::to_string(field);
  return "C" + std::to_string(field - kDense);
}

class CriteoSource : public LineSource {
 public:
  std::vector<HostTensor> assemble(const std::vector<const Sample*>& samples) override {
    const int64_t b = static_cast<int64_t>(samples.size());
    std::vector<HostTensor> t;
    t.push_back(make_tensor(wire::DType::kFloat32, {b}));
    t.push_back(make_tensor(wire::DType::kFloat32, {b, kDense}));
    t.push_back(make_tensor(wire::DType::kInt64, {b, kSparse}));
    for (size_t i = 0; i < samples.size(); ++i) {
      const uint8_t* s = samples[i]->bytes.data();
      std::memcpy(t[0].data.data() + i * sizeof(float), s, sizeof(float));
      std::memcpy(t[1].data.data() + i * kDense * sizeof(float), s + sizeof(float),
                  kDense * sizeof(float));
      std::memcpy(t[2].data.data() + i * kSparse * sizeof(int64_t), s + kSparseAt,
                  kSparse * sizeof(int64_t));
    }
    return t;
  }

 protected:
  bool decode(std::string_view line, Sample* sample, std::string* why) override {
    if (line.empty()) {
      *why = "empty line";
      return false;
    }
    sample->bytes.resize(kSampleBytes);
    float dense[1 + kDense];
    int64_t sparse[kSparse];
    std::fill(dense, dense + 1 + kDense, std::numeric_limits<float>::quiet_NaN());
    std::fill(sparse, sparse + kSparse, int64_t{-1});
    const char* p = line.data();
    const char* end = p + line.size();
    for (int field = 0;; ++field) {
      const char* tab = static_cast<const char*>(std::memchr(p, '\t', static_cast<size_t>(end - p)));
      if (tab == nullptr) tab = end;
      if (field >= kFields) {
        *why = "more than " + std::to_string(kFields) + " fields";
        return false;
      }
      std::string_view value(p, static_cast<size_t>(tab - p));
      if (!value.empty()) {
        bool ok = field <= kDense ? parse_float(value, &dense[field])
                                  : parse_hex63(value, &sparse[field - 1 - kDense]);
        if (!ok) {
          *why = "field " + std::to_string(field + 1) + " (" + field_name(field) + "): " +
                 quote_value(value) + (field <= kDense ? " is not a number" : " is not a hex hash");
          return false;
        }
      }
      if (tab == end) break;
      p = tab + 1;
    }
    std::memcpy(sample->bytes.data(), dense, sizeof dense);
    std::memcpy(sample->bytes.data() + kSparseAt, sparse, sizeof sparse);
    return true;
  }
};

class TextSource : public LineSource {
 public:
  std::vector<HostTensor> assemble(const std::vector<const Sample*>& samples) override {
    size_t total = 0;
    for (const Sample* s : samples) total += s->bytes.size();
    std::vector<HostTensor> t;
    t.push_back(make_tensor(wire::DType::kUInt8, {static_cast<int64_t>(total)}));
    t.push_back(make_tensor(wire::DType::kInt64, {static_cast<int64_t>(samples.size())}));
    uint8_t* data = t[0].data.data();
    for (size_t i = 0; i < samples.size(); ++i) {
      const ByteBuffer& b = samples[i]->bytes;
      if (!b.empty()) std::memcpy(data, b.data(), b.size());
      data += b.size();
      int64_t len = static_cast<int64_t>(b.size());
      std::memcpy(t[1].data.data() + i * sizeof(int64_t), &len, sizeof len);
    }
    return t;
  }

 protected:
  bool decode(std::string_view line, Sample* sample, std::string*) override {
    sample->bytes.assign(line.begin(), line.end());
    return true;
  }
};

// A source of type S (a LineSource) over one split of `format`.
template <typename S>
Expected<std::unique_ptr<RecordSource>> open_line_source(const char* format, const DatasetConfig& config,
                                                         const SplitRange& split) {
  auto source = std::make_unique<S>();
  Status s = source->open(format, config.files[split.file_index], split, false);
  if (!s.ok()) return s;
  return std::unique_ptr<RecordSource>(std::move(source));
}

}  // namespace

Expected<std::unique_ptr<RecordSource>> open_criteo_source(const DatasetConfig& config,
                                                           const SplitRange& split) {
  return open_line_source<CriteoSource>("criteo-tsv", config, split);
}

Expected<std::unique_ptr<RecordSource>> open_text_source(const DatasetConfig& config,
                                                         const SplitRange& split) {
  return open_line_source<TextSource>("text", config, split);
}

}  // namespace goldminer::readers::internal
