#include "gmcore/port_registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace goldminer {
namespace {

struct Entry {
  int port = 0;
  uint32_t job = 0;
  pid_t pid = 0;
  std::string tag;  // "": the job's trainer; "rank:R": rank R of a step
};

bool valid_tag(const std::string& tag) {
  if (tag.size() > 32) return false;
  for (char c : tag)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' || c == '-')) return false;
  return true;
}

Expected<std::vector<Entry>> parse(const std::string& path, const std::string& text) {
  std::vector<Entry> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    Entry e;
    long long port = 0, job = 0, pid = 0;
    char tag[40] = {}, tail = 0;
    const int fields = std::sscanf(line.c_str(), "%lld %lld %lld %39s %c", &port, &job, &pid, tag, &tail);
    if ((fields != 3 && fields != 4) || port < 1 || port > 65535 || job < 1 || job > 0xffffffffLL || pid < 1 ||
        pid > 0x7fffffffLL || !valid_tag(tag))
      return Status::error("port registry: " + path + ":" + std::to_string(n) + ": expected 'PORT JOB PID [TAG]', got '" +
                           line.substr(0, 80) + "' (remove the line, or the file when no job runs on the node)");
    e.port = static_cast<int>(port);
    e.job = static_cast<uint32_t>(job);
    e.pid = static_cast<pid_t>(pid);
    e.tag = tag;
    out.push_back(e);
  }
  return out;
}

std::string render(const std::vector<Entry>& entries) {
  std::string out;
  for (const Entry& e : entries)
    out += std::to_string(e.port) + " " + std::to_string(e.job) + " " + std::to_string(e.pid) +
           (e.tag.empty() ? "" : " " + e.tag) + "\n";
  return out;
}

// The registry file, opened and locked, with its entries; closing it
// unlocks.
class Locked {
 public:
  ~Locked() {
    if (fd_ >= 0) ::close(fd_);
  }
  Locked(Locked&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), entries_(std::move(o.entries_)) { o.fd_ = -1; }
  Locked& operator=(Locked&&) = delete;

  static Expected<Locked> open(const std::string& path) {
    Locked l(path);
    // Its directory (one level, as /run/goldminer), root's and readable.
    const std::string dir = path.substr(0, path.rfind('/'));
    if (!dir.empty() && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::error("port registry: cannot create " + dir + ": " + std::strerror(errno));
    l.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (l.fd_ < 0) return l.failed();
    while (::flock(l.fd_, LOCK_EX) != 0)
      if (errno != EINTR) return l.failed("flock: ");
    std::string text;
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(l.fd_, buf, sizeof buf, at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return l.failed();
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      at += n;
    }
    auto entries = parse(path, text);
    if (!entries.ok()) return entries.status();
    l.entries_ = std::move(entries).value();
    return l;
  }

  // What the file held when it was opened.
  const std::vector<Entry>& entries() const { return entries_; }

  Status write(const std::vector<Entry>& entries) const {
    const std::string text = render(entries);
    if (::ftruncate(fd_, 0) != 0) return failed();
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::pwrite(fd_, text.data() + at, text.size() - at, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return failed();
      at += static_cast<size_t>(n);
    }
    return Status();
  }

 private:
  explicit Locked(std::string path) : path_(std::move(path)) {}
  Status failed(const char* what = "") const {
    return Status::error("port registry: " + path_ + ": " + what + std::strerror(errno));
  }

  std::string path_;
  int fd_ = -1;
  std::vector<Entry> entries_;
};

}  // namespace

Expected<PortRange> parse_port_range(const std::string& text) {
  int low = 0, high = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d-%d%c", &low, &high, &tail) != 2)
    return Status::error("expected LOW-HIGH, for example 20000-39999");
  if (low < 1024 || high > 65535 || low > high)
    return Status::error("expected 1024 <= LOW <= HIGH <= 65535");
  return PortRange{low, high};
}

bool bind_probe(const std::string& address, int port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, address.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *in;
  } else if (::inet_pton(AF_INET6, address.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *in6;
  } else {
    return false;
  }
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) == 0;
  ::close(fd);
  return ok;
}

bool live_slurmstepd(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return std::getline(comm, name) && name == "slurmstepd";
}

Expected<int> reserve_port(const PortRegistry& r, uint32_t job, pid_t owner, const std::string& tag) {
  if (!valid_tag(tag)) return Status::error("port registry: invalid tag '" + tag + "'");
  auto locked = Locked::open(r.path);
  if (!locked.ok()) return locked.status();
  const auto& alive = r.alive ? r.alive : live_slurmstepd;
  std::vector<Entry> kept;
  std::set<int> taken;
  int port = 0;
  for (const Entry& e : locked->entries()) {
    if (!alive(e.pid)) continue;  // its step is gone: the port is free again
    kept.push_back(e);
    taken.insert(e.port);
    if (e.job == job && e.tag == tag) port = e.port;
  }
  for (int i = 0; port == 0 && i < r.range.size(); ++i) {
    const int p = r.range.low + static_cast<int>((job + static_cast<uint32_t>(i)) % static_cast<uint32_t>(r.range.size()));
    if (taken.count(p) == 0 && (!r.bindable || r.bindable(p))) port = p;
  }
  if (port == 0)
    return Status::error("port registry: " + r.path + ": every port of " + std::to_string(r.range.low) + "-" +
                         std::to_string(r.range.high) + " is reserved or in use on this node");
  if (!taken.count(port)) kept.push_back(Entry{port, job, owner, tag});
  Status s = locked->write(kept);
  if (!s.ok()) return s;
  return port;
}

Status release_port(const PortRegistry& r, uint32_t job, pid_t owner) {
  auto locked = Locked::open(r.path);
  if (!locked.ok()) return locked.status();
  std::vector<Entry> kept;
  for (const Entry& e : locked->entries())
    if (!(e.job == job && e.pid == owner)) kept.push_back(e);
  if (kept.size() == locked->entries().size()) return Status();
  return locked->write(kept);
}

}  // namespace goldminer
