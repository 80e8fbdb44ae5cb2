// The ucx:// transport's connecting side, a worker (ucx_endpoint.h): the
// control endpoint, the bind message and the bulk endpoint made from it,
// and the shared-memory arena it offers the trainer.
#include <cstring>

#include "gmcore/log.h"
#include "mpi_transport/ucx_endpoint.h"

namespace goldminer::transport {

// Connects the control endpoint. The bulk endpoint follows when the
// trainer's bind message arrives (bind()).
Status UcxEndpoint::start_client(const std::string& host_port) {
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

std::unique_ptr<wire::FrameStorage> UcxEndpoint::reserve(size_t size) {
  if (shm_.load(std::memory_order_acquire) != Shm::kInUse || size < kShmMinFrame) return nullptr;
  return arena_->reserve(size);
}

// Worker: waits for the trainer's bind message (the trainer sends it when
// it accepts the connection) and creates the bulk endpoint from it.
Status UcxEndpoint::bind() {
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
  // A trainer that has not authenticated this worker yet answers "later"
  // (kDeferred) and the real answer once it has, before its Program.
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
  while (shm_ == Shm::kOffered && failed_.empty() && Clock::now() < deadline) {
    if (ucp_worker_progress(worker_) == 0 && ucp_worker_arm(worker_) == UCS_OK) wait_efd(10);
  }
  if (shm_ == Shm::kOffered) {
    shm_ = Shm::kNotUsed;
    stats_.shared_memory_status = "not used: the trainer did not answer";
  }
}

// Worker: the trainer's bind message (only the first counts).
ucs_status_t UcxEndpoint::on_bind(void* arg, const void*, size_t, void* data, size_t length,
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

// Worker: the trainer's answer to the offer.
ucs_status_t UcxEndpoint::on_shm_ack(void* arg, const void*, size_t, void* data, size_t length,
                                     const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  if (self->server_ || (self->shm_ != Shm::kOffered && self->shm_ != Shm::kDeferred) || length == 0) return UCS_OK;
  const auto* a = static_cast<const char*>(data);
  if (a[0] == 2) {
    if (self->shm_ == Shm::kOffered) self->shm_ = Shm::kDeferred;
    return UCS_OK;
  }
  self->shm_.store(a[0] == 1 ? Shm::kInUse : Shm::kNotUsed, std::memory_order_release);
  self->stats_.shared_memory_status =
      a[0] == 1 ? "in use" : "refused by the trainer: " + peer_text(std::string(a + 1, length - 1));
  return UCS_OK;
}

}  // namespace goldminer::transport
