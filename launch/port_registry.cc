#include "launch/port_registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "gmcore/log.h"

namespace goldminer {
namespace {

constexpr size_t kMaxRegistryBytes = 16 << 20;  // 65,536 ports of ~40 bytes fit many times
constexpr auto kLockRetry = std::chrono::milliseconds(20);

struct Entry {
  int port = 0;
  uint32_t job = 0;
  pid_t pid = 0;
  uint64_t start = 0;  // 0: a line without START (lives while its PID does)
  std::string tag;     // "": the job's trainer; "rank:R": rank R of a step
};

bool valid_tag(const std::string& tag) {
  if (tag.empty()) return true;
  if (tag.size() > 32 || tag[0] < 'a' || tag[0] > 'z') return false;
  for (char c : tag)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' || c == '-')) return false;
  return true;
}

// A decimal number of at most `max`, digits only.
bool parse_number(const std::string& text, uint64_t max, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v > max) return false;
  *out = v;
  return true;
}

Expected<std::vector<Entry>> parse(const std::string& path, const std::string& text) {
  std::vector<Entry> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w && f.size() < 6;) f.push_back(w);
    uint64_t port = 0, job = 0, pid = 0, start = 0;
    bool ok = f.size() >= 3 && f.size() <= 5 && parse_number(f[0], 65535, &port) && port >= 1 &&
              parse_number(f[1], 0xffffffffULL, &job) && job >= 1 && parse_number(f[2], 0x7fffffffULL, &pid) &&
              pid >= 1;
    size_t next = 3;
    if (ok && f.size() > 3 && parse_number(f[3], UINT64_MAX, &start)) next = 4;  // START (tags start with a letter)
    std::string tag = next < f.size() ? f[next] : "";
    ok = ok && next + (tag.empty() ? 0 : 1) == f.size() && !(start == 0 && next == 4) && (tag.empty() || valid_tag(tag));
    if (!ok)
      return Status::error("port registry: " + path + ":" + std::to_string(n) +
                           ": expected 'PORT JOB PID START [TAG]', got '" + line.substr(0, 80) +
                           "' (remove the line, or the file when no job runs on the node)");
    out.push_back(Entry{static_cast<int>(port), static_cast<uint32_t>(job), static_cast<pid_t>(pid), start, tag});
  }
  return out;
}

std::string render(const std::vector<Entry>& entries) {
  std::string out;
  for (const Entry& e : entries)
    out += std::to_string(e.port) + " " + std::to_string(e.job) + " " + std::to_string(e.pid) +
           (e.start == 0 ? "" : " " + std::to_string(e.start)) + (e.tag.empty() ? "" : " " + e.tag) + "\n";
  return out;
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// A descriptor, closed when it goes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Why `path`, which open refused with `err` (O_NOFOLLOW), is not usable.
Status open_failed(const std::string& path, int err, int dirfd = AT_FDCWD, const char* name = nullptr) {
  struct stat st {};
  if ((err == ELOOP || err == ENOTDIR || err == EISDIR || err == ENXIO) &&
      ::fstatat(dirfd, name ? name : path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return Status::error("port registry: " + path + ": a symbolic link: refused (remove it)");
    return Status::error("port registry: " + path + ": not a " +
                         (err == ENOTDIR ? "directory" : "regular file") + ": refused (remove it)");
  }
  return Status::error("port registry: " + path + ": " + std::strerror(err));
}

// Checks what `fd` (opened from `path`) is against the policy in the
// header; tightens a mode that only lets group or others read.
Status check_owned(int fd, const std::string& path, bool directory, uid_t owner) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::error("port registry: " + path + ": fstat: " + std::strerror(errno));
  const std::string where = "port registry: " + path + ": ";
  const std::string fix = " (remove it when no job runs on the node)";
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return Status::error(where + (directory ? "not a directory" : "not a regular file") + ": refused" + fix);
  if (st.st_uid != owner)
    return Status::error(where + "owned by uid " + std::to_string(st.st_uid) + ", expected uid " +
                         std::to_string(owner) + ": refused" + fix);
  if ((st.st_mode & 022) != 0)
    return Status::error(where + "mode " + octal_mode(st.st_mode) + ": group or others may write it: refused" + fix);
  if (!directory && st.st_nlink != 1)
    return Status::error(where + std::to_string(st.st_nlink) + " links to it: refused" + fix);
  if ((st.st_mode & 07077) != 0) {
    const mode_t want = directory ? 0700 : 0600;
    if (::fchmod(fd, want) != 0)
      return Status::error(where + "mode " + octal_mode(st.st_mode) + ", cannot make it " + octal_mode(want) + ": " +
                           std::strerror(errno));
    log::info(where + "mode " + octal_mode(st.st_mode) + " tightened to " + octal_mode(want));
  }
  return Status();
}

// The registry's directory, file and lock, opened, checked and locked; its
// entries. Destroying it unlocks.
class Locked {
 public:
  static Expected<Locked> open(const PortRegistry& r) {
    Locked l;
    const size_t slash = r.path.rfind('/');
    if (r.path.empty() || r.path[0] != '/' || slash == 0 || slash + 1 == r.path.size())
      return Status::error("port registry: " + r.path + ": expected an absolute path of a file in a directory of its own");
    l.dir_path_ = r.path.substr(0, slash);
    l.name_ = r.path.substr(slash + 1);
    if (l.name_ == "." || l.name_ == "..") return Status::error("port registry: " + r.path + ": not a file name");
    l.path_ = r.path;
    const uid_t owner = r.owner_uid >= 0 ? static_cast<uid_t>(r.owner_uid) : ::geteuid();

    const int dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    l.dir_ = Fd(::open(l.dir_path_.c_str(), dir_flags));
    if (l.dir_.get() < 0 && errno == ENOENT) {
      if (::mkdir(l.dir_path_.c_str(), 0700) != 0 && errno != EEXIST)
        return Status::error("port registry: cannot create " + l.dir_path_ + ": " + std::strerror(errno));
      l.dir_ = Fd(::open(l.dir_path_.c_str(), dir_flags));
    }
    if (l.dir_.get() < 0) return open_failed(l.dir_path_, errno);
    Status s = check_owned(l.dir_.get(), l.dir_path_, true, owner);
    if (!s.ok()) return s;

    // O_NONBLOCK: a FIFO planted under the name cannot block the open.
    const std::string lock_name = l.name_ + ".lock", lock_path = r.path + ".lock";
    l.lock_ = Fd(::openat(l.dir_.get(), lock_name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
    if (l.lock_.get() < 0) return open_failed(lock_path, errno, l.dir_.get(), lock_name.c_str());
    s = check_owned(l.lock_.get(), lock_path, false, owner);
    if (!s.ok()) return s;
    s = lock(l.lock_.get(), lock_path, r.lock_wait_s);
    if (!s.ok()) return s;
    auto salt = read_salt(l.lock_.get(), lock_path);
    if (!salt.ok()) return salt.status();
    l.salt_ = *salt;

    std::string text;
    Fd file(::openat(l.dir_.get(), l.name_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (file.get() < 0 && errno != ENOENT) return open_failed(r.path, errno, l.dir_.get(), l.name_.c_str());
    if (file.get() >= 0) {
      s = check_owned(file.get(), r.path, false, owner);
      if (!s.ok()) return s;
      char buf[4096];
      for (;;) {
        const ssize_t n = ::read(file.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Status::error("port registry: " + r.path + ": " + std::strerror(errno));
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > kMaxRegistryBytes)
          return Status::error("port registry: " + r.path + ": larger than 16 MiB: refused (remove it when no job runs on the node)");
      }
    }
    auto entries = parse(r.path, text);
    if (!entries.ok()) return entries.status();
    l.entries_ = std::move(entries).value();
    return l;
  }

  // What the registry held when it was opened.
  const std::vector<Entry>& entries() const { return entries_; }
  // This boot's random offset of every job's first port (the lock file's
  // text, written by the first reservation after boot: /run is a tmpfs).
  uint32_t salt() const { return salt_; }

  // Replaces the registry with `entries`: .NAME.new, fsync, rename, fsync
  // of the directory.
  Status write(const std::vector<Entry>& entries, const std::function<void()>& before_rename) const {
    const std::string tmp = "." + name_ + ".new", tmp_path = dir_path_ + "/" + tmp;
    auto failed = [&](const std::string& what, int err) {
      ::unlinkat(dir_.get(), tmp.c_str(), 0);
      return Status::error("port registry: " + what + ": " + std::strerror(err));
    };
    if (::unlinkat(dir_.get(), tmp.c_str(), 0) != 0 && errno != ENOENT) return failed(tmp_path, errno);
    Fd out(::openat(dir_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (out.get() < 0) return failed(tmp_path, errno);
    const std::string text = render(entries);
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::write(out.get(), text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return failed(tmp_path, errno);
      at += static_cast<size_t>(n);
    }
    if (::fsync(out.get()) != 0) return failed(tmp_path + ": fsync", errno);
    if (before_rename) before_rename();
    if (::renameat(dir_.get(), tmp.c_str(), dir_.get(), name_.c_str()) != 0)
      return failed("rename " + tmp_path + " to " + path_, errno);
    if (::fsync(dir_.get()) != 0) return Status::error("port registry: " + dir_path_ + ": fsync: " + std::strerror(errno));
    return Status();
  }

 private:
  Locked() = default;

  // flock(LOCK_EX | LOCK_NB) every kLockRetry until `wait_s` has passed.
  static Status lock(int fd, const std::string& path, double wait_s) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(wait_s > 0 ? wait_s : 0));
    for (;;) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Status();
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK)
        return Status::error("port registry: " + path + ": flock: " + std::strerror(errno));
      const auto now = Clock::now();
      if (now >= deadline) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", wait_s);
        return Status::error("port registry: " + path + ": locked by another process for more than " + secs +
                             " s: no port reserved (a stuck step or a root process holds it: fuser -v " + path + ")");
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(kLockRetry, deadline - now));
    }
  }

  std::string dir_path_, name_, path_;
  // The lock file holds the salt: 8 hex digits, written under the lock
  // when it is empty (getrandom), read back otherwise.
  static Expected<uint32_t> read_salt(int fd, const std::string& path) {
    char text[16] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    if (n < 0) return Status::error("port registry: " + path + ": " + std::strerror(errno));
    if (n == 0) {
      uint32_t salt = 0;
      if (::getrandom(&salt, sizeof salt, 0) != static_cast<ssize_t>(sizeof salt))
        return Status::error(std::string("port registry: getrandom: ") + std::strerror(errno));
      char hex[16];
      std::snprintf(hex, sizeof hex, "%08x\n", salt);
      if (::pwrite(fd, hex, 9, 0) != 9 || ::fsync(fd) != 0)
        return Status::error("port registry: " + path + ": " + std::strerror(errno));
      return salt;
    }
    char* end = nullptr;
    const unsigned long v = std::strtoul(text, &end, 16);
    if (end != text + 8 || v > UINT32_MAX)
      return Status::error("port registry: " + path + ": expected 8 hex digits (this boot's port offset); remove it "
                           "when no job runs on the node");
    return static_cast<uint32_t>(v);
  }

  Fd dir_, lock_;  // destroyed in reverse: the lock goes before the directory
  uint32_t salt_ = 0;
  std::vector<Entry> entries_;
};

using StartOf = std::function<Expected<uint64_t>(pid_t)>;

// Whether the process that made `e` still runs: its PID has the start
// time the entry recorded (a line without one: its PID exists).
bool alive(const StartOf& start_of, const Entry& e) {
  auto start = start_of(e.pid);
  return start.ok() && (e.start == 0 || *start == e.start);
}

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

Expected<uint64_t> process_start_time(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  if (pid <= 0) return Status::error("no process " + std::to_string(pid));
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status::error(path + ": " + std::strerror(errno));
  char buf[1024];
  ssize_t n;
  do n = ::read(fd.get(), buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return Status::error(path + ": " + (n < 0 ? std::strerror(errno) : "empty"));
  buf[n] = '\0';
  // Field 2, the name, is in parentheses and may hold anything, ')' too:
  // the fields after the last ')' are 3 (state) on; 22 is the 20th.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return Status::error(path + ": no ')' after the process name");
  std::istringstream rest(p + 1);
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return Status::error(path + ": fewer than 22 fields");
  uint64_t start = 0;
  if (!parse_number(field, UINT64_MAX, &start)) return Status::error(path + ": field 22 is '" + field + "'");
  return start;
}

Expected<std::map<std::string, int>> reserve_ports(const PortRegistry& r, uint32_t job, pid_t owner,
                                                    const std::vector<std::string>& tags) {
  for (const std::string& tag : tags)
    if (!valid_tag(tag)) return Status::error("port registry: invalid tag '" + tag + "'");
  const StartOf& start_of = r.start_time ? r.start_time : StartOf(process_start_time);
  auto owner_start = start_of(owner);
  if (!owner_start.ok())
    return Status::error("port registry: cannot tell when pid " + std::to_string(owner) +
                         " started: " + owner_start.status().message());
  auto locked = Locked::open(r);
  if (!locked.ok()) return locked.status();
  std::vector<Entry> kept;
  std::set<int> taken;
  std::map<std::string, int> got;
  const std::set<std::string> wanted(tags.begin(), tags.end());
  for (const Entry& e : locked->entries()) {
    if (!alive(start_of, e)) continue;  // its step is gone: the port is free again
    kept.push_back(e);
    taken.insert(e.port);
    if (e.job == job && wanted.count(e.tag) && !got.count(e.tag)) got[e.tag] = e.port;
  }
  bool changed = kept.size() != locked->entries().size();
  size_t held = 0;
  for (const Entry& e : kept) held += e.job == job;
  size_t wanted_new = 0;
  for (const std::string& tag : tags) wanted_new += got.count(tag) == 0;
  if (held + wanted_new > kMaxPortsPerJob)
    return Status::error("port registry: job " + std::to_string(job) + " would hold " +
                         std::to_string(held + wanted_new) + " ports on this node (at most " +
                         std::to_string(kMaxPortsPerJob) + ")");
  // A job's first port: this boot's random offset plus its id, so nobody
  // can tell which port a job id will get and take it first.
  const uint64_t offset = r.random_start ? locked->salt() : 0;
  for (const std::string& tag : tags) {  // in the caller's order
    if (got.count(tag)) continue;
    for (int i = 0; i < r.range.size(); ++i) {
      const int p = r.range.low + static_cast<int>((uint64_t{job} + offset + static_cast<uint64_t>(i)) %
                                                   static_cast<uint64_t>(r.range.size()));
      if (taken.count(p) || (r.bindable && !r.bindable(p))) continue;
      got[tag] = p;
      taken.insert(p);
      kept.push_back(Entry{p, job, owner, *owner_start, tag});
      changed = true;
      break;
    }
  }
  if (changed) {
    Status s = locked->write(kept, r.before_rename);
    if (!s.ok()) return s;
  }
  return got;
}

std::map<uint32_t, size_t> listeners_by_uid(const PortRange& range, const std::string& proc_net) {
  std::map<uint32_t, size_t> by_uid;
  for (const char* file : {"tcp", "tcp6"}) {
    std::ifstream in(proc_net + "/" + file);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retransmits;
      uint32_t uid = 0;
      if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid) || state != "0A") continue;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      const long port = std::strtol(local.c_str() + colon + 1, nullptr, 16);
      if (port >= range.low && port <= range.high) ++by_uid[uid];
    }
  }
  return by_uid;
}

Status no_port_left(const PortRegistry& r) {
  // Who holds them, for the log: goldminer jobs by the registry (best
  // effort, without the lock), other listeners by uid (/proc/net/tcp{,6}).
  std::map<uint32_t, size_t> jobs;
  std::ifstream registry(r.path);
  for (std::string line; std::getline(registry, line);) {
    std::istringstream f(line);
    int port = 0;
    uint32_t job = 0;
    if (f >> port >> job) ++jobs[job];
  }
  std::string who;
  size_t shown = 0;
  for (const auto& [job, n] : jobs) {
    if (shown++ == 5) {
      who += ", ...";
      break;
    }
    who += (who.empty() ? "job " : ", job ") + std::to_string(job) + ": " + std::to_string(n);
  }
  std::string others;
  for (const auto& [uid, n] : listeners_by_uid(r.range, "/proc/net"))
    others += (others.empty() ? "uid " : ", uid ") + std::to_string(uid) + ": " + std::to_string(n);
  return Status::error("port registry: " + r.path + ": every port of " + std::to_string(r.range.low) + "-" +
                       std::to_string(r.range.high) + " is reserved or in use on this node (reserved by goldminer " +
                       (who.empty() ? std::string("jobs: none") : who) + "; listening now, by owner: " +
                       (others.empty() ? std::string("none seen") : others) + ")");
}

Expected<int> reserve_port(const PortRegistry& r, uint32_t job, pid_t owner, const std::string& tag) {
  auto ports = reserve_ports(r, job, owner, {tag});
  if (!ports.ok()) return ports.status();
  auto it = ports->find(tag);
  if (it == ports->end()) return no_port_left(r);
  return it->second;
}

Status release_port(const PortRegistry& r, uint32_t job, pid_t owner) {
  auto locked = Locked::open(r);
  if (!locked.ok()) return locked.status();
  std::vector<Entry> kept;
  for (const Entry& e : locked->entries())
    if (!(e.job == job && e.pid == owner)) kept.push_back(e);
  if (kept.size() == locked->entries().size()) return Status();
  return locked->write(kept, r.before_rename);
}

}  // namespace goldminer
