// The ucx:// transport's receiving, both sides (ucx_endpoint.h): active
// messages into pooled buffers (eager ones copied, rendezvous ones fetched
// into the buffer), the pre-authentication and budget limits on them, and
// delivery in arrival order.
#include <cstring>

#include "mpi_transport/ucx_endpoint.h"

namespace goldminer::transport {

// Starts receiving a rendezvous message into a pooled buffer; false if
// it must wait for room in the receive budget.
bool UcxEndpoint::receive_rndv(Rndv* r) {
  bool over_budget = false;
  auto buffer = r->preauth ? preauth_pool_->take(r->length) : pool_->take(r->length, true, &over_budget);
  if (!buffer) {
    if (over_budget) return false;
    refuse(r->peer, too_large(r->length));
    return true;
  }
  uint8_t* into = buffer->mutable_data();
  r->slot->frame = std::move(buffer);
  auto* ctx = new RndvRecv{this, r->peer, r->slot};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &UcxEndpoint::on_rndv_done;
  p.user_data = ctx;
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_, r->desc, into, r->length, &p);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) {
    if (req != nullptr) r->slot->frame.reset();
    r->slot->done = true;
    delete ctx;
    flush(r->peer);
  }  // else on_rndv_done runs on completion and frees the request
  return true;
}

// A whole message from `peer`: an event now, or after the messages
// before it.
void UcxEndpoint::arrived(PeerId peer, std::unique_ptr<Frame> frame) {
  auto it = order_.find(peer);
  if (it == order_.end() || it->second.empty()) return deliver(peer, std::move(frame));
  auto slot = std::make_shared<Slot>();
  slot->frame = std::move(frame);
  slot->done = true;
  it->second.push_back(std::move(slot));
}

// Delivers `peer`'s messages that are complete and next in order.
void UcxEndpoint::flush(PeerId peer) {
  auto it = order_.find(peer);
  if (it == order_.end()) return;
  auto& q = it->second;
  while (!q.empty() && q.front()->done) {
    if (q.front()->frame) deliver(peer, std::move(q.front()->frame));
    q.pop_front();
  }
  if (q.empty()) order_.erase(it);
}

void UcxEndpoint::deliver(PeerId peer, std::unique_ptr<Frame> frame) {
  if (peers_.count(peer) == 0) return;  // dropped meanwhile
  Event e;
  e.kind = Event::Kind::kMessage;
  e.peer = peer;
  e.frame = std::move(frame);
  events_.push_back(std::move(e));
}

std::string UcxEndpoint::too_large(size_t length) const {
  return "message of " + std::to_string(length) + " bytes refused (limit " + std::to_string(options_.max_message) +
         ")";
}

void UcxEndpoint::on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data) {
  std::unique_ptr<RndvRecv> ctx(static_cast<RndvRecv*>(user_data));
  ucp_request_free(request);
  if (status != UCS_OK) ctx->slot->frame.reset();
  ctx->slot->done = true;
  ctx->self->flush(ctx->peer);
}

ucs_status_t UcxEndpoint::on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  PeerId peer = 0;
  bool preauth = false;
  if (self->server_) {
    // A worker's message comes on its bulk endpoint with its token.
    auto from = self->sender(header, header_length, param);
    if (!from) return UCS_OK;
    peer = *from;
    Peer& p = self->peers_[peer];
    preauth = !p.authenticated;
    // Refused before anything of its size exists: a rendezvous
    // announcement answered UCS_OK is not fetched (UCX tells the sender).
    if (preauth) {
      if (auto why = self->preauth_refusal(&p, length)) {
        self->refused_.emplace_back(peer, *why);  // closed outside the callback
        return UCS_OK;
      }
    }
    ++self->stats_.copied;
  } else if (auto it = self->peers_.find(peer); it != self->peers_.end() && !it->second.authenticated) {
    // A worker's trainer before it has proved the job (verify_trainer).
    preauth = true;
    if (auto why = self->preauth_refusal(&it->second, length)) {
      self->refused_.emplace_back(peer, *why);  // closed outside the callback
      return UCS_OK;
    }
  }
  if (length > self->options_.max_message) {
    self->refused_.emplace_back(peer, self->too_large(length));  // closed outside the callback
    return UCS_OK;
  }
  if (!preauth && self->pool_->beyond_budget(length)) {
    self->refused_.emplace_back(peer, "message of " + std::to_string(length) +
                                          " bytes refused (more than the whole receive budget, " +
                                          std::to_string(self->options_.receive_budget) + " bytes)");
    return UCS_OK;
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    auto slot = std::make_shared<Slot>();
    self->order_[peer].push_back(slot);
    self->rndv_.push_back({peer, data, length, std::move(slot), preauth});
    return UCS_INPROGRESS;
  }
  auto frame = preauth ? self->preauth_pool_->take(length) : self->pool_->take(length);
  if (!frame) {
    self->refused_.emplace_back(peer, self->too_large(length));
    return UCS_OK;
  }
  std::memcpy(frame->mutable_data(), data, length);
  self->arrived(peer, std::move(frame));
  return UCS_OK;
}

}  // namespace goldminer::transport
