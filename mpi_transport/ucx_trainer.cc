// The ucx:// transport's listening side, the trainer (ucx_endpoint.h): the
// listener, the bind message to each worker it accepts, which worker a
// bulk message comes from, workers' shared-memory arenas and the frames in
// them, and the reset of accepted sockets that are none of its workers'.
#include <arpa/inet.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

#include <cstring>
#include <set>

#include "gmcore/log.h"
#include "mpi_transport/ucx_endpoint.h"

namespace goldminer::transport {

Status UcxEndpoint::start_listener(const std::string& host_port) {
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
  // sin_port and sin6_port lie at the same offset.
  const uint16_t port = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
  address_ = "ucx://" + sockaddr_text(&attr.sockaddr, sizeof attr.sockaddr);
  if (options_.handshake_timeout_ms > 0)
    sweeper_.emplace(port, std::chrono::milliseconds(options_.handshake_timeout_ms));
  raise_descriptor_limit();
  return Status();
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

// Trainer: tells a new worker its token and where to send (kBindAmId).
void UcxEndpoint::send_bind(ucp_ep_h ep, uint64_t token) {
  BindHead head{};
  head.token = token;
  head.network_namespace = network_namespace_;
  std::memcpy(head.boot_id, boot_id_.data(), std::min(boot_id_.size(), sizeof head.boot_id));
  std::vector<uint8_t> payload(sizeof head + worker_address_.size());
  std::memcpy(payload.data(), &head, sizeof head);
  std::memcpy(payload.data() + sizeof head, worker_address_.data(), worker_address_.size());
  send_owned(ep, kBindAmId, std::move(payload), false);
}

// Trainer: resets the accepted sockets that have been none of its
// workers' for handshake_timeout_ms (stale_sockets.h), at most every
// kSweepInterval. Runs after handle_pending(), so a connection request
// UCX has handed over is already a worker.
void UcxEndpoint::sweep_stale() {
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

void UcxEndpoint::on_conn_request(ucp_conn_request_h req, void* arg) {
  static_cast<UcxEndpoint*>(arg)->conn_requests_.push_back(req);
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

// Trainer: the owner has verified `peer`: the pre-authentication limits
// end, and its arena offer, if one came, is answered now, before anything
// the owner sends it next (the same control endpoint keeps the order).
void UcxEndpoint::authenticated(PeerId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.authenticated) return;
  it->second.authenticated = true;
  unauthenticated_.erase(peer);
  if (!it->second.shm_offer.empty()) send_owned(it->second.control, kShmAckAmId, answer_shm_offer(&it->second), false);
}

// Trainer: a connection request is about to become a peer; if as many
// peers as allowed are waiting to authenticate, the oldest goes
// (transport.h, Options::max_pending_peers, says why the oldest).
void UcxEndpoint::make_room_for_a_peer() {
  if (options_.max_pending_peers == 0 || unauthenticated_.size() < options_.max_pending_peers) return;
  const PeerId oldest = *unauthenticated_.begin();
  refuse(oldest, "evicted: " + std::to_string(unauthenticated_.size()) +
                     " connections were waiting to authenticate (max_pending_peers), this one the longest");
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

// Trainer: maps the arena `p` offered, or says why not: the answer to send
// (kShmAckAmId). The offer is spent.
std::vector<uint8_t> UcxEndpoint::answer_shm_offer(Peer* p) {
  auto offer = ShmOffer::decode(p->shm_offer.data(), p->shm_offer.size());
  p->shm_offer.clear();
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

// Trainer: a worker's arena, the first offer only. From an authenticated
// worker it is mapped here, so the frames that follow it on the bulk
// endpoint find it, and answered from the event loop. From a worker not
// yet authenticated it is kept (bounded) and answered "later" at once, so
// the worker stops waiting; authenticated() maps and answers it.
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
  const auto* bytes = static_cast<const uint8_t*>(data);
  p.shm_offer.assign(bytes, bytes + length);
  self->shm_acks_.emplace_back(*peer, p.authenticated ? self->answer_shm_offer(&p) : std::vector<uint8_t>{2});
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
