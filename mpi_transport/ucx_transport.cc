// ucx://HOST:PORT: UCX active messages (ucp) over a listener, so workers
// connect by socket address whenever they start. Peer failure is detected
// by UCX (UCP_ERR_HANDLING_MODE_PEER) and becomes a kDisconnected event.
// A message is one AM with the frame as its data: small ones arrive eagerly
// and are copied once into a pooled buffer; large ones arrive by rendezvous,
// received by UCX straight into a pooled buffer (zero copy).
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "mpi_transport/buffer_pool.h"
#include "mpi_transport/transport_impl.h"

namespace goldminer::transport {
namespace {

constexpr unsigned kAmId = 7;
using Clock = std::chrono::steady_clock;

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
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = kAmId;
    hp.cb = &UcxEndpoint::on_am;
    hp.arg = this;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    s = ucp_worker_set_am_recv_handler(worker_, &hp);
    if (s != UCS_OK) return Status::error("ucx: setting the AM handler: " + ucs_text(s));
    return Status();
  }

  Status start_listener(const std::string& host_port) {
    socklen_t len = 0;
    auto addr = resolve(host_port, &len);
    if (!addr.ok()) return addr.status();
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*addr);
    lp.sockaddr.addrlen = len;
    lp.conn_handler.cb = &UcxEndpoint::on_conn_request;
    lp.conn_handler.arg = this;
    ucs_status_t s = ucp_listener_create(worker_, &lp, &listener_);
    if (s != UCS_OK) return Status::error("ucx: listening on " + host_port + ": " + ucs_text(s));
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucp_listener_query(listener_, &attr);
    if (s != UCS_OK) return Status::error("ucx: ucp_listener_query: " + ucs_text(s));
    const auto* in = reinterpret_cast<const sockaddr_in*>(&attr.sockaddr);
    char ip[64] = "";
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    address_ = "ucx://" + std::string(ip) + ":" + std::to_string(ntohs(in->sin_port));
    return Status();
  }

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
    add_peer(0, h);
    address_ = "ucx://" + host_port;
    return Status();
  }

  std::string address() const override { return address_; }

  Status send(PeerId peer, const uint8_t* data, size_t size) override {
    auto it = eps_.find(peer);
    if (it == eps_.end()) return Status::error("ucx: no connection to peer " + std::to_string(peer));
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t req = ucp_am_send_nbx(it->second, kAmId, nullptr, 0, data, size, &p);
    if (req == nullptr) return Status();
    if (UCS_PTR_IS_ERR(req))
      return Status::error("ucx: send to peer " + std::to_string(peer) + ": " + ucs_text(UCS_PTR_STATUS(req)));
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.send_timeout_ms);
    ucs_status_t s;
    while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) {
      if (ucp_worker_progress(worker_) == 0) {
        if (Clock::now() > deadline) {
          ucp_request_cancel(worker_, req);
          while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker_);
          ucp_request_free(req);
          return Status::error("ucx: send to peer " + std::to_string(peer) + ": not taken within " +
                               std::to_string(options_.send_timeout_ms) + " ms");
        }
        wait_efd(1);
      }
    }
    ucp_request_free(req);
    if (s != UCS_OK) return Status::error("ucx: send to peer " + std::to_string(peer) + ": " + ucs_text(s));
    return Status();
  }

  Expected<std::optional<Event>> poll(int timeout_ms) override {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      while (ucp_worker_progress(worker_) != 0) {
      }
      handle_pending();
      if (!events_.empty()) {
        Event e = std::move(events_.front());
        events_.pop_front();
        return std::optional<Event>(std::move(e));
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return std::optional<Event>();
      ucs_status_t s = ucp_worker_arm(worker_);
      if (s == UCS_ERR_BUSY) continue;
      if (s != UCS_OK) return Status::error("ucx: ucp_worker_arm: " + ucs_text(s));
      wait_efd(static_cast<int>(std::min<long long>(left, 100)));
    }
  }

  void disconnect(PeerId peer) override {
    auto it = eps_.find(peer);
    if (it == eps_.end()) return;
    ucp_ep_h ep = it->second;
    remove_peer(peer);
    close_ep(ep, true);
  }

 private:
  struct RndvRecv {
    UcxEndpoint* self;
    PeerId peer;
    std::unique_ptr<PooledFrame> frame;
  };

  void wait_efd(int ms) {
    pollfd p{efd_, POLLIN, 0};
    ::poll(&p, 1, ms);
  }

  void add_peer(PeerId peer, ucp_ep_h ep) {
    eps_[peer] = ep;
    peer_of_[ep] = peer;
  }
  void remove_peer(PeerId peer) {
    auto it = eps_.find(peer);
    if (it == eps_.end()) return;
    peer_of_.erase(it->second);
    eps_.erase(it);
  }

  void close_ep(ucp_ep_h ep, bool force) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
    if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) {
      if (ucp_worker_progress(worker_) == 0) wait_efd(1);
    }
    if (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_request_cancel(worker_, req);
    ucp_request_free(req);
  }

  void push_disconnect(PeerId peer, std::string reason) {
    Event e;
    e.kind = Event::Kind::kDisconnected;
    e.peer = peer;
    e.reason = std::move(reason);
    events_.push_back(std::move(e));
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
      ucp_ep_h h = nullptr;
      if (ucp_ep_create(worker_, &ep, &h) != UCS_OK) continue;
      const PeerId peer = next_peer_++;
      add_peer(peer, h);
      Event e;
      e.kind = Event::Kind::kConnected;
      e.peer = peer;
      events_.push_back(std::move(e));
    }
    // Endpoints that failed: close them and tell the owner.
    while (!failed_.empty()) {
      auto [ep, status] = failed_.front();
      failed_.pop_front();
      auto it = peer_of_.find(ep);
      if (it == peer_of_.end()) continue;  // already dropped by disconnect()
      const PeerId peer = it->second;
      remove_peer(peer);
      close_ep(ep, true);
      push_disconnect(peer, "connection lost: " + ucs_text(status));
    }
    // Peers that sent what we cannot take.
    while (!refused_.empty()) {
      auto [peer, length] = refused_.front();
      refused_.pop_front();
      drop_for_size(peer, length);
    }
    // Rendezvous messages: receive into a pooled buffer.
    while (!rndv_.empty()) {
      auto [peer, desc, length] = rndv_.front();
      rndv_.front() = {};
      rndv_.pop_front();
      auto frame = pool_->take(length);
      if (!frame) {
        drop_for_size(peer, length);
        continue;
      }
      auto* ctx = new RndvRecv{this, peer, std::move(frame)};
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = &UcxEndpoint::on_rndv_done;
      p.user_data = ctx;
      ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_, desc, ctx->frame->mutable_data(), length, &p);
      if (req == nullptr) {
        deliver(peer, std::move(ctx->frame));
        delete ctx;
      } else if (UCS_PTR_IS_ERR(req)) {
        delete ctx;
      }  // else on_rndv_done runs on completion and frees the request

    }
  }

  void deliver(PeerId peer, std::unique_ptr<PooledFrame> frame) {
    if (eps_.count(peer) == 0) return;  // dropped meanwhile
    Event e;
    e.kind = Event::Kind::kMessage;
    e.peer = peer;
    e.frame = std::move(frame);
    events_.push_back(std::move(e));
  }

  void drop_for_size(PeerId peer, size_t length) {
    auto it = eps_.find(peer);
    if (it == eps_.end()) return;
    ucp_ep_h ep = it->second;
    remove_peer(peer);
    close_ep(ep, true);
    push_disconnect(peer, "message of " + std::to_string(length) + " bytes refused (limit " +
                              std::to_string(options_.max_message) + ")");
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
    if (status == UCS_OK) ctx->self->deliver(ctx->peer, std::move(ctx->frame));
  }
  static ucs_status_t on_am(void* arg, const void*, size_t, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxEndpoint*>(arg);
    PeerId peer = 0;
    if (self->server_) {
      if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) return UCS_OK;
      auto it = self->peer_of_.find(param->reply_ep);
      if (it == self->peer_of_.end()) return UCS_OK;
      peer = it->second;
    }
    if (length > self->options_.max_message) {
      self->refused_.emplace_back(peer, length);  // closed outside the callback
      return UCS_OK;
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      self->rndv_.push_back({peer, data, length});
      return UCS_INPROGRESS;
    }
    auto frame = self->pool_->take(length);
    if (!frame) {
      self->refused_.emplace_back(peer, length);
      return UCS_OK;
    }
    std::memcpy(frame->mutable_data(), data, length);
    self->deliver(peer, std::move(frame));
    return UCS_OK;
  }

  void shutdown() {
    if (worker_ != nullptr) {
      // Close gracefully so the other side sees the disconnect at once.
      std::vector<ucp_ep_h> eps;
      for (auto& [peer, ep] : eps_) eps.push_back(ep);
      eps_.clear();
      peer_of_.clear();
      for (ucp_ep_h ep : eps) close_ep(ep, false);
      for (int i = 0; i < 100 && ucp_worker_progress(worker_) != 0; ++i) {
      }
      events_.clear();
      if (listener_ != nullptr) ucp_listener_destroy(listener_);
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
  };

  bool server_;
  Options options_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;
  std::string address_;
  std::shared_ptr<BufferPool> pool_ = BufferPool::create();
  std::map<PeerId, ucp_ep_h> eps_;
  std::unordered_map<ucp_ep_h, PeerId> peer_of_;
  PeerId next_peer_ = 1;
  std::deque<Event> events_;
  std::deque<ucp_conn_request_h> conn_requests_;
  std::deque<std::pair<ucp_ep_h, ucs_status_t>> failed_;
  std::deque<Rndv> rndv_;
  std::deque<std::pair<PeerId, size_t>> refused_;
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
