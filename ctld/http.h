// The little HTTP/1.0 that goldminer-ctld speaks: sessions POST their
// reports, goldminer-top GETs /jobs, Prometheus GETs /metrics. One request
// per connection (Connection: close), a body of at most kMaxHttpBody
// bytes, the whole request read within one deadline, a bounded number of
// connections in hand per peer address and in all. No TLS: what travels
// is aggregate figures, a munge credential, or what a munge credential
// authorises (Authorization: Munge CREDENTIAL).
//
// Hand-written rather than libmicrohttpd or Boost.Beast: the protocol is
// this small, and the limits a library would give (per-peer connections,
// a connection's time) are the ones HttpServer enforces itself.
#ifndef GOLDMINER_CTLD_HTTP_H_
#define GOLDMINER_CTLD_HTTP_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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
  std::string peer;           // the client's address (set by HttpServer)
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
Expected<HttpResponse> parse_http_response(const std::string& data);

// One request to `address` (HOST:PORT), all of it within `timeout_s`.
Expected<HttpResponse> http_call(const std::string& address, const HttpRequest& request, double timeout_s);

struct HttpServeLimits {
  int max_connections = 64;  // in hand at once, from all peers
  int max_per_peer = 8;      // in hand at once from one address
  double timeout_s = 5;      // to send the whole request; again to take the answer
};

// Serves requests on a listening TCP socket until stop(): each connection
// on a thread of its own, within `limits` (a connection over them is
// answered 503 at once, without a wait, and closed; the one slot a slow
// peer holds is its own: other peers are served meanwhile).
class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds `address` (HOST:PORT; HOST 0.0.0.0 or :: for every interface).
  static Expected<std::unique_ptr<HttpServer>> listen(const std::string& address);
  ~HttpServer();

  int port() const { return port_; }
  // Returns after stop(), once the connections in hand are answered.
  void serve(const Handler& handler, HttpServeLimits limits = HttpServeLimits());
  // Async-signal-safe: may be called from a signal handler.
  void stop();

 private:
  HttpServer(int fd, int port, int wake_read, int wake_write);
  void answer(int fd, const std::string& peer, const Handler& handler, double timeout_s);

  int fd_, port_, wake_read_, wake_write_;
  std::mutex mu_;
  std::condition_variable idle_;
  int active_ = 0;
  std::map<std::string, int> per_peer_;  // connections in hand by address
};

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_HTTP_H_
