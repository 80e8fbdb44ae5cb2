// The little HTTP/1.0 that goldminer-ctld speaks: sessions POST their
// reports, goldminer-top GETs /jobs, Prometheus GETs /metrics. One request
// per connection (Connection: close), a body of at most kMaxHttpBody
// bytes, the whole message read within one deadline. No TLS: what travels
// is aggregate figures, a munge credential, or what a munge credential
// authorises (Authorization: Munge CREDENTIAL). This header is the
// messages and the client's call; the daemon's server is
// ctld/http_server.h.
//
// Messages are parsed and written by Boost.Beast (its request and response
// parsers, with head and body limits, and its serializer); the sockets,
// deadlines and connection limits are ours (http_io.h, HttpServer), since
// Beast leaves them to its user and they are what a slow or flooding
// peer meets first.
#ifndef GOLDMINER_CTLD_CLIENT_HTTP_H_
#define GOLDMINER_CTLD_CLIENT_HTTP_H_

#include <cstddef>
#include <string>
#include <utility>

#include "gmcore/host_port.h"
#include "gmcore/status.h"

namespace goldminer {

constexpr size_t kMaxHttpHead = 8192;
constexpr size_t kMaxHttpBody = 65536;

struct HttpRequest {
  HttpRequest() = default;
  HttpRequest(std::string m, std::string p, std::string b, std::string a = "")
      : method(std::move(m)), path(std::move(p)), body(std::move(b)), authorization(std::move(a)) {}
  std::string method;  // GET, POST
  std::string path;    // /report
  std::string body;
  std::string authorization;  // the Authorization header's value; "" when absent
  std::string peer;           // the client's address (set by HttpServer, http_server.h)
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// The bytes one request takes of `data` once it is whole; 0 while it is
// not; an error when it cannot become a request (malformed, too large).
Expected<size_t> http_request_size(const std::string& data);
Expected<HttpRequest> parse_http_request(const std::string& data);
std::string format_http_request(const HttpRequest& request, const std::string& host);

std::string format_http_response(const HttpResponse& response);
// The bytes a whole response takes of `data` (`eof`: nothing more comes);
// 0 while it is not whole; an error when it cannot become one.
Expected<size_t> http_response_size(const std::string& data, bool eof);
Expected<HttpResponse> parse_http_response(const std::string& data);

// One request to `address` (HOST:PORT), all of it within `timeout_s`.
Expected<HttpResponse> http_call(const std::string& address, const HttpRequest& request, double timeout_s);

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_CLIENT_HTTP_H_
