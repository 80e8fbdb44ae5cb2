// Buffered sequential file access and the plan-time record scanners shared
// by the readers. Internal to readers/.
#ifndef GOLDMINER_READERS_FILE_IO_H_
#define GOLDMINER_READERS_FILE_IO_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gmcore/status.h"
#include "readers/format.h"

namespace goldminer::readers::internal {

// "<format>: <path>: <strerror(errno)>" for a failed system call: an
// environment error (Status::environment_error), which a data worker
// gives back for another to re-run, unlike a corrupt record.
Status errno_status(const char* format, const std::string& path, const char* what = nullptr);

// A read-only file read forward through one reusable buffer. Owns the file
// descriptor. Thread-compatible.
class FileWindow {
 public:
  FileWindow() = default;
  ~FileWindow();
  FileWindow(const FileWindow&) = delete;
  FileWindow& operator=(const FileWindow&) = delete;

  // Opens `path` positioned at `offset`; errors name `format` and the file.
  Status open(const char* format, const std::string& path, uint64_t offset);
  // Buffers at least `n` bytes from the cursor unless the file ends first;
  // returns how many are buffered (may move data()).
  Expected<size_t> ensure(size_t n);
  const char* data() const { return buffer_.data() + begin_; }
  size_t available() const { return end_ - begin_; }
  void consume(size_t n) { begin_ += n; }
  // Skips `n` bytes, seeking past what is not buffered.
  Status skip(uint64_t n);
  // File offset of data().
  uint64_t offset() const { return file_offset_ - (end_ - begin_); }
  bool at_eof() const { return eof_ && begin_ == end_; }
  // The file's current size (fstat).
  Expected<uint64_t> file_size() const;
  const std::string& path() const { return path_; }

  // The next record of a line format: up to '\n' (not included; a "\r"
  // before it is dropped too), or the rest of the file. With `quotes`, a
  // '\n' between double quotes does not end the record (CSV). Returns false
  // at the end of the file. `line` is valid until the next call.
  Expected<bool> next_line(bool quotes, std::string_view* line, uint64_t* line_offset);

 private:
  int fd_ = -1;
  std::string path_;
  const char* format_ = "";
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  uint64_t file_offset_ = 0;  // of buffer_[end_]
  bool eof_ = false;
};

// Counts the line records of `path` from byte `start` (the rules of
// FileWindow::next_line) and notes where records 0, step, 2*step, ...
// begin. memchr over 4 MiB reads.
Expected<FilePlan> scan_lines(const char* format, const std::string& path, uint64_t start,
                              bool quotes, uint64_t step);

// Reads a whole (small) file into *out.
Status read_file(const char* format, const std::string& path, std::vector<uint8_t>* out);

// Schema and config text: a sequence of "key value" lines where strings
// are written as "<length>:<bytes>" so that any byte round-trips.
class FieldWriter {
 public:
  void put(const char* key, uint64_t value);
  void put(const char* key, int64_t value);
  void put(const char* key, std::string_view value);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

class FieldReader {
 public:
  FieldReader(const char* what, std::string_view text) : what_(what), text_(text) {}
  Expected<uint64_t> get_uint(const char* key);
  Expected<int64_t> get_int(const char* key);
  Expected<std::string> get_string(const char* key);
  bool done() const { return pos_ == text_.size(); }
  Status error(const std::string& message) const;

 private:
  Expected<std::string_view> value_of(const char* key);
  template <typename T>
  Expected<T> get_number(const char* key, const char* what);
  const char* what_;
  std::string_view text_;
  size_t pos_ = 0;
};

// 63-bit FNV-1a hash of a categorical value (never negative: -1 is missing).
inline int64_t category_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

// Quotes a value for an error message (at most 40 bytes shown).
std::string quote_value(std::string_view s);

// "<format>: <path>: byte <offset> (record <index>): <what>"
std::string record_error(const char* format, const std::string& path, uint64_t offset,
                         uint64_t record, const std::string& what);

}  // namespace goldminer::readers::internal

#endif  // GOLDMINER_READERS_FILE_IO_H_
