#include "gmcore/wire.h"

#include <gtest/gtest.h>

#include <cstring>

namespace goldminer::wire {
namespace {

constexpr uint64_t kLimit = 1 << 30;

template <typename T>
T round_trip(const T& m) {
  std::vector<uint8_t> frame = encode(Message(m));
  auto back = decode_frame(frame.data(), frame.size(), kLimit);
  EXPECT_TRUE(back.ok()) << back.status().message();
  if (!back.ok()) return T{};
  EXPECT_TRUE(std::holds_alternative<T>(*back));
  return std::get<T>(*back);
}

std::string refusal(const std::vector<uint8_t>& frame) {
  auto m = decode_frame(frame.data(), frame.size(), kLimit);
  return m.ok() ? "accepted" : m.status().message();
}

TEST(WireTest, ControlMessagesRoundTrip) {
  Hello hello{"c1:4242", 4, {}};
  hello.nonce.fill(0x5a);
  EXPECT_EQ(round_trip(hello).worker_id, "c1:4242");
  EXPECT_EQ(round_trip(hello).nonce, hello.nonce);
  hello.target = "ucx://[fd00::1]:4000";
  EXPECT_EQ(round_trip(hello).target, hello.target) << "the address the worker dialed (both proofs name it)";
  Challenge c;
  for (int i = 0; i < 32; ++i) c.nonce[i] = static_cast<uint8_t>(i * 7);
  c.method = AuthMethod::kMunge;
  c.credential = "MUNGE:AwQ...:";
  EXPECT_EQ(round_trip(c).nonce, c.nonce);
  EXPECT_EQ(round_trip(c).method, AuthMethod::kMunge);
  EXPECT_EQ(round_trip(c).credential, c.credential);
  c.mac.fill(9);
  EXPECT_EQ(round_trip(c).mac, c.mac) << "the trainer's proof (secret method)";
  Auth a;
  a.mac.fill(3);
  a.credential = "MUNGE:xyz:";
  EXPECT_EQ(round_trip(a).mac, a.mac);
  EXPECT_EQ(round_trip(a).credential, a.credential);
  Program p{"criteo-tsv:/data/a,/data/b", std::string("PK\0\x03zip", 6)};
  Program q = round_trip(p);
  EXPECT_EQ(q.reader_config, p.reader_config);
  EXPECT_EQ(q.program, p.program) << "binary program bytes survive";
  LeaseGrant g{42, 3, 0xdeadbeefcafeULL, 2, "/data/day_0.tsv", 7, 1000, 2000, 123456, 9, 40, 300};
  LeaseGrant h = round_trip(g);
  EXPECT_EQ(h.split_id, 42u);
  EXPECT_EQ(h.seed, 0xdeadbeefcafeULL);
  EXPECT_EQ(h.skip_batches, 2u);
  EXPECT_EQ(h.file, "/data/day_0.tsv");
  EXPECT_EQ(h.file_index, 7u);
  EXPECT_EQ(h.end, 2000u);
  EXPECT_EQ(h.offset, 123456u);
  EXPECT_EQ(h.rank, 9u);
  EXPECT_EQ(h.batches, 40u);
  EXPECT_EQ(h.skip, 300u);
  EXPECT_EQ(round_trip(Credit{6}).batches, 6u);
  EXPECT_EQ(round_trip(LeaseRequest{5}).splits, 5u);
  EXPECT_EQ(round_trip(LeaseReturn{7, "sigterm"}).reason, "sigterm");
  EXPECT_FALSE(round_trip(LeaseReturn{7, "sigterm"}).failed);
  EXPECT_TRUE(round_trip(LeaseReturn{8, "the Python process was killed by signal 9", true}).failed);
  EXPECT_EQ(round_trip(Heartbeat{1763776800000ULL}).unix_ms, 1763776800000ULL);
  round_trip(Drain{});
  EXPECT_EQ(round_trip(Hello{"g1:7", 2, {}, PeerRole::kRank}).role, PeerRole::kRank);
  RankJoin j = round_trip(RankJoin{3, 4, "ucx://10.0.0.2:40000"});
  EXPECT_EQ(j.rank, 3u);
  EXPECT_EQ(j.world_size, 4u);
  EXPECT_EQ(j.address, "ucx://10.0.0.2:40000");
  EXPECT_EQ(round_trip(Redirect{"ucx://[fd00::2]:5"}).address, "ucx://[fd00::2]:5");
  RankStatus st = round_trip(RankStatus{6, 1234567890123ULL, 2});
  EXPECT_EQ(st.workers, 6u);
  EXPECT_EQ(st.batches_arrived, 1234567890123ULL);
  EXPECT_EQ(st.left_unasked, 2u);
  EXPECT_EQ(round_trip(Error{3, "bad secret"}).message, "bad secret");
}

TEST(WireTest, BatchIsWrittenOnceAndReadInPlace) {
  auto w = BatchWriter::create(BatchHeader{9, 2, true, 3, 5}, {{DType::kFloat32, {3, 13}}, {DType::kInt64, {3, 26}},
                                                {DType::kUInt8, {0}}});
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->tensor_bytes(0), 3u * 13 * 4);
  float* dense = reinterpret_cast<float*>(w->tensor_data(0));
  for (int i = 0; i < 39; ++i) dense[i] = 0.5f * static_cast<float>(i);
  int64_t* ids = reinterpret_cast<int64_t*>(w->tensor_data(1));
  for (int i = 0; i < 78; ++i) ids[i] = 1000 + i;
  const std::vector<uint8_t> frame(w->frame_data(), w->frame_data() + w->frame_size());
  EXPECT_EQ((w->tensor_data(0) - w->frame_data()) % kDataAlignment, 0) << "tensors are 64-byte aligned";

  auto m = decode_frame(w->frame_data(), w->frame_size(), kLimit);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const BatchView& b = std::get<BatchView>(*m);
  EXPECT_EQ(b.split_id, 9u);
  EXPECT_EQ(b.sequence, 2u);
  EXPECT_TRUE(b.last_of_split);
  EXPECT_EQ(b.samples, 3u);
  EXPECT_EQ(b.bad_records, 5u);
  ASSERT_EQ(b.tensors.size(), 3u);
  EXPECT_EQ(b.tensors[0].shape, (std::vector<int64_t>{3, 13}));
  EXPECT_EQ(b.tensors[0].data, w->tensor_data(0)) << "zero copy: the view points into the frame";
  EXPECT_EQ(reinterpret_cast<const float*>(b.tensors[0].data)[38], 19.0f);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(b.tensors[1].data)[77], 1077);
  EXPECT_EQ(b.tensors[2].nbytes, 0u);
}

TEST(WireTest, HeaderErrorsNameFieldAndByte) {
  std::vector<uint8_t> f = encode(Message(Heartbeat{1}));
  auto bad = f;
  bad[0] = 'X';
  EXPECT_EQ(refusal(bad), "wire: frame: magic at byte 0: not a GoldMiner frame");
  bad = f;
  bad[4] = 1;  // before LeaseGrant::rank
  EXPECT_EQ(refusal(bad), "wire: frame: version at byte 4: version 1, this side speaks 7");
  bad[4] = 6;  // a peer from before mutual authentication (Hello::target, Challenge::mac)
  EXPECT_EQ(refusal(bad), "wire: frame: version at byte 4: version 6, this side speaks 7");
  bad = f;
  bad[6] = 99;
  EXPECT_EQ(refusal(bad), "wire: frame: type at byte 6: unknown message type 99");
  EXPECT_EQ(refusal(std::vector<uint8_t>(f.begin(), f.begin() + 10)),
            "wire: frame: length at byte 8: needs 8 bytes, 2 left");
  auto big = decode_header(f.data(), f.size(), 4);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "wire: frame: length at byte 8: payload of 8 bytes exceeds the limit of 4");
  auto longer = f;
  longer.push_back(0);
  EXPECT_EQ(refusal(longer), "wire: frame: length at byte 8: header says 8 payload bytes, 9 arrived");
}

TEST(WireTest, PayloadErrors) {
  std::vector<uint8_t> grant = encode(Message(LeaseGrant{1, 0, 0, 0, "f", 0, 10, 5, 0}));
  EXPECT_EQ(refusal(grant), "wire: lease_grant: end at payload byte 45: 5 is before begin 10");
  // A rank's part: skip within the split, at most one batch per record.
  EXPECT_EQ(refusal(encode(Message(LeaseGrant{1, 0, 0, 0, "f", 0, 10, 20, 0, 0, 0, 11}))),
            "wire: lease_grant: skip at payload byte 77: 11 of 10 records");
  EXPECT_EQ(refusal(encode(Message(LeaseGrant{1, 0, 0, 0, "f", 0, 10, 20, 0, 0, 5, 6}))),
            "wire: lease_grant: batches at payload byte 69: 5 batches of 4 records");
  EXPECT_EQ(refusal(encode(Message(RankJoin{2, 2, "x"}))), "wire: rank_join: rank at payload byte 0: 2 of world size 2");
  std::vector<uint8_t> hello = encode(Message(Hello{"w", 1, {}}));
  hello[16] = 0xff;  // worker_id length 255, 38 bytes left
  hello[17] = 0;
  EXPECT_EQ(refusal(hello), "wire: hello: worker_id at payload byte 4: needs 255 bytes, 42 left");
  hello[19] = 0x7f;  // length over kMaxString
  EXPECT_EQ(refusal(hello), "wire: hello: worker_id at payload byte 0: length 2130706687 exceeds 1048576");
  std::vector<uint8_t> challenge = encode(Message(Challenge{}));
  challenge[16 + 32] = 7;  // the method
  EXPECT_EQ(refusal(challenge), "wire: challenge: method at payload byte 32: unknown authentication method 7");
  std::vector<uint8_t> lease_return = encode(Message(LeaseReturn{3, "x", true}));
  lease_return[16 + 13] = 2;  // `failed`: 0 or 1
  EXPECT_EQ(refusal(lease_return), "wire: lease_return: failed at payload byte 13: value 2 (0 or 1)");
  auto drain = encode(Message(Drain{}));
  drain[8] = 1;  // one payload byte where none belongs
  drain.push_back(0);
  EXPECT_EQ(refusal(drain), "wire: drain: end at payload byte 0: 1 unexpected trailing bytes");
}

// A batch with two int32 tensors [4] at data offsets 0 and 64, to corrupt.
std::vector<uint8_t> two_tensor_batch() {
  auto w = BatchWriter::create(BatchHeader{1, 0, false, 4, 0}, {{DType::kInt32, {4}}, {DType::kInt32, {4}}});
  return w.ok() ? std::vector<uint8_t>(w->frame_data(), w->frame_data() + w->frame_size()) : std::vector<uint8_t>();
}

// Frame byte of table entry i (16-byte header, 28-byte batch fields, 28
// bytes per entry of a 1-d tensor); messages count from the payload.
constexpr size_t entry(int i) { return 16 + 28 + static_cast<size_t>(i) * 28; }

TEST(WireTest, BatchTableErrors) {
  auto f = two_tensor_batch();
  ASSERT_EQ(refusal(f), "accepted");
  auto bad = f;
  bad[entry(1)] = 77;
  EXPECT_EQ(refusal(bad), "wire: batch: tensor 1 dtype at payload byte 56: unknown dtype 77");
  bad = f;
  bad[entry(0) + 12] = 12;  // nbytes 12 for [4] int32
  EXPECT_EQ(refusal(bad), "wire: batch: tensor 0 nbytes at payload byte 40: shape [4] of int32 needs 16 bytes, table says 12");
  bad = f;
  bad[entry(1) + 4] = 8;  // offset 8: overlaps tensor 0
  EXPECT_EQ(refusal(bad), "wire: batch: tensor 1 offset at payload byte 60: overlaps tensor 0");
  bad = f;
  bad[entry(0) + 4] = 2;  // not a multiple of 4
  EXPECT_EQ(refusal(bad), "wire: batch: tensor 0 offset at payload byte 32: 2 is not aligned to int32");
  bad = f;
  bad[entry(1) + 5] = 1;  // offset 64 + 256
  EXPECT_EQ(refusal(bad), "wire: batch: tensor 1 offset at payload byte 60: bytes [320, +16) outside the 80 data bytes");
  bad = f;
  bad[16 + 24] = 200;  // tensor_count 200: the table reads on into the tensor bytes
  EXPECT_EQ(refusal(bad), "wire: batch: tensor 2 dtype at payload byte 84: unknown dtype 0");
  bad = f;
  bad[16 + 12] = 2;  // unknown flag bit
  EXPECT_EQ(refusal(bad), "wire: batch: flags at payload byte 12: unknown bits 2");
}

TEST(WireTest, WriterReusesItsBuffer) {
  BatchWriter w;
  ASSERT_TRUE(w.reset(BatchHeader{1, 0, false, 2, 0}, {{DType::kInt64, {2, 100}}}).ok());
  const uint8_t* first = w.frame_data();
  std::memset(w.tensor_data(0), 0xab, w.tensor_bytes(0));
  ASSERT_TRUE(w.reset(BatchHeader{1, 1, true, 1, 0}, {{DType::kInt32, {3}}, {DType::kUInt8, {5}}}).ok());
  EXPECT_EQ(w.frame_data(), first) << "a smaller batch reuses the buffer";
  std::memset(w.tensor_data(0), 1, w.tensor_bytes(0));
  std::memset(w.tensor_data(1), 2, w.tensor_bytes(1));
  auto m = decode_frame(w.frame_data(), w.frame_size(), kLimit);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const BatchView& b = std::get<BatchView>(*m);
  EXPECT_EQ(b.sequence, 1u);
  ASSERT_EQ(b.tensors.size(), 2u);
  EXPECT_EQ(b.tensors[1].nbytes, 5u);
  // The padding after tensor 0 held 0xab from the first batch: now zero.
  for (const uint8_t* p = b.tensors[0].data + 12; p < b.tensors[1].data; ++p) ASSERT_EQ(*p, 0);
}

// Storage the writer is given: a frame laid out there is byte for byte the
// one its own buffer would hold (stale bytes in the padding included), the
// storage is dropped at the next reset, and too little of it is an error.
TEST(WireTest, WriterLaysOutInStorageItIsGiven) {
  class Bytes final : public FrameStorage {
   public:
    Bytes(size_t n, int* dropped) : b_(n, 0xcd), dropped_(dropped) {}
    ~Bytes() override { ++*dropped_; }
    uint8_t* data() override { return b_.data(); }
    size_t capacity() const override { return b_.size(); }

   private:
    std::vector<uint8_t> b_;
    int* dropped_;
  };
  const std::vector<TensorDesc> specs = {{DType::kInt32, {3}}, {DType::kFloat64, {2, 5}}};
  const BatchHeader h{7, 2, true, 3, 1};
  auto size = BatchWriter::frame_size_for(specs);
  ASSERT_TRUE(size.ok()) << size.status().message();
  auto own = BatchWriter::create(h, specs);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->frame_size(), *size);
  int dropped = 0;
  BatchWriter w;
  auto storage = std::make_unique<Bytes>(*size + 10, &dropped);
  uint8_t* const at = storage->data();
  ASSERT_TRUE(w.reset(h, specs, std::move(storage)).ok());
  EXPECT_EQ(w.frame_data(), at);
  for (size_t i = 0; i < 2; ++i) {
    std::memset(w.tensor_data(i), static_cast<int>(i + 1), w.tensor_bytes(i));
    std::memset(own->tensor_data(i), static_cast<int>(i + 1), own->tensor_bytes(i));
  }
  ASSERT_EQ(w.frame_size(), own->frame_size());
  EXPECT_EQ(std::memcmp(w.frame_data(), own->frame_data(), w.frame_size()), 0);
  auto m = decode_frame(w.frame_data(), w.frame_size(), kLimit);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(std::get<BatchView>(*m).split_id, 7u);

  ASSERT_TRUE(w.reset(h, specs).ok());
  EXPECT_EQ(dropped, 1) << "the storage goes back at the next reset";
  EXPECT_NE(w.frame_data(), at);
  Status small = w.reset(h, specs, std::make_unique<Bytes>(*size - 1, &dropped));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.message(), "wire: batch: " + std::to_string(*size) + " bytes do not fit the " +
                                 std::to_string(*size - 1) + " bytes of storage given");
  EXPECT_EQ(dropped, 2);
  EXPECT_FALSE(BatchWriter::frame_size_for({{DType::kFloat32, {2, -1}}}).ok());
}

TEST(WireTest, WriterRefusesWhatCannotBeEncoded) {
  auto neg = BatchWriter::create(BatchHeader{1, 0, false, 1, 0}, {{DType::kFloat32, {2, -1}}});
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(), "wire: batch: tensor 0: cannot encode float32 [2, -1]");
  auto huge = BatchWriter::create(BatchHeader{1, 0, false, 1, 0}, {{DType::kFloat64, {1 << 30, 1 << 30}}});
  ASSERT_FALSE(huge.ok());
  std::vector<TensorDesc> many(kMaxTensors + 1, {DType::kUInt8, {1}});
  EXPECT_FALSE(BatchWriter::create(BatchHeader{1, 0, false, 1, 0}, many).ok());
}

}  // namespace
}  // namespace goldminer::wire
