// Transport benchmark: a stream of batch frames (gmcore/wire.h) from a
// data worker process to a trainer process over the ucx transport on one
// node (its shared-memory arena; and without it, UCX's own shared memory:
// posix eager + cma rendezvous) and over TCP on lo, against two baselines
// measured in the same run:
//   memcpy      the frame copied into one reused buffer (one core, no
//               process boundary: the ceiling of "memory speed")
//   tcp socket  a plain TCP socket on lo, same framing, the receiver
//               reading each frame into one reused buffer
// Every receiver decodes every frame in place (wire::decode_frame). Prints
// GB/s per payload size (1 MiB, 8 MiB) and the ratios ucx/memcpy and
// ucx/tcp-socket (goal >= 0.8 of each).
//
// Usage: bench/transport_bench [--mib-per-run N] [--reps R] [--in-flight F] [--arena-mib A]
// (--in-flight: a fixed number of frames in flight instead of goldminer-dw's
// transport::SendWindow)
// The sender is this binary re-run (`--send ...`): UCX state does not
// survive fork(). UCX_NET_DEVICES defaults to lo; UCX_TLS is set per
// configuration (shm: posix,sysv,cma,self,tcp; tcp: tcp; --shm-tls and
// --tcp-tls change them).
//
// Note: the ucx transport sends a worker's messages on an endpoint without
// error-handling mode (failures are seen on a second, control endpoint), so
// UCX 1.13 may select posix/sysv shared memory and cma there; with
// UCX_LOG_LEVEL=info the shm configuration shows which lanes it chose.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gmcore/wire.h"
#include "mpi_transport/transport.h"

using namespace goldminer;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWarmup = 16;  // frames not timed (connection setup, pool fill, page faults)

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "transport_bench: %s\n", what.c_str());
  std::exit(1);
}

// A batch frame whose tensor bytes total `payload`: a uint8 "data" tensor
// and an int64 [512] "ids" tensor, as a worker would send.
wire::BatchWriter make_frame(size_t payload) {
  wire::BatchHeader h;
  h.samples = 512;
  auto w = wire::BatchWriter::create(
      h, {{wire::DType::kUInt8, {static_cast<int64_t>(payload - 4096)}}, {wire::DType::kInt64, {512}}});
  if (!w.ok()) die(w.status().message());
  for (size_t i = 0; i < w->tensor_count(); ++i) {
    uint8_t* p = w->tensor_data(i);
    for (uint64_t j = 0; j < w->tensor_bytes(i); ++j) p[j] = static_cast<uint8_t>(j * 131 + i);
  }
  return std::move(w).value();
}

// Decodes a received frame in place and checks it is the batch we sent;
// `sequence` >= 0: also that it is the sender's frame number `sequence`
// (stamped in the first bytes of its data), so a lost, repeated or
// reordered frame fails the run.
void check_frame(const uint8_t* data, size_t size, size_t payload, int64_t sequence = -1) {
  auto m = wire::decode_frame(data, size, uint64_t{1} << 32);
  if (!m.ok()) die("decode: " + m.status().message());
  const auto* b = std::get_if<wire::BatchView>(&*m);
  if (b == nullptr || b->tensors.size() != 2 || b->tensors[0].nbytes + b->tensors[1].nbytes != payload)
    die("decode: not the batch that was sent");
  int64_t stamp;
  std::memcpy(&stamp, b->tensors[0].data, sizeof stamp);
  if (sequence >= 0 && stamp != sequence)
    die("frame " + std::to_string(sequence) + " expected, frame " + std::to_string(stamp) + " received");
}

// ---------------------------------------------------------------- senders
// (child processes)

// Sends `frames` copies of one batch frame, keeping goldminer-dw's window
// of sends in flight (transport::SendWindow; `depth` > 0: up to that many
// frames instead).
int run_ucx_sender(const std::string& address, size_t payload, int frames, int depth, size_t arena_bytes) {
  transport::Options options;
  options.shm_arena_bytes = arena_bytes;
  auto ep = transport::connect(address, options);
  if (!ep.ok()) die(ep.status().message());
  transport::SendWindow window =
      depth > 0 ? transport::SendWindow(static_cast<size_t>(depth), SIZE_MAX) : transport::SendWindow();
  // One buffer per frame the window lets be in flight at once (no more:
  // goldminer-dw reuses its spare batches too), the last one freed used
  // first (the warmest).
  std::vector<wire::BatchWriter> buffers;
  buffers.push_back(make_frame(payload));
  const size_t frame_size = buffers[0].frame_size();
  for (transport::SendWindow probe = window; probe.started(frame_size), probe.open(frame_size);)
    buffers.push_back(make_frame(payload));
  std::vector<size_t> free_buffers;
  for (size_t i = buffers.size(); i-- > 0;) free_buffers.push_back(i);
  int started = 0, done = 0;
  while (done < frames) {
    while (started < frames && window.open(frame_size)) {
      const size_t b = free_buffers.back();
      free_buffers.pop_back();
      wire::BatchWriter& w = buffers[b];
      const int64_t stamp = started;
      std::memcpy(w.tensor_data(0), &stamp, sizeof stamp);
      window.started(frame_size);
      Status s = (*ep)->send_async(0, w.frame_data(), frame_size, [&, b](Status sent) {
        if (!sent.ok()) die(sent.message());
        window.finished(frame_size);
        free_buffers.push_back(b);
        ++done;
      });
      if (!s.ok()) die(s.message());
      ++started;
    }
    auto e = (*ep)->poll(10);  // progresses the sends
    if (!e.ok()) die(e.status().message());
    // The receiver closes once it has counted every frame, possibly before
    // the last completions reach this side.
    if (e->has_value() && (*e)->kind == transport::Event::Kind::kDisconnected) {
      if (started == frames) return 0;
      die("receiver lost: " + (*e)->reason);
    }
  }
  // Stay until the receiver has everything (it closes first).
  for (int i = 0; i < 200; ++i) {
    auto e = (*ep)->poll(50);
    if (!e.ok()) break;
    if (e->has_value() && (*e)->kind == transport::Event::Kind::kDisconnected) break;
  }
  return 0;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, MSG_WAITALL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

int run_tcp_sender(int port, size_t payload, int frames) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die(std::string("connect: ") + strerror(errno));
  wire::BatchWriter w = make_frame(payload);
  for (int i = 0; i < frames; ++i)
    if (!write_all(fd, w.frame_data(), w.frame_size())) die(std::string("tcp send: ") + strerror(errno));
  uint8_t done;
  (void)::recv(fd, &done, 1, 0);  // the receiver closes when it has all
  close(fd);
  return 0;
}

// ---------------------------------------------------------------- receivers

pid_t spawn_self(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid < 0) die(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    std::vector<char*> argv;
    std::string self = "transport_bench";
    argv.push_back(self.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  return pid;
}

void reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("sender process failed (status " + std::to_string(status) + ")");
}

// Bytes/s of `frames` frames received over UCX with UCX_TLS=`tls`, the
// sender keeping goldminer-dw's window in flight (`depth` > 0: up to that
// many frames), with a shared-memory arena of
// `arena_bytes` (0: none).
double ucx_stream(const char* tls, size_t arena_bytes, size_t payload, int frames, int depth) {
  setenv("UCX_TLS", tls, 1);  // read by the context each endpoint creates
  transport::Options trusted;  // the transport alone: no handshake vouches for the sender
  trusted.trust_on_connect = true;
  auto server = transport::listen("ucx://127.0.0.1:0", trusted);
  if (!server.ok()) die(server.status().message());
  const pid_t child = spawn_self({"--send", "ucx", (*server)->address(), std::to_string(payload), std::to_string(frames),
                                  std::to_string(depth), std::to_string(arena_bytes)});
  int got = 0;
  size_t frame_size = 0;
  Clock::time_point t0;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (got < frames) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child && got < frames)
      die(std::string("ucx ") + tls + ": the sender exited early (status " + std::to_string(status) + ")");
    if (Clock::now() > deadline) {
      kill(child, SIGKILL);
      die(std::string("ucx ") + tls + ": stream did not finish within 120 s");
    }
    auto e = (*server)->poll(100);
    if (!e.ok()) die(e.status().message());
    if (!e->has_value()) continue;
    if ((*e)->kind == transport::Event::Kind::kDisconnected) die("ucx: sender lost: " + (*e)->reason);
    if ((*e)->kind != transport::Event::Kind::kMessage) continue;
    check_frame((*e)->frame->data(), (*e)->frame->size(), payload, got);
    frame_size = (*e)->frame->size();
    if (++got == kWarmup) t0 = Clock::now();
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  // Which path the frames took must be the one measured.
  const uint64_t through_arena = (*server)->path_stats().shared_memory;
  if ((arena_bytes > 0) != (through_arena > 0))
    die(std::string("ucx ") + tls + ": " + std::to_string(through_arena) + " frames through the arena, expected " +
        (arena_bytes > 0 ? "most" : "none"));
  server->reset();
  reap(child);
  return static_cast<double>(frame_size) * (frames - kWarmup) / s;
}

double tcp_stream(size_t payload, int frames) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(lfd, 1) != 0)
    die(std::string("tcp listen: ") + strerror(errno));
  socklen_t len = sizeof sa;
  getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
  const pid_t child = spawn_self({"--send", "tcp", std::to_string(ntohs(sa.sin_port)), std::to_string(payload),
                                  std::to_string(frames)});
  const int fd = accept(lfd, nullptr, nullptr);
  if (fd < 0) die(std::string("accept: ") + strerror(errno));
  close(lfd);
  std::vector<uint8_t> buffer;  // reused: grows to one frame once
  Clock::time_point t0;
  size_t frame_size = 0;
  for (int got = 0; got < frames;) {
    uint8_t head[wire::kFrameHeaderSize];
    if (!read_all(fd, head, sizeof head)) die("tcp: sender closed early");
    auto h = wire::decode_header(head, sizeof head, uint64_t{1} << 32);
    if (!h.ok()) die(h.status().message());
    frame_size = sizeof head + h->payload_size;
    if (buffer.size() < frame_size) buffer.resize(frame_size);
    std::memcpy(buffer.data(), head, sizeof head);
    if (!read_all(fd, buffer.data() + sizeof head, h->payload_size)) die("tcp: sender closed early");
    check_frame(buffer.data(), frame_size, payload);
    if (++got == kWarmup) t0 = Clock::now();
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  close(fd);
  reap(child);
  return static_cast<double>(frame_size) * (frames - kWarmup) / s;
}

// Bytes/s of copying the frame into `buffers` destinations in turn: 1 is
// the baseline (one reused, cache-warm buffer); 2 is the working set of a
// pipelined stream, whose sender writes one block while the receiver still
// holds the other (an informative figure, not the goal's baseline).
double memcpy_stream(size_t payload, int frames, size_t buffers = 1) {
  wire::BatchWriter w = make_frame(payload);
  std::vector<std::vector<uint8_t>> dst(buffers, std::vector<uint8_t>(w.frame_size()));
  for (int i = 0; i < kWarmup; ++i) std::memcpy(dst[i % buffers].data(), w.frame_data(), w.frame_size());
  const auto t0 = Clock::now();
  for (int i = 0; i < frames - kWarmup; ++i) {
    uint8_t* to = dst[static_cast<size_t>(i) % buffers].data();
    std::memcpy(to, w.frame_data(), w.frame_size());
    asm volatile("" : : "r"(to) : "memory");  // keep every copy
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& d : dst) check_frame(d.data(), w.frame_size(), payload);
  return static_cast<double>(w.frame_size()) * (frames - kWarmup) / s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (getenv("UCX_NET_DEVICES") == nullptr) setenv("UCX_NET_DEVICES", "lo", 1);
  if (argc >= 6 && std::string(argv[1]) == "--send") {
    const size_t payload = std::stoull(argv[4]);
    const int frames = std::stoi(argv[5]);
    if (std::string(argv[2]) == "ucx" && argc == 8)
      return run_ucx_sender(argv[3], payload, frames, std::stoi(argv[6]), std::stoull(argv[7]));
    return run_tcp_sender(std::stoi(argv[3]), payload, frames);
  }
  size_t mib_per_run = 2048;
  int reps = 3;
  int depth = 0;  // goldminer-dw's SendWindow
  size_t arena_mib = transport::Options().shm_arena_bytes >> 20;
  // tcp stays in the shm list: UCX 1.13 connects listener endpoints through
  // its tcp connection manager and fails with "Destination is unreachable"
  // without it.
  std::string shm_tls = "posix,sysv,cma,self,tcp", tcp_tls = "tcp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib-per-run" && i + 1 < argc) {
      mib_per_run = std::stoull(argv[++i]);
    } else if (a == "--shm-tls" && i + 1 < argc) {
      shm_tls = argv[++i];
    } else if (a == "--tcp-tls" && i + 1 < argc) {
      tcp_tls = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--in-flight" && i + 1 < argc) {
      depth = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--arena-mib" && i + 1 < argc) {
      arena_mib = std::max(1, std::stoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: transport_bench [--mib-per-run N (default 2048)] [--reps R (default 3)] "
                   "[--in-flight F (default: goldminer-dw's window)] [--arena-mib A (default %zu)] [--shm-tls T] [--tcp-tls T]\n",
                   arena_mib);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  const char* kShm = shm_tls.c_str();
  const char* kTcp = tcp_tls.c_str();
  std::printf("transport_bench: batch frames, sender and receiver in separate processes, receiver decodes in place\n");
  const std::string window =
      depth > 0 ? "up to " + std::to_string(depth) + " frames"
                : "goldminer-dw's window (up to " + std::to_string(transport::SendWindow::kDefaultFrames) +
                      " frames within " + std::to_string(transport::SendWindow::kDefaultBytes >> 20) + " MiB)";
  std::printf("  %zu MiB per measurement (after %d warm-up frames), median of %d; ucx sender: %s in flight; "
              "UCX_NET_DEVICES=%s\n\n",
              mib_per_run, kWarmup, reps, window.c_str(), getenv("UCX_NET_DEVICES"));
  std::printf("%-8s %10s %10s %10s %10s %10s | %12s %12s %12s %12s %12s\n", "payload", "memcpy", "tcp-sock",
              "ucx-arena", "ucx-cma", "ucx-tcp", "arena/memcpy", "arena/sock", "cma/memcpy", "tcp/memcpy",
              "tcp/sock");
  struct Row {
    size_t mib;
    double mem, sock, arena, cma, tcp, mem2;
  };
  std::vector<Row> rows;
  for (size_t mib : {size_t{1}, size_t{8}}) {
    const size_t payload = mib << 20;
    const int frames = static_cast<int>(std::max<size_t>(kWarmup + 32, mib_per_run / mib + kWarmup));
    std::vector<double> mem, sock, arena, cma, tcp, mem2;
    for (int r = 0; r < reps; ++r) {  // interleaved, so noise hits every column alike
      mem.push_back(memcpy_stream(payload, frames));
      mem2.push_back(memcpy_stream(payload, frames, 2));
      sock.push_back(tcp_stream(payload, frames));
      arena.push_back(ucx_stream(kShm, arena_mib << 20, payload, frames, depth));
      cma.push_back(ucx_stream(kShm, 0, payload, frames, depth));
      tcp.push_back(ucx_stream(kTcp, 0, payload, frames, depth));
    }
    Row row{mib,           median(mem) / 1e9, median(sock) / 1e9, median(arena) / 1e9,
            median(cma) / 1e9, median(tcp) / 1e9, median(mem2) / 1e9};
    rows.push_back(row);
    std::printf("%4zu MiB %5.2f GB/s %5.2f GB/s %5.2f GB/s %5.2f GB/s %5.2f GB/s | %12.2f %12.2f %12.2f %12.2f %12.2f\n",
                mib, row.mem, row.sock, row.arena, row.cma, row.tcp, row.arena / row.mem, row.arena / row.sock,
                row.cma / row.mem, row.tcp / row.mem, row.tcp / row.sock);
    std::fflush(stdout);
  }
  std::printf("\nsummary (goal: ucx >= 0.8 x memcpy and >= 0.8 x tcp socket)\n");
  for (const Row& r : rows) {
    auto verdict = [](double x) { return x >= 0.8 ? "met" : "NOT met"; };
    std::printf("  %zu MiB: shared memory (arena) /memcpy %.2f (%s), /tcp-sock %.2f (%s); "
                "ucx-tcp /tcp-sock %.2f (%s), /memcpy %.2f (%s)\n",
                r.mib, r.arena / r.mem, verdict(r.arena / r.mem), r.arena / r.sock, verdict(r.arena / r.sock),
                r.tcp / r.sock, verdict(r.tcp / r.sock), r.tcp / r.mem, verdict(r.tcp / r.mem));
  }
  std::printf("informative: memcpy into 2 alternating buffers (a stream's working set):");
  for (const Row& r : rows)
    std::printf(" %zu MiB %.2f GB/s, arena / it %.2f;", r.mib, r.mem2, r.arena / r.mem2);
  std::printf("\n");
  std::printf("assumptions: memcpy is one copy by one core within one process (source and destination\n"
              "  reused, partly cache-resident); every transport column crosses processes and both\n"
              "  processes share this machine's cores. ucx-arena: the worker copies each frame once into\n"
              "  its shared-memory arena and sends a 16-byte descriptor (the default on one node); ucx-cma:\n"
              "  no arena, UCX's posix eager + cma rendezvous (one copy, by the receiver); ucx-tcp:\n"
              "  UCX_TLS=tcp, no arena (a worker on another node); tcp-sock: sender->kernel->receiver.\n"
              "  The ucx sender keeps goldminer-dw's window of frames in flight (send_async;\n"
              "  transport::SendWindow), or --in-flight frames.\n");
  return 0;
}
