#include "mpi_transport/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "gmcore/auth.h"

namespace goldminer::transport {
namespace {

constexpr uint64_t kArenaMagic = 0x4e455241484d5347;  // "GSMHAREN", little-endian
constexpr uint32_t kBlockMagic = 0x4b424d47;           // "GMBK"
constexpr uint32_t kOfferVersion = 1;
constexpr size_t kArenaHeader = 4096;  // magic, key, size; blocks follow
constexpr size_t kBlockHeader = 64;    // BlockHeader, padded: frames stay 64-byte aligned
constexpr size_t kBlockAlign = 4096;
constexpr uint64_t kMaxArena = (uint64_t{64} << 30) + kArenaHeader;  // goldminer-dw --shm-mb: up to 64 GiB

struct ArenaHeader {
  uint64_t magic;
  uint64_t key;
  uint64_t size;
};

// The header before every block's frame. `state` moves filled (worker) ->
// delivered (trainer, once) -> released (trainer, when the frame is
// dropped); the worker reuses released blocks.
// A reserved block (worker only) is neither free nor deliverable.
enum BlockState : uint32_t { kReleased = 0, kFilled = 1, kDelivered = 2, kReserved = 3 };
struct BlockHeader {
  uint32_t magic;
  uint32_t state;
  ShmDescriptor desc;  // what the worker sends; the trainer checks it against the header
};
static_assert(sizeof(BlockHeader) <= kBlockHeader);

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// A frame held by the trainer; dropping it releases the block.
class ShmFrame final : public Frame {
 public:
  ShmFrame(std::shared_ptr<ShmMapping> mapping, BlockHeader* header, const uint8_t* data, size_t size)
      : mapping_(std::move(mapping)), header_(header), data_(data), size_(size) {}
  ~ShmFrame() override { __atomic_store_n(&header_->state, kReleased, __ATOMIC_RELEASE); }
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  std::shared_ptr<ShmMapping> mapping_;  // keeps the memory mapped
  BlockHeader* header_;
  const uint8_t* data_;
  size_t size_;
};

template <typename T>
void put_field(std::vector<uint8_t>* out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}

template <typename T>
T get_field(const uint8_t** p) {
  T v;
  std::memcpy(&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

constexpr size_t kOfferSize = 4 + 4 + 4 + 8 * 4 + kBootIdLength;

}  // namespace

std::string node_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.size() == kBootIdLength ? id : "";
}

uint64_t network_namespace_id() {
  struct stat st {};
  return ::stat("/proc/self/ns/net", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::vector<uint8_t> ShmOffer::encode() const {
  std::vector<uint8_t> out;
  put_field(&out, kOfferVersion);
  put_field(&out, pid);
  put_field(&out, fd);
  put_field(&out, device);
  put_field(&out, inode);
  put_field(&out, size);
  put_field(&out, key);
  std::string id = boot_id;
  id.resize(kBootIdLength, '\0');
  out.insert(out.end(), id.begin(), id.end());
  return out;
}

Expected<ShmOffer> ShmOffer::decode(const uint8_t* data, size_t size) {
  if (size != kOfferSize)
    return Status::error("shared-memory offer of " + std::to_string(size) + " bytes (expected " +
                         std::to_string(kOfferSize) + ")");
  const uint8_t* p = data;
  const auto version = get_field<uint32_t>(&p);
  if (version != kOfferVersion)
    return Status::error("shared-memory offer version " + std::to_string(version) + " (expected " +
                         std::to_string(kOfferVersion) + ")");
  ShmOffer o;
  o.pid = get_field<uint32_t>(&p);
  o.fd = get_field<int32_t>(&p);
  o.device = get_field<uint64_t>(&p);
  o.inode = get_field<uint64_t>(&p);
  o.size = get_field<uint64_t>(&p);
  o.key = get_field<uint64_t>(&p);
  o.boot_id.assign(reinterpret_cast<const char*>(p), kBootIdLength);
  o.boot_id.resize(std::strlen(o.boot_id.c_str()));
  return o;
}

// ------------------------------------------------------------------ worker

Expected<std::shared_ptr<ShmArena>> ShmArena::create(size_t bytes) {
  const size_t size = round_up(std::max<size_t>(bytes, 64 << 10), kBlockAlign) + kArenaHeader;
  std::shared_ptr<ShmArena> a(new ShmArena);
  a->fd_ = memfd_create("goldminer-frames", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (a->fd_ < 0) return Status::error(errno_text("shared memory: memfd_create"));
  if (ftruncate(a->fd_, static_cast<off_t>(size)) != 0)
    return Status::error(errno_text("shared memory: sizing the arena to " + std::to_string(size) + " bytes"));
  if (fcntl(a->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return Status::error(errno_text("shared memory: sealing the arena"));
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd_, 0);
  if (base == MAP_FAILED) return Status::error(errno_text("shared memory: mapping the arena"));
  a->base_ = static_cast<uint8_t*>(base);
  a->size_ = size;
  auto nonce = auth::random_nonce();
  if (!nonce.ok()) return nonce.status();
  struct stat st {};
  if (fstat(a->fd_, &st) != 0) return Status::error(errno_text("shared memory: fstat"));
  ShmOffer& o = a->offer_;
  o.pid = static_cast<uint32_t>(getpid());
  o.fd = a->fd_;
  o.device = st.st_dev;
  o.inode = st.st_ino;
  o.size = size;
  std::memcpy(&o.key, nonce->data(), sizeof o.key);
  o.boot_id = node_boot_id();
  auto* h = reinterpret_cast<ArenaHeader*>(a->base_);
  *h = ArenaHeader{kArenaMagic, o.key, size};
  return a;
}

ShmArena::~ShmArena() {
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

void ShmArena::reclaim() {
  for (auto it = used_.begin(); it != used_.end();) {
    auto* h = reinterpret_cast<BlockHeader*>(base_ + it->first);
    if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == kReleased)
      it = used_.erase(it);
    else
      ++it;
  }
}

uint64_t ShmArena::take(uint64_t need) {
  if (need > size_ - kArenaHeader) return 0;
  reclaim();
  // First fit, lowest address first.
  uint64_t at = kArenaHeader;
  bool found = false;
  for (const auto& [offset, length] : used_) {
    if (offset - at >= need) {
      found = true;
      break;
    }
    at = offset + length;
  }
  if (!found && size_ - at < need) return 0;
  used_.emplace(at, need);
  return at;
}

const ShmDescriptor* ShmArena::fill(uint64_t at, size_t size) {
  auto* h = reinterpret_cast<BlockHeader*>(base_ + at);
  h->magic = kBlockMagic;
  h->desc = ShmDescriptor{at + kBlockHeader, size};
  __atomic_store_n(&h->state, kFilled, __ATOMIC_RELEASE);
  return &h->desc;
}

const ShmDescriptor* ShmArena::put(const uint8_t* data, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t at = take(round_up(kBlockHeader + size, kBlockAlign));
  if (at == 0) return nullptr;
  std::memcpy(base_ + at + kBlockHeader, data, size);
  return fill(at, size);
}

void ShmArena::unput(const ShmDescriptor* d) {
  std::lock_guard<std::mutex> lock(mu_);
  used_.erase(d->offset - kBlockHeader);
}

// A reserved block, given back when dropped unless it was committed.
class ShmArena::Reservation final : public wire::FrameStorage {
 public:
  Reservation(std::shared_ptr<ShmArena> arena, uint8_t* data, size_t capacity, uint64_t ticket)
      : arena_(std::move(arena)), data_(data), capacity_(capacity), ticket_(ticket) {}
  ~Reservation() override { arena_->unreserve(ticket_); }
  uint8_t* data() override { return data_; }
  size_t capacity() const override { return capacity_; }

 private:
  std::shared_ptr<ShmArena> arena_;  // keeps the memory mapped
  uint8_t* data_;
  size_t capacity_;
  uint64_t ticket_;
};

std::unique_ptr<wire::FrameStorage> ShmArena::reserve(size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t need = round_up(kBlockHeader + size, kBlockAlign);
  const uint64_t at = take(need);
  if (at == 0) return nullptr;
  auto* h = reinterpret_cast<BlockHeader*>(base_ + at);
  h->magic = kBlockMagic;
  h->desc = ShmDescriptor{0, 0};
  __atomic_store_n(&h->state, kReserved, __ATOMIC_RELEASE);
  const uint64_t ticket = next_ticket_++;
  reserved_[at] = ticket;
  return std::make_unique<Reservation>(shared_from_this(), base_ + at + kBlockHeader, need - kBlockHeader, ticket);
}

const ShmDescriptor* ShmArena::commit(const uint8_t* data, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!owns(data) || static_cast<uint64_t>(data - base_) < kBlockHeader) return nullptr;
  const uint64_t at = static_cast<uint64_t>(data - base_) - kBlockHeader;
  auto r = reserved_.find(at);
  if (r == reserved_.end() || kBlockHeader + size > used_[at]) return nullptr;
  reserved_.erase(r);
  return fill(at, size);
}

void ShmArena::unreserve(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = reserved_.begin(); it != reserved_.end(); ++it) {
    if (it->second != ticket) continue;
    auto* h = reinterpret_cast<BlockHeader*>(base_ + it->first);
    __atomic_store_n(&h->state, kReleased, __ATOMIC_RELEASE);
    used_.erase(it->first);
    reserved_.erase(it);
    return;
  }
}

size_t ShmArena::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [offset, length] : used_) {
    auto* h = reinterpret_cast<const BlockHeader*>(base_ + offset);
    if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != kReleased) n += length;
  }
  return n;
}

// ----------------------------------------------------------------- trainer

Expected<std::shared_ptr<ShmMapping>> ShmMapping::open(const ShmOffer& o) {
  if (o.size > kMaxArena)
    return Status::error("shared memory: an arena of " + std::to_string(o.size) + " bytes (limit " +
                         std::to_string(kMaxArena) + ")");
  const std::string here = node_boot_id();
  if (o.boot_id.empty() || o.boot_id != here) return Status::error("shared memory: the worker is on another node");
  const std::string path = "/proc/" + std::to_string(o.pid) + "/fd/" + std::to_string(o.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Status::error(errno_text("shared memory: opening " + path));
  struct stat st {};
  const int sealed = fcntl(fd, F_GET_SEALS);
  std::string why;
  if (fstat(fd, &st) != 0)
    why = errno_text("fstat");
  else if (st.st_dev != o.device || st.st_ino != o.inode)
    why = "not the worker's arena (another file)";
  else if (static_cast<uint64_t>(st.st_size) != o.size || o.size <= kArenaHeader)
    why = "size " + std::to_string(st.st_size) + " bytes, announced " + std::to_string(o.size);
  else if (sealed < 0 || (sealed & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    why = "not sealed against resizing";
  void* base = MAP_FAILED;
  if (why.empty()) {
    base = mmap(nullptr, o.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) why = errno_text("mmap");
  }
  close(fd);
  if (!why.empty()) return Status::error("shared memory: " + path + ": " + why);
  std::shared_ptr<ShmMapping> m(new ShmMapping);
  m->base_ = static_cast<uint8_t*>(base);
  m->size_ = o.size;
  const auto* h = reinterpret_cast<const ArenaHeader*>(m->base_);
  if (h->magic != kArenaMagic || h->key != o.key || h->size != o.size)
    return Status::error("shared memory: " + path + ": not the worker's arena (key differs)");
  return m;
}

ShmMapping::~ShmMapping() {
  if (base_ != nullptr) munmap(base_, size_);
}

Expected<std::unique_ptr<Frame>> ShmMapping::frame(const ShmDescriptor& d, uint64_t max_size) {
  if (d.size > max_size)
    return Status::error("shared-memory frame of " + std::to_string(d.size) + " bytes (limit " +
                         std::to_string(max_size) + ")");
  if (d.offset < kArenaHeader + kBlockHeader || d.offset % kBlockAlign != kBlockHeader || d.offset > size_ ||
      d.size > size_ - d.offset)
    return Status::error("shared-memory frame at " + std::to_string(d.offset) + " (" + std::to_string(d.size) +
                         " bytes) is outside the arena of " + std::to_string(size_) + " bytes");
  auto* h = reinterpret_cast<BlockHeader*>(base_ + d.offset - kBlockHeader);
  uint32_t filled = kFilled;
  if (h->magic != kBlockMagic || h->desc.offset != d.offset || h->desc.size != d.size ||
      !__atomic_compare_exchange_n(&h->state, &filled, kDelivered, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return Status::error("shared-memory frame at " + std::to_string(d.offset) + " names no filled block");
  return std::unique_ptr<Frame>(new ShmFrame(shared_from_this(), h, base_ + d.offset, d.size));
}

}  // namespace goldminer::transport
