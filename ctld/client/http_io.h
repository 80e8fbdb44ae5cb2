// What the HTTP client (http.h, http_call) and goldminer-ctld's server
// (ctld/http_server.h) both do on a socket: waits, whole writes and reads
// within one deadline, name resolution, and pieces of a message for
// error texts.
// Internal to ctld/: the rest of the tree calls http_call or HttpServer.
#ifndef GOLDMINER_CTLD_CLIENT_HTTP_IO_H_
#define GOLDMINER_CTLD_CLIENT_HTTP_IO_H_

#include <netdb.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "gmcore/host_port.h"
#include "gmcore/status.h"

namespace goldminer::http_io {

using Clock = std::chrono::steady_clock;

// `what`: strerror(errno).
std::string errno_text(const std::string& what);
// `timeout_s` from now.
Clock::time_point deadline_after(double timeout_s);

// For error texts (the messages themselves are Boost.Beast's to parse,
// http.h): `v` without spaces and tabs around it; the first line of
// `data` (at most 80 bytes); the raw value of header `name` (lowercase)
// in `data`'s head, at most 40 bytes, "" when absent.
std::string trimmed(std::string v);
std::string first_line(const std::string& data);
std::string header_line(const std::string& data, const std::string& name);

// Waits for `events` on `fd` until `deadline`; an error names `what`.
Status wait_fd(int fd, short events, Clock::time_point deadline, const std::string& what);
// Sends all of `data` on the non-blocking socket `fd` by `deadline`.
Status write_all(int fd, const std::string& data, Clock::time_point deadline);
// Reads until `complete` says how much of what came is whole (> 0), EOF
// or the deadline; at most `limit` bytes.
Expected<std::string> read_until(int fd, Clock::time_point deadline, size_t limit,
                                 const std::function<Expected<size_t>(const std::string&, bool eof)>& complete);

// getaddrinfo's list, freed with it.
using AddressList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;
// The stream addresses of `address` (HOST:PORT; `what` names it where it
// does not parse), passive: to bind.
Expected<AddressList> resolve(const std::string& address, const std::string& what, bool passive);

// Closes the descriptor it holds.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace goldminer::http_io

#endif  // GOLDMINER_CTLD_CLIENT_HTTP_IO_H_
