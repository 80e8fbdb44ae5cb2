// goldminer-ctld's HTTP server (the messages and the client's call are
// ctld/client/http.h): one request per connection, the whole request read
// within one deadline, a bounded number of connections in hand per peer
// address and in all.
#ifndef GOLDMINER_CTLD_HTTP_SERVER_H_
#define GOLDMINER_CTLD_HTTP_SERVER_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ctld/client/http.h"
#include "gmcore/status.h"

namespace goldminer {

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

#endif  // GOLDMINER_CTLD_HTTP_SERVER_H_
