// The ucx:// transport (ucx_endpoint.h): what both sides do (setting up
// UCX, sending, polling, closing endpoints, teardown) and the factory's
// open_ucx. Receiving: ucx_receive.cc.
#include <netdb.h>
#include <strings.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "gmcore/host_port.h"
#include "gmcore/log.h"
#include "gmcore/net_interface.h"
#include "mpi_transport/transport_impl.h"
#include "mpi_transport/ucx_endpoint.h"

namespace goldminer::transport {

Expected<sockaddr_storage> resolve(const std::string& host_port, socklen_t* len) {
  auto hp = parse_host_port(host_port, "ucx");
  if (!hp.ok()) return hp.status();
  // HOST is a name, an IPv4 address or a bracketed IPv6 address; an empty
  // one (":PORT") listens on every IPv4 address.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(hp->host.empty() ? "0.0.0.0" : hp->host.c_str(), hp->port.c_str(), &hints, &res);
  if (rc != 0) return Status::error("ucx: address '" + host_port + "': " + gai_strerror(rc));
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return ss;
}

namespace {

// The devices UCX may use when a firewall guards the port of its TCP
// transport: the interface the trainer listens on, and every RDMA port
// (their traffic passes no firewall; /sys/class/infiniband/DEV/ports/N is
// UCX's DEV:N). UCX's default, every interface, would also listen on the
// node's other networks, and a worker could wire its data connection over
// one of them: another address family or subnet, whose addresses the
// firewall does not admit (the job's nodes are admitted by the addresses
// their names resolve to). "": UCX's own choice (the site's
// UCX_NET_DEVICES, a wildcard listen address, or no interface holds it).
std::string guarded_net_devices(const std::string& host_port) {
  if (std::getenv("UCX_NET_DEVICES") != nullptr) return "";
  socklen_t len = 0;
  auto address = resolve(host_port, &len);
  if (!address.ok()) return "";
  std::string devices = interface_holding(*address);
  if (devices.empty()) return "";
  std::error_code ec;
  for (const auto& dev : std::filesystem::directory_iterator("/sys/class/infiniband", ec))
    for (const auto& port : std::filesystem::directory_iterator(dev.path() / "ports", ec))
      devices += "," + dev.path().filename().string() + ":" + port.path().filename().string();
  return devices;
}

}  // namespace

Status UcxEndpoint::init(const std::string& host_port) {
  if (server_ && options_.tcp_data_port != 0) {
    const std::string devices = guarded_net_devices(host_port);
    Status st = init_with_tcp_port(options_.tcp_data_port, devices);
    if (st.ok()) {
      if (!devices.empty())
        log::verbose("goldminer: ucx: UCX's TCP transport listens on port " + std::to_string(options_.tcp_data_port) +
                     " of " + devices.substr(0, devices.find(',')) + " only (UCX_NET_DEVICES=" + devices + ")");
      return st;
    }
    log::error("goldminer: ucx: UCX's TCP transport cannot listen on its reserved port " +
               std::to_string(options_.tcp_data_port) + " (" + st.message() +
               "); it listens on an ephemeral port, which the job's firewall rules do not cover");
    close_ucx();
  }
  return init_with_tcp_port(0, "");
}

// Undoes what a failed init_with_tcp_port made (nothing is connected yet).
void UcxEndpoint::close_ucx() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (context_ != nullptr) ucp_cleanup(context_);
  context_ = nullptr;
  efd_ = -1;
  worker_address_.clear();
}

Status UcxEndpoint::init_with_tcp_port(int port, const std::string& net_devices) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return Status::error("ucx: reading the UCX configuration: " + ucs_text(s));
  if (!net_devices.empty() && (s = ucp_config_modify(config, "NET_DEVICES", net_devices.c_str())) != UCS_OK) {
    ucp_config_release(config);
    return Status::error("ucx: NET_DEVICES=" + net_devices + ": " + ucs_text(s));
  }
  if (port != 0) {
    const std::string range = std::to_string(port) + "-" + std::to_string(port);
    s = ucp_config_modify(config, "PORT_RANGE", range.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      return Status::error("ucx: TCP_PORT_RANGE=" + range + ": " + ucs_text(s));
    }
  }
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
  for (auto [id, cb] : {std::pair{kAmId, &UcxEndpoint::on_am}, std::pair{kAttachAmId, &UcxEndpoint::on_attach},
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
  ucp_address_t* address = nullptr;
  size_t address_size = 0;
  s = ucp_worker_get_address(worker_, &address, &address_size);
  if (s != UCS_OK) return Status::error("ucx: ucp_worker_get_address: " + ucs_text(s));
  const auto* a = reinterpret_cast<const uint8_t*>(address);
  worker_address_.assign(a, a + address_size);
  ucp_worker_release_address(worker_, address);
  if (worker_address_.size() > kMaxWorkerAddress)
    return Status::error("ucx: this process's UCP worker address has " + std::to_string(worker_address_.size()) +
                         " bytes (at most " + std::to_string(kMaxWorkerAddress) + "; set UCX_NET_DEVICES)");
  return Status();
}

Status UcxEndpoint::send(PeerId peer, const uint8_t* data, size_t size) {
  if (server_) {
    // A worker just authenticated: its control endpoint comes once its
    // UCX attached (a round trip, longer when UCX wires up slowly). Until
    // then frames to it wait in its queue, sent in order when it is ready
    // or dropped with it (expire_handshakes): a send never waits on one
    // worker's wiring while the others' frames wait behind it.
    auto it = peers_.find(peer);
    if (it != peers_.end() && it->second.bound && !it->second.ready) {
      auto copy = std::make_shared<std::vector<uint8_t>>(data, data + size);
      it->second.queued.push_back({copy->data(), copy->size(), [copy](Status) {}, peer_name(peer)});
      return Status();
    }
  }
  ucp_request_param_t p{};
  auto started = start_send(peer, data, size, &p);
  if (!started.ok()) return started.status();
  ucs_status_ptr_t req = *started;
  if (req == nullptr) return Status();
  const std::string to = peer_name(peer);
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
  ucs_status_t s;
  while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    if (ucp_worker_progress(worker_) != 0) continue;
    // An endpoint without error handling (a worker's bulk one, and the
    // trainer's matched one in the same network namespace) reports no
    // failure: the socket does, on both sides.
    pump();
    const std::string failure = failing(peer);
    if (!failure.empty() || Clock::now() > deadline) {
      const std::string why =
          failure.empty() ? "not taken within " + std::to_string(options_.send_timeout_ms) + " ms" : failure;
      // UCX 1.13 cannot cancel a send: closing the endpoints at once
      // completes it (with an error); the connection goes.
      abandon(peer, req);
      push_disconnect(peer, why);
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

Status UcxEndpoint::send_async(PeerId peer, const uint8_t* data, size_t size, std::function<void(Status)> done) {
  if (server_) {
    auto it = peers_.find(peer);
    if (it != peers_.end() && it->second.bound && !it->second.ready) {
      it->second.queued.push_back({data, size, std::move(done), peer_name(peer)});
      return Status();
    }
  }
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
Expected<std::optional<Event>> UcxEndpoint::poll(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    // Returns as soon as an event is there: draining all progress first
    // would hold the first of a burst of eager frames until the burst
    // ends (the receiver's queue, not the sender's credits, would then
    // bound what arrives).
    while (events_.empty() && ucp_worker_progress(worker_) != 0) {
    }
    pump();
    handle_pending();
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
    // A rendezvous frame waiting for room in the receive budget is retried
    // every millisecond: its room comes from frames dropped on other
    // threads, which do not wake this one.
    wait_efd(static_cast<int>(std::min<long long>(left, waiting_for_room_ ? 1 : 100)));
  }
}

void UcxEndpoint::wake() {
  woken_ = true;
  if (worker_ != nullptr) ucp_worker_signal(worker_);
}

// Starts one AM with the frame to `peer` (a worker: on its bulk endpoint,
// its token as header, binding first; the trainer: on the control
// endpoint) with the caller's completion settings in `p`. nullptr: done.
// Before the endpoints exist a small frame goes on the socket instead
// (done at once: the socket keeps a copy).
Expected<ucs_status_ptr_t> UcxEndpoint::start_send(PeerId peer, const uint8_t* data, size_t size,
                                                   ucp_request_param_t* p) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return Status::error("ucx: no connection to peer " + std::to_string(peer));
  const bool bulk = !server_;
  if (!it->second.bound && it->second.socket != nullptr) {
    if (size <= options_.preauth_max_message) {
      Status s = it->second.socket->write(RecordKind::kFrame, data, size);
      if (!s.ok()) return Status::error("ucx: send to " + peer_name(peer) + ": " + s.message());
      return ucs_status_ptr_t{nullptr};
    }
    if (server_)
      return Status::error("ucx: send to " + peer_name(peer) + ": a frame of " + std::to_string(size) +
                           " bytes before it is authenticated (at most " +
                           std::to_string(options_.preauth_max_message) + " until then)");
  }
  if (bulk && (!it->second.ready || !shm_tried_)) {
    Status s = bind();
    if (!s.ok()) return s;
    it = peers_.find(peer);
    if (it == peers_.end()) return Status::error("ucx: send to " + peer_name(peer) + ": connection closed");
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

void UcxEndpoint::on_sent(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<Sent> sent(static_cast<Sent*>(user_data));
  ucp_request_free(request);
  sent->self->woken_ = true;  // the owner may send again: poll() returns
  sent->done(status == UCS_OK ? Status() : Status::error("ucx: send to " + sent->to + ": " + ucs_text(status)));
}

void UcxEndpoint::add_peer(PeerId peer, std::unique_ptr<HandshakeSocket> socket) {
  Peer& p = peers_[peer];
  p = Peer{};
  p.socket = std::move(socket);
  p.connected = Clock::now();
  p.authenticated = server_ ? options_.trust_on_connect : !options_.verify_trainer;
}

// Forgets `peer` and closes its endpoints. `force`: at once, dropping
// what is not sent yet; else the bulk endpoint is flushed first, so what
// a worker sent before closing arrives, and the control endpoint (the
// other side's disconnect signal) is closed after it.
void UcxEndpoint::drop_peer(PeerId peer, bool force) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  Peer p = std::move(it->second);
  if (p.control != nullptr) peer_of_.erase(p.control);
  if (p.bulk != nullptr) peer_of_.erase(p.bulk);
  if (server_) peer_of_token_.erase(p.token);
  peers_.erase(it);
  unauthenticated_.erase(peer);
  unattached_.erase(peer);
  order_.erase(peer);
  if (p.bulk != nullptr && p.bulk != p.control) close_ep(p.bulk, force);
  if (p.control != nullptr) close_ep(p.control, p.bulk == p.control ? force : true);
  // The socket closes last: after what the bulk endpoint flushed.
  p.socket.reset();
  for (auto& q : p.queued)
    if (q.done) q.done(Status::error("ucx: send to " + q.to + ": connection closed"));
}

// A send that cannot finish: closing the endpoints completes it (with an
// error), then it is freed and the peer is gone.
void UcxEndpoint::abandon(PeerId peer, ucs_status_ptr_t req) {
  drop_peer(peer, true);
  if (!settle(req)) ucp_request_cancel(worker_, req);
  ucp_request_free(req);
}

// Progresses until `req` completes, up to 2 s; whether it did.
bool UcxEndpoint::settle(ucs_status_ptr_t req) {
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) {
    if (ucp_worker_progress(worker_) == 0) wait_efd(1);
  }
  return ucp_request_check_status(req) != UCS_INPROGRESS;
}

// Closes `ep`, waiting up to 2 s. A graceful close that does not finish
// (the peer stopped progressing) is left pending: freeing it, or
// destroying the worker under it, would trip UCX's assertions.
void UcxEndpoint::close_ep(ucp_ep_h ep, bool force) {
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

void UcxEndpoint::push_disconnect(PeerId peer, std::string reason) {
  Event e;
  e.kind = Event::Kind::kDisconnected;
  e.peer = peer;
  e.reason = std::move(reason);
  events_.push_back(std::move(e));
}

// Sends a small control message that owns its bytes, without waiting:
// they are freed when the send completes. `with_token`: a worker's
// message on its bulk endpoint (its token as header).
void UcxEndpoint::send_owned(ucp_ep_h ep, unsigned id, std::vector<uint8_t> bytes, bool with_token) {
  auto* payload = new std::vector<uint8_t>(std::move(bytes));
  ucp_request_param_t p{};
  // REPLY: the receiver learns the endpoint to answer on (on_attach).
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
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

void UcxEndpoint::handle_pending() {
  // Peers whose control endpoint failed, or whose socket ended: close
  // their endpoints and tell the owner. The trainer first takes, for a
  // short grace, what the worker sent on its bulk endpoint before it
  // closed (its last lease returns may still be on their way there when
  // the loss is seen).
  const auto now = Clock::now();
  while (!failed_.empty()) {
    auto [ep, status] = failed_.front();
    failed_.pop_front();
    auto it = peer_of_.find(ep);
    if (it == peer_of_.end()) continue;  // already dropped by disconnect()
    closing_.push_back({it->second, "connection lost: " + ucs_text(status), server_ ? now + kBulkGrace : now});
    peer_of_.erase(it);  // one report per failure
  }
  while (!lost_.empty()) {
    auto [peer, why] = std::move(lost_.front());
    lost_.pop_front();
    auto it = peers_.find(peer);
    if (it == peers_.end() || it->second.socket == nullptr) continue;
    it->second.socket.reset();  // one report per loss
    if (!it->second.ready) {
      refuse(peer, why);  // nothing on its way on UCX
    } else {
      // Both sides: the socket's end may be read before the peer's last
      // UCX messages (its goodbye, a worker's last lease returns), which
      // are still taken for a short grace.
      closing_.push_back({peer, std::move(why), now + kBulkGrace});
    }
  }
  while (!closing_.empty() && (closing_.front().at <= now || peers_.count(closing_.front().peer) == 0)) {
    const Closing c = closing_.front();
    closing_.pop_front();
    if (peers_.count(c.peer) == 0) continue;  // dropped by disconnect() meanwhile
    drop_peer(c.peer, true);
    push_disconnect(c.peer, c.reason);
  }
  // Answers to shared-memory offers.
  while (!shm_acks_.empty()) {
    auto [peer, answer] = std::move(shm_acks_.front());
    shm_acks_.pop_front();
    auto it = peers_.find(peer);
    if (it != peers_.end() && it->second.control != nullptr)
      send_owned(it->second.control, kShmAckAmId, std::move(answer), false);
  }
  // Workers whose first UCX message came.
  while (!attaching_.empty()) {
    const PeerId peer = attaching_.front();
    attaching_.pop_front();
    auto it = peers_.find(peer);
    if (it != peers_.end() && !it->second.ready) maybe_ready(peer);
  }
  // Peers that sent what we cannot take.
  while (!refused_.empty()) {
    auto [peer, why] = std::move(refused_.front());
    refused_.pop_front();
    refuse(peer, why);
  }
  // Rendezvous messages: receive into a pooled buffer, in arrival order.
  // One that does not fit in the receive budget waits (its sender's send
  // stays unfinished), and those behind it with it.
  waiting_for_room_ = false;
  while (!rndv_.empty()) {
    if (!receive_rndv(&rndv_.front())) {
      waiting_for_room_ = true;
      break;
    }
    rndv_.pop_front();
  }
}

// Drops `peer` for a message it should not have sent.
void UcxEndpoint::refuse(PeerId peer, const std::string& why) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  // A connection that never sent a frame was never an owner's peer.
  const bool known = !server_ || it->second.announced;
  drop_peer(peer, true);
  if (known) push_disconnect(peer, why);
}

void UcxEndpoint::on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  static_cast<UcxEndpoint*>(arg)->failed_.emplace_back(ep, status);
}

void UcxEndpoint::shutdown() {
  if (worker_ != nullptr) {
    // Close gracefully so the other side sees the disconnect at once.
    std::vector<PeerId> ids;
    for (auto& [peer, p] : peers_) ids.push_back(peer);
    for (PeerId peer : ids) drop_peer(peer, false);
    for (int i = 0; i < 100 && ucp_worker_progress(worker_) != 0; ++i) {
    }
    events_.clear();
    if (silent_closed_ != silent_logged_)
      log::info("goldminer: ucx: closed " + std::to_string(silent_closed_ - silent_logged_) + " connection(s) to " +
                address_ + " that sent no frame (evicted, or not authenticated in time)");
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
    // A close still pending (a peer that stopped progressing): the worker
    // and context stay until the process exits.
    if (unfinished_close_) return;
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  if (context_ != nullptr) ucp_cleanup(context_);
  context_ = nullptr;
}

Expected<std::unique_ptr<Endpoint>> open_ucx(const std::string& host_port, const Options& options, bool listening) {
  auto ep = std::make_unique<UcxEndpoint>(listening, options);
  Status s = ep->init(host_port);
  if (s.ok()) s = listening ? ep->start_listener(host_port) : ep->start_client(host_port);
  if (!s.ok()) return s;
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace goldminer::transport
