// Tests of the data worker's loop (dw_daemon/worker.h) on its own, part of
// tests/dataplane_test: stopping while the trainer is out of reach, a
// trainer that closes right after telling the worker to drain, the
// default worker id.
#include "dw_daemon/worker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gmcore/peer_auth.h"
#include "gmcore/stream_config.h"
#include "gmcore/wire.h"
#include "mpi_transport/transport.h"
#include "readers/reader.h"

namespace goldminer {
namespace {

// SIGTERM to a worker whose trainer never listened (a companion job ended
// with its batch job): it stops retrying at once and says it was stopped,
// which goldminer-dw turns into exit 0.
TEST(WorkerTest, StopWhileTheTrainerIsOutOfReachEndsTheRetries) {
  dw::WorkerOptions w;
  w.trainer = "local://nobody-listens-here";
  w.secret = "s";
  w.connect_timeout_s = 600;
  std::atomic<bool> stop{false};
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = dw::run_worker(w, stop);
  stopper.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), dw::kStopped);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A trainer whose session ends tells its workers to drain and closes at
// once. Here it does so with a lease granted after the Drain, so the
// worker's first act on a closed connection is to send that lease back:
// the worker still ends as drained, with no error (its trainer left as it
// said it would).
TEST(WorkerTest, ATrainerThatClosesRightAfterItsDrainEndsTheWorkerCleanly) {
  const std::string address = "local://worker-drain-then-close";
  auto listening = transport::listen(address, transport::Options{});
  ASSERT_TRUE(listening.ok()) << listening.status().message();
  std::unique_ptr<transport::Endpoint> trainer = std::move(listening).value();
  transport::PeerId peer = 0;
  std::vector<std::shared_ptr<const transport::Frame>> keep;
  auto next = [&]() -> std::optional<wire::Message> {
    for (int i = 0; i < 200; ++i) {
      auto e = trainer->poll(50);
      if (!e.ok() || !e->has_value()) continue;
      if ((*e)->kind == transport::Event::Kind::kConnected) peer = (*e)->peer;
      if ((*e)->kind != transport::Event::Kind::kMessage) continue;
      keep.push_back((*e)->frame);
      auto m = wire::decode_frame(keep.back()->data(), keep.back()->size(), keep.back()->size());
      if (m.ok()) return std::move(m).value();
    }
    return std::nullopt;
  };
  auto send = [&](const wire::Message& m) {
    auto frame = wire::encode(m);
    ASSERT_TRUE(trainer->send(peer, frame.data(), frame.size()).ok());
  };
  std::atomic<bool> stop{false};
  Expected<dw::WorkerReport> result = Status::error("the worker did not run");
  std::thread worker([&] {
    dw::WorkerOptions w;
    w.trainer = address;
    w.secret = "s";
    w.id = "drained";
    result = dw::run_worker(w, stop);
  });
  auto hello = next();
  ASSERT_TRUE(hello && std::holds_alternative<wire::Hello>(*hello));
  const auth::PeerAuth secret{"s", {}};
  auth::Handshake hs{std::get<wire::Hello>(*hello).nonce, auth::random_nonce().value(),
                     std::get<wire::Hello>(*hello).target};
  auto challenge = auth::challenge(secret, hs, address);
  ASSERT_TRUE(challenge.ok()) << challenge.status().message();
  send(*challenge);
  auto answer = next();
  ASSERT_TRUE(answer && std::holds_alternative<wire::Auth>(*answer));
  ASSERT_TRUE(auth::check_answer(secret, hs, std::get<wire::Auth>(*answer)).ok());
  trainer->authenticated(peer);
  readers::DatasetConfig dataset;
  dataset.format = readers::Format::kIndex;
  StreamConfig stream;
  stream.batch_size = 10;
  stream.dataset = dataset.encode();
  send(wire::Program{stream.encode(), ""});
  auto asked = next();
  ASSERT_TRUE(asked && std::holds_alternative<wire::LeaseRequest>(*asked));
  send(wire::Drain{});
  wire::LeaseGrant grant;
  grant.split_id = 7;
  grant.end = 10;
  send(grant);
  trainer.reset();  // the session ends
  worker.join();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(result->drained);
}

// A worker's default id: the Slurm node name in a Slurm task (nodes may
// share a host name), else the host name; then the process id.
TEST(WorkerIdTest, SlurmNodeNameElseHostName) {
  const std::string pid = ":" + std::to_string(getpid());
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const char* saved = std::getenv("SLURMD_NODENAME");
  const std::string before = saved != nullptr ? saved : "";
  setenv("SLURMD_NODENAME", "c7", 1);
  EXPECT_EQ(dw::default_worker_id(), "c7" + pid);
  setenv("SLURMD_NODENAME", "", 1);
  EXPECT_EQ(dw::default_worker_id(), host + pid);
  unsetenv("SLURMD_NODENAME");
  EXPECT_EQ(dw::default_worker_id(), host + pid);
  if (saved != nullptr) setenv("SLURMD_NODENAME", before.c_str(), 1);
}

}  // namespace
}  // namespace goldminer
