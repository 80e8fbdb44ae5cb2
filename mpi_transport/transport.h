// The data plane's transports: one message-oriented interface between a
// trainer session (the server: it listens, many workers connect) and its
// data workers (clients: each connects to one trainer), with three
// implementations behind one factory:
//
//   ucx://HOST:PORT   UCX active messages, after a handshake on a socket of
//                     the trainer's own (ucx_endpoint.h); workers join and
//                     leave at any time; peer failure is an event. A
//                     worker on the trainer's node puts its large frames
//                     in a shared-memory arena the trainer maps (one copy,
//                     by the worker, or none where it built the frame there:
//                     reserve(); shm_arena.h); other frames arrive by
//                     rendezvous straight into a pooled, reused buffer
//                     (zero copy; one with cma on one node) or, small
//                     ones, copied once.
//   mpi://            MPI_COMM_WORLD of a static job (`srun ... : ...` or
//                     `mpirun -np 1 trainer : -np N goldminer-dw`): rank 0
//                     is the trainer, every other rank a worker.
//   local://NAME      in-process (threads), for tests and local runs.
//
// A message is one whole wire frame (gmcore/wire.h). Received frames live in
// 64-byte aligned buffers shared with whoever holds the Frame, so batch
// tensors can be viewed in place and the buffer goes back to its pool when
// the last view is dropped.
//
// Threading: an Endpoint is used by one thread (its owner's event loop);
// Frames may be released from any thread.
#ifndef GOLDMINER_MPI_TRANSPORT_TRANSPORT_H_
#define GOLDMINER_MPI_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gmcore/status.h"
#include "gmcore/wire.h"
#include "mpi_transport/host_memory.h"

namespace goldminer::transport {

// One received message (a whole wire frame), 64-byte aligned.
class Frame {
 public:
  virtual ~Frame() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

using PeerId = uint64_t;

struct Event {
  enum class Kind { kConnected, kMessage, kDisconnected };
  Kind kind = Kind::kMessage;
  PeerId peer = 0;
  std::shared_ptr<const Frame> frame;  // kMessage
  std::string reason;                  // kDisconnected: why
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;

  // Where workers connect ("ucx://127.0.0.1:40123"); a client endpoint
  // returns the address it connected to.
  virtual std::string address() const = 0;

  // Sends one frame to `peer` (a client has one peer, 0). Returns once the
  // bytes may be reused; fails if the peer is gone or does not take the
  // message within the endpoint's send timeout. ucx: a server's first
  // frames to a peer it has just authenticated wait for that peer's answer
  // to the bind (ucx_endpoint.h): the peer must be polling.
  virtual Status send(PeerId peer, const uint8_t* data, size_t size) = 0;

  // Starts sending one frame to `peer` and returns without waiting for it:
  // `done` runs once the bytes may be reused (OK) or the send failed, on
  // this endpoint's thread, from a later poll(), send(), send_async() or
  // the destructor, or before send_async() returns. The bytes must stay
  // valid and unchanged until then. An error means nothing was started and
  // `done` does not run. Frames sent to one peer arrive in the order sent,
  // however many are in flight. The default sends and waits (send()).
  virtual Status send_async(PeerId peer, const uint8_t* data, size_t size, std::function<void(Status)> done);

  // The next event, waiting up to `timeout_ms` (0: do not wait); nothing
  // if none came or wake() was called.
  virtual Expected<std::optional<Event>> poll(int timeout_ms) = 0;

  // Makes the poll() waiting on the owner's thread, or the next one, return
  // at once. The only call that is safe from other threads. The default
  // does nothing (poll() returns within its timeout).
  virtual void wake() {}

  // Drops `peer` (a server refusing a worker); no kDisconnected follows.
  virtual void disconnect(PeerId peer) = 0;

  // Server: the owner has verified who `peer` is (the session, once a
  // worker's Auth checks out). Until then a ucx server holds the peer to the
  // pre-authentication limits of Options (small frames, few of them, no
  // shared-memory arena, pageable memory only, and at most
  // max_pending_peers such peers); afterwards to max_message and the
  // receive budget. Client (ucx, with Options::verify_trainer): the same
  // for the trainer (`peer` 0), once the worker has checked the trainer's
  // proof. Calling it again, or for a peer that is gone, does
  // nothing. local:// (threads of this process) and mpi:// (ranks mpirun
  // started together) have no strangers: there it does nothing.
  virtual void authenticated(PeerId /*peer*/) {}

  // Client: room for a frame of up to `size` bytes that send_async() or
  // send() of bytes starting at its data() then sends without copying them
  // (the ucx client's shared-memory arena, once the trainer has accepted
  // it). Null when there is none, or no room now: build the frame
  // elsewhere. Dropped unsent, the room is given back; once sent it
  // belongs to the transport (the storage may be dropped at any time). Safe
  // from any thread. The default has none.
  virtual std::unique_ptr<wire::FrameStorage> reserve(size_t /*size*/) { return nullptr; }

  // How frames went: a client counts its sends, a server its receives.
  struct PathStats {
    uint64_t shared_memory = 0;  // through a shared-memory arena
    uint64_t copied = 0;         // as bytes on the wire (or by cma)
    uint64_t built_in_place = 0;  // client: of shared_memory, built in reserve()d room
    // Client: "off", "offered", "in use", or why not ("not used: ...",
    // "refused by the trainer: ..."); "" where the transport has none.
    std::string shared_memory_status;
  };
  virtual PathStats path_stats() const { return {}; }
};

struct Options {
  uint64_t max_message = uint64_t{1} << 32;  // larger announced frames are refused
  // ucx, limits on a peer not yet authenticated() (anyone who can reach
  // the trainer's port can connect; the port registry names it). Until
  // then the peer is only a socket of the trainer's own (ucx_endpoint.h):
  // nothing of it reaches UCX. A frame larger than preauth_max_message, or
  // more than preauth_max_frames frames, drops the peer with the reason as
  // its kDisconnected event, and nothing of the announced size is
  // allocated. 16 KiB holds the handshake with room to spare: a Hello
  // (worker id, 32-byte nonce) and an Auth (32-byte MAC, or a munge
  // credential of a few hundred bytes) are each under 1 KiB; 8 frames are
  // the two the handshake needs plus what a worker may send before the
  // session has read its Auth. Frames on that socket are at most
  // preauth_max_message bytes in both directions, also on a worker's side.
  size_t preauth_max_message = size_t{16} << 10;
  uint32_t preauth_max_frames = 8;
  // ucx server: at most this many connections not yet authenticated; one
  // more closes one of them first: the oldest that has sent nothing (a
  // worker sends its Hello the moment it connects), else the oldest. The
  // oldest, not the newcomer: refusing newcomers would let whoever holds
  // this many connections open lock every worker out, and keep doing so by
  // reconnecting; closing the oldest silent one costs a real worker its
  // place only if this many connections that have all sent a frame arrive
  // during its own handshake (a round trip), and it retries. 64 covers the
  // workers of a large job starting at once (goldminer-dw retries while its
  // connect timeout lasts). A connection that never sent a frame was never
  // the owner's peer: closing it raises no event. 0: no limit.
  uint32_t max_pending_peers = 64;
  // ucx server: of those, at most this many from one IP address (the
  // room is then made among that address's own): one source cannot push
  // out the workers of other nodes. 0: no limit.
  uint32_t max_pending_per_source = 32;
  // Server: every peer counts as authenticated as soon as it connects (for
  // tests and benchmarks of the transport alone, whose owner has no
  // handshake). Never for a listener others can reach.
  bool trust_on_connect = false;
  // ucx client: the trainer is held to preauth_max_message and
  // preauth_max_frames (its frames into a small pageable pool) until the
  // owner calls authenticated(0). goldminer-dw sets it: whoever listens at
  // a worker's trainer address before the trainer does gets no buffer of a
  // size it announces before it has proved the job.
  bool verify_trainer = false;
  // ucx server: the most bytes the receive pool holds (frames delivered and
  // not yet dropped by their holders, plus cached free buffers; pinned
  // memory with pin_memory). A rendezvous frame that does not fit waits,
  // its sender's send unfinished, until held frames are dropped (back-
  // pressure: nothing is lost; the sender's send timeout still applies);
  // a frame larger than the whole budget drops its peer. Small (eager)
  // frames, which UCX has already received, are counted but never held
  // back. Frames in a worker's shared-memory arena are the worker's memory
  // and not counted. Default 8 GiB: a bound on a runaway (a holder that
  // never drops frames, a flood of large ones), meant to sit well above a
  // session's queue (queue_batches batches) plus the frames in flight; one
  // below what its owner holds by design stalls senders until their send
  // timeout.
  // The session's is SessionOptions::receive_budget_bytes
  // (goldminer-consume --receive-budget-mb).
  uint64_t receive_budget = uint64_t{8} << 30;
  // The longest a send waits for its frame to be taken. ucx server: also
  // how long a worker it bound may take to attach its UCX (frames to it
  // wait in its queue meanwhile, without holding up the sender), else it
  // is dropped.
  int send_timeout_ms = 30000;
  // ucx server: the port UCX's own TCP transport listens on for its data
  // connections (UCX_TCP_PORT_RANGE P-P in this endpoint's context only),
  // one the SPANK plugin reserved, so that a firewall can guard it
  // (launch/job_firewall.h). When UCX cannot take it (another process
  // holds it), the endpoint falls back to an ephemeral port and logs it.
  // 0: an ephemeral port.
  int tcp_data_port = 0;
  // ucx client: the size of its shared-memory arena for frames to a trainer
  // on the same node (virtual; pages are touched as frames use them). 0:
  // every frame goes by copy.
  size_t shm_arena_bytes = size_t{256} << 20;
  // ucx server: a connection that has sent no whole frame within this time
  // is closed (a worker sends its Hello as it connects; once a frame has
  // come the peer is its owner's, whose own handshake timeout covers the
  // rest: munge round trips on a loaded node take longer). 0: never.
  int handshake_timeout_ms = 2000;
  // Server: where received frames' buffers come from (null: pageable).
  // With pinned memory the ucx trainer refuses workers' shared-memory
  // arenas: their frames come by copy into this memory instead.
  std::shared_ptr<HostMemory> memory;
};

// How many send_async() frames an owner keeps in flight on one endpoint:
// always one, and more while they number at most `max_frames` and total at
// most `max_bytes` with the next one. The defaults are goldminer-dw's,
// measured with bench/transport_bench (UCX 1.13, 2 cores, lo): over TCP
// each 1 MiB rendezvous waits two round trips, so with one frame in flight
// the link idles (0.5 of a plain socket; 4 in flight: 0.9-1.1), while
// 8 MiB frames over cma slow each other when several are in flight
// (5.6-7.2 GB/s with 4 against 9.5-11 with one). Not thread-safe.
class SendWindow {
 public:
  static constexpr size_t kDefaultFrames = 4;
  static constexpr size_t kDefaultBytes = size_t{4} << 20;

  explicit SendWindow(size_t max_frames = kDefaultFrames, size_t max_bytes = kDefaultBytes)
      : max_frames_(max_frames < 1 ? 1 : max_frames), max_bytes_(max_bytes) {}

  // Whether a frame of `size` bytes may start now.
  bool open(size_t size) const {
    return frames_ == 0 || (frames_ < max_frames_ && bytes_ + size <= max_bytes_);
  }
  void started(size_t size) {
    ++frames_;
    bytes_ += size;
  }
  void finished(size_t size) {
    --frames_;
    bytes_ -= size;
  }
  size_t frames() const { return frames_; }
  size_t max_frames() const { return max_frames_; }

 private:
  size_t max_frames_, max_bytes_;
  size_t frames_ = 0, bytes_ = 0;
};

// A server endpoint listening at `address`: "ucx://HOST:PORT" (PORT 0 picks
// a free one; address() tells which), "mpi://", "local://NAME". When
// another process holds the port, the error contains kAddressInUse.
Expected<std::unique_ptr<Endpoint>> listen(const std::string& address, const Options& options = {});

inline constexpr char kAddressInUse[] = "the address is in use";

// A client endpoint connected to the trainer at `address`. The server sees
// kConnected for it.
Expected<std::unique_ptr<Endpoint>> connect(const std::string& address, const Options& options = {});

// A string a peer sent (a worker id, an error text, a reason), fit for a
// log line: at most `max` bytes of it, bytes outside printable ASCII as
// \xNN, and, when cut, how long it was.
std::string peer_text(const std::string& s, size_t max = 200);

// "ucx", "mpi" or "local", from an address; an error for anything else.
Expected<std::string> scheme_of(const std::string& address);

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_TRANSPORT_H_
