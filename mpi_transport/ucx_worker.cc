// The ucx:// transport's connecting side, a worker (ucx_endpoint.h): its
// socket to the trainer, the bind record and the bulk endpoint made from
// it, and the shared-memory arena it offers the trainer.
#include <cstring>

#include "gmcore/log.h"
#include "mpi_transport/ucx_endpoint.h"

namespace goldminer::transport {

// Connects to the trainer's socket; the UCX endpoint follows its bind
// record (on_bind).
Status UcxEndpoint::start_client(const std::string& host_port) {
  socklen_t len = 0;
  auto addr = resolve(host_port, &len);
  if (!addr.ok()) return addr.status();
  auto fd = connect_socket(*addr, len, host_port, std::min(options_.send_timeout_ms, 10000));
  if (!fd.ok()) return fd.status();
  add_peer(0, std::make_unique<HandshakeSocket>(*fd));
  address_ = "ucx://" + host_port;
  return Status();
}

std::unique_ptr<wire::FrameStorage> UcxEndpoint::reserve(size_t size) {
  if (shm_.load(std::memory_order_acquire) != Shm::kInUse || size < kShmMinFrame) return nullptr;
  return arena_->reserve(size);
}

// Worker: waits until the UCX endpoints exist (the trainer's bind record
// came, the worker answered with its address, the ready record came),
// then offers its arena once.
Status UcxEndpoint::bind() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
  for (;;) {
    auto it = peers_.find(0);
    if (it == peers_.end() || lost(0)) {
      handle_pending();
      return Status::error("ucx: connecting to the trainer: connection closed");
    }
    if (!failed_.empty()) return Status::error("ucx: connecting to the trainer: " + ucs_text(failed_.front().second));
    if (it->second.ready) break;
    if (Clock::now() > deadline)
      return Status::error("ucx: connecting to the trainer: not accepted within " +
                           std::to_string(options_.send_timeout_ms) + " ms");
    pump();
    if (ucp_worker_progress(worker_) == 0 && ucp_worker_arm(worker_) == UCS_OK) wait_efd(10);
  }
  if (!shm_tried_) {
    shm_tried_ = true;
    offer_shm(peers_[0].bulk);
  }
  return Status();
}

// Worker: the trainer's bind record (only one is taken, and only once the
// worker has authenticated the trainer): the bulk endpoint to its address,
// its first message (kAttachAmId) and the attached record.
void UcxEndpoint::on_bind(const std::vector<uint8_t>& record) {
  Peer& p = peers_[0];
  if (record.size() <= sizeof(BindHead))
    return refuse(0, "a bind record of " + std::to_string(record.size()) + " bytes");
  BindHead head;
  std::memcpy(&head, record.data(), sizeof head);
  Bind b;
  b.token = head.token;
  b.address.assign(record.begin() + sizeof head, record.end());
  b.other_network_namespace = same_kernel_other_namespace(head);
  bind_ = std::move(b);
  p.bound = true;
  ucp_ep_params_t bulk{};
  bulk.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  bulk.address = reinterpret_cast<const ucp_address_t*>(bind_->address.data());
  bulk.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  if (bind_->other_network_namespace) {
    log::info("goldminer: ucx: the trainer shares this kernel but not its network namespace: its endpoint has "
              "peer-failure mode (UCX's posix and sysv transports cannot wake a peer there)");
    bulk.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    bulk.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    bulk.err_handler.cb = &UcxEndpoint::on_ep_error;
    bulk.err_handler.arg = this;
  }
  if (const ucs_status_t s = ucp_ep_create(worker_, &bulk, &p.bulk); s != UCS_OK) {
    p.bulk = nullptr;
    return refuse(0, "ucx: connecting to the trainer (bulk endpoint): " + ucs_text(s));
  }
  if (bind_->other_network_namespace) peer_of_[p.bulk] = 0;
  // The trainer answers on the endpoint UCX makes for this one's first
  // message; the attached record tells it the socket's frames end here.
  send_owned(p.bulk, kAttachAmId, {}, true);
  std::vector<uint8_t> attached{static_cast<uint8_t>(bind_->other_network_namespace ? 1 : 0)};
  attached.insert(attached.end(), worker_address_.begin(), worker_address_.end());
  Status s = p.socket->write(RecordKind::kAttached, attached.data(), attached.size());
  if (!s.ok()) lost_.emplace_back(0, s.message());
}

// Worker: creates the arena and offers it to the trainer, which answers
// with kShmAckAmId. Frames go by copy until it has accepted.
void UcxEndpoint::offer_shm(ucp_ep_h bulk) {
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
  while (shm_ == Shm::kOffered && failed_.empty() && !lost(0) && Clock::now() < deadline) {
    pump();
    if (ucp_worker_progress(worker_) == 0 && ucp_worker_arm(worker_) == UCS_OK) wait_efd(10);
  }
  if (shm_ == Shm::kOffered) {
    shm_ = Shm::kNotUsed;
    stats_.shared_memory_status = "not used: the trainer did not answer";
  }
}

// Worker: the trainer's answer to the offer.
ucs_status_t UcxEndpoint::on_shm_ack(void* arg, const void*, size_t, void* data, size_t length,
                                     const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  if (self->server_ || self->shm_ != Shm::kOffered || length == 0) return UCS_OK;
  const auto* a = static_cast<const char*>(data);
  self->shm_.store(a[0] == 1 ? Shm::kInUse : Shm::kNotUsed, std::memory_order_release);
  self->stats_.shared_memory_status =
      a[0] == 1 ? "in use" : "refused by the trainer: " + peer_text(std::string(a + 1, length - 1));
  return UCS_OK;
}

}  // namespace goldminer::transport
