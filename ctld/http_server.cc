#include "ctld/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "ctld/client/http_io.h"
#include "gmcore/host_port.h"

namespace goldminer {

using http_io::deadline_after;
using http_io::errno_text;
using http_io::Fd;
using http_io::read_until;
using http_io::resolve;
using http_io::write_all;

HttpServer::HttpServer(int fd, int port, int wake_read, int wake_write)
    : fd_(fd), port_(port), wake_read_(wake_read), wake_write_(wake_write) {}

HttpServer::~HttpServer() {
  ::close(fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

Expected<std::unique_ptr<HttpServer>> HttpServer::listen(const std::string& address) {
  auto list = resolve(address, "listen", true);
  if (!list.ok()) return list.status();
  std::string why = "no address";
  for (addrinfo* a = list->get(); a != nullptr; a = a->ai_next) {
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
  auto after = [timeout_s] { return deadline_after(timeout_s); };
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
