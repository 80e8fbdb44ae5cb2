// ucx://HOST:PORT: UCX active messages (ucp) over a listener, so workers
// connect by socket address whenever they start.
//
// Each worker (client) has two endpoints to its trainer (server):
//   control  created by socket address with UCP_ERR_HANDLING_MODE_PEER, so a
//            lost peer (kill -9, a dead node) becomes a kDisconnected event.
//            The trainer sends on it; the worker sends nothing on it.
//   bulk     created by the trainer's worker address, which the trainer
//            sends on the control endpoint right after accepting it
//            (kBindAmId: a random 64-bit token, the trainer's boot id and
//            network namespace, the address), without error-handling
//            mode. UCX 1.13 selects its shared-memory transports
//            (posix/sysv eager, cma single-copy rendezvous) only for such
//            endpoints (posix/sysv lack peer-failure support), and
//            TCP or the fabric where the trainer is on another node. The
//            worker sends every message on it, the token as AM header; the
//            trainer maps the token to the peer. One endpoint per direction
//            keeps each direction in order. When the control endpoint fails,
//            the bulk endpoint is closed with it.
// A worker's first send waits for the bind message (or the trainer's
// failure) and creates the bulk endpoint, so no message of a worker goes
// on the control endpoint. Except: a trainer of the same kernel (boot id)
// in another network namespace (a container, goldminer-devcluster's
// nodes). UCX 1.13 then takes it for a peer on this node, but its posix and
// sysv transports wake their peer through an abstract Unix socket, which
// does not cross network namespaces: the bulk endpoint's first message
// would never be seen. Such a worker sends on its control endpoint, where
// UCX uses neither (TCP, and cma's single copy for large frames); the
// arena, which needs no socket, still works.
//
// A message is one AM with the frame as its data: small ones arrive eagerly
// and are copied once into a pooled buffer; large ones arrive by rendezvous,
// received by UCX straight into a pooled buffer (zero copy; one copy in all
// with cma, which copies from the sender's memory into the receiver's).
//
// Shared memory (shm_arena.h): right after creating its bulk endpoint a
// worker offers the trainer its arena (kShmOfferAmId); the trainer maps it
// and answers on the control endpoint (kShmAckAmId: mapped, or why not).
// From then on the worker copies each frame of at least kShmMinFrame bytes
// into a free arena block (or has built it in one: reserve()) and sends
// only the block's descriptor
// (kShmFrameAmId) on the bulk endpoint, in order with its other messages;
// the trainer delivers the block itself as the frame. A frame the arena has
// no room for, or any frame before the answer, or after a refusal, goes by
// copy as above. A worker on another node is refused (boot id) and sends
// by copy.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "gmcore/auth.h"
#include "gmcore/log.h"
#include "mpi_transport/buffer_pool.h"
#include "mpi_transport/shm_arena.h"
#include "mpi_transport/stale_sockets.h"
#include "mpi_transport/transport_impl.h"

namespace goldminer::transport {
namespace {

constexpr unsigned kAmId = 7;           // a frame
constexpr unsigned kBindAmId = 8;       // trainer -> worker: BindHead + trainer's worker address
constexpr unsigned kShmOfferAmId = 9;   // worker -> trainer: its arena (ShmOffer)
constexpr unsigned kShmAckAmId = 10;    // trainer -> worker: 1 mapped / 0 + why not
constexpr unsigned kShmFrameAmId = 11;  // worker -> trainer: a frame in the arena (ShmDescriptor)
// Smaller frames (lease requests, heartbeats) go by copy: an eager copy of
// a few KiB costs less than the descriptor's round trip.
constexpr size_t kShmMinFrame = 64 << 10;
// How long the trainer keeps taking a worker's bulk messages after its
// control endpoint failed.
constexpr auto kBulkGrace = std::chrono::milliseconds(200);
// How often the trainer looks for accepted sockets that are none of its
// workers' (stale_sockets.h).
constexpr auto kSweepInterval = std::chrono::seconds(1);
using Clock = std::chrono::steady_clock;

// The bind message's fixed part; the trainer's worker address follows.
struct BindHead {
  uint64_t token;
  uint64_t network_namespace;  // network_namespace_id(); 0: unknown
  char boot_id[kBootIdLength];  // node_boot_id(), NUL-padded
};

std::string ucs_text(ucs_status_t s) { return ucs_status_string(s); }

Expected<sockaddr_storage> resolve(const std::string& host_port, socklen_t* len) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon + 1 == host_port.size())
    return Status::error("ucx: address '" + host_port + "': expected HOST:PORT");
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? "0.0.0.0" : host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return Status::error("ucx: address '" + host_port + "': " + gai_strerror(rc));
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return ss;
}

class UcxEndpoint final : public Endpoint {
 public:
  UcxEndpoint(bool server, Options options) : server_(server), options_(options) {}
  ~UcxEndpoint() override { shutdown(); }

  Status init() {
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) return Status::error("ucx: reading the UCX configuration: " + ucs_text(s));
    // With UCX 1.13's put_zcopy rendezvous, a worker killed mid-transfer
    // left the trainer an endpoint UCX had freed (a segfault in
    // ucp_am_send_nbx, in the kill -9 test). A lost worker must never take
    // the trainer down: that scheme is replaced by UCX's own choice.
    if (const char* v = std::getenv("UCX_RNDV_SCHEME"); v != nullptr && strcasecmp(v, "put_zcopy") == 0) {
      if (ucp_config_modify(config, "RNDV_SCHEME", "auto") == UCS_OK)
        log::error("goldminer: warning: UCX_RNDV_SCHEME=put_zcopy ignored (with this UCX a worker that dies "
                   "mid-transfer crashes the trainer); using auto");
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) return Status::error("ucx: ucp_init: " + ucs_text(s));
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    s = ucp_worker_create(context_, &wp, &worker_);
    if (s != UCS_OK) return Status::error("ucx: ucp_worker_create: " + ucs_text(s));
    s = ucp_worker_get_efd(worker_, &efd_);
    if (s != UCS_OK) return Status::error("ucx: ucp_worker_get_efd: " + ucs_text(s));
    for (auto [id, cb] : {std::pair{kAmId, &UcxEndpoint::on_am}, std::pair{kBindAmId, &UcxEndpoint::on_bind},
                          std::pair{kShmOfferAmId, &UcxEndpoint::on_shm_offer},
                          std::pair{kShmAckAmId, &UcxEndpoint::on_shm_ack},
                          std::pair{kShmFrameAmId, &UcxEndpoint::on_shm_frame}}) {
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
      hp.id = id;
      hp.cb = cb;
      hp.arg = this;
      hp.flags = UCP_AM_FLAG_WHOLE_MSG;
      s = ucp_worker_set_am_recv_handler(worker_, &hp);
      if (s != UCS_OK) return Status::error("ucx: setting the AM handler: " + ucs_text(s));
    }
    return Status();
  }

  Status start_listener(const std::string& host_port) {
    socklen_t len = 0;
    auto addr = resolve(host_port, &len);
    if (!addr.ok()) return addr.status();
    ucp_address_t* worker_address = nullptr;
    size_t worker_address_size = 0;
    ucs_status_t s = ucp_worker_get_address(worker_, &worker_address, &worker_address_size);
    if (s != UCS_OK) return Status::error("ucx: ucp_worker_get_address: " + ucs_text(s));
    const auto* a = reinterpret_cast<const uint8_t*>(worker_address);
    worker_address_.assign(a, a + worker_address_size);
    ucp_worker_release_address(worker_, worker_address);
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*addr);
    lp.sockaddr.addrlen = len;
    lp.conn_handler.cb = &UcxEndpoint::on_conn_request;
    lp.conn_handler.arg = this;
    s = ucp_listener_create(worker_, &lp, &listener_);
    if (s == UCS_ERR_BUSY)  // UCX's word for EADDRINUSE
      return Status::error("ucx: listening on " + host_port + ": the address is in use (another process listens "
                           "on that port; choose another, or port 0 for any free one)");
    if (s != UCS_OK) return Status::error("ucx: listening on " + host_port + ": " + ucs_text(s));
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucp_listener_query(listener_, &attr);
    if (s != UCS_OK) return Status::error("ucx: ucp_listener_query: " + ucs_text(s));
    const auto* in = reinterpret_cast<const sockaddr_in*>(&attr.sockaddr);
    char ip[64] = "";
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    address_ = "ucx://" + std::string(ip) + ":" + std::to_string(ntohs(in->sin_port));
    if (options_.handshake_timeout_ms > 0)
      sweeper_.emplace(ntohs(in->sin_port), std::chrono::milliseconds(options_.handshake_timeout_ms));
    return Status();
  }

  // Connects the control endpoint. The bulk endpoint follows when the
  // trainer's bind message arrives (bind()).
  Status start_client(const std::string& host_port) {
    socklen_t len = 0;
    auto addr = resolve(host_port, &len);
    if (!addr.ok()) return addr.status();
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*addr);
    ep.sockaddr.addrlen = len;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &UcxEndpoint::on_ep_error;
    ep.err_handler.arg = this;
    ucp_ep_h h = nullptr;
    ucs_status_t s = ucp_ep_create(worker_, &ep, &h);
    if (s != UCS_OK) return Status::error("ucx: connecting to " + host_port + ": " + ucs_text(s));
    add_peer(0, h, 0);
    address_ = "ucx://" + host_port;
    return Status();
  }

  std::string address() const override { return address_; }

  Status send(PeerId peer, const uint8_t* data, size_t size) override {
    ucp_request_param_t p{};
    auto started = start_send(peer, data, size, &p);
    if (!started.ok()) return started.status();
    ucs_status_ptr_t req = *started;
    if (req == nullptr) return Status();
    const bool bulk = !server_;
    const std::string to = peer_name(peer);
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
    ucs_status_t s;
    while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) {
      if (ucp_worker_progress(worker_) != 0) continue;
      // The bulk endpoint reports no failure: its control endpoint does.
      const bool lost = bulk && !failed_.empty();
      if (lost || Clock::now() > deadline) {
        const std::string why =
            lost ? "connection lost: " + ucs_text(failed_.front().second)
                 : "not taken within " + std::to_string(options_.send_timeout_ms) + " ms";
        if (bulk) {
          // The bulk endpoint has no error handling: the connection goes.
          abandon(peer, req);
          push_disconnect(peer, why);
        } else {
          ucp_request_cancel(worker_, req);
          while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker_);
          ucp_request_free(req);
        }
        return Status::error("ucx: send to " + to + ": " + why);
      }
      // Sleep until UCX has something to progress (the receiver fetched the
      // data, or acknowledged it); the cap bounds the wait on transports
      // that signal no events.
      if (ucp_worker_arm(worker_) == UCS_OK) wait_efd(10);
    }
    ucp_request_free(req);
    if (s != UCS_OK) return Status::error("ucx: send to " + to + ": " + ucs_text(s));
    return Status();
  }

  Status send_async(PeerId peer, const uint8_t* data, size_t size, std::function<void(Status)> done) override {
    auto* cb = new Sent{this, std::move(done), peer_name(peer)};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &UcxEndpoint::on_sent;
    p.user_data = cb;
    auto started = start_send(peer, data, size, &p);
    if (!started.ok() || *started == nullptr) {
      std::unique_ptr<Sent> owned(cb);
      if (!started.ok()) return started.status();
      owned->done(Status());  // sent at once
    }
    return Status();  // else on_sent runs on completion
  }

  // Sleeps on the worker's event fd when nothing is there, except while
  // messages stream in faster than every kSpinMax: then it keeps
  // progressing for up to twice the recent gap between them. A sleeping
  // receiver makes each sender signal it (a system call and a wake-up,
  // ~15 us on a virtual machine): at 1 MiB frames through shared memory
  // that cost a third of the throughput. The spin costs this thread's CPU
  // only while frames arrive that fast.
  Expected<std::optional<Event>> poll(int timeout_ms) override {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      // Returns as soon as an event is there: draining all progress first
      // would hold the first of a burst of eager frames until the burst
      // ends (the receiver's queue, not the sender's credits, would then
      // bound what arrives).
      while (events_.empty() && ucp_worker_progress(worker_) != 0) {
      }
      handle_pending();
      sweep_stale();
      if (!events_.empty()) {
        Event e = std::move(events_.front());
        events_.pop_front();
        if (e.kind == Event::Kind::kMessage) arrival_.seen(Clock::now());
        return std::optional<Event>(std::move(e));
      }
      if (woken_.exchange(false)) return std::optional<Event>();
      const auto now = Clock::now();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
      if (left <= 0) return std::optional<Event>();
      if (arrival_.spin(now)) continue;
      ucs_status_t s = ucp_worker_arm(worker_);
      if (s == UCS_ERR_BUSY) continue;
      if (s != UCS_OK) return Status::error("ucx: ucp_worker_arm: " + ucs_text(s));
      wait_efd(static_cast<int>(std::min<long long>(left, 100)));
    }
  }

  void disconnect(PeerId peer) override { drop_peer(peer, true); }

  std::unique_ptr<wire::FrameStorage> reserve(size_t size) override {
    if (shm_.load(std::memory_order_acquire) != Shm::kInUse || size < kShmMinFrame) return nullptr;
    return arena_->reserve(size);
  }

  PathStats path_stats() const override { return stats_; }

  void wake() override {
    woken_ = true;
    if (worker_ != nullptr) ucp_worker_signal(worker_);
  }

 private:
  // Worker: waits for the trainer's bind message (the trainer sends it when
  // it accepts the connection) and creates the bulk endpoint from it.
  Status bind() {
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
    while (!bind_.has_value()) {
      if (!failed_.empty()) return Status::error("ucx: connecting to the trainer: " + ucs_text(failed_.front().second));
      if (Clock::now() > deadline)
        return Status::error("ucx: connecting to the trainer: not accepted within " +
                             std::to_string(options_.send_timeout_ms) + " ms");
      if (ucp_worker_progress(worker_) == 0 && ucp_worker_arm(worker_) == UCS_OK) wait_efd(10);
    }
    auto it = peers_.find(0);
    if (it == peers_.end()) return Status::error("ucx: connecting to the trainer: connection closed");
    if (bind_->other_network_namespace) {
      log::info("goldminer: ucx: the trainer shares this kernel but not its network namespace: sending on the "
                "connection endpoint (UCX's posix and sysv transports cannot wake a peer there)");
      it->second.bulk = it->second.control;
      offer_shm(it->second.bulk);
      return Status();
    }
    ucp_ep_params_t bulk{};
    bulk.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    bulk.address = reinterpret_cast<const ucp_address_t*>(bind_->address.data());
    bulk.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ucs_status_t s = ucp_ep_create(worker_, &bulk, &it->second.bulk);
    if (s != UCS_OK) return Status::error("ucx: connecting to the trainer (bulk endpoint): " + ucs_text(s));
    offer_shm(it->second.bulk);
    return Status();
  }

  // Worker: creates the arena and offers it to the trainer, which answers
  // with kShmAckAmId. Frames go by copy until it has accepted.
  void offer_shm(ucp_ep_h bulk) {
    if (options_.shm_arena_bytes == 0) {
      stats_.shared_memory_status = "off";
      return;
    }
    auto arena = ShmArena::create(options_.shm_arena_bytes);
    if (!arena.ok()) {
      stats_.shared_memory_status = "not used: " + arena.status().message();
      return;
    }
    arena_ = std::move(arena).value();
    shm_ = Shm::kOffered;
    stats_.shared_memory_status = "offered";
    send_owned(bulk, kShmOfferAmId, arena_->offer().encode(), true);
    // The answer comes within a round trip; waiting for it here (once per
    // connection) makes every frame after the first send's take one path.
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
    while (shm_ == Shm::kOffered && failed_.empty() && Clock::now() < deadline) {
      if (ucp_worker_progress(worker_) == 0 && ucp_worker_arm(worker_) == UCS_OK) wait_efd(10);
    }
    if (shm_ == Shm::kOffered) {
      shm_ = Shm::kNotUsed;
      stats_.shared_memory_status = "not used: the trainer did not answer";
    }
  }

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

  // Starts one AM with the frame to `peer` (a worker: on its bulk endpoint,
  // its token as header, binding first; the trainer: on the control
  // endpoint) with the caller's completion settings in `p`. nullptr: done.
  Expected<ucs_status_ptr_t> start_send(PeerId peer, const uint8_t* data, size_t size, ucp_request_param_t* p) {
    auto it = peers_.find(peer);
    if (it == peers_.end()) return Status::error("ucx: no connection to peer " + std::to_string(peer));
    const bool bulk = !server_;
    if (bulk && it->second.bulk == nullptr) {
      Status s = bind();
      if (!s.ok()) return s;
    }
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    p->flags = UCP_AM_SEND_FLAG_REPLY;
    if (!bulk) {
      ucs_status_ptr_t req = ucp_am_send_nbx(it->second.control, kAmId, nullptr, 0, data, size, p);
      if (UCS_PTR_IS_ERR(req))
        return Status::error("ucx: send to " + peer_name(peer) + ": " + ucs_text(UCS_PTR_STATUS(req)));
      return req;
    }
    // A worker's frame: its descriptor if the arena takes it (the
    // descriptor lives in the block until the trainer releases it), else
    // the bytes. UCX 1.13 reads the header until the send completes: the
    // token lives in bind_ as long as the endpoint.
    const ShmDescriptor* d = nullptr;
    const bool in_place = arena_ != nullptr && arena_->owns(data);
    if (in_place) {  // built in a block reserve() gave
      d = arena_->commit(data, size);
      if (d == nullptr)
        return Status::error("ucx: send to " + peer_name(peer) + ": " + std::to_string(size) +
                             " bytes in the shared-memory arena that are not a whole reserved block");
    } else if (shm_ == Shm::kInUse && size >= kShmMinFrame) {
      d = arena_->put(data, size);
    }
    ucs_status_ptr_t req =
        d != nullptr ? ucp_am_send_nbx(it->second.bulk, kShmFrameAmId, &bind_->token, sizeof bind_->token, d,
                                       sizeof *d, p)
                     : ucp_am_send_nbx(it->second.bulk, kAmId, &bind_->token, sizeof bind_->token, data, size, p);
    if (UCS_PTR_IS_ERR(req)) {
      if (d != nullptr) arena_->unput(d);
      return Status::error("ucx: send to " + peer_name(peer) + ": " + ucs_text(UCS_PTR_STATUS(req)));
    }
    ++(d != nullptr ? stats_.shared_memory : stats_.copied);
    if (in_place) ++stats_.built_in_place;
    return req;
  }

  static void on_sent(void* request, ucs_status_t status, void* user_data) {
    std::unique_ptr<Sent> sent(static_cast<Sent*>(user_data));
    ucp_request_free(request);
    sent->self->woken_ = true;  // the owner may send again: poll() returns
    sent->done(status == UCS_OK ? Status() : Status::error("ucx: send to " + sent->to + ": " + ucs_text(status)));
  }

  struct Peer {
    ucp_ep_h control = nullptr;  // peer-failure mode; the trainer sends here
    ucp_ep_h bulk = nullptr;     // the worker's sends (client: its own; server: the reply endpoint)
    uint64_t token = 0;          // trainer: names the peer in the header of its bulk messages
    std::shared_ptr<ShmMapping> shm;  // trainer: the worker's arena, once mapped
    std::string client;               // trainer: the worker's address on the listener, "IP:PORT"
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

  void wait_efd(int ms) {
    pollfd p{efd_, POLLIN, 0};
    ::poll(&p, 1, ms);
  }

  void add_peer(PeerId peer, ucp_ep_h control, uint64_t token) {
    peers_[peer] = Peer{control, nullptr, token, nullptr, ""};
    peer_of_[control] = peer;
    if (server_) peer_of_token_[token] = peer;
  }

  // Forgets `peer` and closes its endpoints. `force`: at once, dropping
  // what is not sent yet; else the bulk endpoint is flushed first, so what
  // a worker sent before closing arrives, and the control endpoint (the
  // other side's disconnect signal) is closed after it.
  void drop_peer(PeerId peer, bool force) {
    auto it = peers_.find(peer);
    if (it == peers_.end()) return;
    const Peer p = it->second;
    peer_of_.erase(p.control);
    if (server_) peer_of_token_.erase(p.token);
    peers_.erase(it);
    order_.erase(peer);
    if (p.bulk != nullptr && p.bulk != p.control) close_ep(p.bulk, force);
    close_ep(p.control, p.bulk == p.control ? force : true);
  }

  // A send that cannot finish: closing the endpoints completes it (with an
  // error), then it is freed and the peer is gone.
  void abandon(PeerId peer, ucs_status_ptr_t req) {
    drop_peer(peer, true);
    if (!settle(req)) ucp_request_cancel(worker_, req);
    ucp_request_free(req);
  }

  // Progresses until `req` completes, up to 2 s; whether it did.
  bool settle(ucs_status_ptr_t req) {
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) {
      if (ucp_worker_progress(worker_) == 0) wait_efd(1);
    }
    return ucp_request_check_status(req) != UCS_INPROGRESS;
  }

  // Closes `ep`, waiting up to 2 s. A graceful close that does not finish
  // (the peer stopped progressing) is left pending: freeing it, or
  // destroying the worker under it, would trip UCX's assertions.
  void close_ep(ucp_ep_h ep, bool force) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
    if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
    if (!settle(req)) {
      unfinished_close_ = true;
      return;
    }
    ucp_request_free(req);
  }

  void push_disconnect(PeerId peer, std::string reason) {
    Event e;
    e.kind = Event::Kind::kDisconnected;
    e.peer = peer;
    e.reason = std::move(reason);
    events_.push_back(std::move(e));
  }

  // Trainer: tells a new worker its token and where to send (kBindAmId).
  void send_bind(ucp_ep_h ep, uint64_t token) {
    BindHead head{};
    head.token = token;
    head.network_namespace = network_namespace_;
    std::memcpy(head.boot_id, boot_id_.data(), std::min(boot_id_.size(), sizeof head.boot_id));
    std::vector<uint8_t> payload(sizeof head + worker_address_.size());
    std::memcpy(payload.data(), &head, sizeof head);
    std::memcpy(payload.data() + sizeof head, worker_address_.data(), worker_address_.size());
    send_owned(ep, kBindAmId, std::move(payload), false);
  }

  // Sends a small control message that owns its bytes, without waiting:
  // they are freed when the send completes. `with_token`: a worker's
  // message on its bulk endpoint (its token as header).
  void send_owned(ucp_ep_h ep, unsigned id, std::vector<uint8_t> bytes, bool with_token) {
    auto* payload = new std::vector<uint8_t>(std::move(bytes));
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = [](void* request, ucs_status_t, void* user_data) {
      delete static_cast<std::vector<uint8_t>*>(user_data);
      ucp_request_free(request);
    };
    p.user_data = payload;
    ucs_status_ptr_t req =
        with_token ? ucp_am_send_nbx(ep, id, &bind_->token, sizeof bind_->token, payload->data(), payload->size(), &p)
                   : ucp_am_send_nbx(ep, id, nullptr, 0, payload->data(), payload->size(), &p);
    if (req == nullptr || UCS_PTR_IS_ERR(req)) delete payload;  // else the callback frees it
  }

  void handle_pending() {
    // New connections.
    while (!conn_requests_.empty()) {
      ucp_conn_request_h req = conn_requests_.front();
      conn_requests_.pop_front();
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
      ep.conn_request = req;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &UcxEndpoint::on_ep_error;
      ep.err_handler.arg = this;
      // The token only the worker this bind reaches learns (getrandom).
      auto nonce = auth::random_nonce();
      if (!nonce.ok()) {
        ucp_listener_reject(listener_, req);
        continue;
      }
      uint64_t token;
      std::memcpy(&token, nonce->data(), sizeof token);
      ucp_conn_request_attr_t attr{};
      attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
      const std::string client = ucp_conn_request_query(req, &attr) == UCS_OK
                                     ? sockaddr_text(&attr.client_address, sizeof attr.client_address)
                                     : "";
      if (client.empty() && sweeper_) {
        // Its socket could not be told from junk: sweep nothing rather
        // than reset a worker.
        sweeper_.reset();
        log::info("goldminer: ucx: a worker's address is unknown (ucp_conn_request_query); connections to " +
                  address_ + " that send junk or nothing are no longer reset");
      }
      ucp_ep_h h = nullptr;
      if (const ucs_status_t s = ucp_ep_create(worker_, &ep, &h); s != UCS_OK) {
        // UCX 1.13 has already rejected and freed the request on its
        // failure paths (rejecting it again would free it twice); a socket
        // it leaves open is not a worker's, so the sweeper resets it.
        log::info("goldminer: ucx: could not accept a connection from " + (client.empty() ? "?" : client) +
                  " on " + address_ + ": " + ucs_status_string(s));
        continue;
      }
      const PeerId peer = next_peer_++;
      add_peer(peer, h, token);
      peers_[peer].client = client;
      send_bind(h, token);
      Event e;
      e.kind = Event::Kind::kConnected;
      e.peer = peer;
      events_.push_back(std::move(e));
    }
    // Control endpoints that failed: close the peer's endpoints and tell the
    // owner. The trainer first takes, for a short grace, what the worker
    // sent on its bulk endpoint before it closed (its last lease returns
    // may still be on their way there when the control endpoint's failure
    // is seen).
    const auto now = Clock::now();
    while (!failed_.empty()) {
      auto [ep, status] = failed_.front();
      failed_.pop_front();
      auto it = peer_of_.find(ep);
      if (it == peer_of_.end()) continue;  // already dropped by disconnect()
      closing_.push_back({it->second, status, server_ ? now + kBulkGrace : now});
      peer_of_.erase(it);  // one report per failure
    }
    while (!closing_.empty() && (closing_.front().at <= now || peers_.count(closing_.front().peer) == 0)) {
      const Closing c = closing_.front();
      closing_.pop_front();
      if (peers_.count(c.peer) == 0) continue;  // dropped by disconnect() meanwhile
      drop_peer(c.peer, true);
      push_disconnect(c.peer, "connection lost: " + ucs_text(c.status));
    }
    // Answers to shared-memory offers.
    while (!shm_acks_.empty()) {
      auto [peer, answer] = std::move(shm_acks_.front());
      shm_acks_.pop_front();
      auto it = peers_.find(peer);
      if (it != peers_.end()) send_owned(it->second.control, kShmAckAmId, std::move(answer), false);
    }
    // Peers that sent what we cannot take.
    while (!refused_.empty()) {
      auto [peer, why] = std::move(refused_.front());
      refused_.pop_front();
      refuse(peer, why);
    }
    // Rendezvous messages: receive into a pooled buffer.
    while (!rndv_.empty()) {
      Rndv r = std::move(rndv_.front());
      rndv_.pop_front();
      auto buffer = pool_->take(r.length);
      if (!buffer) {
        refuse(r.peer, too_large(r.length));
        continue;
      }
      uint8_t* into = buffer->mutable_data();
      r.slot->frame = std::move(buffer);
      auto* ctx = new RndvRecv{this, r.peer, r.slot};
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = &UcxEndpoint::on_rndv_done;
      p.user_data = ctx;
      ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_, r.desc, into, r.length, &p);
      if (req == nullptr || UCS_PTR_IS_ERR(req)) {
        if (req != nullptr) r.slot->frame.reset();
        r.slot->done = true;
        delete ctx;
        flush(r.peer);
      }  // else on_rndv_done runs on completion and frees the request
    }
  }

  // Trainer: resets the accepted sockets that have been none of its
  // workers' for handshake_timeout_ms (stale_sockets.h), at most every
  // kSweepInterval. Runs after handle_pending(), so a connection request
  // UCX has handed over is already a worker.
  void sweep_stale() {
    const auto now = Clock::now();
    if (!sweeper_ || now < next_sweep_) return;
    next_sweep_ = now + kSweepInterval;
    std::set<std::string> known;
    for (const auto& [id, p] : peers_) known.insert(p.client);
    for (const std::string& from : sweeper_->sweep(known, now))
      log::info("goldminer: ucx: reset the connection from " + from + " to " + address_ +
                ": no connection request of a goldminer worker within " +
                std::to_string(options_.handshake_timeout_ms) + " ms");
  }

  // A whole message from `peer`: an event now, or after the messages
  // before it.
  void arrived(PeerId peer, std::unique_ptr<Frame> frame) {
    auto it = order_.find(peer);
    if (it == order_.end() || it->second.empty()) return deliver(peer, std::move(frame));
    auto slot = std::make_shared<Slot>();
    slot->frame = std::move(frame);
    slot->done = true;
    it->second.push_back(std::move(slot));
  }

  // Delivers `peer`'s messages that are complete and next in order.
  void flush(PeerId peer) {
    auto it = order_.find(peer);
    if (it == order_.end()) return;
    auto& q = it->second;
    while (!q.empty() && q.front()->done) {
      if (q.front()->frame) deliver(peer, std::move(q.front()->frame));
      q.pop_front();
    }
    if (q.empty()) order_.erase(it);
  }

  void deliver(PeerId peer, std::unique_ptr<Frame> frame) {
    if (peers_.count(peer) == 0) return;  // dropped meanwhile
    Event e;
    e.kind = Event::Kind::kMessage;
    e.peer = peer;
    e.frame = std::move(frame);
    events_.push_back(std::move(e));
  }

  std::string too_large(size_t length) const {
    return "message of " + std::to_string(length) + " bytes refused (limit " + std::to_string(options_.max_message) +
           ")";
  }

  // Drops `peer` for a message it should not have sent.
  void refuse(PeerId peer, const std::string& why) {
    if (peers_.count(peer) == 0) return;
    drop_peer(peer, true);
    push_disconnect(peer, why);
  }

  static void on_conn_request(ucp_conn_request_h req, void* arg) {
    static_cast<UcxEndpoint*>(arg)->conn_requests_.push_back(req);
  }
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
    static_cast<UcxEndpoint*>(arg)->failed_.emplace_back(ep, status);
  }
  static void on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data) {
    std::unique_ptr<RndvRecv> ctx(static_cast<RndvRecv*>(user_data));
    ucp_request_free(request);
    if (status != UCS_OK) ctx->slot->frame.reset();
    ctx->slot->done = true;
    ctx->self->flush(ctx->peer);
  }
  // Worker: the trainer's bind message (only the first counts).
  static ucs_status_t on_bind(void* arg, const void*, size_t, void* data, size_t length,
                              const ucp_am_recv_param_t*) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    if (self->server_ || self->bind_.has_value() || length <= sizeof(BindHead)) return UCS_OK;
    BindHead head;
    std::memcpy(&head, data, sizeof head);
    Bind b;
    b.token = head.token;
    const auto* a = static_cast<const uint8_t*>(data) + sizeof head;
    b.address.assign(a, a + (length - sizeof head));
    const std::string boot_id(head.boot_id, strnlen(head.boot_id, sizeof head.boot_id));
    b.other_network_namespace = !boot_id.empty() && boot_id == self->boot_id_ && head.network_namespace != 0 &&
                                self->network_namespace_ != 0 && head.network_namespace != self->network_namespace_;
    self->bind_ = std::move(b);
    return UCS_OK;
  }
  // Trainer: the worker a message on a bulk endpoint comes from (its token
  // is the header); nothing for an unknown token.
  std::optional<PeerId> sender(const void* header, size_t header_length, const ucp_am_recv_param_t* param) {
    if (header_length != sizeof(uint64_t)) return std::nullopt;
    uint64_t token;
    std::memcpy(&token, header, sizeof token);
    auto it = peer_of_token_.find(token);
    if (it == peer_of_token_.end()) return std::nullopt;
    Peer& p = peers_[it->second];
    if (p.bulk == nullptr && (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) p.bulk = param->reply_ep;
    return it->second;
  }

  // Trainer: a worker's arena. Mapped here, so the frames that follow it on
  // the bulk endpoint find it; answered from the event loop.
  static ucs_status_t on_shm_offer(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                   const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    if (!self->server_ || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
    auto peer = self->sender(header, header_length, param);
    if (!peer || self->peers_[*peer].shm) return UCS_OK;
    auto offer = ShmOffer::decode(static_cast<const uint8_t*>(data), length);
    Expected<std::shared_ptr<ShmMapping>> mapped =
        offer.ok() ? ShmMapping::open(*offer) : Expected<std::shared_ptr<ShmMapping>>(offer.status());
    std::vector<uint8_t> answer{static_cast<uint8_t>(mapped.ok() ? 1 : 0)};
    if (mapped.ok()) {
      self->peers_[*peer].shm = std::move(mapped).value();
    } else {
      const std::string& why = mapped.status().message();
      answer.insert(answer.end(), why.begin(), why.end());
    }
    self->shm_acks_.emplace_back(*peer, std::move(answer));
    return UCS_OK;
  }

  // Worker: the trainer's answer to the offer.
  static ucs_status_t on_shm_ack(void* arg, const void*, size_t, void* data, size_t length,
                                 const ucp_am_recv_param_t*) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    if (self->server_ || self->shm_ != Shm::kOffered || length == 0) return UCS_OK;
    const auto* a = static_cast<const char*>(data);
    self->shm_.store(a[0] == 1 ? Shm::kInUse : Shm::kNotUsed, std::memory_order_release);
    self->stats_.shared_memory_status =
        a[0] == 1 ? "in use" : "refused by the trainer: " + std::string(a + 1, length - 1);
    return UCS_OK;
  }

  // Trainer: a frame in a worker's arena.
  static ucs_status_t on_shm_frame(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                   const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    if (!self->server_) return UCS_OK;
    auto peer = self->sender(header, header_length, param);
    if (!peer) return UCS_OK;
    std::shared_ptr<ShmMapping> shm = self->peers_[*peer].shm;
    ShmDescriptor d;
    if (!shm || length != sizeof d || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
      self->refused_.emplace_back(*peer, "shared-memory frame without an accepted arena");
      return UCS_OK;
    }
    std::memcpy(&d, data, sizeof d);
    auto frame = shm->frame(d, self->options_.max_message);
    if (!frame.ok()) {
      self->refused_.emplace_back(*peer, frame.status().message());  // closed outside the callback
      return UCS_OK;
    }
    ++self->stats_.shared_memory;
    self->arrived(*peer, std::move(frame).value());
    return UCS_OK;
  }

  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    PeerId peer = 0;
    if (self->server_) {
      // A worker's message comes on its bulk endpoint with its token.
      auto from = self->sender(header, header_length, param);
      if (!from) return UCS_OK;
      peer = *from;
      ++self->stats_.copied;
    }
    if (length > self->options_.max_message) {
      self->refused_.emplace_back(peer, self->too_large(length));  // closed outside the callback
      return UCS_OK;
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      auto slot = std::make_shared<Slot>();
      self->order_[peer].push_back(slot);
      self->rndv_.push_back({peer, data, length, std::move(slot)});
      return UCS_INPROGRESS;
    }
    auto frame = self->pool_->take(length);
    if (!frame) {
      self->refused_.emplace_back(peer, self->too_large(length));
      return UCS_OK;
    }
    std::memcpy(frame->mutable_data(), data, length);
    self->arrived(peer, std::move(frame));
    return UCS_OK;
  }

  void shutdown() {
    if (worker_ != nullptr) {
      // Close gracefully so the other side sees the disconnect at once.
      std::vector<PeerId> ids;
      for (auto& [peer, p] : peers_) ids.push_back(peer);
      for (PeerId peer : ids) drop_peer(peer, false);
      for (int i = 0; i < 100 && ucp_worker_progress(worker_) != 0; ++i) {
      }
      events_.clear();
      if (listener_ != nullptr) ucp_listener_destroy(listener_);
      listener_ = nullptr;
      // A close still pending (a peer that stopped progressing): the worker
      // and context stay until the process exits.
      if (unfinished_close_) return;
      ucp_worker_destroy(worker_);
      worker_ = nullptr;
    }
    if (context_ != nullptr) ucp_cleanup(context_);
    context_ = nullptr;
  }

  struct Rndv {
    PeerId peer = 0;
    void* desc = nullptr;
    size_t length = 0;
    std::shared_ptr<Slot> slot;
  };

  bool server_;
  Options options_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;
  bool unfinished_close_ = false;
  std::atomic<bool> woken_{false};
  std::string address_;
  std::vector<uint8_t> worker_address_;  // trainer: what workers connect their bulk endpoint to
  const std::string boot_id_ = node_boot_id();                // bind message: same kernel?
  const uint64_t network_namespace_ = network_namespace_id();  // bind message: same network namespace?
  std::optional<Bind> bind_;             // worker: the trainer's bind message
  std::shared_ptr<BufferPool> pool_ = BufferPool::create();
  std::map<PeerId, Peer> peers_;
  std::unordered_map<ucp_ep_h, PeerId> peer_of_;    // control endpoint -> peer
  std::unordered_map<uint64_t, PeerId> peer_of_token_;  // trainer: token -> peer
  PeerId next_peer_ = 1;
  std::deque<Event> events_;
  std::deque<ucp_conn_request_h> conn_requests_;
  std::optional<StaleSocketSweeper> sweeper_;  // trainer, unless handshake_timeout_ms is 0
  Clock::time_point next_sweep_{};
  std::deque<std::pair<ucp_ep_h, ucs_status_t>> failed_;
  struct Closing {
    PeerId peer;
    ucs_status_t status;
    Clock::time_point at;  // when to drop the peer and report it
  };
  std::deque<Closing> closing_;  // peers whose control endpoint failed
  std::deque<Rndv> rndv_;
  std::map<PeerId, std::deque<std::shared_ptr<Slot>>> order_;  // peers with a rendezvous in progress
  std::deque<std::pair<PeerId, std::string>> refused_;  // peers to drop, and why
  std::deque<std::pair<PeerId, std::vector<uint8_t>>> shm_acks_;  // trainer: answers to send
  std::shared_ptr<ShmArena> arena_;  // worker: its shared-memory frames
  // Worker: the arena's state; stats_.shared_memory_status says it in words.
  // Atomic: reserve() reads it on other threads (and arena_ only once it is
  // kInUse, after which arena_ does not change).
  enum class Shm { kNotUsed, kOffered, kInUse };
  std::atomic<Shm> shm_{Shm::kNotUsed};
  Arrivals arrival_;
  PathStats stats_;
};

}  // namespace

Expected<std::unique_ptr<Endpoint>> listen_ucx(const std::string& host_port, const Options& options) {
  auto ep = std::make_unique<UcxEndpoint>(true, options);
  Status s = ep->init();
  if (s.ok()) s = ep->start_listener(host_port);
  if (!s.ok()) return s;
  return std::unique_ptr<Endpoint>(std::move(ep));
}

Expected<std::unique_ptr<Endpoint>> connect_ucx(const std::string& host_port, const Options& options) {
  auto ep = std::make_unique<UcxEndpoint>(false, options);
  Status s = ep->init();
  if (s.ok()) s = ep->start_client(host_port);
  if (!s.ok()) return s;
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace goldminer::transport
