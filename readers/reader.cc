// Format-independent parts of the readers: input specs, the dataset config
// text, planning, and the split stream (shuffle buffer, bad-record budget,
// batching). Formats plug in through readers/format.h.
#include "readers/reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "gmcore/rank_share.h"
#include "gmcore/splitmix.h"
#include "readers/file_io.h"
#include "readers/format.h"

namespace goldminer::readers {
namespace {

using internal::FilePlan;
using internal::Outcome;
using internal::RecordSource;
using internal::Sample;

constexpr const char* kValidFormats = "criteo-tsv, csv, tfrecord, jpeg, text, index";

// Uniform in [0, n) by multiply-shift (Lemire); n > 0. SplitMix64
// (gmcore/splitmix.h) is identical everywhere, unlike
// std::uniform_int_distribution whose output is implementation-defined.
uint64_t below(goldminer::SplitMix64& rng, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng.next()) * n) >> 64);
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  std::string base(cwd);
  std::string rel = path;
  while (rel.compare(0, 2, "./") == 0) rel.erase(0, 2);
  return base + "/" + rel;
}

// Records -> shuffle buffer -> batches. Owns the format's RecordSource.
class BatchingStream : public SplitStream {
 public:
  BatchingStream(std::unique_ptr<RecordSource> source, uint64_t max_bad, uint64_t seed,
                 uint32_t batch_size, uint32_t shuffle_buffer, uint64_t skip, uint64_t records, uint64_t batches)
      : source_(std::move(source)),
        skip_(skip),
        max_bad_(max_bad),
        rng_(seed),
        batch_size_(batch_size),
        records_(records),
        batches_(batches),
        capacity_(shuffle_buffer > 1 ? shuffle_buffer : 1),
        out_(batch_size) {}

  Expected<std::optional<Batch>> next() override {
    if (!started_) {
      started_ = true;
      if (skip_ > 0) {
        Status s = source_->skip(skip_);
        if (!s.ok()) return s;
      }
      buffer_.reserve(capacity_);
      while (buffer_.size() < capacity_) {
        buffer_.emplace_back();
        auto got = read_one(&buffer_.back());
        if (!got.ok()) return got.status();
        if (!*got) {
          buffer_.pop_back();
          break;
        }
      }
    }
    // This batch's size: the batch size but where the split is cut into
    // more batches (a rank's share); past the planned count (records the
    // plan did not count), the batch size again, so none is left behind.
    uint64_t size = batches_ == 0 ? batch_size_ : batch_size_at(records_, batches_, batch_size_, made_);
    if (size == 0) size = batch_size_;
    ++made_;
    size_t n = 0;
    while (n < size && !buffer_.empty()) {
      size_t j = capacity_ > 1 ? static_cast<size_t>(below(rng_, buffer_.size())) : 0;
      std::swap(out_[n], buffer_[j]);
      ++n;
      auto got = read_one(&buffer_[j]);
      if (!got.ok()) return got.status();
      if (!*got) {
        std::swap(buffer_[j], buffer_.back());
        buffer_.pop_back();
      }
    }
    if (n == 0 && pending_bad_ == 0) return std::optional<Batch>();
    // Even with no sample left, skipped records are reported (never a
    // silent drop): the split's last batch may then be empty.
    std::vector<const Sample*> samples(n);
    Batch batch;
    batch.records.resize(n);
    for (size_t i = 0; i < n; ++i) {
      samples[i] = &out_[i];
      batch.records[i] = out_[i].record;
    }
    batch.tensors = source_->assemble(samples);
    batch.bad_records = pending_bad_;
    pending_bad_ = 0;
    return std::optional<Batch>(std::move(batch));
  }

 private:
  // The next good record into *sample; false at the end of the split.
  Expected<bool> read_one(Sample* sample) {
    for (;;) {
      std::string what;
      auto outcome = source_->next(sample, &what);
      if (!outcome.ok()) return outcome.status();
      if (*outcome == Outcome::kRecord) return true;
      if (*outcome == Outcome::kEnd) return false;
      if (bad_ >= max_bad_) {
        if (max_bad_ > 0) what += " (max_bad_records " + std::to_string(max_bad_) + " exceeded)";
        return Status::error(what);
      }
      ++bad_;
      ++pending_bad_;
    }
  }

  std::unique_ptr<RecordSource> source_;
  uint64_t skip_;  // records before the ones batched (another rank's)
  uint64_t max_bad_;
  uint64_t bad_ = 0;          // skipped in this split
  uint64_t pending_bad_ = 0;  // skipped since the last batch
  goldminer::SplitMix64 rng_;
  uint32_t batch_size_;
  uint64_t records_;   // in the split
  uint64_t batches_;   // to cut it into; 0: as the batch size makes
  uint64_t made_ = 0;  // batches made so far
  size_t capacity_;
  bool started_ = false;
  std::vector<Sample> buffer_;  // the shuffle buffer
  std::vector<Sample> out_;     // the batch being made; storage recycled
};

}  // namespace

// ------------------------------------------------------------------ formats

Expected<Format> parse_format(const std::string& name) {
  if (name == "criteo-tsv") return Format::kCriteoTsv;
  if (name == "csv") return Format::kCsv;
  if (name == "tfrecord") return Format::kTfRecord;
  if (name == "jpeg") return Format::kJpeg;
  if (name == "text") return Format::kText;
  if (name == "index") return Format::kIndex;
  return Status::error("readers: unknown format " + internal::quote_value(name) + " (valid: " +
                       kValidFormats + ")");
}

const char* format_name(Format format) {
  switch (format) {
    case Format::kCriteoTsv: return "criteo-tsv";
    case Format::kCsv: return "csv";
    case Format::kTfRecord: return "tfrecord";
    case Format::kJpeg: return "jpeg";
    case Format::kText: return "text";
    case Format::kIndex: return "index";
  }
  return "unknown";
}

Expected<InputSpec> parse_input_spec(const std::string& text) {
  size_t colon = text.find(':');
  if (colon == std::string::npos) {
    return Status::error("input spec " + internal::quote_value(text) +
                         ": expected FORMAT:PATH[,PATH...] (formats: " + kValidFormats + ")");
  }
  auto format = parse_format(text.substr(0, colon));
  if (!format.ok()) {
    return Status::error("input spec " + internal::quote_value(text) + ": " +
                         format.status().message());
  }
  InputSpec spec;
  spec.format = *format;
  std::string paths = text.substr(colon + 1);
  if (paths.empty()) {
    return Status::error("input spec " + internal::quote_value(text) + ": empty path list");
  }
  size_t begin = 0;
  for (;;) {
    size_t comma = paths.find(',', begin);
    std::string path = paths.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (path.empty()) {
      return Status::error("input spec " + internal::quote_value(text) + ": path " +
                           std::to_string(spec.paths.size() + 1) + " is empty");
    }
    spec.paths.push_back(std::move(path));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return spec;
}

Expected<JpegDecodeOption> parse_jpeg_decode(const std::string& text) {
  JpegDecodeOption o;
  if (text == "full") return o;
  const size_t colon = text.find(':');
  const std::string mode = text.substr(0, colon);
  if (mode == "scale") o.mode = JpegDecode::kScale;
  else if (mode == "crop") o.mode = JpegDecode::kCrop;
  else if (mode == "resized-crop") o.mode = JpegDecode::kResizedCrop;
  else
    return Status::error("jpeg decode " + internal::quote_value(text) +
                         ": expected full, scale:SIZE, crop:SIZE or resized-crop:SIZE");
  const std::string size = colon == std::string::npos ? "" : text.substr(colon + 1);
  uint64_t v = 0;
  bool ok = !size.empty() && size.size() <= 5;
  for (char c : size) {
    if (c < '0' || c > '9') ok = false;
    if (ok) v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || v == 0 || v > 65535)
    return Status::error("jpeg decode " + internal::quote_value(text) + ": SIZE must be a whole number from 1 to 65535");
  // A resized crop is S x S x 3 bytes whatever the image: bounded so that
  // a typo cannot ask for gigabytes per record.
  if (o.mode == JpegDecode::kResizedCrop && v > kMaxResizedCrop)
    return Status::error("jpeg decode " + internal::quote_value(text) + ": SIZE of resized-crop must be at most " +
                         std::to_string(kMaxResizedCrop) + " (each image is SIZE x SIZE x 3 bytes)");
  o.size = static_cast<uint32_t>(v);
  return o;
}

std::string jpeg_decode_name(const JpegDecodeOption& o) {
  switch (o.mode) {
    case JpegDecode::kFull: return "full";
    case JpegDecode::kScale: return "scale:" + std::to_string(o.size);
    case JpegDecode::kCrop: return "crop:" + std::to_string(o.size);
    case JpegDecode::kResizedCrop: return "resized-crop:" + std::to_string(o.size);
  }
  return "full";
}

// ------------------------------------------------------------------ config

std::string DatasetConfig::encode() const {
  internal::FieldWriter w;
  w.put("goldminer-dataset", uint64_t{2});
  w.put("format", std::string_view(format_name(format)));
  w.put("max_bad_records", options.max_bad_records);
  w.put("jpeg_decode", jpeg_decode_name(options.jpeg_decode));
  w.put("files", static_cast<uint64_t>(files.size()));
  for (const std::string& f : files) w.put("file", f);
  w.put("schema", schema);
  return w.text();
}

Expected<DatasetConfig> DatasetConfig::decode(const std::string& text) {
  internal::FieldReader r("dataset config", text);
  auto version = r.get_uint("goldminer-dataset");
  if (!version.ok()) return version.status();
  if (*version != 2) return r.error("unsupported version " + std::to_string(*version) + " (this worker reads 2)");
  DatasetConfig config;
  auto format_text = r.get_string("format");
  if (!format_text.ok()) return format_text.status();
  auto format = parse_format(*format_text);
  if (!format.ok()) return r.error(format.status().message());
  config.format = *format;
  auto max_bad = r.get_uint("max_bad_records");
  if (!max_bad.ok()) return max_bad.status();
  config.options.max_bad_records = *max_bad;
  auto jpeg_decode_text = r.get_string("jpeg_decode");
  if (!jpeg_decode_text.ok()) return jpeg_decode_text.status();
  auto jpeg_decode = parse_jpeg_decode(*jpeg_decode_text);
  if (!jpeg_decode.ok()) return r.error(jpeg_decode.status().message());
  config.options.jpeg_decode = *jpeg_decode;
  auto count = r.get_uint("files");
  if (!count.ok()) return count.status();
  if (*count > text.size()) return r.error("file count " + std::to_string(*count) + " is implausible");
  for (uint64_t i = 0; i < *count; ++i) {
    auto file = r.get_string("file");
    if (!file.ok()) return file.status();
    config.files.push_back(std::move(*file));
  }
  auto schema = r.get_string("schema");
  if (!schema.ok()) return schema.status();
  config.schema = std::move(*schema);
  if (!r.done()) return r.error("trailing bytes after the schema");
  return config;
}

// ------------------------------------------------------------------ plan

Expected<DatasetPlan> plan_dataset(const InputSpec& input, const ReaderOptions& options,
                                   uint64_t records_per_split) {
  const char* name = format_name(input.format);
  if (input.paths.empty()) return Status::error(std::string(name) + ": no input paths");
  if (records_per_split == 0) return Status::error(std::string(name) + ": records_per_split is 0");
  if (input.paths.size() > UINT32_MAX) return Status::error(std::string(name) + ": too many files");
  DatasetPlan plan;
  plan.config.format = input.format;
  plan.config.options = options;
  for (const std::string& p : input.paths)
    plan.config.files.push_back(input.format == Format::kIndex ? p : absolute_path(p));
  const std::vector<std::string>& files = plan.config.files;

  Expected<std::string> schema = std::string();
  switch (input.format) {
    case Format::kCsv: schema = internal::csv_plan_schema(files); break;
    case Format::kTfRecord: schema = internal::tfrecord_plan_schema(files); break;
    case Format::kJpeg: schema = internal::jpeg_plan_schema(files); break;
    case Format::kCriteoTsv:
    case Format::kText:
    case Format::kIndex: break;
  }
  if (!schema.ok()) return schema.status();
  plan.config.schema = std::move(*schema);

  for (uint32_t i = 0; i < files.size(); ++i) {
    Expected<FilePlan> file = FilePlan();
    switch (input.format) {
      case Format::kCriteoTsv:
      case Format::kText:
        file = internal::scan_lines(name, files[i], 0, false, records_per_split);
        break;
      case Format::kCsv: file = internal::csv_plan_file(files[i], records_per_split); break;
      case Format::kTfRecord: file = internal::tfrecord_plan_file(files[i], records_per_split); break;
      case Format::kJpeg:
        file = internal::jpeg_plan_file(plan.config.schema, i, records_per_split);
        break;
      case Format::kIndex: file = internal::index_plan_file(files[i]); break;
    }
    if (!file.ok()) return file.status();
    plan.records_per_file.push_back(file->records);
    plan.total_records += file->records;
    for (uint64_t k = 0; k * records_per_split < file->records; ++k) {
      SplitRange split;
      split.file_index = i;
      split.first_record = k * records_per_split;
      split.records = std::min(records_per_split, file->records - split.first_record);
      split.byte_offset = k < file->split_offsets.size() ? file->split_offsets[k] : 0;
      plan.splits.push_back(split);
    }
  }
  return plan;
}

// ------------------------------------------------------------------ streams

Status internal::RecordSource::skip(uint64_t n) {
  Sample scratch;
  std::string what;
  for (uint64_t i = 0; i < n; ++i) {
    auto outcome = next(&scratch, &what);
    if (!outcome.ok()) return outcome.status();
    if (*outcome == Outcome::kEnd) break;
  }
  return Status();
}

Expected<std::unique_ptr<SplitStream>> SplitStream::open(const DatasetConfig& config,
                                                         const SplitRange& split, uint64_t seed,
                                                         uint32_t batch_size,
                                                         uint32_t shuffle_buffer, uint64_t batches) {
  const char* name = format_name(config.format);
  if (batch_size == 0) return Status::error(std::string(name) + ": batch size is 0");
  if (split.file_index >= config.files.size()) {
    return Status::error(std::string(name) + ": split file index " +
                         std::to_string(split.file_index) + " out of range (" +
                         std::to_string(config.files.size()) + " files)");
  }
  Expected<std::unique_ptr<RecordSource>> source = Status::error("unreachable");
  switch (config.format) {
    case Format::kCriteoTsv: source = internal::open_criteo_source(config, split); break;
    case Format::kCsv: source = internal::open_csv_source(config, split); break;
    case Format::kTfRecord: source = internal::open_tfrecord_source(config, split); break;
    case Format::kJpeg: source = internal::open_jpeg_source(config, split, seed); break;
    case Format::kText: source = internal::open_text_source(config, split); break;
    case Format::kIndex: source = internal::open_index_source(config, split); break;
  }
  if (!source.ok()) return source.status();
  std::unique_ptr<SplitStream> stream = std::make_unique<BatchingStream>(
      std::move(*source), config.options.max_bad_records, seed, batch_size, shuffle_buffer, split.skip,
      split.records - std::min(split.skip, split.records), batches);
  return stream;
}

}  // namespace goldminer::readers
