#include "gmcore/wire.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace goldminer::wire {
namespace {

// Reads little-endian fields from [data, data + size). The first failure
// is latched with the message type, field and byte offset; later reads
// return zeros, so a decoder reads straight through and checks ok() once.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const char* what, bool payload = true)
      : data_(data), size_(size), what_(what), payload_(payload) {}

  template <typename T>
  T get(const char* field) {
    static_assert(std::is_integral_v<T>);
    if (!take(sizeof(T), field)) return T{};
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(data_[pos_ - sizeof(T) + i]) << (8 * i);
    return static_cast<T>(v);
  }

  std::string str(const char* field) {
    uint32_t n = get<uint32_t>(field);
    if (!ok()) return "";
    if (n > kMaxString) {
      fail(field, "length " + std::to_string(n) + " exceeds " + std::to_string(kMaxString), pos_ - 4);
      return "";
    }
    if (!take(n, field)) return "";
    return std::string(reinterpret_cast<const char*>(data_ + pos_ - n), n);
  }

  template <size_t N>
  std::array<uint8_t, N> bytes(const char* field) {
    std::array<uint8_t, N> out{};
    if (take(N, field)) std::memcpy(out.data(), data_ + pos_ - N, N);
    return out;
  }

  // The payload must end here: trailing bytes are an error, not padding.
  void end() {
    if (ok() && pos_ != size_)
      fail("end", std::to_string(size_ - pos_) + " unexpected trailing bytes", pos_);
  }

  void fail(const std::string& field, const std::string& why, size_t at) {
    if (!error_.empty()) return;
    // Header fields count from the frame's start, payload fields from the
    // payload's (the first byte after the 16-byte header).
    error_ = std::string("wire: ") + what_ + ": " + field + (payload_ ? " at payload byte " : " at byte ") +
             std::to_string(at) + ": " + why;
  }

  bool ok() const { return error_.empty(); }
  size_t pos() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; }
  Status status() const { return ok() ? Status() : Status::error(error_); }

 private:
  bool take(size_t n, const char* field) {
    if (!ok()) return false;
    if (n > size_ - pos_) {
      fail(field, "needs " + std::to_string(n) + " bytes, " + std::to_string(size_ - pos_) + " left", pos_);
      return false;
    }
    pos_ += n;
    return true;
  }

  const uint8_t* data_;
  size_t size_;
  const char* what_;
  bool payload_;
  size_t pos_ = 0;
  std::string error_;
};

class Writer {
 public:
  template <typename T>
  void put(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
  }
  void str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  template <size_t N>
  void bytes(const std::array<uint8_t, N>& b) {
    out.insert(out.end(), b.begin(), b.end());
  }
  std::vector<uint8_t> out;
};

void put_header(Writer* w, MessageType type, uint64_t payload) {
  w->put<uint32_t>(kMagic);
  w->put<uint16_t>(kVersion);
  w->put<uint16_t>(static_cast<uint16_t>(type));
  w->put<uint64_t>(payload);
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

constexpr size_t kBatchFixed = 8 + 4 + 4 + 4 + 4 + 4;  // split, sequence, flags, samples, bad, count
constexpr size_t kEntryFixed = 1 + 1 + 2 + 8 + 8;  // dtype, ndim, reserved, offset, nbytes

// Element count x element size, or false on overflow or a negative dim.
bool tensor_size(DType dtype, const std::vector<int64_t>& shape, uint64_t* out) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) return false;
    n *= static_cast<uint64_t>(d);
  }
  *out = n;
  return true;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Expected<Message> decode_batch(const uint8_t* data, size_t size) {
  Reader r(data, size, "batch");
  BatchView b;
  b.split_id = r.get<uint64_t>("split_id");
  b.sequence = r.get<uint32_t>("sequence");
  uint32_t flags = r.get<uint32_t>("flags");
  b.samples = r.get<uint32_t>("samples");
  b.bad_records = r.get<uint32_t>("bad_records");
  uint32_t count = r.get<uint32_t>("tensor_count");
  if (!r.ok()) return r.status();
  if (flags & ~1u) r.fail("flags", "unknown bits " + std::to_string(flags & ~1u), 12);
  if (count > kMaxTensors)
    r.fail("tensor_count", std::to_string(count) + " exceeds " + std::to_string(kMaxTensors), 24);
  if (!r.ok()) return r.status();
  b.last_of_split = flags & 1u;

  std::vector<uint64_t> offsets(count);
  std::vector<size_t> entry_at(count);
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    const std::string t = "tensor " + std::to_string(i);
    entry_at[i] = r.pos();
    TensorView v;
    uint8_t dtype = r.get<uint8_t>("dtype");
    uint8_t ndim = r.get<uint8_t>("ndim");
    uint16_t reserved = r.get<uint16_t>("reserved");
    offsets[i] = r.get<uint64_t>("offset");
    v.nbytes = r.get<uint64_t>("nbytes");
    if (!r.ok()) break;
    v.dtype = static_cast<DType>(dtype);
    if (dtype_size(v.dtype) == 0) r.fail(t + " dtype", "unknown dtype " + std::to_string(dtype), entry_at[i]);
    if (ndim > kMaxDims) r.fail(t + " ndim", std::to_string(ndim) + " exceeds " + std::to_string(kMaxDims), entry_at[i] + 1);
    if (reserved != 0) r.fail(t + " reserved", "not zero", entry_at[i] + 2);
    for (uint8_t d = 0; d < ndim && r.ok(); ++d) v.shape.push_back(r.get<int64_t>("dims"));
    if (!r.ok()) break;
    uint64_t expect = 0;
    if (!tensor_size(v.dtype, v.shape, &expect))
      r.fail(t + " dims", "shape " + shape_text(v.shape) + " is negative or too large", entry_at[i] + kEntryFixed);
    else if (expect != v.nbytes)
      r.fail(t + " nbytes", "shape " + shape_text(v.shape) + " of " + dtype_name(v.dtype) + " needs " +
                               std::to_string(expect) + " bytes, table says " + std::to_string(v.nbytes),
             entry_at[i] + 12);
    b.tensors.push_back(std::move(v));
  }
  if (!r.ok()) return r.status();

  // Tensor bytes start at the first 64-byte boundary of the frame after the
  // table (the frame header is 16 bytes).
  const size_t data_start = align_up(kFrameHeaderSize + r.pos(), kDataAlignment) - kFrameHeaderSize;
  if (data_start > size)
    return Status::error("wire: batch: data at payload byte " + std::to_string(data_start) + ": payload ends at " +
                         std::to_string(size));
  const uint64_t data_size = size - data_start;
  std::vector<uint32_t> by_offset(count);
  for (uint32_t i = 0; i < count; ++i) {
    const TensorView& v = b.tensors[i];
    const std::string t = "tensor " + std::to_string(i);
    if (offsets[i] > data_size || v.nbytes > data_size - offsets[i])
      return Status::error("wire: batch: " + t + " offset at payload byte " + std::to_string(entry_at[i] + 4) +
                           ": bytes [" + std::to_string(offsets[i]) + ", +" + std::to_string(v.nbytes) +
                           ") outside the " + std::to_string(data_size) + " data bytes");
    if (offsets[i] % dtype_size(v.dtype) != 0)
      return Status::error("wire: batch: " + t + " offset at payload byte " + std::to_string(entry_at[i] + 4) + ": " +
                           std::to_string(offsets[i]) + " is not aligned to " + dtype_name(v.dtype));
    by_offset[i] = i;
  }
  std::sort(by_offset.begin(), by_offset.end(), [&](uint32_t a, uint32_t c) { return offsets[a] < offsets[c]; });
  for (uint32_t k = 1; k < count; ++k) {
    uint32_t prev = by_offset[k - 1], cur = by_offset[k];
    if (b.tensors[prev].nbytes > 0 && offsets[prev] + b.tensors[prev].nbytes > offsets[cur])
      return Status::error("wire: batch: tensor " + std::to_string(cur) + " offset at payload byte " +
                           std::to_string(entry_at[cur] + 4) + ": overlaps tensor " + std::to_string(prev));
  }
  for (uint32_t i = 0; i < count; ++i) b.tensors[i].data = data + data_start + offsets[i];
  return Message(std::move(b));
}

}  // namespace

const char* type_name(MessageType type) {
  switch (type) {
    case MessageType::kHello: return "hello";
    case MessageType::kChallenge: return "challenge";
    case MessageType::kAuth: return "auth";
    case MessageType::kProgram: return "program";
    case MessageType::kLeaseRequest: return "lease_request";
    case MessageType::kLeaseGrant: return "lease_grant";
    case MessageType::kLeaseReturn: return "lease_return";
    case MessageType::kBatch: return "batch";
    case MessageType::kHeartbeat: return "heartbeat";
    case MessageType::kDrain: return "drain";
    case MessageType::kError: return "error";
    case MessageType::kCredit: return "credit";
    case MessageType::kRankJoin: return "rank_join";
    case MessageType::kRedirect: return "redirect";
    case MessageType::kRankStatus: return "rank_status";
  }
  return "unknown";
}

Expected<FrameHeader> decode_header(const uint8_t* data, size_t size, uint64_t max_payload) {
  Reader r(data, size, "frame", false);
  uint32_t magic = r.get<uint32_t>("magic");
  uint16_t version = r.get<uint16_t>("version");
  uint16_t type = r.get<uint16_t>("type");
  uint64_t length = r.get<uint64_t>("length");
  if (!r.ok()) return r.status();
  if (magic != kMagic) r.fail("magic", "not a GoldMiner frame", 0);
  else if (version != kVersion)
    r.fail("version", "version " + std::to_string(version) + ", this side speaks " + std::to_string(kVersion), 4);
  else if (type < 1 || type > static_cast<uint16_t>(MessageType::kRankStatus))
    r.fail("type", "unknown message type " + std::to_string(type), 6);
  else if (length > max_payload)
    r.fail("length", "payload of " + std::to_string(length) + " bytes exceeds the limit of " +
                         std::to_string(max_payload), 8);
  if (!r.ok()) return r.status();
  return FrameHeader{static_cast<MessageType>(type), length};
}

Expected<Message> decode_payload(MessageType type, const uint8_t* data, size_t size) {
  if (type == MessageType::kBatch) return decode_batch(data, size);
  Reader r(data, size, type_name(type));
  Message m;
  switch (type) {
    case MessageType::kHello: {
      Hello h;
      h.worker_id = r.str("worker_id");
      h.threads = r.get<uint32_t>("threads");
      h.nonce = r.bytes<32>("nonce");
      const uint8_t role = r.get<uint8_t>("role");
      if (r.ok() && role > static_cast<uint8_t>(PeerRole::kRank)) r.fail("role", "unknown role " + std::to_string(role), r.pos() - 1);
      h.role = static_cast<PeerRole>(role);
      h.target = r.str("target");
      m = std::move(h);
      break;
    }
    case MessageType::kChallenge: {
      Challenge c;
      c.nonce = r.bytes<32>("nonce");
      uint8_t method = r.get<uint8_t>("method");
      if (r.ok() && method != static_cast<uint8_t>(AuthMethod::kSecret) &&
          method != static_cast<uint8_t>(AuthMethod::kMunge))
        r.fail("method", "unknown authentication method " + std::to_string(method), r.pos() - 1);
      c.method = static_cast<AuthMethod>(method);
      c.credential = r.str("credential");
      c.mac = r.bytes<32>("mac");
      m = std::move(c);
      break;
    }
    case MessageType::kAuth: {
      Auth a;
      a.mac = r.bytes<32>("mac");
      a.credential = r.str("credential");
      m = std::move(a);
      break;
    }
    case MessageType::kProgram: {
      Program p;
      p.reader_config = r.str("reader_config");
      uint64_t n = r.get<uint64_t>("program_size");
      if (r.ok() && n != size - r.pos())
        r.fail("program_size", std::to_string(n) + " but " + std::to_string(size - r.pos()) + " bytes follow",
               r.pos() - 8);
      if (r.ok()) {
        p.program.assign(reinterpret_cast<const char*>(data + r.pos()), n);
        r.seek(size);
      }
      m = std::move(p);
      break;
    }
    case MessageType::kLeaseRequest: m = LeaseRequest{r.get<uint32_t>("splits")}; break;
    case MessageType::kLeaseGrant: {
      LeaseGrant g;
      g.split_id = r.get<uint64_t>("split_id");
      g.epoch = r.get<uint32_t>("epoch");
      g.seed = r.get<uint64_t>("seed");
      g.skip_batches = r.get<uint64_t>("skip_batches");
      g.file = r.str("file");
      g.file_index = r.get<uint32_t>("file_index");
      g.begin = r.get<uint64_t>("begin");
      g.end = r.get<uint64_t>("end");
      if (r.ok() && g.end < g.begin) r.fail("end", std::to_string(g.end) + " is before begin " + std::to_string(g.begin), r.pos() - 8);
      g.offset = r.get<uint64_t>("offset");
      g.rank = r.get<uint64_t>("rank");
      g.batches = r.get<uint64_t>("batches");
      g.skip = r.get<uint64_t>("skip");
      if (r.ok() && g.skip > g.end - g.begin)
        r.fail("skip", std::to_string(g.skip) + " of " + std::to_string(g.end - g.begin) + " records", r.pos() - 8);
      if (r.ok() && g.batches > g.end - g.begin - g.skip)
        r.fail("batches", std::to_string(g.batches) + " batches of " + std::to_string(g.end - g.begin - g.skip) +
                              " records", r.pos() - 16);
      m = std::move(g);
      break;
    }
    case MessageType::kLeaseReturn: {
      LeaseReturn l;
      l.split_id = r.get<uint64_t>("split_id");
      l.reason = r.str("reason");
      const uint8_t failed = r.get<uint8_t>("failed");
      if (r.ok() && failed > 1) r.fail("failed", "value " + std::to_string(failed) + " (0 or 1)", r.pos() - 1);
      l.failed = failed == 1;
      m = std::move(l);
      break;
    }
    case MessageType::kHeartbeat: m = Heartbeat{r.get<uint64_t>("unix_ms")}; break;
    case MessageType::kDrain: m = Drain{}; break;
    case MessageType::kError: {
      Error e;
      e.code = r.get<uint32_t>("code");
      e.message = r.str("message");
      m = std::move(e);
      break;
    }
    case MessageType::kCredit: m = Credit{r.get<uint32_t>("batches")}; break;
    case MessageType::kRankJoin: {
      RankJoin j;
      j.rank = r.get<uint32_t>("rank");
      j.world_size = r.get<uint32_t>("world_size");
      if (r.ok() && j.rank >= j.world_size)
        r.fail("rank", std::to_string(j.rank) + " of world size " + std::to_string(j.world_size), r.pos() - 8);
      j.address = r.str("address");
      m = std::move(j);
      break;
    }
    case MessageType::kRedirect: m = Redirect{r.str("address")}; break;
    case MessageType::kRankStatus: {
      RankStatus st;
      st.workers = r.get<uint32_t>("workers");
      st.batches_arrived = r.get<uint64_t>("batches_arrived");
      st.left_unasked = r.get<uint32_t>("left_unasked");
      m = st;
      break;
    }
    case MessageType::kBatch: break;  // above
  }
  r.end();
  if (!r.ok()) return r.status();
  return m;
}

Expected<Message> decode_frame(const uint8_t* data, size_t size, uint64_t max_payload) {
  auto header = decode_header(data, size, max_payload);
  if (!header.ok()) return header.status();
  if (size - kFrameHeaderSize != header->payload_size)
    return Status::error("wire: frame: length at byte 8: header says " + std::to_string(header->payload_size) +
                         " payload bytes, " + std::to_string(size - kFrameHeaderSize) + " arrived");
  return decode_payload(header->type, data + kFrameHeaderSize, size - kFrameHeaderSize);
}

std::vector<uint8_t> encode(const Message& message) {
  Writer body;
  MessageType type = MessageType::kHeartbeat;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Hello>) {
          type = MessageType::kHello;
          body.str(m.worker_id);
          body.put<uint32_t>(m.threads);
          body.bytes(m.nonce);
          body.put<uint8_t>(static_cast<uint8_t>(m.role));
          body.str(m.target);
        } else if constexpr (std::is_same_v<T, Challenge>) {
          type = MessageType::kChallenge;
          body.bytes(m.nonce);
          body.put<uint8_t>(static_cast<uint8_t>(m.method));
          body.str(m.credential);
          body.bytes(m.mac);
        } else if constexpr (std::is_same_v<T, Auth>) {
          type = MessageType::kAuth;
          body.bytes(m.mac);
          body.str(m.credential);
        } else if constexpr (std::is_same_v<T, Program>) {
          type = MessageType::kProgram;
          body.str(m.reader_config);
          body.put<uint64_t>(m.program.size());
          body.out.insert(body.out.end(), m.program.begin(), m.program.end());
        } else if constexpr (std::is_same_v<T, LeaseRequest>) {
          type = MessageType::kLeaseRequest;
          body.put<uint32_t>(m.splits);
        } else if constexpr (std::is_same_v<T, LeaseGrant>) {
          type = MessageType::kLeaseGrant;
          body.put<uint64_t>(m.split_id);
          body.put<uint32_t>(m.epoch);
          body.put<uint64_t>(m.seed);
          body.put<uint64_t>(m.skip_batches);
          body.str(m.file);
          body.put<uint32_t>(m.file_index);
          body.put<uint64_t>(m.begin);
          body.put<uint64_t>(m.end);
          body.put<uint64_t>(m.offset);
          body.put<uint64_t>(m.rank);
          body.put<uint64_t>(m.batches);
          body.put<uint64_t>(m.skip);
        } else if constexpr (std::is_same_v<T, LeaseReturn>) {
          type = MessageType::kLeaseReturn;
          body.put<uint64_t>(m.split_id);
          body.str(m.reason);
          body.put<uint8_t>(m.failed ? 1 : 0);
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          type = MessageType::kHeartbeat;
          body.put<uint64_t>(m.unix_ms);
        } else if constexpr (std::is_same_v<T, Drain>) {
          type = MessageType::kDrain;
        } else if constexpr (std::is_same_v<T, Error>) {
          type = MessageType::kError;
          body.put<uint32_t>(m.code);
          body.str(m.message);
        } else if constexpr (std::is_same_v<T, Credit>) {
          type = MessageType::kCredit;
          body.put<uint32_t>(m.batches);
        } else if constexpr (std::is_same_v<T, RankJoin>) {
          type = MessageType::kRankJoin;
          body.put<uint32_t>(m.rank);
          body.put<uint32_t>(m.world_size);
          body.str(m.address);
        } else if constexpr (std::is_same_v<T, Redirect>) {
          type = MessageType::kRedirect;
          body.str(m.address);
        } else if constexpr (std::is_same_v<T, RankStatus>) {
          type = MessageType::kRankStatus;
          body.put<uint32_t>(m.workers);
          body.put<uint64_t>(m.batches_arrived);
          body.put<uint32_t>(m.left_unasked);
        } else {
          static_assert(std::is_same_v<T, BatchView>);
          type = MessageType::kBatch;  // batches are built with BatchWriter
        }
      },
      message);
  Writer frame;
  put_header(&frame, type, body.out.size());
  frame.out.insert(frame.out.end(), body.out.begin(), body.out.end());
  return frame.out;
}

namespace {

// Where each tensor of a batch frame goes: its size, its offset from the
// frame's start, and the frame's size.
struct BatchLayout {
  std::vector<uint64_t> sizes;
  std::vector<size_t> offsets;
  size_t table = 0;       // bytes of the tensor table
  size_t data_start = 0;  // of the first tensor
  size_t frame_size = 0;
};

Expected<BatchLayout> batch_layout(const std::vector<TensorDesc>& tensors) {
  if (tensors.size() > kMaxTensors)
    return Status::error("wire: batch: " + std::to_string(tensors.size()) + " tensors exceed " +
                         std::to_string(kMaxTensors));
  BatchLayout l;
  uint64_t data = 0;
  std::vector<uint64_t> starts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    uint64_t n = 0;
    if (dtype_size(t.dtype) == 0 || t.shape.size() > static_cast<size_t>(kMaxDims) ||
        !tensor_size(t.dtype, t.shape, &n) || n > (uint64_t{1} << 46)) {
      return Status::error("wire: batch: tensor " + std::to_string(i) + ": cannot encode " +
                           dtype_name(t.dtype) + " " + shape_text(t.shape));
    }
    l.table += kEntryFixed + 8 * t.shape.size();
    l.sizes.push_back(n);
    data = align_up(data, kDataAlignment);
    starts.push_back(data);
    data += n;
  }
  l.data_start = align_up(kFrameHeaderSize + kBatchFixed + l.table, kDataAlignment);
  for (uint64_t start : starts) l.offsets.push_back(l.data_start + start);
  l.frame_size = l.data_start + data;
  return l;
}

}  // namespace

Expected<size_t> BatchWriter::frame_size_for(const std::vector<TensorDesc>& tensors) {
  auto l = batch_layout(tensors);
  if (!l.ok()) return l.status();
  return l->frame_size;
}

Status BatchWriter::reset(const BatchHeader& header, const std::vector<TensorDesc>& tensors,
                          std::unique_ptr<FrameStorage> storage) {
  offsets_.clear();
  sizes_.clear();
  frame_size_ = 0;
  storage_.reset();  // a previous batch's storage goes back
  auto l = batch_layout(tensors);
  if (!l.ok()) return l.status();
  if (storage != nullptr && storage->capacity() < l->frame_size)
    return Status::error("wire: batch: " + std::to_string(l->frame_size) + " bytes do not fit the " +
                         std::to_string(storage->capacity()) + " bytes of storage given");
  Writer head;
  put_header(&head, MessageType::kBatch, l->frame_size - kFrameHeaderSize);
  head.put<uint64_t>(header.split_id);
  head.put<uint32_t>(header.sequence);
  head.put<uint32_t>(header.last_of_split ? 1u : 0u);
  head.put<uint32_t>(header.samples);
  head.put<uint32_t>(header.bad_records);
  head.put<uint32_t>(static_cast<uint32_t>(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    head.put<uint8_t>(static_cast<uint8_t>(tensors[i].dtype));
    head.put<uint8_t>(static_cast<uint8_t>(tensors[i].shape.size()));
    head.put<uint16_t>(0);
    head.put<uint64_t>(l->offsets[i] - l->data_start);
    head.put<uint64_t>(l->sizes[i]);
    for (int64_t d : tensors[i].shape) head.put<int64_t>(d);
  }
  sizes_ = std::move(l->sizes);
  offsets_ = std::move(l->offsets);
  frame_size_ = l->frame_size;
  // Without storage the buffer only grows: a steady stream of like batches
  // reuses it as is. Padding between tensors is zeroed so no stale bytes
  // leave the process.
  storage_ = std::move(storage);
  if (storage_ == nullptr && buffer_.size() < frame_size_) buffer_.resize(frame_size_);
  uint8_t* out = base();
  std::memset(out, 0, l->data_start);
  std::memcpy(out, head.out.data(), head.out.size());
  for (size_t i = 0; i + 1 < sizes_.size(); ++i) {
    const size_t pad_from = offsets_[i] + sizes_[i];
    std::memset(out + pad_from, 0, offsets_[i + 1] - pad_from);
  }
  return Status();
}

Expected<BatchWriter> BatchWriter::create(const BatchHeader& header, const std::vector<TensorDesc>& tensors) {
  BatchWriter w;
  Status s = w.reset(header, tensors);
  if (!s.ok()) return s;
  return w;
}

}  // namespace goldminer::wire
