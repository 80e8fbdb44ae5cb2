// The handshake end to end (gmcore/peer_auth.h), part of tests/dataplane_test:
// a fake trainer that does not hold the job secret, listening where a real
// goldminer-dw is told its trainer is, sends it a Program whose pickle would
// create a file; a relay between a worker and a real session. What each
// injects and checks is said at each test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dw_daemon/python_program.h"
#include "gm_config.h"
#include "dw_daemon/worker.h"
#include "gmcore/log.h"
#include "gmcore/peer_auth.h"
#include "gmcore/stream_config.h"
#include "gmcore/wire.h"
#include "mpi_transport/transport.h"
#include "readers/reader.h"
#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

using testing::builddir;
using testing::kEnv;
using testing::Process;
using testing::TempDir;
using transport::Event;

// A pickle whose loading creates `path` (builtins.open(path, "w")): what an
// attacker's Program would carry, with a side effect a test can see.
std::string file_creating_pickle(const std::string& path) { return "cbuiltins\nopen\n(V" + path + "\nVw\ntR."; }

// The Program goldminer.DataLoader would send (dw_daemon/python_program.h),
// around that pickle.
wire::Program pickle_program(const std::string& marker) {
  readers::DatasetConfig dataset;
  dataset.format = readers::Format::kIndex;
  StreamConfig stream;
  stream.batch_size = 10;
  stream.dataset = dataset.encode();
  return wire::Program{stream.encode(), std::string(dw::kPythonProgramMagic) + "python=/usr/bin/python3\n\n" +
                                            file_creating_pickle(marker)};
}

// A listener that speaks the wire as a trainer would, for one worker.
class FakeTrainer {
 public:
  FakeTrainer() {
    auto ep = transport::listen("ucx://127.0.0.1:0", transport::Options{});
    if (ep.ok()) ep_ = std::move(ep).value();
    else error_ = ep.status().message();
  }
  const std::string& error() const { return error_; }
  std::string address() const { return ep_->address(); }
  // The next message of the worker; nothing once it left or after `timeout_s`.
  std::optional<wire::Message> next(double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
    while (std::chrono::steady_clock::now() < end) {
      auto e = ep_->poll(50);
      if (!e.ok() || !e->has_value()) continue;
      Event& ev = **e;
      if (ev.kind == Event::Kind::kConnected) peer_ = ev.peer;
      if (ev.kind == Event::Kind::kDisconnected) return std::nullopt;
      if (ev.kind != Event::Kind::kMessage) continue;
      auto m = wire::decode_frame(ev.frame->data(), ev.frame->size(), ev.frame->size());
      if (m.ok()) return std::move(m).value();
    }
    return std::nullopt;
  }
  void send(const wire::Message& m) {
    auto frame = wire::encode(m);
    (void)ep_->send(peer_, frame.data(), frame.size());  // the worker may be gone already
  }
  void authenticated() { ep_->authenticated(peer_); }

 private:
  std::unique_ptr<transport::Endpoint> ep_;
  transport::PeerId peer_ = 0;
  std::string error_;
};

// One handshake of a real goldminer-dw (job secret "s3cret-for-tests")
// with a fake trainer proving itself with `trainer_secret`, which then
// sends the pickle Program at once, whatever the worker answered. Returns
// the worker's exit status; `answered` says whether it sent an Auth.
struct Outcome {
  int exit = -1;
  bool answered = false;
  bool sent_error = false;
  std::string worker_log;
  bool marker_created = false;
};
Outcome handshake_with_fake_trainer(const std::string& trainer_secret) {
  Outcome out;
  TempDir d;
  const std::string marker = d / "the-pickle-ran";
  FakeTrainer t;
  if (!t.error().empty()) {
    ADD_FAILURE() << t.error();
    return out;
  }
  auto env = kEnv;
  env["GOLDMINER_TRAINER"] = t.address();
  Process w({builddir() + "/goldminer-dw", "--verbose", "--id", "victim", "--connect-timeout", "5"}, env);
  auto hello = t.next(20);
  if (!hello || !std::holds_alternative<wire::Hello>(*hello)) {
    ADD_FAILURE() << "no Hello from the worker: " << w.err();
    return out;
  }
  const auto& h = std::get<wire::Hello>(*hello);
  EXPECT_EQ(h.target, t.address()) << "the Hello names the address the worker dialed";
  auth::Handshake hs{h.nonce, auth::random_nonce().value(), h.target};
  auth::PeerAuth fake;
  fake.secret = trainer_secret;
  auto c = auth::challenge(fake, hs, t.address());
  EXPECT_TRUE(c.ok()) << c.status().message();
  t.send(*c);
  // The attack: the Program right behind the challenge, not waiting for
  // (or checking) an answer.
  t.send(pickle_program(marker));
  for (auto m = t.next(10); m; m = t.next(10)) {
    if (std::holds_alternative<wire::Auth>(*m)) {
      out.answered = true;
      t.authenticated();
    }
    if (std::holds_alternative<wire::Error>(*m)) out.sent_error = true;
  }
  out.exit = w.wait();
  out.worker_log = w.err();
  out.marker_created = access(marker.c_str(), F_OK) == 0;
  return out;
}

// Injects: a trainer that does not hold the secret (it proves itself with
// another) and sends a Program whose pickle would create a file. Checks:
// the worker sends no proof (it is no oracle), refuses with its reason in
// its log, exits non-zero, and the file does not exist (no program loaded,
// nothing unpickled).
TEST(WorkerAuthTest, AFakeTrainerWithoutTheSecretGetsNoProofAndItsPickleNeverRuns) {
#ifndef GOLDMINER_HAVE_UCX
  GTEST_SKIP() << "built without UCX (goldminer-dw reaches its trainer over ucx://)";
#endif
  Outcome o = handshake_with_fake_trainer("a-guessed-secret");
  EXPECT_FALSE(o.answered) << "the worker proved the secret to a peer that did not";
  EXPECT_TRUE(o.sent_error) << "the worker says it refuses";
  EXPECT_NE(o.exit, 0) << o.worker_log;
  EXPECT_NE(o.worker_log.find("authentication: the trainer does not prove this job's secret for this handshake"),
            std::string::npos)
      << o.worker_log;
  EXPECT_EQ(o.worker_log.find("python dataset"), std::string::npos) << "a program was loaded: " << o.worker_log;
  EXPECT_FALSE(o.marker_created) << "the fake trainer's pickle ran on the worker";
}

// The control: the same fake trainer, given the secret, gets its pickle
// run (so the test above would see it if the worker accepted the program).
TEST(WorkerAuthTest, TheSamePickleFromATrainerHoldingTheSecretRuns) {
#ifndef GOLDMINER_HAVE_UCX
  GTEST_SKIP() << "built without UCX (goldminer-dw reaches its trainer over ucx://)";
#endif
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3 to unpickle with";
  if (std::getenv("PYTHONPATH") == nullptr) GTEST_SKIP() << "PYTHONPATH (the staged goldminer package) not set";
  Outcome o = handshake_with_fake_trainer(kEnv.at("GOLDMINER_SECRET"));
  EXPECT_TRUE(o.answered) << o.worker_log;
  EXPECT_TRUE(o.marker_created) << "the control did not run the pickle (exit " << o.exit << "): " << o.worker_log;
}

// A relay at another address between a worker and a real session: it
// forwards every frame both ways, and (`rewrite_target`) rewrites the
// Hello's target to the session's own address. Checks: no worker joins
// and no Program passes the relay; returns the worker's error and what
// the session logged.
struct RelayOutcome {
  std::string worker_error, session_log;
};
RelayOutcome relay(bool rewrite_target, const std::string& name) {
  std::mutex log_mu;
  std::string session_log;
  struct SinkGuard {  // declared before the session: restored after it ends
    log::Sink previous;
    ~SinkGuard() { log::set_sink(previous); }
  } guard{log::set_sink([&](log::Level, const std::string& line) {
    std::lock_guard<std::mutex> l(log_mu);
    session_log += line + "\n";
  })};
  testing::TempDir d;
  SessionOptions o = testing::text_session(d, 100, "local://" + name + "-real");
  auto s = Session::create(o);
  if (!s.ok()) return {"session: " + s.status().message(), ""};
  auto relay_ep = transport::listen("local://" + name + "-relay", transport::Options{});
  if (!relay_ep.ok()) return {"relay: " + relay_ep.status().message(), ""};
  std::atomic<bool> done{false};
  std::string worker_error;
  std::thread worker([&] {
    dw::WorkerOptions w;
    w.trainer = "local://" + name + "-relay";
    w.secret = "x";
    w.id = "relayed";
    w.connect_timeout_s = 3;  // it retries while the trainer seems not to listen yet
    std::atomic<bool> stop{false};
    auto r = dw::run_worker(w, stop);
    worker_error = r.ok() ? "joined" : r.status().message();
    done = true;
  });
  std::unique_ptr<transport::Endpoint> up;  // the relay's connection to the session
  transport::PeerId down = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // watchdog
  // Until the worker has ended and the session has seen its refusal (the
  // worker's last frame may still be on its way through the relay).
  while (!(done && (*s)->metrics().workers_rejected >= 1) && std::chrono::steady_clock::now() < end) {
    auto e = (*relay_ep)->poll(5);
    if (e.ok() && e->has_value()) {
      Event& ev = **e;
      if (ev.kind == Event::Kind::kConnected) {  // each of the worker's tries
        down = ev.peer;
        auto c = transport::connect("local://" + name + "-real", transport::Options{});
        EXPECT_TRUE(c.ok()) << c.status().message();
        if (c.ok()) up = std::move(c).value();
      } else if (ev.kind == Event::Kind::kDisconnected) {
        up.reset();
      } else if (up != nullptr) {
        std::vector<uint8_t> bytes(ev.frame->data(), ev.frame->data() + ev.frame->size());
        auto m = wire::decode_frame(bytes.data(), bytes.size(), bytes.size());
        if (rewrite_target && m.ok() && std::holds_alternative<wire::Hello>(*m)) {
          std::get<wire::Hello>(*m).target = (*s)->address();
          bytes = wire::encode(*m);
        }
        (void)up->send(0, bytes.data(), bytes.size());
      }
    }
    if (up == nullptr) continue;
    auto back = up->poll(5);
    if (back.ok() && back->has_value() && (**back).kind == Event::Kind::kMessage) {
      auto m = wire::decode_frame((**back).frame->data(), (**back).frame->size(), (**back).frame->size());
      EXPECT_FALSE(m.ok() && std::holds_alternative<wire::Program>(*m)) << "a Program went through the relay";
      (void)(*relay_ep)->send(down, (**back).frame->data(), (**back).frame->size());
    }
  }
  EXPECT_TRUE(done) << "the worker still runs after 30 s";
  worker.join();
  EXPECT_GE((*s)->metrics().workers_rejected, 1u);
  EXPECT_EQ((*s)->metrics().workers, 0u) << "a relayed worker joined";
  (*s).reset();  // its last log lines are in
  std::lock_guard<std::mutex> l(log_mu);
  return {worker_error, session_log};
}

// Injects: a relay that forwards the worker's Hello as it is. Checks: the
// session refuses it before it proves anything (the worker dialed the
// relay's address, not the session's) and the worker does not join; the
// reason is in the session's log, and the stranger learns none of it.
TEST(WorkerAuthTest, ARelayedHandshakeIsRefusedByTheSession) {
  const RelayOutcome r = relay(false, "relay-as-is");
  EXPECT_NE(r.session_log.find(
                "the worker dialed 'local://relay-as-is-relay', not this session (local://relay-as-is-real)"),
            std::string::npos)
      << r.session_log;
  EXPECT_EQ(r.worker_error,
            "the trainer refused: the trainer cannot authenticate this connection (its log says why)");
}

// Injects: a relay that rewrites the Hello's target to the session's own
// address. Checks: the worker refuses the session's proof, made for an
// address it did not dial; it sends no proof and does not join.
TEST(WorkerAuthTest, ARelayThatRewritesTheAddressIsRefusedByTheWorker) {
  const std::string e = relay(true, "relay-rewrites").worker_error;
  EXPECT_EQ(e.rfind("authentication: the trainer does not prove this job's secret for this handshake (another "
                    "secret, or a handshake relayed from another address than local://relay-rewrites-relay)",
                    0),
            0u)
      << e;
}

}  // namespace
}  // namespace goldminer
