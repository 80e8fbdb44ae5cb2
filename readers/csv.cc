// csv: a header line, then RFC 4180 records (quoted fields may hold commas,
// doubled quotes and newlines; CRLF or LF). Column types are inferred at
// plan time and fixed in the schema.
#include <cmath>
#include <cstring>
#include <limits>

#include "readers/line_source.h"
#include "readers/number.h"

namespace goldminer::readers::internal {
namespace {

constexpr const char* kFormat = "csv";
// Type inference reads at most this many data records (over the files in
// order); a later value that does not parse in a numeric column makes its
// record corrupt.
constexpr uint64_t kInferRecords = 100000;

struct Column {
  std::string name;
  bool numeric = true;
};

}  // namespace

bool split_csv_fields(std::string_view record, std::vector<std::string_view>* fields,
                  std::string* scratch, std::string* why) {
  fields->clear();
  scratch->clear();
  scratch->reserve(record.size());
  const size_t n = record.size();
  size_t i = 0;
  for (;;) {
    if (i < n && record[i] == '"') {
      size_t start = scratch->size();
      ++i;
      for (;;) {
        if (i >= n) {
          *why = "field " + std::to_string(fields->size() + 1) + ": unterminated quoted field";
          return false;
        }
        char c = record[i];
        if (c == '"') {
          if (i + 1 < n && record[i + 1] == '"') {
            scratch->push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        scratch->push_back(c);
        ++i;
      }
      fields->emplace_back(scratch->data() + start, scratch->size() - start);
      if (i == n) return true;
      if (record[i] != ',') {
        *why = "field " + std::to_string(fields->size()) + ": text after the closing quote";
        return false;
      }
      ++i;
    } else {
      const void* comma = std::memchr(record.data() + i, ',', n - i);
      size_t end = comma != nullptr ? static_cast<size_t>(static_cast<const char*>(comma) - record.data()) : n;
      std::string_view value = record.substr(i, end - i);
      if (value.find('"') != std::string_view::npos) {
        *why = "field " + std::to_string(fields->size() + 1) + ": quote inside an unquoted field";
        return false;
      }
      fields->push_back(value);
      if (comma == nullptr) return true;
      i = end + 1;
    }
  }
}

namespace {

std::string encode_schema(const std::vector<Column>& columns) {
  FieldWriter w;
  w.put("columns", static_cast<uint64_t>(columns.size()));
  for (const Column& c : columns) {
    w.put("name", c.name);
    w.put("type", std::string_view(c.numeric ? "numeric" : "categorical"));
  }
  return w.text();
}

Expected<std::vector<Column>> decode_schema(const std::string& schema) {
  FieldReader r("csv schema", schema);
  auto count = r.get_uint("columns");
  if (!count.ok()) return count.status();
  if (*count > schema.size()) return r.error("implausible column count");
  std::vector<Column> columns(*count);
  for (Column& c : columns) {
    auto name = r.get_string("name");
    if (!name.ok()) return name.status();
    auto type = r.get_string("type");
    if (!type.ok()) return type.status();
    if (*type != "numeric" && *type != "categorical") return r.error("bad column type " + quote_value(*type));
    c.name = std::move(*name);
    c.numeric = *type == "numeric";
  }
  if (!r.done()) return r.error("trailing bytes");
  return columns;
}

class CsvSource : public LineSource {
 public:
  explicit CsvSource(std::vector<Column> columns) : columns_(std::move(columns)) {
    for (const Column& c : columns_) (c.numeric ? numeric_ : categorical_)++;
  }

  std::vector<HostTensor> assemble(const std::vector<const Sample*>& samples) override {
    const int64_t b = static_cast<int64_t>(samples.size());
    std::vector<HostTensor> t;
    t.push_back(make_tensor(wire::DType::kFloat32, {b, static_cast<int64_t>(numeric_)}));
    t.push_back(make_tensor(wire::DType::kInt64, {b, static_cast<int64_t>(categorical_)}));
    const size_t cat_bytes = categorical_ * sizeof(int64_t);
    const size_t num_bytes = numeric_ * sizeof(float);
    for (size_t i = 0; i < samples.size(); ++i) {
      const uint8_t* s = samples[i]->bytes.data();
      if (num_bytes > 0) std::memcpy(t[0].data.data() + i * num_bytes, s + cat_bytes, num_bytes);
      if (cat_bytes > 0) std::memcpy(t[1].data.data() + i * cat_bytes, s, cat_bytes);
    }
    return t;
  }

 protected:
  // Sample layout: int64 categorical[n_cat], float numeric[n_num].
  bool decode(std::string_view line, Sample* sample, std::string* why) override {
    if (!split_csv_fields(line, &fields_, &scratch_, why)) return false;
    if (fields_.size() != columns_.size()) {
      *why = std::to_string(fields_.size()) + " fields, the header has " + std::to_string(columns_.size());
      return false;
    }
    sample->bytes.resize(categorical_ * sizeof(int64_t) + numeric_ * sizeof(float));
    uint8_t* cat = sample->bytes.data();
    uint8_t* num = cat + categorical_ * sizeof(int64_t);
    for (size_t i = 0; i < columns_.size(); ++i) {
      std::string_view v = fields_[i];
      if (columns_[i].numeric) {
        float f = std::numeric_limits<float>::quiet_NaN();
        if (!v.empty() && !parse_float(v, &f)) {
          *why = "field " + std::to_string(i + 1) + " (" + columns_[i].name + "): " + quote_value(v) +
                 " is not a number (the column was inferred numeric)";
          return false;
        }
        std::memcpy(num, &f, sizeof f);
        num += sizeof f;
      } else {
        int64_t h = v.empty() ? -1 : category_hash(v);
        std::memcpy(cat, &h, sizeof h);
        cat += sizeof h;
      }
    }
    return true;
  }

 private:
  std::vector<Column> columns_;
  size_t numeric_ = 0, categorical_ = 0;
  std::vector<std::string_view> fields_;
  std::string scratch_;
};

}  // namespace

// Opens `path` and reads its header line; an empty file is an error.
static Status open_at_header(const std::string& path, FileWindow* window, std::string_view* header) {
  Status s = window->open(kFormat, path, 0);
  if (!s.ok()) return s;
  uint64_t offset = 0;
  auto got = window->next_line(true, header, &offset);
  if (!got.ok()) return got.status();
  if (!*got) return Status::error(std::string(kFormat) + ": " + path + ": empty file (no header)");
  return Status();
}

Expected<std::string> csv_plan_schema(const std::vector<std::string>& files) {
  std::vector<Column> columns;
  std::vector<std::string_view> fields;
  std::string scratch, why, first_header;
  uint64_t inferred = 0;
  for (const std::string& path : files) {
    FileWindow window;
    std::string_view line;
    uint64_t offset = 0;
    Status s = open_at_header(path, &window, &line);
    if (!s.ok()) return s;
    if (columns.empty()) {
      if (!split_csv_fields(line, &fields, &scratch, &why)) {
        return Status::error(std::string(kFormat) + ": " + path + ": header: " + why);
      }
      for (std::string_view f : fields) columns.push_back(Column{std::string(f), true});
      first_header = std::string(line);
    } else if (line != first_header) {
      return Status::error(std::string(kFormat) + ": " + path + ": header differs from " + files[0] +
                           "'s");
    }
    // Infer: numeric while every non-empty value parses. Malformed records
    // are left for the reader to report.
    while (inferred < kInferRecords) {
      auto got = window.next_line(true, &line, &offset);
      if (!got.ok()) return got.status();
      if (!*got) break;
      ++inferred;
      if (!split_csv_fields(line, &fields, &scratch, &why) || fields.size() != columns.size()) continue;
      for (size_t i = 0; i < fields.size(); ++i) {
        float f;
        if (columns[i].numeric && !fields[i].empty() && !parse_float(fields[i], &f)) {
          columns[i].numeric = false;
        }
      }
    }
  }
  return encode_schema(columns);
}

Expected<FilePlan> csv_plan_file(const std::string& path, uint64_t step) {
  FileWindow window;
  std::string_view header;
  Status s = open_at_header(path, &window, &header);
  if (!s.ok()) return s;
  return scan_lines(kFormat, path, window.offset(), true, step);
}

Expected<std::unique_ptr<RecordSource>> open_csv_source(const DatasetConfig& config,
                                                        const SplitRange& split) {
  auto columns = decode_schema(config.schema);
  if (!columns.ok()) return columns.status();
  auto source = std::make_unique<CsvSource>(std::move(*columns));
  Status s = source->open(kFormat, config.files[split.file_index], split, true);
  if (!s.ok()) return s;
  return std::unique_ptr<RecordSource>(std::move(source));
}

}  // namespace goldminer::readers::internal
