// The ucx:// transport's handshake sockets (ucx_endpoint.h,
// handshake_socket.h), for both sides: waiting on them with UCX, reading
// their records, and what each record does before the UCX endpoints exist.
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "gmcore/log.h"
#include "mpi_transport/ucx_endpoint.h"

namespace goldminer::transport {

// Sleeps until UCX, the listening socket or a peer's socket has something,
// or `ms` pass.
void UcxEndpoint::wait_efd(int ms) {
  std::vector<pollfd> fds{{efd_, POLLIN, 0}};
  if (listen_fd_ >= 0 && Clock::now() >= accept_paused_until_) fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& [id, p] : peers_)
    if (p.socket != nullptr)
      fds.push_back({p.socket->fd(), static_cast<short>(POLLIN | (p.socket->wants_write() ? POLLOUT : 0)), 0});
  ::poll(fds.data(), fds.size(), ms);
}

// New connections (trainer), and what every socket has: records taken,
// queued bytes written.
void UcxEndpoint::pump() {
  if (server_) {
    accept_connections();
    expire_handshakes();
  }
  std::vector<PeerId> ids;
  for (const auto& [id, p] : peers_)
    if (p.socket != nullptr) ids.push_back(id);
  for (PeerId id : ids) read_socket(id);
}

void UcxEndpoint::read_socket(PeerId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.socket == nullptr) return;
  Status s = it->second.socket->flush();
  std::vector<Record> records;
  if (s.ok()) {
    const Peer& p = it->second;
    s = it->second.socket->read([this, &p](RecordKind kind) { return record_limit(p, kind); }, kRecordsPerRead,
                                &records);
  }
  for (Record& r : records) {
    take_record(peer, std::move(r));
    if (peers_.count(peer) == 0) return;  // refused meanwhile
  }
  if (!s.ok()) lost_.emplace_back(peer, s.message());
}

// The longest record of `kind` that `p` may send now; nothing: none now.
std::optional<size_t> UcxEndpoint::record_limit(const Peer& p, RecordKind kind) const {
  switch (kind) {
    case RecordKind::kFrame:
      return options_.preauth_max_message;
    case RecordKind::kAttached:  // trainer, once after its bind
      if (server_ && p.bound && !p.attached) return 1 + kMaxWorkerAddress;
      return std::nullopt;
    case RecordKind::kBind:  // worker: only from a trainer it has authenticated
      if (!server_ && p.authenticated && !p.bound) return sizeof(BindHead) + kMaxWorkerAddress;
      return std::nullopt;
    case RecordKind::kReady:
      if (!server_ && p.bound && !p.ready) return 0;
      return std::nullopt;
  }
  return std::nullopt;
}

void UcxEndpoint::take_record(PeerId peer, Record r) {
  switch (r.kind) {
    case RecordKind::kFrame:
      return socket_frame(peer, r.payload);
    case RecordKind::kAttached: {
      Peer& p = peers_[peer];
      if (r.payload.size() < 2) return refuse(peer, "an attached record of " + std::to_string(r.payload.size()) + " bytes");
      p.attached = true;
      p.peer_failure_mode = r.payload[0] == 1;
      p.worker_address.assign(r.payload.begin() + 1, r.payload.end());
      return maybe_ready(peer);
    }
    case RecordKind::kBind:
      return on_bind(r.payload);
    case RecordKind::kReady:
      peers_[peer].ready = true;
      return;
  }
}

// A frame that came on the socket: into the pre-authentication pool while
// its sender is not authenticated, counted against preauth_max_frames.
void UcxEndpoint::socket_frame(PeerId peer, const std::vector<uint8_t>& bytes) {
  Peer& p = peers_[peer];
  if (!p.authenticated) {
    if (auto why = preauth_refusal(&p, bytes.size())) return refuse(peer, *why);
  }
  if (server_ && !p.announced) {
    // A connection becomes the owner's peer with its first frame: silent
    // ones never reach it.
    p.announced = true;
    Event e;
    e.kind = Event::Kind::kConnected;
    e.peer = peer;
    events_.push_back(std::move(e));
  }
  auto frame = p.authenticated ? pool_->take(bytes.size()) : preauth_pool_->take(bytes.size());
  if (!frame) return refuse(peer, too_large(bytes.size()));
  std::memcpy(frame->mutable_data(), bytes.data(), bytes.size());
  if (server_) ++stats_.copied;
  arrived(peer, std::move(frame));
}

// The bind record: BindHead (`token`, this side's kernel and network
// namespace) and this side's UCP worker address.
std::vector<uint8_t> UcxEndpoint::bind_head(uint64_t token) const {
  BindHead head{};
  head.token = token;
  head.network_namespace = network_namespace_;
  std::memcpy(head.boot_id, boot_id_.data(), std::min(boot_id_.size(), sizeof head.boot_id));
  std::vector<uint8_t> payload(sizeof head + worker_address_.size());
  std::memcpy(payload.data(), &head, sizeof head);
  std::memcpy(payload.data() + sizeof head, worker_address_.data(), worker_address_.size());
  return payload;
}

// Whether the other side (its BindHead) runs on this kernel in another
// network namespace.
bool UcxEndpoint::same_kernel_other_namespace(const BindHead& head) const {
  const std::string boot_id(head.boot_id, strnlen(head.boot_id, sizeof head.boot_id));
  return !boot_id.empty() && boot_id == boot_id_ && head.network_namespace != 0 && network_namespace_ != 0 &&
         head.network_namespace != network_namespace_;
}

// Why `peer`'s connection is gone or going ("" while it is not): its
// socket ended, or its endpoint failed.
std::string UcxEndpoint::failing(PeerId peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return "connection closed";
  for (const auto& [id, why] : lost_)
    if (id == peer) return "connection lost: " + why;
  for (const auto& [ep, status] : failed_)
    if (ep == it->second.control || ep == it->second.bulk) return "connection lost: " + ucs_text(status);
  return "";
}

// Whether `peer`'s connection is gone or going.
bool UcxEndpoint::lost(PeerId peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return true;
  for (const auto& [id, why] : lost_)
    if (id == peer) return true;
  return false;
}

}  // namespace goldminer::transport
