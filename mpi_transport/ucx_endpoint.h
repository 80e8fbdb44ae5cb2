// UcxEndpoint, the ucx:// transport (transport.h), and what its files share:
// ucx_transport.cc (setup, sends, polling and teardown, for both sides;
// open_ucx), ucx_receive.cc (receiving, both sides), ucx_handshake.cc
// (the handshake sockets, both sides), ucx_trainer.cc (the listening side:
// pending connections, the bind, taking a worker's endpoint, arenas) and
// ucx_worker.cc (the connecting side: its endpoint and its arena).
// Internal to libgoldminer_transport.
//
// ucx://HOST:PORT: the trainer listens on a TCP socket of its own
// (handshake_socket.h says why), so workers connect by socket address
// whenever they start; the frames go by UCX active messages (ucp).
//
// A worker's connection, in order:
//   1. It connects to the trainer's socket. Frames of either side go there
//      as records of at most preauth_max_message bytes (the owner's
//      handshake: Hello, Challenge, Auth or Error).
//   2. When the trainer's owner calls authenticated(peer), the trainer
//      sends a bind record: a random 64-bit token, its boot id and network
//      namespace, and its UCP worker address. Nobody else ever gets that
//      address. A worker takes a bind only from a trainer it has itself
//      authenticated (verify_trainer).
//   3. The worker creates its bulk endpoint from that address, sends on it
//      one attach message (kAttachAmId: its token), and an attached record
//      on the socket (its endpoint's error mode and its UCP address). The
//      attach message means UCX has wired the worker's endpoint and made
//      one for it on the trainer's side (reply_ep); with it and the
//      attached record (all the worker's socket frames are read) the
//      trainer takes that endpoint as its own (ucp_ep_create to the
//      worker's address, which UCX matches to it: until then UCX would
//      destroy it on a peer failure, under the trainer's sends) and sends
//      a ready record. Frames the trainer's owner sends in between wait
//      for that; the worker's next frame waits for the ready record, so
//      every frame after those on the socket follows them in order.
//   bulk     the worker's endpoint to the trainer's address; it sends every
//            message here, the token as AM header (the trainer maps the
//            token to the peer).
//   control  the trainer's side of the same connection, where it sends.
//            Taken only after the worker's endpoint is wired: UCX 1.13
//            pairs endpoints two workers make to each other's addresses,
//            and where the two chose different lanes (two interfaces of a
//            multi-homed node) it aborts ("endpoint reconfiguration not
//            supported yet"; seen on goldminer-devcluster's nodes).
//   Without error-handling mode: UCX selects its shared-memory transports
//   (posix/sysv eager, cma single-copy rendezvous) only for such endpoints
//   (posix/sysv lack peer-failure support), and TCP or the fabric where the
//   trainer is on another node.
//   The socket stays open: its end is the peer's loss on either side
//   (neither endpoint reports failure), with keepalive probes for a node
//   that goes silent.
// Except: a trainer of the same kernel (boot id) in another network
// namespace (a container, goldminer-devcluster's nodes). UCX 1.13 then
// takes it for a peer on this node, but its posix and sysv transports wake
// their peer through an abstract Unix socket, which does not cross network
// namespaces: the bulk endpoint's first message would never be seen. Such
// a worker's bulk endpoint (and so the trainer's side of it) has
// peer-failure mode, where UCX uses neither (TCP, and cma's single copy
// for large frames); the arena, which needs no socket, still works.
//
// A message is one AM with the frame as its data: small ones arrive eagerly
// and are copied once into a pooled buffer; large ones arrive by rendezvous,
// received by UCX straight into a pooled buffer (zero copy; one copy in all
// with cma, which copies from the sender's memory into the receiver's).
//
// Shared memory (shm_arena.h): right after the ready record a worker
// offers the trainer its arena (kShmOfferAmId); the trainer maps it and
// answers on its control endpoint (kShmAckAmId: mapped, or why not).
// From then on the worker copies each frame of at least kShmMinFrame bytes
// into a free arena block (or has built it in one: reserve()) and sends
// only the block's descriptor
// (kShmFrameAmId) on the bulk endpoint, in order with its other messages;
// the trainer delivers the block itself as the frame. A frame the arena has
// no room for, or any frame before the answer, or after a refusal, goes by
// copy as above. A worker on another node is refused (boot id) and sends
// by copy.
//
// Before authentication (transport.h, Endpoint::authenticated) a peer is
// only a socket: the trainer takes at most preauth_max_frames frames of at
// most preauth_max_message bytes, into a small pageable pool of their own
// (never the pinned one), and drops it for anything more, before any buffer
// of the announced size exists; at most max_pending_peers such sockets are
// open (max_pending_per_source from one address), the silent ones evicted
// first, and one that sends no frame within handshake_timeout_ms is closed
// (after its first frame its owner's handshake timeout governs).
#ifndef GOLDMINER_MPI_TRANSPORT_UCX_ENDPOINT_H_
#define GOLDMINER_MPI_TRANSPORT_UCX_ENDPOINT_H_

#include <sys/resource.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "mpi_transport/buffer_pool.h"
#include "mpi_transport/handshake_socket.h"
#include "mpi_transport/shm_arena.h"
#include "mpi_transport/transport.h"

namespace goldminer::transport {

constexpr unsigned kAmId = 7;           // a frame
constexpr unsigned kAttachAmId = 8;     // worker -> trainer: its first message (token only)
constexpr unsigned kShmOfferAmId = 9;   // worker -> trainer: its arena (ShmOffer)
constexpr unsigned kShmAckAmId = 10;    // trainer -> worker: 1 mapped / 0 + why not
constexpr unsigned kShmFrameAmId = 11;  // worker -> trainer: a frame in the arena (ShmDescriptor)
// Smaller frames (lease requests, heartbeats) go by copy: an eager copy of
// a few KiB costs less than the descriptor's round trip.
constexpr size_t kShmMinFrame = 64 << 10;
// An arena offer is a few dozen bytes (ShmOffer::encode); the trainer keeps
// no longer one of a peer it has not authenticated.
constexpr size_t kShmOfferMax = 256;
// How long the trainer keeps taking a worker's bulk messages after its
// socket ended (or, across network namespaces, its endpoint failed).
constexpr auto kBulkGrace = std::chrono::milliseconds(200);
// The trainer's soft descriptor limit at least (where the hard one allows).
constexpr rlim_t kDescriptorSoftLimit = 65536;
// The longest UCP worker address a bind or address record may carry (a
// few hundred bytes per device in UCX 1.13).
constexpr size_t kMaxWorkerAddress = 64 << 10;
// Records one socket yields per read, so one peer cannot hold the loop.
constexpr size_t kRecordsPerRead = 16;
// Connections the trainer accepts per pass of its loop.
constexpr int kAcceptsPerPass = 256;
using Clock = std::chrono::steady_clock;

// The bind record's fixed part; the trainer's worker address follows.
struct BindHead {
  uint64_t token;
  uint64_t network_namespace;  // network_namespace_id(); 0: unknown
  char boot_id[kBootIdLength];  // node_boot_id(), NUL-padded
};

inline std::string ucs_text(ucs_status_t s) { return ucs_status_string(s); }

// "HOST:PORT" (IPv4 or a resolvable name; HOST empty: any) as a socket
// address, its length in `*len`.
Expected<sockaddr_storage> resolve(const std::string& host_port, socklen_t* len);

class UcxEndpoint final : public Endpoint {
 public:
  UcxEndpoint(bool server, Options options) : server_(server), options_(options) {}
  ~UcxEndpoint() override { shutdown(); }

  // Sets UCX up for an endpoint that listens at, or connects to, `host_port`.
  Status init(const std::string& host_port);
  // init's body: UCX's TCP transport on `port` (0: an ephemeral one), on
  // `net_devices` ("": UCX's configured ones).
  Status init_with_tcp_port(int port, const std::string& net_devices);
  void close_ucx();
  Status start_listener(const std::string& host_port);  // ucx_trainer.cc
  Status start_client(const std::string& host_port);    // ucx_worker.cc

  std::string address() const override { return address_; }
  Status send(PeerId peer, const uint8_t* data, size_t size) override;
  Status send_async(PeerId peer, const uint8_t* data, size_t size, std::function<void(Status)> done) override;
  Expected<std::optional<Event>> poll(int timeout_ms) override;
  void disconnect(PeerId peer) override { drop_peer(peer, true); }
  void authenticated(PeerId peer) override;  // ucx_trainer.cc
  std::unique_ptr<wire::FrameStorage> reserve(size_t size) override;  // ucx_worker.cc
  PathStats path_stats() const override { return stats_; }
  void wake() override;

 private:
  // When to keep progressing instead of sleeping (see poll()).
  static constexpr auto kSpinMax = std::chrono::microseconds(100);
  struct Arrivals {
    Clock::time_point last{};
    Clock::duration gap = std::chrono::hours(1);  // moving average between messages
    void seen(Clock::time_point t) {
      if (last != Clock::time_point{}) gap = (gap * 7 + std::min<Clock::duration>(t - last, std::chrono::seconds(1))) / 8;
      last = t;
    }
    bool spin(Clock::time_point now) const { return gap < kSpinMax && now - last < 2 * gap; }
  };

  // A send_async() in flight.
  struct Sent {
    UcxEndpoint* self;
    std::function<void(Status)> done;
    std::string to;
  };

  std::string peer_name(PeerId peer) const { return server_ ? "peer " + std::to_string(peer) : "the trainer"; }

  struct Peer {
    std::unique_ptr<HandshakeSocket> socket;  // the connection to the trainer's socket
    Clock::time_point connected{};    // trainer: when it was accepted
    ucp_ep_h control = nullptr;  // trainer: peer-failure mode, to the worker's address; it sends here
    ucp_ep_h bulk = nullptr;     // worker: its sends; trainer: the reply endpoint of its messages
    uint64_t token = 0;          // trainer: names the peer in the header of its bulk messages
    std::shared_ptr<ShmMapping> shm;  // trainer: the worker's arena, once mapped
    std::string client;               // trainer: the worker's address on the socket, "IP:PORT"
    bool authenticated = false;       // authenticated() was called (trainer: or trust_on_connect;
                                      // worker: or no verify_trainer)
    bool announced = false;           // trainer: kConnected went (at its first frame)
    bool bound = false;               // trainer: the bind record went; worker: it came
    Clock::time_point bound_at{};     // trainer: when the bind record went
    bool attached = false;            // trainer: the worker's attached record came
    bool peer_failure_mode = false;   // trainer: the worker's endpoint has it (another network namespace)
    std::vector<uint8_t> worker_address;  // trainer: the worker's UCP address (its attached record)
    bool ready = false;               // the UCX endpoints exist (trainer: control; worker: bulk)
    uint32_t preauth_frames = 0;      // frames taken before authentication
    bool shm_offered = false;         // trainer: an offer came (only the first counts)
    // Trainer: frames its owner sent after the bind, until the control
    // endpoint exists (send_async's bytes stay valid until `done`).
    struct Queued {
      const uint8_t* data;
      size_t size;
      std::function<void(Status)> done;
      std::string to;
    };
    std::deque<Queued> queued;
  };
  struct Bind {
    uint64_t token = 0;
    std::vector<uint8_t> address;
    bool other_network_namespace = false;  // same kernel, another network namespace
  };
  // One message of a peer in arrival order: an eager one is complete at
  // once, a rendezvous one when its data is in. Events follow this order,
  // so frames sent back to back arrive as sent even when a small eager one
  // overtakes a large one whose data is still being fetched.
  struct Slot {
    std::unique_ptr<Frame> frame;  // null when done: the receive failed
    bool done = false;
  };
  struct RndvRecv {
    UcxEndpoint* self;
    PeerId peer;
    std::shared_ptr<Slot> slot;
  };
  struct Rndv {
    PeerId peer = 0;
    void* desc = nullptr;
    size_t length = 0;
    std::shared_ptr<Slot> slot;
    bool preauth = false;  // into preauth_pool_, not counted in the budget
  };

  // ucx_transport.cc and ucx_receive.cc: both sides.
  Expected<ucs_status_ptr_t> start_send(PeerId peer, const uint8_t* data, size_t size, ucp_request_param_t* p);
  static void on_sent(void* request, ucs_status_t status, void* user_data);
  void wait_efd(int ms);
  void add_peer(PeerId peer, std::unique_ptr<HandshakeSocket> socket);
  void drop_peer(PeerId peer, bool force);
  void abandon(PeerId peer, ucs_status_ptr_t req);
  bool settle(ucs_status_ptr_t req);
  void close_ep(ucp_ep_h ep, bool force);
  void push_disconnect(PeerId peer, std::string reason);
  void send_owned(ucp_ep_h ep, unsigned id, std::vector<uint8_t> bytes, bool with_token);
  void handle_pending();
  void arrived(PeerId peer, std::unique_ptr<Frame> frame);
  void flush(PeerId peer);
  void deliver(PeerId peer, std::unique_ptr<Frame> frame);
  std::string too_large(size_t length) const;
  void refuse(PeerId peer, const std::string& why);
  bool receive_rndv(Rndv* r);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data);
  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param);
  void shutdown();
  // The handshake sockets (both sides).
  void pump();
  void read_socket(PeerId peer);
  void take_record(PeerId peer, Record r);
  void socket_frame(PeerId peer, const std::vector<uint8_t>& bytes);
  std::optional<size_t> record_limit(const Peer& p, RecordKind kind) const;
  std::vector<uint8_t> bind_head(uint64_t token) const;
  bool same_kernel_other_namespace(const BindHead& head) const;
  bool lost(PeerId peer) const;
  std::string failing(PeerId peer) const;

  // ucx_trainer.cc: the listening side.
  void accept_connections();
  void make_room_for(const std::string& source);
  void expire_handshakes();
  void send_bind(PeerId peer);
  void maybe_ready(PeerId peer);
  static ucs_status_t on_attach(void* arg, const void* header, size_t header_length, void*, size_t,
                                const ucp_am_recv_param_t* param);
  void raise_descriptor_limit();
  std::optional<std::string> preauth_refusal(Peer* p, size_t length) const;
  std::vector<uint8_t> answer_shm_offer(Peer* p, const uint8_t* offer, size_t length);
  std::optional<PeerId> sender(const void* header, size_t header_length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_shm_offer(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                   const ucp_am_recv_param_t* param);
  static ucs_status_t on_shm_frame(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                   const ucp_am_recv_param_t* param);

  // ucx_worker.cc: the connecting side.
  Status bind();
  void on_bind(const std::vector<uint8_t>& record);
  void offer_shm(ucp_ep_h bulk);
  static ucs_status_t on_shm_ack(void* arg, const void*, size_t, void* data, size_t length,
                                 const ucp_am_recv_param_t*);

  bool server_;
  Options options_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int listen_fd_ = -1;  // trainer: its handshake socket
  Clock::time_point accept_paused_until_{};  // trainer: out of descriptors, nothing to close
  int efd_ = -1;
  bool unfinished_close_ = false;
  std::atomic<bool> woken_{false};
  std::string address_;
  std::vector<uint8_t> worker_address_;  // this side's UCP worker address (the bind or address record)
  const std::string boot_id_ = node_boot_id();                // bind record: same kernel?
  const uint64_t network_namespace_ = network_namespace_id();  // bind record: same network namespace?
  std::optional<Bind> bind_;             // worker: the trainer's bind record
  std::shared_ptr<BufferPool> pool_ = BufferPool::create(size_t{1} << 30, options_.memory, options_.receive_budget);
  // Frames of peers not yet authenticated, pageable whatever
  // options_.memory is (nothing is registered with CUDA for a stranger);
  // bounded by max_pending_peers x preauth_max_frames x preauth_max_message.
  std::shared_ptr<BufferPool> preauth_pool_ = BufferPool::create(size_t{1} << 20, pageable_memory());
  std::set<PeerId> unauthenticated_;  // trainer: the oldest first
  std::set<PeerId> unattached_;       // trainer: bound, their UCX not attached yet
  bool waiting_for_room_ = false;     // a rendezvous frame waits for the receive budget
  std::map<PeerId, Peer> peers_;
  std::unordered_map<ucp_ep_h, PeerId> peer_of_;    // endpoint with failure reports -> peer
  std::unordered_map<uint64_t, PeerId> peer_of_token_;  // trainer: token -> peer
  PeerId next_peer_ = 1;
  std::deque<Event> events_;
  std::deque<std::pair<ucp_ep_h, ucs_status_t>> failed_;
  std::deque<std::pair<PeerId, std::string>> lost_;  // peers whose socket ended, and why
  struct Closing {
    PeerId peer;
    std::string reason;
    Clock::time_point at;  // when to drop the peer and report it
  };
  std::deque<Closing> closing_;  // peers whose socket or control endpoint failed
  std::deque<Rndv> rndv_;
  std::map<PeerId, std::deque<std::shared_ptr<Slot>>> order_;  // peers with a rendezvous in progress
  std::deque<std::pair<PeerId, std::string>> refused_;  // peers to drop, and why
  std::deque<PeerId> attaching_;  // trainer: workers whose kAttachAmId came
  std::deque<std::pair<PeerId, std::vector<uint8_t>>> shm_acks_;  // trainer: answers to send
  std::shared_ptr<ShmArena> arena_;  // worker: its shared-memory frames
  // Worker: the arena's state; stats_.shared_memory_status says it in words.
  // Atomic: reserve() reads it on other threads (and arena_ only once it is
  // kInUse, after which arena_ does not change).
  enum class Shm { kNotUsed, kOffered, kInUse };
  std::atomic<Shm> shm_{Shm::kNotUsed};
  Arrivals arrival_;
  PathStats stats_;
  bool shm_tried_ = false;  // worker: the arena was offered (or is off)
  // Trainer: connections closed before they sent a frame (evicted or
  // timed out), and when that was last logged.
  uint64_t silent_closed_ = 0, silent_logged_ = 0;
  Clock::time_point silent_log_at_{};
};

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_UCX_ENDPOINT_H_
