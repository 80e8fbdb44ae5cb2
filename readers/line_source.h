// The record source of the line formats (criteo-tsv, csv, text): reads a
// split's lines from its byte offset and hands each to decode(). Internal.
#ifndef GOLDMINER_READERS_LINE_SOURCE_H_
#define GOLDMINER_READERS_LINE_SOURCE_H_

#include <string>
#include <string_view>

#include "readers/file_io.h"
#include "readers/format.h"

namespace goldminer::readers::internal {

class LineSource : public RecordSource {
 public:
  // `quotes`: a '\n' inside double quotes does not end a record (csv).
  Status open(const char* format, const std::string& path, const SplitRange& split, bool quotes) {
    format_ = format;
    split_ = split;
    quotes_ = quotes;
    return window_.open(format, path, split.byte_offset);
  }

  Expected<Outcome> next(Sample* sample, std::string* what) override {
    if (read_ == split_.records) return Outcome::kEnd;
    std::string_view line;
    uint64_t offset = 0;
    auto got = window_.next_line(quotes_, &line, &offset);
    if (!got.ok()) return got.status();
    uint64_t record = split_.first_record + read_;
    if (!*got) {
      return Status::error(std::string(format_) + ": " + window_.path() + ": file ends at record " +
                           std::to_string(record) + ", before the end of its split (records " +
                           std::to_string(split_.first_record) + " to " +
                           std::to_string(split_.first_record + split_.records - 1) +
                           "): file changed since the plan?");
    }
    ++read_;
    sample->record = record;
    why_.clear();
    if (!decode(line, sample, &why_)) {
      *what = record_error(format_, window_.path(), offset, record, why_);
      return Outcome::kCorrupt;
    }
    return Outcome::kRecord;
  }

 protected:
  // Decodes one line into *sample, or says why it is corrupt.
  virtual bool decode(std::string_view line, Sample* sample, std::string* why) = 0;

 private:
  const char* format_ = "";
  SplitRange split_;
  bool quotes_ = false;
  FileWindow window_;
  uint64_t read_ = 0;
  std::string why_;
};

}  // namespace goldminer::readers::internal

#endif  // GOLDMINER_READERS_LINE_SOURCE_H_
