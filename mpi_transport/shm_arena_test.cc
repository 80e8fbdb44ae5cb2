// Tests of the shared-memory arena (shm_arena.h) on its own: one process
// plays worker and trainer.
#include "mpi_transport/shm_arena.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi_transport/test_util.h"

namespace goldminer::transport {
namespace {

using testing::pattern;

// A worker's arena mapped by the trainer (here one process plays both):
// frames are viewed in place, a released block is reused, a full arena
// says so, and bad descriptors are refused.
TEST(ShmArenaTest, FramesAreViewedInPlaceAndBlocksReused) {
  auto arena = ShmArena::create(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto offer = ShmOffer::decode((*arena)->offer().encode().data(), (*arena)->offer().encode().size());
  ASSERT_TRUE(offer.ok()) << offer.status().message();
  auto mapping = ShmMapping::open(*offer);
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();

  auto a = pattern(300 << 10, 1), b = pattern(300 << 10, 2);
  const ShmDescriptor* da = (*arena)->put(a.data(), a.size());
  const ShmDescriptor* db = (*arena)->put(b.data(), b.size());
  ASSERT_NE(da, nullptr);
  ASSERT_NE(db, nullptr);
  const ShmDescriptor first = *da;
  auto fa = (*mapping)->frame(*da, 1 << 30);
  auto fb = (*mapping)->frame(*db, 1 << 30);
  ASSERT_TRUE(fa.ok() && fb.ok());
  ASSERT_EQ((*fa)->size(), a.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*fa)->data()) % 64, 0u);
  EXPECT_EQ(std::memcmp((*fa)->data(), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp((*fb)->data(), b.data(), b.size()), 0);

  // Delivered once only.
  auto again = (*mapping)->frame(*da, 1 << 30);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("names no filled block"), std::string::npos) << again.status().message();

  // 1 MiB holds three blocks of 300 KiB; the fourth does not fit.
  auto c = pattern(300 << 10, 3);
  const ShmDescriptor* dc = (*arena)->put(c.data(), c.size());
  ASSERT_NE(dc, nullptr);
  EXPECT_EQ((*arena)->put(c.data(), c.size()), nullptr) << "a full arena sends by copy";
  EXPECT_GE((*arena)->bytes_in_use(), 3 * (300u << 10));

  // Dropping the first frame frees the lowest block, which is taken next.
  fa->reset();
  const ShmDescriptor* dd = (*arena)->put(c.data(), c.size());
  ASSERT_NE(dd, nullptr);
  EXPECT_EQ(dd->offset, first.offset);
  auto fd = (*mapping)->frame(*dd, 1 << 30);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(std::memcmp((*fd)->data(), c.data(), c.size()), 0);
  // A frame outlives the mapping's other holders.
  mapping->reset();
  EXPECT_EQ(std::memcmp((*fb)->data(), b.data(), b.size()), 0);
}

// A frame built in a reserved block: committed, it is the trainer's like a
// put one; the trainer refuses a block still reserved; a reservation
// dropped after its block was committed, released and reserved anew leaves
// the new reservation alone; dropped uncommitted, its block is free again.
TEST(ShmArenaTest, FramesBuiltInReservedBlocks) {
  auto arena = ShmArena::create(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto mapping = ShmMapping::open((*arena)->offer());
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();
  auto a = pattern(300 << 10, 1), b = pattern(300 << 10, 2);

  std::unique_ptr<wire::FrameStorage> r = (*arena)->reserve(a.size());
  ASSERT_NE(r, nullptr);
  ASSERT_GE(r->capacity(), a.size());
  uint8_t* const block = r->data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
  EXPECT_TRUE((*arena)->owns(block));
  EXPECT_FALSE((*arena)->owns(a.data()));
  std::memcpy(block, a.data(), a.size());
  EXPECT_EQ((*arena)->commit(block + 64, a.size()), nullptr) << "not a block's start";
  EXPECT_EQ((*arena)->commit(block, r->capacity() + 1), nullptr) << "larger than the block";
  const ShmDescriptor* d = (*arena)->commit(block, a.size());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ((*arena)->commit(block, a.size()), nullptr) << "committed twice";
  auto f = (*mapping)->frame(*d, 1 << 30);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ((*f)->size(), a.size());
  EXPECT_EQ(std::memcmp((*f)->data(), a.data(), a.size()), 0);
  const ShmDescriptor first = *d;

  // Released by the trainer, the block is reserved anew (lowest first);
  // dropping the old, committed reservation must not free it.
  f->reset();
  std::unique_ptr<wire::FrameStorage> again = (*arena)->reserve(a.size());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->data(), block);
  r.reset();
  const ShmDescriptor* other = (*arena)->put(b.data(), b.size());
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->offset, first.offset) << "the reserved block was given away";
  EXPECT_FALSE((*mapping)->frame(ShmDescriptor{first.offset, a.size()}, 1 << 30).ok())
      << "a block still reserved is not delivered";

  // Dropped uncommitted, the block is free again.
  again.reset();
  const ShmDescriptor* reused = (*arena)->put(b.data(), b.size());
  ASSERT_NE(reused, nullptr);
  EXPECT_EQ(reused->offset, first.offset);
  // Full (three blocks of 300 KiB in 1 MiB): no room to reserve.
  auto third = (*arena)->reserve(a.size());
  ASSERT_NE(third, nullptr);
  EXPECT_EQ((*arena)->reserve(a.size()), nullptr) << "a full arena has no room";
}

// Producer threads reserve, fill, commit or drop blocks while the owner
// thread puts frames and a trainer releases them: no two frames ever share
// bytes, and every delivered frame holds what was written into it.
TEST(ShmArenaTest, ConcurrentReservationsNeverOverlap) {
  auto arena = ShmArena::create(4 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto mapping = ShmMapping::open((*arena)->offer());
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();
  std::mutex mu;  // guards `committed` (the owner thread's sends)
  std::deque<std::pair<ShmDescriptor, uint8_t>> committed;
  std::atomic<int> bad{0}, done{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 3; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const size_t size = (64 << 10) + static_cast<size_t>((i * 7919 + t * 104729) % (200 << 10));
        // A full arena frees up as the trainer releases frames: wait for a
        // block, so every iteration makes a frame however the threads are
        // scheduled (skipping made the delivered count depend on timing).
        std::unique_ptr<wire::FrameStorage> r;
        while ((r = (*arena)->reserve(size)) == nullptr) std::this_thread::yield();
        const auto fill = static_cast<uint8_t>(1 + (t * 300 + i) % 251);
        std::memset(r->data(), fill, size);
        if (i % 3 == 0) continue;  // dropped unsent
        std::lock_guard<std::mutex> lock(mu);  // the owner's thread, in effect
        const ShmDescriptor* d = (*arena)->commit(r->data(), size);
        if (d == nullptr) {
          ++bad;
          continue;
        }
        committed.emplace_back(*d, fill);
      }
      ++done;
    });
  }
  auto put_pattern = pattern(100 << 10, 0);
  size_t delivered = 0;
  for (bool finished = false; !finished;) {
    std::pair<ShmDescriptor, uint8_t> next{};
    bool have = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = done == 3 && committed.empty();
      if (!committed.empty()) {
        next = committed.front();
        committed.pop_front();
        have = true;
      }
      // The owner also puts frames by copy now and then; they are released at once.
      if (delivered % 5 == 0) {
        const ShmDescriptor* p = (*arena)->put(put_pattern.data(), put_pattern.size());
        if (p != nullptr) {
          auto f = (*mapping)->frame(*p, 1 << 30);
          if (!f.ok() || std::memcmp((*f)->data(), put_pattern.data(), put_pattern.size()) != 0) ++bad;
        }
      }
    }
    if (!have) {
      std::this_thread::yield();
      continue;
    }
    auto f = (*mapping)->frame(next.first, 1 << 30);  // dropped at once: released
    if (!f.ok()) {
      ++bad;
      continue;
    }
    const uint8_t* p = (*f)->data();
    for (size_t k = 0; k < (*f)->size(); k += 4093)
      if (p[k] != next.second) {
        ++bad;
        break;
      }
    ++delivered;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(delivered, 3u * 200u) << "every committed frame is delivered";
}

TEST(ShmArenaTest, BadDescriptorsAndOffersAreRefused) {
  auto arena = ShmArena::create(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto mapping = ShmMapping::open((*arena)->offer());
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();
  auto a = pattern(100 << 10, 1);
  const ShmDescriptor* d = (*arena)->put(a.data(), a.size());
  ASSERT_NE(d, nullptr);

  auto refused = [&](ShmDescriptor bad, uint64_t limit = 1 << 30) {
    auto f = (*mapping)->frame(bad, limit);
    return f.ok() ? std::string("accepted") : f.status().message();
  };
  EXPECT_NE(refused({d->offset, uint64_t{1} << 40}, ~uint64_t{0}).find("outside the arena"), std::string::npos);
  EXPECT_NE(refused({~uint64_t{0} - 10, 100}).find("outside the arena"), std::string::npos);
  EXPECT_NE(refused({d->offset + 64, 100}).find("outside the arena"), std::string::npos) << "not a block start";
  EXPECT_NE(refused({d->offset, d->size - 1}).find("names no filled block"), std::string::npos) << "size differs";
  EXPECT_NE(refused({d->offset + 4096 * 50, 100}).find("names no filled block"), std::string::npos) << "free space";
  EXPECT_NE(refused(*d, 1000).find("limit 1000"), std::string::npos);
  EXPECT_TRUE((*mapping)->frame(*d, 1 << 30).ok()) << "the real descriptor still works after the refusals";

  // Offers that do not describe the arena.
  ShmOffer o = (*arena)->offer();
  auto open_error = [](const ShmOffer& bad) {
    auto m = ShmMapping::open(bad);
    return m.ok() ? std::string("accepted") : m.status().message();
  };
  ShmOffer key = o;
  key.key ^= 1;
  EXPECT_NE(open_error(key).find("key differs"), std::string::npos) << open_error(key);
  ShmOffer inode = o;
  inode.inode += 1;
  EXPECT_NE(open_error(inode).find("another file"), std::string::npos) << open_error(inode);
  ShmOffer size = o;
  size.size *= 2;
  EXPECT_NE(open_error(size).find("announced"), std::string::npos) << open_error(size);
  ShmOffer huge = o;
  huge.size = uint64_t{1} << 40;
  EXPECT_NE(open_error(huge).find("limit"), std::string::npos) << open_error(huge);
  ShmOffer node = o;
  node.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_NE(open_error(node).find("another node"), std::string::npos) << open_error(node);
  ShmOffer fd = o;
  fd.fd = 1 << 20;
  EXPECT_NE(open_error(fd).find("opening /proc/"), std::string::npos) << open_error(fd);
  auto bytes = o.encode();
  EXPECT_FALSE(ShmOffer::decode(bytes.data(), bytes.size() - 1).ok());
  bytes[0] ^= 0x40;
  auto v = ShmOffer::decode(bytes.data(), bytes.size());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("version"), std::string::npos);
}

}  // namespace
}  // namespace goldminer::transport
