#include "ctld/client/http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include "ctld/client/http_io.h"

namespace goldminer {

using http_io::content_length;
using http_io::deadline_after;
using http_io::errno_text;
using http_io::Fd;
using http_io::head_end;
using http_io::header_value;
using http_io::lower;
using http_io::read_until;
using http_io::resolve;
using http_io::wait_fd;
using http_io::write_all;

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
  const auto deadline = deadline_after(timeout_s);
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

}  // namespace goldminer
