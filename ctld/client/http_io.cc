#include "ctld/client/http_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "ctld/client/http.h"

namespace goldminer::http_io {
namespace {

double left_s(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

}  // namespace

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Clock::time_point deadline_after(double timeout_s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}

size_t head_end(const std::string& data) {
  size_t p = data.find("\r\n\r\n");
  return p == std::string::npos ? p : p + 4;
}

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

}  // namespace goldminer::http_io
