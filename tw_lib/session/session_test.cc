// Tests of the trainer session's C++ API (goldminer::Session) in one
// process: local workers as threads, tensors viewed in place, sample ids,
// state(), the queue's bound, deterministic order, refused batches, munge,
// the bad-record budget, bad options, the jpeg reader's resized crops.
// Elastic workers, timeouts and interruptions: session_waiting_test.cc.
#include "goldminer/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dw_daemon/worker.h"
#include "gmcore/auth.h"
#include "gmcore/fake_credentials.h"
#include "gmcore/lease_table.h"
#include "gmcore/wire.h"
#include "mpi_transport/transport.h"
#include "readers/image_resize.h"
#include "readers/test_util.h"
#include "tw_lib/session/dataplane_test_util.h"
#include "tw_lib/session/session_impl.h"

namespace goldminer {
namespace {

using testing::TempDir;
using testing::text_session;

// A JPEG listing too long for the one message workers get it in is refused
// when the session is made, naming the size.
TEST(SessionTest, RefusesAReaderConfigurationTooLargeToSend) {
  TempDir d;
  std::ofstream(d / "one.jpg") << "not read at planning";
  {
    std::ofstream m(d / "list.txt");
    for (int i = 0; i < 30000; ++i) m << d / "one.jpg" << "\n";
  }
  SessionOptions o;
  o.listen = "local://too-large";
  o.secret = "x";
  o.input = "jpeg:" + (d / "list.txt");
  auto s = Session::create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("its reader configuration (a JPEG listing is part of it) is "), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("more than the 1048576 a worker can be sent"), std::string::npos)
      << s.status().message();
}

// Each record's image of one epoch of `decode` over the JPEGs of `folder`
// (shape and pixels by record), with two local workers.
std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<uint8_t>>> jpeg_epoch(const std::string& folder,
                                                                                     const std::string& decode,
                                                                                     const std::string& listen) {
  SessionOptions o;
  o.listen = listen;
  o.secret = "x";
  o.input = "jpeg:" + folder;
  o.batch_size = 4;
  o.records_per_split = 8;
  o.seed = 11;
  o.local_workers = 2;
  o.jpeg_decode = decode;
  std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<uint8_t>>> images;
  auto s = Session::create(o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return images;
  for (const SessionBatch& b : (*s)->epoch()) {
    EXPECT_EQ(b.tensors.size(), 2u) << "jpeg: data + shapes";
    const auto* shapes = reinterpret_cast<const int64_t*>(b.tensors[1].data);
    const uint8_t* px = b.tensors[0].data;
    for (uint32_t i = 0; i < b.samples; ++i) {
      std::vector<int64_t> shape(shapes + 3 * i, shapes + 3 * i + 3);
      const size_t n = static_cast<size_t>(shape[0] * shape[1] * shape[2]);
      EXPECT_TRUE(images.emplace(b.sample_ids[2 * i + 1], std::make_pair(shape, std::vector<uint8_t>(px, px + n))).second)
          << "record " << b.sample_ids[2 * i + 1] << " twice";
      px += n;
    }
    EXPECT_EQ(px, b.tensors[0].data + b.tensors[0].nbytes);
  }
  EXPECT_TRUE((*s)->status().ok()) << (*s)->status().message();
  return images;
}

// --jpeg-decode resized-crop:S through the whole data plane: every image
// reaches the trainer S x S, and it is the crop the same seed's crop:S
// delivers, resized.
TEST(SessionTest, JpegResizedCropsReachTheTrainerAtTheTargetSize) {
  TempDir d;
  readers::testing::TempDir images;
  for (int i = 0; i < 19; ++i) {
    const int w = 40 + 23 * i, h = 30 + 17 * (i % 7);
    const bool gray = i % 5 == 0;  // one byte a pixel
    images.write("im" + std::to_string(100 + i) + ".jpg",
                 readers::testing::encode_jpeg(w, h, gray, i % 3 == 0, [i, gray](int x, int y, unsigned char* px) {
                   px[0] = static_cast<unsigned char>(x * 3 + i);
                   if (gray) return;
                   px[1] = static_cast<unsigned char>(y * 5);
                   px[2] = static_cast<unsigned char>((x ^ y) & 0xff);
                 }));
  }
  const auto crops = jpeg_epoch(images.path(), "crop:24", "local://session-jpeg-crop");
  const auto resized = jpeg_epoch(images.path(), "resized-crop:24", "local://session-jpeg-resized");
  ASSERT_EQ(crops.size(), 19u);
  ASSERT_EQ(resized.size(), 19u);
  std::vector<int32_t> rows;
  for (const auto& [record, image] : resized) {
    EXPECT_EQ(image.first, (std::vector<int64_t>{24, 24, 3})) << "record " << record;
    const auto& crop = crops.at(record);
    std::vector<uint8_t> want(24 * 24 * 3);
    readers::resize_bilinear_rgb(crop.second.data(), static_cast<uint32_t>(crop.first[0]),
                                 static_cast<uint32_t>(crop.first[1]), static_cast<size_t>(crop.first[1]) * 3,
                                 want.data(), 24, 24, &rows);
    EXPECT_EQ(image.second, want) << "record " << record;
  }
}

TEST(SessionTest, IteratesEpochsWithLocalWorkerThreads) {
  TempDir d;
  SessionOptions o = text_session(d, 1000, "local://session-test");
  o.local_workers = 2;
  o.records_per_split = 300;  // 300, 300, 300, 100: 5 + 5 + 5 + 2 batches of up to 64
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->batches_per_epoch(), 17u);
  // Both local workers are counted once they joined (on a loaded machine
  // one may join only after the other has read the whole epoch).
  auto joined = (*s)->wait_for_workers(2, 60);
  ASSERT_TRUE(joined.ok() && *joined == 2u);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> records;
    uint64_t batches = 0;
    for (;;) {
      auto b = (*s)->next();
      ASSERT_TRUE(b.ok()) << b.status().message();
      if (!b->has_value()) break;
      ++batches;
      const SessionBatch& batch = **b;
      EXPECT_EQ(batch.epoch, static_cast<uint32_t>(epoch));
      ASSERT_EQ(batch.tensors.size(), 2u) << "text: data + lengths";
      const auto* lengths = reinterpret_cast<const int64_t*>(batch.tensors[1].data);
      const char* data = reinterpret_cast<const char*>(batch.tensors[0].data);
      for (uint32_t i = 0; i < batch.samples; ++i) {
        const int64_t r = batch.sample_ids[2 * i + 1];
        const std::string want = "sample " + std::to_string(r) + " " + std::string(r % 37, 'x');
        ASSERT_EQ(std::string(data, static_cast<size_t>(lengths[i])), want);
        data += lengths[i];
        EXPECT_TRUE(records.insert(r).second);
      }
    }
    EXPECT_EQ(records.size(), 1000u);
    EXPECT_EQ(batches, (*s)->batches_per_epoch());
    SessionMetrics m = (*s)->metrics();
    EXPECT_EQ(m.workers, 2u);
  }
  // The range form: one epoch per loop.
  for (int epoch = 2; epoch < 4; ++epoch) {
    uint64_t samples = 0;
    for (const SessionBatch& b : (*s)->epoch()) {
      EXPECT_EQ(b.epoch, static_cast<uint32_t>(epoch));
      samples += b.samples;
    }
    EXPECT_TRUE((*s)->status().ok()) << (*s)->status().message();
    EXPECT_EQ(samples, 1000u);
  }
}

// The corrupt-record budget holds where the trainer is, not where the
// workers are: with a worker that has read the whole epoch, two corrupt
// records in it and a budget of one, every batch before the second is
// taken; the position then counts one; reaching the second fails.
TEST(SessionTest, TheBadRecordBudgetIsCheckedWhereTheTrainerIs) {
  TempDir d;
  testing::write_criteo(d / "day.tsv", 300, 5);
  std::ofstream(d / "day.tsv", std::ios::app) << "0\talso-not-a-number\n";  // split 3: only this record
  SessionOptions o;
  o.listen = "local://session-bad-budget";
  o.secret = "x";
  o.input = "criteo-tsv:" + (d / "day.tsv");
  o.batch_size = 10;
  o.records_per_split = 100;
  o.deterministic = true;
  o.max_bad_records = 1;
  o.local_workers = 1;
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto first = (*s)->next();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status().message();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((*s)->metrics().bad_records < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ((*s)->metrics().bad_records, 2u) << "the worker read the whole epoch";
  uint64_t samples = (*first)->samples;
  for (int i = 1; i < 30; ++i) {
    auto b = (*s)->next();
    ASSERT_TRUE(b.ok()) << "batch " << i << ": " << b.status().message();
    ASSERT_TRUE(b->has_value());
    samples += (*b)->samples;
  }
  EXPECT_EQ(samples, 299u);
  EXPECT_EQ((*s)->state().bad_records, 1u);
  auto over = (*s)->next();
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "input: 2 corrupt records this epoch exceed the budget of 1 (--max-bad-records)");
}

// Under Slurm no secret exists: the session and its workers prove uid and
// job to each other with munge (a stand-in here; the devcluster's tests use
// munged). The job's workers feed the epoch exactly once; a worker of
// another job of the same user, and one of another user, are refused, and
// the session goes on.
TEST(SessionTest, MungeAdmitsTheJobsWorkersAndRefusesOthers) {
  TempDir d;
  SessionOptions o = text_session(d, 1000, "local://session-munge");
  o.secret.clear();
  auto munge = [](uid_t uid, uint32_t job) {
    auth::MungeAuth m;
    m.credentials = std::make_shared<FakeCredentials>(uid);
    m.uid = uid;
    m.job = job;
    return m;
  };
  o.munge = munge(1000, 42);
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto worker = [&](auth::MungeAuth m) {
    dw::WorkerOptions w;
    w.trainer = (*s)->address();
    w.munge = std::move(m);
    w.id = "w" + std::to_string(w.munge.uid) + "-" + std::to_string(w.munge.job);
    std::atomic<bool> stop{false};
    return dw::run_worker(w, stop).status().message();
  };
  EXPECT_EQ(worker(munge(1000, 43)).rfind(
                "authentication: the trainer works for another job: it says 'goldminer trainer job=42 worker-nonce=", 0),
            0u)
      << "a worker of the same user's job 43 refuses the trainer (and so runs none of its program)";
  EXPECT_EQ(worker(munge(1001, 42)), "authentication: the trainer's munge: credential refused: Unauthorized")
      << "another user cannot decode the trainer's proof";
  std::thread good([&] { EXPECT_EQ(worker(munge(1000, 42)), ""); });
  std::set<int64_t> records;
  for (;;) {
    auto b = (*s)->next();
    ASSERT_TRUE(b.ok()) << b.status().message();
    if (!b->has_value()) break;
    for (uint32_t i = 0; i < (*b)->samples; ++i) EXPECT_TRUE(records.insert((*b)->sample_ids[2 * i + 1]).second);
  }
  EXPECT_EQ(records.size(), 1000u);
  EXPECT_EQ((*s)->metrics().workers, 1u);
  s->reset();  // drains the worker
  good.join();
}

// The queue's bound holds whatever the number of workers, while they join
// too: queued batches plus the credits workers hold stay within
// queue_batches and queue_bytes, or one per worker where that is more.
TEST(SessionTest, QueueStaysWithinItsBoundWithManyWorkers) {
  TempDir d;
  for (const bool by_bytes : {false, true}) {
    SessionOptions o = text_session(d, 3000, by_bytes ? "local://session-bound-bytes" : "local://session-bound");
    o.batch_size = 10;
    o.local_workers = 8;
    o.credits_per_worker = 4;  // without the bound: 32 batches
    o.queue_batches = by_bytes ? 64 : 5;
    // A text batch of 10 samples is a frame of about 1 KB: room for ~3.
    o.queue_bytes = by_bytes ? 3000 : uint64_t{1} << 30;
    auto s = Session::create(o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto joined = (*s)->wait_for_workers(8, 60);
    ASSERT_TRUE(joined.ok() && *joined == 8u);
    // The batch size is known from the first batch on; the workers that
    // joined later got their first credits from room the trainer freed.
    uint64_t samples = 0;
    for (int i = 0; i < 100; ++i) {
      auto b = (*s)->next();
      ASSERT_TRUE(b.ok() && b->has_value());
      samples += (*b)->samples;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    SessionMetrics m = (*s)->metrics();
    EXPECT_EQ(m.workers, 8u);
    EXPECT_LE(m.max_queued_batches, 8u) << "while the workers joined";
    // 8 workers: each may always send one batch.
    EXPECT_LE(m.queue_batches, 8u);
    EXPECT_GE(m.queue_batches, 5u) << "the room is used";
    if (by_bytes) {
      EXPECT_LE(m.queue_bytes, 8 * 1200u);
    }
    for (const SessionBatch& b : (*s)->epoch()) samples += b.samples;
    EXPECT_EQ(samples, 3000u);
    // A whole epoch with all of them joined: the most ever queued at once.
    samples = 0;
    for (const SessionBatch& b : (*s)->epoch()) samples += b.samples;
    EXPECT_EQ(samples, 3000u);
    EXPECT_LE((*s)->metrics().max_queued_batches, 8u);
    EXPECT_GE((*s)->metrics().max_queued_batches, 1u);
  }
}

// Deterministic order with several workers of several threads: next()
// returns the splits in the lease table's seeded order for the epoch (a
// new one each epoch), each split's batches in sequence, and what the
// session holds stays near its bound: the queue's room, plus what the
// worker holding the awaited split still sends of its other splits.
TEST(SessionTest, DeterministicOrderWithManyWorkersAndThreads) {
  TempDir d;
  SessionOptions o = text_session(d, 20000, "local://session-ordered");
  o.batch_size = 10;
  o.records_per_split = 100;  // 10 batches a split, 200 splits (ids 0-199)
  o.deterministic = true;
  o.seed = 5;
  o.local_workers = 4;
  o.local_worker_threads = 2;
  o.queue_batches = 8;
  // The order the session's lease table draws (it depends on the seed and
  // the number of splits only).
  std::vector<InputSplit> ids;
  for (uint64_t i = 0; i < 200; ++i) ids.push_back({i, "f", 0, 1});
  LeaseConfig lc;
  lc.seed = o.seed;
  lc.deterministic_order = true;
  auto plan = LeaseTable::create(ids, lc);
  ASSERT_TRUE(plan.ok());
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::vector<uint64_t> first_order;
  for (uint32_t epoch = 0; epoch < 2; ++epoch) {
    plan->start_epoch(epoch);
    std::vector<uint64_t> order;  // splits as next() returned them
    uint64_t sequence = 0, samples = 0;
    size_t most_held = 0, batches = 0;
    for (const SessionBatch& b : (*s)->epoch()) {
      if (order.empty() || b.split_id != order.back()) {
        EXPECT_TRUE(order.empty() || sequence == 10) << "epoch " << epoch << ": split " << order.back()
                                                     << " left after " << sequence << " batches";
        order.push_back(b.split_id);
        sequence = 0;
      }
      EXPECT_EQ(b.sequence, sequence) << "epoch " << epoch << ": split " << b.split_id;
      sequence = b.sequence + 1;
      samples += b.samples;
      if (++batches % 16 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a slower trainer: the workers get ahead
        SessionMetrics m = (*s)->metrics();
        most_held = std::max(most_held, m.queue_batches + m.held_batches);
      }
    }
    ASSERT_TRUE((*s)->status().ok()) << (*s)->status().message();
    EXPECT_EQ(samples, 20000u);
    EXPECT_EQ(order, plan->epoch_order()) << "epoch " << epoch;
    if (epoch == 0) first_order = order;
    // The room (8, at least one per worker) plus the awaited split's
    // holder's other splits (threads + 1 = 3 leases of 10 batches).
    EXPECT_LE(most_held, 8u + 3 * 10) << "epoch " << epoch;
    std::cerr << "epoch " << epoch << ": at most " << most_held << " batches queued or held\n";
  }
  EXPECT_NE(plan->epoch_order(), first_order) << "shuffled anew each epoch";
}

// A batch the session refuses (here: no sample-id tensor) drops its
// worker before the lease table counts it delivered, so the split is
// re-run from that batch: with deterministic order the next worker's
// batches still fit, and nothing of the epoch is missing.
TEST(SessionTest, ARefusedBatchIsReRunNotSkipped) {
  TempDir d;
  SessionOptions o = text_session(d, 1000, "local://session-refused");
  o.batch_size = 100;  // one split of 10 batches
  o.deterministic = true;
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  // A hand-made worker: authenticates, takes the split, sends its batch 0
  // without the sample-id tensor.
  auto ep = transport::connect("local://session-refused");
  ASSERT_TRUE(ep.ok()) << ep.status().message();
  auto send = [&](const wire::Message& m) {
    auto frame = wire::encode(m);
    ASSERT_TRUE((*ep)->send(0, frame.data(), frame.size()).ok());
  };
  std::vector<std::shared_ptr<const transport::Frame>> keep;
  auto receive = [&]() -> wire::Message {
    for (int i = 0; i < 200; ++i) {
      auto e = (*ep)->poll(50);
      if (e.ok() && e->has_value() && (*e)->kind == transport::Event::Kind::kMessage) {
        keep.push_back((*e)->frame);
        auto m = wire::decode_frame(keep.back()->data(), keep.back()->size(), keep.back()->size());
        if (m.ok()) return *m;
      }
    }
    ADD_FAILURE() << "no message from the session";
    return wire::Drain{};
  };
  const auth::Digest hello_nonce{};
  send(wire::Hello{"hand-made", 1, hello_nonce, wire::PeerRole::kWorker, "local://session-refused"});
  auto challenge = receive();
  ASSERT_TRUE(std::holds_alternative<wire::Challenge>(challenge));
  auto proof = auth::answer(auth::PeerAuth{"x", {}}, hello_nonce, "local://session-refused",
                            std::get<wire::Challenge>(challenge));
  ASSERT_TRUE(proof.ok()) << proof.status().message();
  send(*proof);
  send(wire::LeaseRequest{1});
  std::optional<wire::LeaseGrant> grant;
  for (int i = 0; i < 5 && !grant; ++i)
    if (auto m = receive(); std::holds_alternative<wire::LeaseGrant>(m)) grant = std::get<wire::LeaseGrant>(m);
  ASSERT_TRUE(grant.has_value());
  wire::BatchHeader h;
  h.split_id = grant->split_id;
  h.samples = 100;
  auto batch = wire::BatchWriter::create(h, {{wire::DType::kUInt8, {100}}});
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE((*ep)->send(0, batch->frame_data(), batch->frame_size()).ok());
  for (int i = 0; i < 100 && (*s)->metrics().workers_rejected == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ((*s)->metrics().workers_rejected, 1u);
  // A real worker does the split, from its batch 0.
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    dw::WorkerOptions w;
    w.trainer = "local://session-refused";
    w.secret = "x";
    w.id = "real";
    (void)dw::run_worker(w, stop);
  });
  std::set<int64_t> records;
  uint64_t samples = 0;
  for (const SessionBatch& b : (*s)->epoch()) {
    samples += b.samples;
    for (uint32_t i = 0; i < b.samples; ++i) records.insert(b.sample_ids[2 * i + 1]);
  }
  EXPECT_TRUE((*s)->status().ok()) << (*s)->status().message();
  EXPECT_EQ(samples, 1000u);
  EXPECT_EQ(records.size(), 1000u);
  stop = true;
  s->reset();
  worker.join();
}

TEST(SessionTest, RefusesBadOptions) {
  SessionOptions o;
  o.input = "text:/etc/hostname";
  auto s = Session::create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no job secret"), std::string::npos);
  o.secret = "x";
  o.listen = "tcp://1.2.3.4:5";
  s = Session::create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown transport 'tcp'"), std::string::npos);
  o.listen = "ucx://127.0.0.1:0";
  o.receive_budget_bytes = 1000;
  s = Session::create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "session: receive budget must be at least 1 MiB");
}

// Drains take the workers on the node whose placement did not pay first
// (the trainer's: goldminer-dw's ids are "NODE:PID"), then the others in
// the session's order; with no such node, the session's order alone.
TEST(SessionDrainTest, WorkersOnTheNodeWhosePlacementDidNotPayDrainFirst) {
  const std::vector<std::pair<transport::PeerId, std::string>> ready{
      {1, "c1:100"}, {2, "g1:200"}, {3, "c2:300"}, {4, "g1:400"}, {5, "g10:500"}};
  EXPECT_EQ(choose_drains(ready, 3, "g1"), (std::vector<transport::PeerId>{2, 4, 1}));
  EXPECT_EQ(choose_drains(ready, 1, "g1"), (std::vector<transport::PeerId>{2}));
  EXPECT_EQ(choose_drains(ready, 2, ""), (std::vector<transport::PeerId>{1, 2}));
  EXPECT_EQ(choose_drains(ready, 9, "g1").size(), 5u) << "never more than are ready";
  EXPECT_EQ(node_of_worker("fe80::1:77"), "fe80::1") << "up to the last colon";
}

}  // namespace
}  // namespace goldminer
