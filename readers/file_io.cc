#include "readers/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace goldminer::readers::internal {
namespace {

constexpr size_t kChunk = 1 << 20;       // FileWindow refill
constexpr size_t kScanChunk = 4 << 20;   // plan-time scans

}  // namespace

Status errno_status(const char* format, const std::string& path, const char* what) {
  std::string message = std::string(format) + ": " + path + ": ";
  if (what != nullptr) message += std::string(what) + ": ";
  // The OS's error, not the file's content: another worker may read it.
  return Status::environment_error(message + std::strerror(errno));
}

std::string quote_value(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 40));
  if (s.size() > 40) out += "...";
  return out + "'";
}

std::string record_error(const char* format, const std::string& path, uint64_t offset,
                         uint64_t record, const std::string& what) {
  return std::string(format) + ": " + path + ": byte " + std::to_string(offset) + " (record " +
         std::to_string(record) + "): " + what;
}

// ------------------------------------------------------------------ FileWindow

FileWindow::~FileWindow() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileWindow::open(const char* format, const std::string& path, uint64_t offset) {
  format_ = format;
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return errno_status(format, path);
  if (offset > 0 && ::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
    return errno_status(format, path, "seek");
  }
  file_offset_ = offset;
  begin_ = end_ = 0;
  eof_ = false;
  return Status();
}

Expected<size_t> FileWindow::ensure(size_t n) {
  if (available() >= n || eof_) return available();
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() < std::max(n, kChunk)) buffer_.resize(std::max(n + kChunk / 2, kChunk));
  while (end_ < n) {
    ssize_t got = ::read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno_status(format_, path_, "read");
    }
    if (got == 0) {
      eof_ = true;
      break;
    }
    end_ += static_cast<size_t>(got);
    file_offset_ += static_cast<uint64_t>(got);
  }
  return available();
}

Expected<uint64_t> FileWindow::file_size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return errno_status(format_, path_, "stat");
  return static_cast<uint64_t>(st.st_size);
}

Status FileWindow::skip(uint64_t n) {
  if (n <= available()) {
    consume(static_cast<size_t>(n));
    return Status();
  }
  uint64_t target = offset() + n;
  begin_ = end_ = 0;
  if (::lseek(fd_, static_cast<off_t>(target), SEEK_SET) < 0) return errno_status(format_, path_, "seek");
  file_offset_ = target;
  eof_ = false;
  return Status();
}

Expected<bool> FileWindow::next_line(bool quotes, std::string_view* line, uint64_t* line_offset) {
  size_t scanned = 0;
  bool in_quote = false;
  for (;;) {
    const char* p = data();
    size_t n = available();
    size_t found = std::string_view::npos;
    if (!quotes) {
      const void* q = n > scanned ? std::memchr(p + scanned, '\n', n - scanned) : nullptr;
      if (q != nullptr) found = static_cast<size_t>(static_cast<const char*>(q) - p);
      scanned = n;
    } else {
      size_t i = scanned;
      for (; i < n; ++i) {
        char c = p[i];
        if (c == '"') {
          in_quote = !in_quote;
        } else if (c == '\n' && !in_quote) {
          found = i;
          break;
        }
      }
      scanned = i;
    }
    if (found != std::string_view::npos || (eof_ && n > 0)) {
      size_t len = found != std::string_view::npos ? found : n;
      size_t take = found != std::string_view::npos ? found + 1 : n;
      if (len > 0 && p[len - 1] == '\r') --len;
      *line = std::string_view(p, len);
      *line_offset = offset();
      consume(take);
      return true;
    }
    if (eof_) return false;
    auto got = ensure(n + 1);
    if (!got.ok()) return got.status();
  }
}

// ------------------------------------------------------------------ scans

namespace {

// Opens `path` to read it and learns its size: `*fd` (the caller's to
// close) and `*size` set only on success.
Status open_with_size(const char* format, const std::string& path, int* fd, uint64_t* size) {
  const int opened = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (opened < 0) return errno_status(format, path);
  struct stat st;
  if (::fstat(opened, &st) != 0) {
    Status s = errno_status(format, path, "stat");
    ::close(opened);
    return s;
  }
  *fd = opened;
  *size = static_cast<uint64_t>(st.st_size);
  return Status();
}

}  // namespace

Expected<FilePlan> scan_lines(const char* format, const std::string& path, uint64_t start,
                              bool quotes, uint64_t step) {
  int fd = -1;
  uint64_t size = 0;
  if (Status s = open_with_size(format, path, &fd, &size); !s.ok()) return s;
  FilePlan plan;
  if (start >= size) {
    ::close(fd);
    return plan;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  plan.split_offsets.push_back(start);
  std::vector<char> buffer(kScanChunk);
  uint64_t pos = start;  // file offset of buffer[0]
  uint64_t next_start = start;
  uint64_t records = 0;
  bool in_quote = false;
  auto on_newline = [&](const char* at) {
    ++records;
    next_start = pos + static_cast<uint64_t>(at - buffer.data()) + 1;
    if (records % step == 0 && next_start < size) plan.split_offsets.push_back(next_start);
  };
  for (;;) {
    ssize_t got = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(pos));
    if (got < 0) {
      if (errno == EINTR) continue;
      Status s = errno_status(format, path, "read");
      ::close(fd);
      return s;
    }
    if (got == 0) break;
    const char* p = buffer.data();
    const char* end = p + got;
    while (p < end) {
      if (in_quote) {
        const void* q = std::memchr(p, '"', static_cast<size_t>(end - p));
        if (q == nullptr) break;
        in_quote = false;
        p = static_cast<const char*>(q) + 1;
        continue;
      }
      const char* limit = end;
      const char* quote = nullptr;
      if (quotes) {
        quote = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(end - p)));
        if (quote != nullptr) limit = quote;
      }
      while (p < limit) {
        const void* nl = std::memchr(p, '\n', static_cast<size_t>(limit - p));
        if (nl == nullptr) break;
        on_newline(static_cast<const char*>(nl));
        p = static_cast<const char*>(nl) + 1;
      }
      if (quote == nullptr) break;
      in_quote = true;
      p = quote + 1;
    }
    pos += static_cast<uint64_t>(got);
  }
  ::close(fd);
  if (next_start < pos) ++records;  // a last record without '\n'
  plan.records = records;
  return plan;
}

Status read_file(const char* format, const std::string& path, std::vector<uint8_t>* out) {
  int fd = -1;
  uint64_t size = 0;
  if (Status s = open_with_size(format, path, &fd, &size); !s.ok()) return s;
  out->resize(static_cast<size_t>(size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t got = ::read(fd, out->data() + done, out->size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      Status s = errno_status(format, path, "read");
      ::close(fd);
      return s;
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  out->resize(done);
  ::close(fd);
  return Status();
}

// ------------------------------------------------------------------ fields

void FieldWriter::put(const char* key, uint64_t value) {
  text_ += key;
  text_ += ' ';
  text_ += std::to_string(value);
  text_ += '\n';
}

void FieldWriter::put(const char* key, int64_t value) {
  text_ += key;
  text_ += ' ';
  text_ += std::to_string(value);
  text_ += '\n';
}

void FieldWriter::put(const char* key, std::string_view value) {
  text_ += key;
  text_ += ' ';
  text_ += std::to_string(value.size());
  text_ += ':';
  text_.append(value);
  text_ += '\n';
}

Status FieldReader::error(const std::string& message) const {
  return Status::error(std::string(what_) + ": byte " + std::to_string(pos_) + ": " + message);
}

Expected<std::string_view> FieldReader::value_of(const char* key) {
  std::string_view rest = text_.substr(pos_);
  size_t klen = std::strlen(key);
  if (rest.size() <= klen || rest.compare(0, klen, key) != 0 || rest[klen] != ' ') {
    size_t eol = rest.find('\n');
    return error(std::string("expected '") + key + "', found " + quote_value(rest.substr(0, eol)));
  }
  pos_ += klen + 1;
  return text_.substr(pos_);
}

template <typename T>
Expected<T> FieldReader::get_number(const char* key, const char* what) {
  auto rest = value_of(key);
  if (!rest.ok()) return rest.status();
  size_t eol = rest->find('\n');
  if (eol == std::string_view::npos) return error(std::string(key) + ": missing end of line");
  T value = 0;
  auto r = std::from_chars(rest->data(), rest->data() + eol, value);
  if (r.ec != std::errc() || r.ptr != rest->data() + eol || eol == 0) {
    return error(std::string(key) + ": invalid value " + quote_value(rest->substr(0, eol)) + ": not " + what);
  }
  pos_ += eol + 1;
  return value;
}

Expected<uint64_t> FieldReader::get_uint(const char* key) { return get_number<uint64_t>(key, "an unsigned integer"); }

Expected<int64_t> FieldReader::get_int(const char* key) { return get_number<int64_t>(key, "an integer"); }

Expected<std::string> FieldReader::get_string(const char* key) {
  auto rest = value_of(key);
  if (!rest.ok()) return rest.status();
  size_t colon = rest->find(':');
  uint64_t len = 0;
  if (colon == std::string_view::npos || colon == 0 ||
      std::from_chars(rest->data(), rest->data() + colon, len).ptr != rest->data() + colon) {
    return error(std::string(key) + ": expected <length>:<bytes>");
  }
  if (len > rest->size() - colon - 1 || rest->size() - colon - 1 - len < 1 ||
      (*rest)[colon + 1 + len] != '\n') {
    return error(std::string(key) + ": string of length " + std::to_string(len) +
                 " runs past the end or lacks its end of line");
  }
  std::string value(rest->substr(colon + 1, len));
  pos_ += colon + 1 + len + 1;
  return value;
}

HostTensor make_tensor(wire::DType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  size_t n = wire::dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  t.shape = std::move(shape);
  t.data.resize(n);
  return t;
}

}  // namespace goldminer::readers::internal
