#include "ctld/client/http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <sstream>

#include <boost/beast/http.hpp>

#include "ctld/client/http_io.h"

namespace goldminer {

using http_io::deadline_after;
using http_io::errno_text;
using http_io::Fd;
using http_io::first_line;
using http_io::header_line;
using http_io::read_until;
using http_io::resolve;
using http_io::trimmed;
using http_io::wait_fd;
using http_io::write_all;

namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;

// Feeds `data` to `parser` (limits set) until it has a whole message:
// the bytes that message took; 0 while it is not whole; an error naming
// what is wrong otherwise. `eof`: nothing more will come (a response
// without Content-Length ends there).
template <class Parser>
Expected<size_t> feed(Parser* parser, const std::string& data, bool eof, const char* what) {
  size_t used = 0;
  beast::error_code ec;
  while (!parser->is_done() && used < data.size()) {
    const size_t n = parser->put(boost::asio::buffer(data.data() + used, data.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) {
      ec = {};
      if (n == 0) break;
      continue;
    }
    if (ec) break;
  }
  if (!ec && !parser->is_done() && eof && used == data.size()) parser->put_eof(ec);
  if (ec == http::error::header_limit)
    return Status::error(std::string("http: ") + what + " head over " + std::to_string(kMaxHttpHead) + " bytes");
  if (ec == http::error::body_limit)
    return Status::error("http: body of " +
                         (header_line(data, "content-length").empty() ? std::string("more")
                                                                      : header_line(data, "content-length")) +
                         " bytes is over " + std::to_string(kMaxHttpBody));
  if (ec == http::error::bad_content_length)
    return Status::error("http: bad Content-Length '" + header_line(data, "content-length") + "'");
  if (ec) return Status::error(std::string("http: bad ") + what + " line '" + first_line(data) + "' (" + ec.message() + ")");
  return parser->is_done() ? used : size_t{0};
}

// feed() with kMaxHttpHead and kMaxHttpBody on `p`, which parses the body
// with the head (one call may take a whole message).
template <class Parser>
Expected<size_t> feed_limited(Parser* p, const std::string& data, bool eof, const char* what) {
  p->header_limit(kMaxHttpHead);
  p->body_limit(kMaxHttpBody);
  p->eager(true);
  return feed(p, data, eof, what);
}

// feed_limited(), and an error unless `data` held a whole message: `cut`
// says what it was instead.
template <class Parser>
Status parse_whole(Parser* p, const std::string& data, bool eof, const char* what, const char* cut) {
  auto size = feed_limited(p, data, eof, what);
  if (!size.ok()) return size.status();
  if (*size == 0) return Status::error(std::string("http: ") + cut);
  return Status();
}

}  // namespace

Expected<size_t> http_request_size(const std::string& data) {
  http::request_parser<http::string_body> p;
  return feed_limited(&p, data, false, "request");
}

Expected<HttpRequest> parse_http_request(const std::string& data) {
  http::request_parser<http::string_body> p;
  if (Status st = parse_whole(&p, data, false, "request", "incomplete request"); !st.ok()) return st;
  const auto& m = p.get();
  HttpRequest r;
  r.method = std::string(m.method_string());
  r.path = std::string(m.target());
  if (r.path.empty() || r.path[0] != '/') return Status::error("http: bad request path '" + r.path.substr(0, 80) + "'");
  r.body = m.body();
  r.authorization = trimmed(std::string(m[http::field::authorization]));
  return r;
}

namespace {

// `m` with `body`, one message per connection, as bytes.
template <class Message>
std::string serialized(Message* m, const std::string& body) {
  m->set(http::field::connection, "close");
  m->body() = body;
  m->content_length(body.size());
  std::ostringstream out;
  out << *m;
  return out.str();
}

}  // namespace

std::string format_http_request(const HttpRequest& r, const std::string& host) {
  http::request<http::string_body> m{http::string_to_verb(r.method), r.path, 10};
  if (m.method() == http::verb::unknown) m.method_string(r.method);
  m.set(http::field::host, host);
  if (!r.authorization.empty()) m.set(http::field::authorization, r.authorization);
  return serialized(&m, r.body);
}

std::string format_http_response(const HttpResponse& r) {
  http::response<http::string_body> m{static_cast<http::status>(r.status), 10};
  m.set(http::field::content_type, r.content_type);
  return serialized(&m, r.body);
}

// The bytes a whole response takes of `data`; 0 while it is not whole.
Expected<size_t> http_response_size(const std::string& data, bool eof) {
  http::response_parser<http::string_body> p;
  return feed_limited(&p, data, eof, "response");
}

Expected<HttpResponse> parse_http_response(const std::string& data) {
  http::response_parser<http::string_body> p;
  if (Status st = parse_whole(&p, data, true, "response", "response cut short"); !st.ok()) return st;
  const auto& m = p.get();
  HttpResponse r;
  r.status = static_cast<int>(m.result_int());
  r.content_type = trimmed(std::string(m[http::field::content_type]));
  r.body = m.body();
  return r;
}

Expected<HttpResponse> http_call(const std::string& address, const HttpRequest& request, double timeout_s) {
  const auto deadline = deadline_after(timeout_s);
  auto list = resolve(address, "address", false);
  if (!list.ok()) return list.status();
  std::string why = "no address";
  for (addrinfo* a = list->get(); a != nullptr; a = a->ai_next) {
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
    auto data = read_until(s.fd, deadline, kMaxHttpHead + kMaxHttpBody, http_response_size);
    if (!data.ok()) return Status::error(address + ": " + data.status().message());
    return parse_http_response(*data);
  }
  return Status::error(address + ": " + why);
}

}  // namespace goldminer
