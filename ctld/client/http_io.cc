#include "ctld/client/http_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
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

Clock::time_point deadline_after(double timeout_s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}

std::string trimmed(std::string v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  return v;
}

std::string first_line(const std::string& data) { return data.substr(0, std::min<size_t>(data.find("\r\n"), 80)); }

std::string header_line(const std::string& data, const std::string& name) {
  for (size_t pos = data.find("\r\n"); pos != std::string::npos && pos + 2 < data.size();
       pos = data.find("\r\n", pos + 2)) {
    const size_t start = pos + 2, colon = data.find(':', start), eol = data.find("\r\n", start);
    if (eol == start) break;  // the end of the head
    if (colon == std::string::npos || eol == std::string::npos || colon > eol || colon - start != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(data[start + i])) == name[i];
    if (same) return trimmed(data.substr(colon + 1, std::min<size_t>(eol - colon - 1, 40)));
  }
  return "";
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

Expected<AddressList> resolve(const std::string& address, const std::string& what, bool passive) {
  auto parsed = parse_host_port(address, what);
  if (!parsed.ok()) return parsed.status();
  const HostPort& hp = *parsed;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &res);
  if (rc != 0) return Status::error("cannot resolve " + hp.host + ":" + hp.port + ": " + gai_strerror(rc));
  return AddressList(res, &::freeaddrinfo);
}

}  // namespace goldminer::http_io
