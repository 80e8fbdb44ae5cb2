#include "ctld/http.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace goldminer {
namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// The head's end (after "\r\n\r\n"), or npos.
size_t head_end(const std::string& data) {
  size_t p = data.find("\r\n\r\n");
  return p == std::string::npos ? p : p + 4;
}

// The value of header `name` (lowercase) in a head, trimmed; npos-free:
// `found` says whether it is there.
std::string header_value(const std::string& head, const std::string& name, bool* found) {
  *found = false;
  size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string::npos) {
    pos += 2;
    size_t colon = head.find(':', pos), eol = head.find("\r\n", pos);
    if (colon == std::string::npos || eol == std::string::npos || colon > eol) continue;
    if (lower(head.substr(pos, colon - pos)) != name) continue;
    std::string v = head.substr(colon + 1, eol - colon - 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
    *found = true;
    return v;
  }
  return "";
}

// Content-Length of a head (0 when absent); an error when it is bad.
Expected<size_t> content_length(const std::string& head) {
  bool found = false;
  std::string v = header_value(head, "content-length", &found);
  if (!found) return size_t{0};
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
    return Status::error("http: bad Content-Length '" + v.substr(0, 40) + "'");
  size_t n = std::stoul(v);
  if (n > kMaxHttpBody) return Status::error("http: body of " + v + " bytes is over " + std::to_string(kMaxHttpBody));
  return n;
}

double left_s(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// Waits for `events` on `fd` until `deadline`; an error names `what`.
Status wait_fd(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    double left = left_s(deadline);
    if (left <= 0) return Status::error(what + ": timed out");
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r > 0) return Status();
    if (r < 0 && errno != EINTR) return Status::error(errno_text(what));
  }
}

Status write_all(int fd, const std::string& data, Clock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      Status st = wait_fd(fd, POLLOUT, deadline, "http: send");
      if (!st.ok()) return st;
    } else {
      return Status::error(errno_text("http: send"));
    }
  }
  return Status();
}

// Reads until `complete` says how much is whole (>0), EOF or the deadline.
Expected<std::string> read_until(int fd, Clock::time_point deadline, size_t limit,
                                 const std::function<Expected<size_t>(const std::string&, bool eof)>& complete) {
  std::string data;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      data.append(buf, static_cast<size_t>(n));
      if (data.size() > limit) return Status::error("http: message over " + std::to_string(limit) + " bytes");
    } else if (n == 0) {
      auto size = complete(data, true);
      if (!size.ok()) return size.status();
      if (*size == 0) return Status::error("http: connection closed before the message was whole");
      return data.substr(0, *size);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      Status st = wait_fd(fd, POLLIN, deadline, "http: receive");
      if (!st.ok()) return st;
      continue;
    } else {
      return Status::error(errno_text("http: receive"));
    }
    auto size = complete(data, false);
    if (!size.ok()) return size.status();
    if (*size > 0) return data.substr(0, *size);
  }
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

Expected<addrinfo*> resolve(const HostPort& hp, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &res);
  if (rc != 0) return Status::error("cannot resolve " + hp.host + ":" + hp.port + ": " + gai_strerror(rc));
  return res;
}

}  // namespace

Expected<size_t> http_request_size(const std::string& data) {
  size_t end = head_end(data);
  if (end == std::string::npos) {
    if (data.size() > kMaxHttpHead) return Status::error("http: request head over " + std::to_string(kMaxHttpHead) + " bytes");
    return size_t{0};
  }
  auto length = content_length(data.substr(0, end));
  if (!length.ok()) return length.status();
  return data.size() >= end + *length ? end + *length : 0;
}

Expected<HttpRequest> parse_http_request(const std::string& data) {
  auto size = http_request_size(data);
  if (!size.ok()) return size.status();
  if (*size == 0) return Status::error("http: incomplete request");
  size_t end = head_end(data), eol = data.find("\r\n");
  std::string line = data.substr(0, eol);
  size_t s1 = line.find(' '), s2 = line.rfind(' ');
  if (s1 == std::string::npos || s2 == s1 || line.compare(s2 + 1, 5, "HTTP/") != 0)
    return Status::error("http: bad request line '" + line.substr(0, 80) + "'");
  HttpRequest r;
  r.method = line.substr(0, s1);
  r.path = line.substr(s1 + 1, s2 - s1 - 1);
  if (r.path.empty() || r.path[0] != '/') return Status::error("http: bad request path '" + r.path.substr(0, 80) + "'");
  r.body = data.substr(end, *size - end);
  bool found = false;
  r.authorization = header_value(data.substr(0, end), "authorization", &found);
  return r;
}

std::string format_http_request(const HttpRequest& r, const std::string& host) {
  return r.method + " " + r.path + " HTTP/1.0\r\nHost: " + host + "\r\n" +
         (r.authorization.empty() ? "" : "Authorization: " + r.authorization + "\r\n") + "Content-Length: " +
         std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" + r.body;
}

std::string format_http_response(const HttpResponse& r) {
  const char* reason = r.status == 200 ? "OK" : r.status == 400 ? "Bad Request" : r.status == 403 ? "Forbidden"
                     : r.status == 404 ? "Not Found" : r.status == 405 ? "Method Not Allowed"
                     : r.status == 408 ? "Request Timeout" : r.status == 429 ? "Too Many Requests"
                     : r.status == 503 ? "Service Unavailable" : "Error";
  return "HTTP/1.0 " + std::to_string(r.status) + " " + reason + "\r\nContent-Type: " + r.content_type +
         "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" + r.body;
}

Expected<HttpResponse> parse_http_response(const std::string& data) {
  size_t end = head_end(data);
  if (end == std::string::npos) return Status::error("http: response without a complete head");
  std::string line = data.substr(0, data.find("\r\n"));
  HttpResponse r;
  if (line.compare(0, 5, "HTTP/") != 0 || line.size() < 12 || line[8] != ' ' ||
      line.find_first_not_of("0123456789", 9) != 12)
    return Status::error("http: bad status line '" + line.substr(0, 80) + "'");
  r.status = std::stoi(line.substr(9, 3));
  auto length = content_length(data.substr(0, end));
  if (!length.ok()) return length.status();
  r.body = data.substr(end);
  if (r.body.size() < *length) return Status::error("http: response body cut short");
  r.body.resize(*length > 0 ? *length : r.body.size());
  size_t ct = lower(data.substr(0, end)).find("\r\ncontent-type:");
  if (ct != std::string::npos) {
    size_t start = ct + 15, eol = data.find("\r\n", start);
    r.content_type = data.substr(start, eol - start);
    while (!r.content_type.empty() && r.content_type.front() == ' ') r.content_type.erase(0, 1);
  }
  return r;
}

Expected<HttpResponse> http_call(const std::string& address, const HttpRequest& request, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto hp = parse_host_port(address, "address");
  if (!hp.ok()) return hp.status();
  auto res = resolve(*hp, false);
  if (!res.ok()) return res.status();
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(*res, &::freeaddrinfo);
  std::string why = "no address";
  for (addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (s.fd < 0) {
      why = errno_text("socket");
      continue;
    }
    if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        why = errno_text("connect");
        continue;
      }
      Status st = wait_fd(s.fd, POLLOUT, deadline, "connect");
      int err = 0;
      socklen_t len = sizeof err;
      if (st.ok() && (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
        errno = err;
        st = Status::error(errno_text("connect"));
      }
      if (!st.ok()) {
        why = st.message();
        continue;
      }
    }
    Status st = write_all(s.fd, format_http_request(request, address), deadline);
    if (!st.ok()) return Status::error(address + ": " + st.message());
    auto data = read_until(s.fd, deadline, kMaxHttpHead + kMaxHttpBody, [](const std::string& d, bool eof) -> Expected<size_t> {
      size_t end = head_end(d);
      if (end == std::string::npos) return size_t{0};
      auto length = content_length(d.substr(0, end));
      if (!length.ok()) return length.status();
      if (d.size() >= end + *length && (*length > 0 || eof)) return end + *length;
      return size_t{0};
    });
    if (!data.ok()) return Status::error(address + ": " + data.status().message());
    return parse_http_response(*data);
  }
  return Status::error(address + ": " + why);
}

HttpServer::HttpServer(int fd, int port, int wake_read, int wake_write)
    : fd_(fd), port_(port), wake_read_(wake_read), wake_write_(wake_write) {}

HttpServer::~HttpServer() {
  ::close(fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

Expected<std::unique_ptr<HttpServer>> HttpServer::listen(const std::string& address) {
  auto hp = parse_host_port(address, "listen");
  if (!hp.ok()) return hp.status();
  auto res = resolve(*hp, true);
  if (!res.ok()) return res.status();
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(*res, &::freeaddrinfo);
  std::string why = "no address";
  for (addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = errno_text("socket");
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      why = errno_text("bind " + address);
      ::close(fd);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    int port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
      why = errno_text("pipe");
      ::close(fd);
      continue;
    }
    return std::unique_ptr<HttpServer>(new HttpServer(fd, port, wake[0], wake[1]));
  }
  return Status::error(why);
}

void HttpServer::stop() {
  char c = 1;
  ssize_t ignored = ::write(wake_write_, &c, 1);
  (void)ignored;
}

void HttpServer::answer(int fd, const std::string& peer, const Handler& handler, double timeout_s) {
  Fd s(fd);
  auto after = [timeout_s] {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  };
  HttpResponse response;
  auto data = read_until(s.fd, after(), kMaxHttpHead + kMaxHttpBody,
                         [](const std::string& d, bool) { return http_request_size(d); });
  auto request = data.ok() ? parse_http_request(*data) : Expected<HttpRequest>(data.status());
  if (!request.ok()) {
    const bool late = request.status().message().find("timed out") != std::string::npos;
    response.status = late ? 408 : 400;
    response.body = request.status().message() + "\n";
  } else {
    request->peer = peer;
    response = handler(*request);
  }
  (void)write_all(s.fd, format_http_response(response), after());
  ::shutdown(s.fd, SHUT_WR);
}

namespace {

// The numeric address of a peer ("" when it has none).
std::string peer_address(const sockaddr_storage& ss) {
  char host[NI_MAXHOST] = "";
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), sizeof ss, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
    return "";
  return host;
}

// Answers a connection over the limits at once: one send that never
// waits (the socket's buffer takes it), then close.
void refuse(int fd, const std::string& why) {
  const std::string busy = format_http_response(HttpResponse{503, "text/plain; charset=utf-8", "busy: " + why + "\n"});
  (void)::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

}  // namespace

void HttpServer::serve(const Handler& handler, HttpServeLimits limits) {
  for (;;) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents != 0) break;
    if ((p[0].revents & POLLIN) == 0) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) continue;
    const std::string peer = peer_address(ss);
    std::unique_lock<std::mutex> lock(mu_);
    if (active_ >= limits.max_connections) {
      lock.unlock();
      refuse(c, std::to_string(limits.max_connections) + " connections in hand");
      continue;
    }
    int& mine = per_peer_[peer];
    if (mine >= limits.max_per_peer) {
      lock.unlock();
      refuse(c, std::to_string(limits.max_per_peer) + " connections from " + peer + " in hand");
      continue;
    }
    ++mine;
    ++active_;
    lock.unlock();
    std::thread([this, c, peer, &handler, timeout_s = limits.timeout_s] {
      answer(c, peer, handler, timeout_s);
      std::lock_guard<std::mutex> l(mu_);
      auto it = per_peer_.find(peer);
      if (--it->second == 0) per_peer_.erase(it);
      if (--active_ == 0) idle_.notify_all();
    }).detach();
  }
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return active_ == 0; });
}

}  // namespace goldminer
