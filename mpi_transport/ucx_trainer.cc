// The ucx:// transport's listening side, the trainer (ucx_endpoint.h): its
// socket, the connections pending authentication (room, timeouts), the bind
// record to each worker it authenticates and the endpoint to its address,
// which worker a bulk message comes from, workers' shared-memory arenas
// and the frames in them.
#include <arpa/inet.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

#include <cstring>
#include <set>

#include "gmcore/auth.h"
#include "gmcore/log.h"
#include "mpi_transport/ucx_endpoint.h"

namespace goldminer::transport {

Status UcxEndpoint::start_listener(const std::string& host_port) {
  socklen_t len = 0;
  auto addr = resolve(host_port, &len);
  if (!addr.ok()) return addr.status();
  auto fd = listen_socket(*addr, len, host_port);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  if (getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
    return Status::error("ucx: listening on " + host_port + ": getsockname: " + std::strerror(errno));
  address_ = "ucx://" + sockaddr_text(&bound, bound_len);
  raise_descriptor_limit();
  return Status();
}

// Trainer: takes the connections waiting on the socket, at most
// kAcceptsPerPass a pass. Each is a pending peer until its owner
// authenticates it: room is made first (make_room_for).
void UcxEndpoint::accept_connections() {
  if (Clock::now() < accept_paused_until_) return;
  for (int i = 0; i < kAcceptsPerPass; ++i) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: the oldest pending connection makes room;
        // with none, the socket is left alone for a while (it stays
        // readable: waiting on it would spin).
        if (!unauthenticated_.empty()) {
          make_room_for("");
          continue;
        }
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN: none waiting
    }
    keepalive_socket(fd);
    const std::string client = sockaddr_text(&from, len);
    make_room_for(host_of(client));
    const PeerId peer = next_peer_++;
    add_peer(peer, std::make_unique<HandshakeSocket>(fd));
    peers_[peer].client = client;
    if (options_.trust_on_connect) {
      peers_[peer].announced = true;
      Event e;
      e.kind = Event::Kind::kConnected;
      e.peer = peer;
      events_.push_back(std::move(e));
      send_bind(peer);
    } else {
      unauthenticated_.insert(peer);
    }
  }
}

// Trainer: before one more pending connection from `source` ("" : any),
// closes one if max_pending_per_source from there or max_pending_peers in
// all are waiting to authenticate. The one closed is the oldest that has
// sent nothing yet (a worker sends its first frame as soon as it
// connects), else the oldest (transport.h, Options::max_pending_peers,
// says why the oldest).
void UcxEndpoint::make_room_for(const std::string& source) {
  std::vector<PeerId> same;
  if (!source.empty() && options_.max_pending_per_source > 0) {
    for (PeerId id : unauthenticated_)
      if (host_of(peers_[id].client) == source) same.push_back(id);
  }
  std::vector<PeerId> candidates;
  if (options_.max_pending_per_source > 0 && same.size() >= options_.max_pending_per_source) {
    candidates = std::move(same);
  } else if (source.empty() ||
             (options_.max_pending_peers > 0 && unauthenticated_.size() >= options_.max_pending_peers)) {
    candidates.assign(unauthenticated_.begin(), unauthenticated_.end());
  }
  if (candidates.empty()) return;
  std::optional<PeerId> victim;
  for (PeerId id : candidates) {
    read_socket(id);  // what it sent by now counts
    auto it = peers_.find(id);
    if (it == peers_.end()) return;  // it went by itself: room made
    if (it->second.socket == nullptr || !it->second.socket->heard()) {
      victim = id;
      break;
    }
  }
  if (!victim) {
    for (PeerId id : candidates)
      if (peers_.count(id) != 0) {
        victim = id;
        break;
      }
  }
  if (!victim) return;
  const bool silent = !peers_[*victim].socket->heard();
  if (!peers_[*victim].announced) ++silent_closed_;
  const std::string waiting = std::to_string(candidates.size()) + " connections";
  refuse(*victim, "evicted: " +
                      (source.empty() ? "out of descriptors, " + waiting + " were waiting to authenticate"
                       : candidates.size() < unauthenticated_.size() || options_.max_pending_peers == 0
                           ? waiting + " from " + source + " were waiting to authenticate (max_pending_per_source)"
                           : waiting + " were waiting to authenticate (max_pending_peers)") +
                      ", this one the oldest" + (silent ? " silent one" : ""));
}

// Trainer: closes connections that sent no frame within
// handshake_timeout_ms (one that did is its owner's peer: the owner's
// handshake timeout governs it) and workers bound longer than
// send_timeout_ms whose UCX never attached, and says now and then how
// many silent ones went.
void UcxEndpoint::expire_handshakes() {
  const auto now = Clock::now();
  if (options_.handshake_timeout_ms > 0) {
    const auto limit = std::chrono::milliseconds(options_.handshake_timeout_ms);
    std::vector<PeerId> silent;
    for (PeerId id : unauthenticated_) {
      const Peer& p = peers_[id];
      if (now - p.connected < limit) break;  // by id: the rest are younger
      if (!p.announced) silent.push_back(id);
    }
    for (PeerId id : silent) {
      ++silent_closed_;
      refuse(id, "no frame within " + std::to_string(options_.handshake_timeout_ms) + " ms");
    }
  }
  // Bound and never attached: the worker's UCX could not wire its data
  // connection to this one (a network or firewall between the nodes drops
  // it, say). Its frames wait in its queue meanwhile; after the send
  // timeout it goes, so that its slot and its frames are not held forever.
  if (options_.send_timeout_ms > 0) {
    const auto limit = std::chrono::milliseconds(options_.send_timeout_ms);
    std::vector<PeerId> unattached;
    for (PeerId id : unattached_)
      if (now - peers_[id].bound_at >= limit) unattached.push_back(id);
    for (PeerId id : unattached)
      refuse(id, "its UCX did not attach within " + std::to_string(options_.send_timeout_ms) +
                     " ms of its bind (no data connection came from its node to this one's UCX: a network or "
                     "firewall between them drops it?)");
  }
  if (silent_closed_ != silent_logged_ && now - silent_log_at_ > std::chrono::seconds(10)) {
    log::info("goldminer: ucx: closed " + std::to_string(silent_closed_ - silent_logged_) + " connection(s) to " +
              address_ + " that sent no frame (evicted, or silent for " +
              std::to_string(options_.handshake_timeout_ms) + " ms)");
    silent_logged_ = silent_closed_;
    silent_log_at_ = now;
  }
}

// Trainer: the soft limit on descriptors raised towards the hard one
// (Slurm passes on the submitting shell's, often 1,024): connections that
// are none of its workers' then leave room for the files, CUDA and
// checkpoints the trainer opens. At most kDescriptorSoftLimit: children
// inherit it, and some close every descriptor up to it one by one. Said
// when it cannot.
void UcxEndpoint::raise_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = std::min<rlim_t>(lim.rlim_max, kDescriptorSoftLimit);
  if (lim.rlim_cur >= want) return;
  const rlim_t was = lim.rlim_cur;
  lim.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
    log::info("goldminer: ucx: cannot raise the descriptor limit from " + std::to_string(was) + " to " +
              std::to_string(want) + ": " + std::strerror(errno));
}

// Trainer: tells an authenticated worker its token and where to send
// (the bind record, on its socket).
void UcxEndpoint::send_bind(PeerId peer) {
  Peer& p = peers_[peer];
  auto nonce = auth::random_nonce();  // the token only this worker learns (getrandom)
  if (!nonce.ok()) return refuse(peer, nonce.status().message());
  std::memcpy(&p.token, nonce->data(), sizeof p.token);
  peer_of_token_[p.token] = peer;
  const std::vector<uint8_t> payload = bind_head(p.token);
  p.bound = true;
  p.bound_at = Clock::now();
  unattached_.insert(peer);
  Status s = p.socket->write(RecordKind::kBind, payload.data(), payload.size());
  if (!s.ok()) lost_.emplace_back(peer, s.message());
}

// Trainer: the worker has attached: its first UCX message (kAttachAmId,
// on_attach) gave the endpoint to answer on, and its attached record
// ended what it sends on the socket. With both, the trainer sends ready
// and the frames its owner queued. UCX 1.13 makes that endpoint itself,
// paired with the worker's, in the worker's error-handling mode: had the
// trainer made one to the worker's address before the worker's was wired
// up, UCX could pick other lanes for it (another interface of a
// multi-homed node) and abort ("endpoint reconfiguration not supported
// yet"); made after, it is the same endpoint.
void UcxEndpoint::maybe_ready(PeerId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  Peer& p = it->second;
  if (p.ready || !p.attached || p.bulk == nullptr) return;
  // The endpoint UCX made for the worker's is not the user's until an
  // ucp_ep_create to the worker's address retrieves it (UCX matches the
  // two: its lanes stay the worker's choice). Until then UCX 1.13 destroys
  // it on a peer failure, under any send of ours (a segfault in
  // ucp_am_send_nbx, seen when workers were killed).
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(p.worker_address.data());
  ep.err_mode = p.peer_failure_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  if (p.peer_failure_mode) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_handler.cb = &UcxEndpoint::on_ep_error;
    ep.err_handler.arg = this;
  }
  ucp_ep_h mine = nullptr;
  if (const ucs_status_t s = ucp_ep_create(worker_, &ep, &mine); s != UCS_OK)
    return refuse(peer, "cannot take the worker's endpoint: " + ucs_text(s));
  if (mine != p.bulk) {
    // Not matched: a second connection would be wired up beside the
    // worker's, which UCX 1.13 cannot reconcile. Refused, not risked.
    close_ep(mine, true);
    return refuse(peer, "UCX did not match the worker's endpoint (its address and its connection differ)");
  }
  if (p.peer_failure_mode) peer_of_[mine] = peer;
  p.control = mine;
  p.ready = true;
  unattached_.erase(peer);
  if (!p.announced) {
    p.announced = true;
    Event e;
    e.kind = Event::Kind::kConnected;
    e.peer = peer;
    events_.push_back(std::move(e));
  }
  Status s = p.socket->write(RecordKind::kReady, nullptr, 0);
  if (!s.ok()) {
    lost_.emplace_back(peer, s.message());
    return;
  }
  std::deque<Peer::Queued> queued = std::move(p.queued);
  for (auto& q : queued) {
    Status started = send_async(peer, q.data, q.size, std::move(q.done));
    if (!started.ok()) log::info("goldminer: ucx: " + started.message());
  }
}

// Trainer: a worker's first message on its bulk endpoint (its token as
// header, nothing else): the endpoint to answer on.
ucs_status_t UcxEndpoint::on_attach(void* arg, const void* header, size_t header_length, void*, size_t,
                                    const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  if (!self->server_) return UCS_OK;
  auto peer = self->sender(header, header_length, param);
  if (!peer) return UCS_OK;
  if (self->peers_[*peer].bulk == nullptr) {
    self->refused_.emplace_back(*peer, "attached without an endpoint to answer on (UCP_AM_SEND_FLAG_REPLY)");
    return UCS_OK;
  }
  self->attaching_.push_back(*peer);  // answered outside the callback
  return UCS_OK;
}

// Trainer: the worker a message on a bulk endpoint comes from (its token
// is the header); nothing for an unknown token.
std::optional<PeerId> UcxEndpoint::sender(const void* header, size_t header_length, const ucp_am_recv_param_t* param) {
  if (header_length != sizeof(uint64_t)) return std::nullopt;
  uint64_t token;
  std::memcpy(&token, header, sizeof token);
  auto it = peer_of_token_.find(token);
  if (it == peer_of_token_.end()) return std::nullopt;
  Peer& p = peers_[it->second];
  if (p.bulk == nullptr && (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) p.bulk = param->reply_ep;
  return it->second;
}

// The owner has verified `peer`: the pre-authentication limits end. The
// trainer sends it the bind record now (its owner's next frames wait for
// the worker's address).
void UcxEndpoint::authenticated(PeerId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.authenticated) return;
  it->second.authenticated = true;
  unauthenticated_.erase(peer);
  if (server_ && !it->second.bound) send_bind(peer);
}

// Why a frame of `length` bytes from `p`, not yet authenticated,
// is refused; nothing if it is taken (and counted).
std::optional<std::string> UcxEndpoint::preauth_refusal(Peer* p, size_t length) const {
  if (length > options_.preauth_max_message)
    return "a frame of " + std::to_string(length) + " bytes before authentication (limit " +
           std::to_string(options_.preauth_max_message) + " until the peer is verified)";
  if (++p->preauth_frames > options_.preauth_max_frames)
    return "more than " + std::to_string(options_.preauth_max_frames) + " frames before authentication";
  return std::nullopt;
}

// Trainer: maps the arena `p` offered (`offer`), or says why not: the
// answer to send (kShmAckAmId).
std::vector<uint8_t> UcxEndpoint::answer_shm_offer(Peer* p, const uint8_t* offer_bytes, size_t length) {
  auto offer = ShmOffer::decode(offer_bytes, length);
  const bool pinned = options_.memory != nullptr && options_.memory->pinned();
  Expected<std::shared_ptr<ShmMapping>> mapped =
      pinned ? Expected<std::shared_ptr<ShmMapping>>(Status::error(
                   "the trainer receives into pinned memory (pin_memory): frames come by copy"))
      : offer.ok() ? ShmMapping::open(*offer)
                   : Expected<std::shared_ptr<ShmMapping>>(offer.status());
  std::vector<uint8_t> answer{static_cast<uint8_t>(mapped.ok() ? 1 : 0)};
  if (mapped.ok()) {
    p->shm = std::move(mapped).value();
  } else {
    const std::string& why = mapped.status().message();
    answer.insert(answer.end(), why.begin(), why.end());
  }
  return answer;
}

// Trainer: a worker's arena, the first offer only, mapped here (so the
// frames that follow it on the bulk endpoint find it) and answered from
// the event loop. Only a worker the owner authenticated has the token a
// bulk message needs.
ucs_status_t UcxEndpoint::on_shm_offer(void* arg, const void* header, size_t header_length, void* data,
                                       size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  if (!self->server_ || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
  auto peer = self->sender(header, header_length, param);
  if (!peer) return UCS_OK;
  Peer& p = self->peers_[*peer];
  if (p.shm_offered) return UCS_OK;
  p.shm_offered = true;
  if (length == 0 || length > kShmOfferMax) {
    self->refused_.emplace_back(*peer, "a shared-memory offer of " + std::to_string(length) + " bytes (at most " +
                                           std::to_string(kShmOfferMax) + ")");
    return UCS_OK;
  }
  self->shm_acks_.emplace_back(*peer, self->answer_shm_offer(&p, static_cast<const uint8_t*>(data), length));
  return UCS_OK;
}

// Trainer: a frame in a worker's arena.
ucs_status_t UcxEndpoint::on_shm_frame(void* arg, const void* header, size_t header_length, void* data,
                                       size_t length, const ucp_am_recv_param_t* param) {
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

}  // namespace goldminer::transport
