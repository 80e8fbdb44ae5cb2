// The data plane's wire protocol: versioned, framed messages between a
// trainer session and its data workers, the same over every transport (UCX,
// MPI, in-process).
//
// Frame: a 16-byte header {magic "GMW1", version u16, type u16, payload
// length u64}, then the payload. All integers are little-endian. A batch
// payload is a fixed part, a tensor table {dtype, ndim, offset, nbytes,
// dims[ndim]} and, 64-byte aligned, the tensor bytes: a sender writes each
// tensor once into its send buffer (BatchWriter) and a receiver reads them
// in place (BatchView points into the received buffer, no copy).
//
// Every decoder checks every length, count and offset against the bytes it
// was given and fails with the message type, the field and the byte offset
// (decode_* never read outside [data, data + size)). Thread-safe: plain
// functions over caller-owned buffers.
#ifndef GOLDMINER_GMCORE_WIRE_H_
#define GOLDMINER_GMCORE_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "gmcore/status.h"
#include "gmcore/tensor.h"

namespace goldminer::wire {

constexpr uint32_t kMagic = 0x31574d47;  // "GMW1" read as little-endian u32
constexpr uint16_t kVersion = 7;  // 2: LeaseGrant::rank; 3: munge credentials in the handshake;
                                  // 4: LeaseGrant::batches and skip; 5: ranks (Hello::role,
                                  // RankJoin, Redirect, RankStatus); 6: LeaseReturn::failed;
                                  // 7: mutual authentication (Hello::target, Challenge::mac)
constexpr size_t kFrameHeaderSize = 16;
constexpr size_t kDataAlignment = 64;
constexpr int kMaxDims = 8;
constexpr uint32_t kMaxTensors = 1024;
constexpr uint32_t kMaxString = 1 << 20;  // reader configs, paths, messages

enum class MessageType : uint16_t {
  kHello = 1,        // worker -> trainer: who it is
  kChallenge = 2,    // trainer -> worker: nonce to answer (and, munge, the trainer's proof)
  kAuth = 3,         // worker -> trainer: the answer (gmcore/peer_auth.h)
  kProgram = 4,      // trainer -> worker: worker program + reader config
  kLeaseRequest = 5, // worker -> trainer: wants up to N splits
  kLeaseGrant = 6,   // trainer -> worker: one split to process
  kLeaseReturn = 7,  // worker -> trainer: gives a split back unfinished
  kBatch = 8,        // worker -> trainer: tensors of one batch
  kHeartbeat = 9,    // either way: still alive
  kDrain = 10,       // trainer -> worker: finish the batch in hand and leave
  kError = 11,       // either way: why the peer is about to close
  kCredit = 12,      // trainer -> worker: may send N more batches
  kRankJoin = 13,    // rank -> rank 0: a data-parallel rank's session and where it listens
  kRedirect = 14,    // rank 0 -> worker: serve the rank listening there instead
  kRankStatus = 15,  // rank -> rank 0: its workers and batches, for the job's sizing
};

const char* type_name(MessageType type);

struct FrameHeader {
  MessageType type = MessageType::kHeartbeat;
  uint64_t payload_size = 0;
};

// Who connects to a session: a data worker, or (to rank 0 of a
// data-parallel job) another rank's session, which authenticates the same
// way and then sends RankJoin instead of asking for leases.
enum class PeerRole : uint8_t { kWorker = 0, kRank = 1 };
struct Hello {
  std::string worker_id;
  uint32_t threads = 0;
  std::array<uint8_t, 32> nonce{};  // the trainer's proof must name it
  PeerRole role = PeerRole::kWorker;
  // The trainer's address as this worker dialed it, numeric
  // (auth::dialed_address): both proofs name it, and the trainer refuses
  // one that is not its own (a handshake relayed through another address).
  std::string target;
};
// How the trainer asks its workers to prove themselves (gmcore/peer_auth.h).
enum class AuthMethod : uint8_t { kSecret = 1, kMunge = 2 };
struct Challenge {
  std::array<uint8_t, 32> nonce{};
  AuthMethod method = AuthMethod::kSecret;
  std::string credential;          // munge: the trainer's proof; empty otherwise
  std::array<uint8_t, 32> mac{};   // secret: the trainer's proof (gmcore/peer_auth.h)
};
struct Auth {
  std::array<uint8_t, 32> mac{};  // secret: the worker's proof (gmcore/peer_auth.h)
  std::string credential;         // munge: the worker's proof
};
struct Program {
  std::string reader_config;  // e.g. "criteo-tsv:/data/day_0"
  std::string program;        // serialized worker program (TorchScript zip)
};
struct LeaseRequest {
  uint32_t splits = 1;
};
struct LeaseGrant {
  uint64_t split_id = 0;
  uint32_t epoch = 0;
  uint64_t seed = 0;            // the split's seed for this epoch
  uint64_t skip_batches = 0;    // already delivered: the worker need not send them
  std::string file;
  uint32_t file_index = 0;      // index into the reader config's file list
  uint64_t begin = 0, end = 0;  // record range [begin, end)
  uint64_t offset = 0;          // byte offset of record `begin`, per the reader
  uint64_t rank = 0;            // the split's place in the epoch's order
  uint64_t batches = 0;         // batches to cut the split into (a DDP rank's share); 0: as the batch size makes
  uint64_t skip = 0;            // records after `begin` that are another rank's: not read into batches
};
struct LeaseReturn {
  uint64_t split_id = 0;
  std::string reason;
  // True: the worker failed on the split through its environment (its
  // Python process killed, a read error of the OS; the reason says which)
  // and goes on: the session re-leases the split up to its retry bound
  // (SessionOptions::split_retries). False: given back while draining.
  bool failed = false;
};
struct Heartbeat {
  uint64_t unix_ms = 0;
};
// How often a session sends each connected worker a Heartbeat: workers
// take a trainer silent for their --trainer-timeout (default 60 s) as gone.
constexpr double kSessionHeartbeatS = 1.0;
struct Drain {};
struct Error {
  uint32_t code = 0;
  std::string message;
};
struct Credit {
  uint32_t batches = 0;
};

// The fixed part of a batch.
struct BatchHeader {
  uint64_t split_id = 0;
  uint32_t sequence = 0;     // batch number within the split
  bool last_of_split = false;
  uint32_t samples = 0;
  uint32_t bad_records = 0;  // corrupt records skipped to make it (budget)
};

// A received batch; valid while the buffer it was decoded from lives (its
// tensors point into it).
struct BatchView : BatchHeader {
  std::vector<TensorView> tensors;
};

struct RankJoin {
  uint32_t rank = 0, world_size = 0;
  std::string address;  // where that rank's session listens for workers
};
struct Redirect {
  std::string address;  // the session the worker serves instead (another rank's)
};
struct RankStatus {
  uint32_t workers = 0;          // connected to that rank now
  uint64_t batches_arrived = 0;  // since it started
  uint32_t left_unasked = 0;     // workers that left it without a drain (killed, lost), since it started
};
using Message = std::variant<Hello, Challenge, Auth, Program, LeaseRequest, LeaseGrant, LeaseReturn,
                             BatchView, Heartbeat, Drain, Error, Credit, RankJoin, Redirect, RankStatus>;

// Decodes a frame header. `max_payload` bounds what a peer may announce.
Expected<FrameHeader> decode_header(const uint8_t* data, size_t size, uint64_t max_payload);

// Decodes the payload of a message of `type` (the bytes after the header).
Expected<Message> decode_payload(MessageType type, const uint8_t* data, size_t size);

// Decodes one whole frame (header and exactly its payload).
Expected<Message> decode_frame(const uint8_t* data, size_t size, uint64_t max_payload);

// Encodes any message but a batch as one frame.
std::vector<uint8_t> encode(const Message& message);

// Memory a BatchWriter may lay its frame out in instead of its own buffer
// (a transport's shared-memory block, which it then sends without copying:
// transport::Endpoint::reserve). The writer owns it until its next reset.
class FrameStorage {
 public:
  virtual ~FrameStorage() = default;
  virtual uint8_t* data() = 0;
  virtual size_t capacity() const = 0;
};

// Builds a batch frame in one buffer: the caller declares the tensors, then
// writes each tensor's bytes straight into tensor_data(i) (the only copy on
// the sending side) and sends frame_data()/frame_size(). The buffer is
// reused from batch to batch (reset()), so steady streaming neither
// allocates nor page-faults.
class BatchWriter {
 public:
  // The size of the frame reset() would lay out; the same errors.
  static Expected<size_t> frame_size_for(const std::vector<TensorDesc>& tensors);

  // Lays out a new batch in this writer's buffer, or in `storage` when
  // given (at least frame_size_for() bytes). Fails on an unknown dtype, a
  // negative dimension, too many dims or tensors, a size that overflows, or
  // storage too small.
  Status reset(const BatchHeader& header, const std::vector<TensorDesc>& tensors,
               std::unique_ptr<FrameStorage> storage = nullptr);
  static Expected<BatchWriter> create(const BatchHeader& header, const std::vector<TensorDesc>& tensors);

  uint8_t* tensor_data(size_t i) { return base() + offsets_[i]; }
  uint64_t tensor_bytes(size_t i) const { return sizes_[i]; }
  size_t tensor_count() const { return sizes_.size(); }
  const uint8_t* frame_data() const { return storage_ != nullptr ? storage_->data() : buffer_.data(); }
  size_t frame_size() const { return frame_size_; }

 private:
  uint8_t* base() { return storage_ != nullptr ? storage_->data() : buffer_.data(); }

  std::vector<uint8_t> buffer_;  // grows only; frame_size_ bytes are in use
  std::unique_ptr<FrameStorage> storage_;  // used instead of buffer_ when set
  size_t frame_size_ = 0;
  std::vector<size_t> offsets_;  // into the frame
  std::vector<uint64_t> sizes_;
};

}  // namespace goldminer::wire

#endif  // GOLDMINER_GMCORE_WIRE_H_
