// local://NAME: endpoints in one process, joined through a registry of
// named servers. Each message is copied once, into a pooled buffer of the
// receiver (as a network would deliver it).
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

#include "mpi_transport/buffer_pool.h"
#include "mpi_transport/transport_impl.h"

namespace goldminer::transport {
namespace {

// The events waiting for one endpoint.
class Mailbox {
 public:
  void push(Event event) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      events_.push_back(std::move(event));
    }
    cv_.notify_one();
  }
  std::optional<Event> pop(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty() || woken_; });
    woken_ = false;
    if (events_.empty()) return std::nullopt;
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // The owner's pop() returns now (or the next one at once).
  void wake() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_one();
  }
  // No more events are accepted (the owner is gone).
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    events_.clear();
  }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool closed_ = false;
  bool woken_ = false;
};

struct Server {
  std::shared_ptr<Mailbox> mailbox = std::make_shared<Mailbox>();
  std::shared_ptr<BufferPool> pool = BufferPool::create();
  std::mutex mu;
  std::map<PeerId, std::shared_ptr<Mailbox>> clients;
  PeerId next_peer = 1;
};

std::mutex registry_mu;
std::map<std::string, std::weak_ptr<Server>>& registry() {
  static auto* r = new std::map<std::string, std::weak_ptr<Server>>;
  return *r;
}

Status deliver(Mailbox* to, BufferPool* pool, PeerId from, const uint8_t* data, size_t size) {
  if (to->closed()) return Status::error("local: peer is gone");
  auto frame = pool->take(size);
  if (!frame) return Status::error("local: out of memory for a " + std::to_string(size) + "-byte message");
  std::memcpy(frame->mutable_data(), data, size);
  Event e;
  e.kind = Event::Kind::kMessage;
  e.peer = from;
  e.frame = std::move(frame);
  to->push(std::move(e));
  return Status();
}

class LocalServer final : public Endpoint {
 public:
  LocalServer(std::string name, std::shared_ptr<Server> server) : name_(std::move(name)), s_(std::move(server)) {}
  ~LocalServer() override {
    {
      std::lock_guard<std::mutex> lock(registry_mu);
      registry().erase(name_);
    }
    std::lock_guard<std::mutex> lock(s_->mu);
    for (auto& [peer, mailbox] : s_->clients) {
      Event e;
      e.kind = Event::Kind::kDisconnected;
      e.reason = "the trainer closed";
      mailbox->push(std::move(e));
    }
    s_->mailbox->close();
  }
  std::string address() const override { return "local://" + name_; }
  Status send(PeerId peer, const uint8_t* data, size_t size) override {
    std::shared_ptr<Mailbox> to;
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      auto it = s_->clients.find(peer);
      if (it == s_->clients.end()) return Status::error("local: no peer " + std::to_string(peer));
      to = it->second;
    }
    return deliver(to.get(), s_->pool.get(), 0, data, size);
  }
  void wake() override { s_->mailbox->wake(); }

  Expected<std::optional<Event>> poll(int timeout_ms) override {
    auto e = s_->mailbox->pop(timeout_ms);
    if (e && e->kind == Event::Kind::kDisconnected) {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->clients.erase(e->peer);
    }
    return e;
  }
  void disconnect(PeerId peer) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    auto it = s_->clients.find(peer);
    if (it == s_->clients.end()) return;
    Event e;
    e.kind = Event::Kind::kDisconnected;
    e.reason = "the trainer dropped this worker";
    it->second->push(std::move(e));
    s_->clients.erase(it);
  }

 private:
  std::string name_;
  std::shared_ptr<Server> s_;
};

class LocalClient final : public Endpoint {
 public:
  LocalClient(std::string address, std::shared_ptr<Server> server, PeerId id, std::shared_ptr<Mailbox> mailbox)
      : address_(std::move(address)), server_(std::move(server)), id_(id), mailbox_(std::move(mailbox)),
        pool_(BufferPool::create()) {}
  ~LocalClient() override {
    mailbox_->close();
    Event e;
    e.kind = Event::Kind::kDisconnected;
    e.peer = id_;
    e.reason = "the worker closed its connection";
    server_->mailbox->push(std::move(e));
  }
  std::string address() const override { return address_; }
  Status send(PeerId, const uint8_t* data, size_t size) override {
    {
      std::lock_guard<std::mutex> lock(server_->mu);
      if (server_->clients.count(id_) == 0) return Status::error("local: the trainer dropped this connection");
    }
    return deliver(server_->mailbox.get(), server_->pool.get(), id_, data, size);
  }
  Expected<std::optional<Event>> poll(int timeout_ms) override { return mailbox_->pop(timeout_ms); }
  void wake() override { mailbox_->wake(); }
  void disconnect(PeerId) override { mailbox_->close(); }

 private:
  std::string address_;
  std::shared_ptr<Server> server_;
  PeerId id_;
  std::shared_ptr<Mailbox> mailbox_;
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace

Expected<std::unique_ptr<Endpoint>> listen_local(const std::string& name, const Options& options) {
  if (name.empty()) return Status::error("local: empty name in 'local://'");
  std::lock_guard<std::mutex> lock(registry_mu);
  auto& slot = registry()[name];
  if (slot.lock()) return Status::error("local://" + name + ": already listening");
  auto server = std::make_shared<Server>();
  if (options.memory != nullptr) server->pool = BufferPool::create(size_t{1} << 30, options.memory);
  slot = server;
  return std::unique_ptr<Endpoint>(new LocalServer(name, server));
}

Expected<std::unique_ptr<Endpoint>> connect_local(const std::string& name, const Options&) {
  std::shared_ptr<Server> server;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = registry().find(name);
    if (it != registry().end()) server = it->second.lock();
  }
  if (!server) return Status::error("local://" + name + ": no trainer listens there");
  auto mailbox = std::make_shared<Mailbox>();
  PeerId id;
  {
    std::lock_guard<std::mutex> lock(server->mu);
    id = server->next_peer++;
    server->clients[id] = mailbox;
  }
  Event e;
  e.kind = Event::Kind::kConnected;
  e.peer = id;
  server->mailbox->push(std::move(e));
  return std::unique_ptr<Endpoint>(new LocalClient("local://" + name, server, id, mailbox));
}

}  // namespace goldminer::transport
