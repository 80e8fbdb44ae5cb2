// Shared-memory frames between a data worker and a trainer on one node.
//
// A worker owns one ShmArena: a sealed memfd (it can neither shrink nor
// grow, so a mapping of it never faults with SIGBUS) mapped into its own
// address space. To send a frame it copies the frame into a free block of
// the arena (put) and sends the trainer only the block's place (a 16-byte
// descriptor). The trainer maps the same memfd once per worker
// (ShmMapping::open, from the worker's Offer), wraps the block as a Frame
// without copying, and marks the block released in shared memory when the
// last holder drops that Frame; the worker takes released blocks back on
// its next put. The frame thus crosses the process boundary with one copy,
// made by the worker, instead of the one the trainer makes for a
// rendezvous (cma) or that TCP makes on both sides.
//
// The trainer opens the worker's memfd through /proc/PID/fd/FD and accepts
// it only if it is the object the worker described: same boot (the node's
// boot id), same device and inode, the size announced, the shrink and grow
// seals set, and the arena's random key in its first bytes. Anything else
// is an error and the worker keeps sending by copy.
//
// Trust: the worker can still write into a block the trainer holds (its
// own frames: a worker is authenticated before it sends batches); what it
// cannot do is make the trainer read outside the mapping, because every
// descriptor is checked against the mapping's bounds and the block's
// header.
//
// A frame can also be built in a block in the first place (reserve, then
// commit when it is sent): then the worker's writing of the batch is the
// only copy there is.
//
// Threading: ShmArena is thread-safe (the worker endpoint's thread puts and
// commits; producer threads reserve, and drop reservations).
// ShmMapping::frame is called by one thread (the trainer endpoint's);
// frames may be dropped from any thread (an atomic store into the block's
// header).
#ifndef GOLDMINER_MPI_TRANSPORT_SHM_ARENA_H_
#define GOLDMINER_MPI_TRANSPORT_SHM_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "gmcore/wire.h"
#include "mpi_transport/transport.h"

namespace goldminer::transport {

// What the worker tells the trainer about its arena.
struct ShmOffer {
  uint32_t pid = 0;
  int32_t fd = -1;
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  uint64_t key = 0;
  std::string boot_id;  // /proc/sys/kernel/random/boot_id

  std::vector<uint8_t> encode() const;
  // Rejects a message of the wrong length or version.
  static Expected<ShmOffer> decode(const uint8_t* data, size_t size);
};

// Where a frame lies in the arena: what goes on the wire instead of it.
struct ShmDescriptor {
  uint64_t offset = 0;  // of the frame's first byte, from the arena's start
  uint64_t size = 0;    // of the frame
};

class ShmArena : public std::enable_shared_from_this<ShmArena> {
 public:
  // An arena of `bytes` (rounded up to pages; at least one block of 64
  // KiB). Pages are touched only as blocks are used.
  static Expected<std::shared_ptr<ShmArena>> create(size_t bytes);
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  const ShmOffer& offer() const { return offer_; }

  // Copies `size` bytes into a free block, lowest address first (blocks
  // the trainer released are reused while they are still in cache). The
  // returned descriptor lives in the block's header, stable until the
  // trainer releases the block. nullptr when no block is free: the caller
  // sends by copy instead.
  const ShmDescriptor* put(const uint8_t* data, size_t size);

  // Gives back the block of `d` that was never sent (its send failed).
  void unput(const ShmDescriptor* d);

  // A free block for a frame of up to `size` bytes that the caller builds
  // in place and then sends with commit(); it keeps the arena mapped.
  // Dropping it uncommitted gives the block back. nullptr when no block is
  // free.
  std::unique_ptr<wire::FrameStorage> reserve(size_t size);

  // The frame of `size` bytes built at `data`, the start of a reserved
  // block, is being sent: its descriptor, as put() returns it. nullptr if
  // `data` starts no uncommitted reservation or `size` exceeds it.
  const ShmDescriptor* commit(const uint8_t* data, size_t size);

  // Whether `p` points into this arena.
  bool owns(const uint8_t* p) const { return p >= base_ && p < base_ + size_; }

  // Bytes in blocks not yet released by the trainer.
  size_t bytes_in_use() const;

 private:
  class Reservation;
  ShmArena() = default;
  // The offset of a free block of `need` bytes, taken; 0 if none. mu_ held.
  uint64_t take(uint64_t need);
  // Marks the block at `at` filled with a frame of `size` bytes, for the
  // trainer to take; its descriptor. mu_ held.
  const ShmDescriptor* fill(uint64_t at, size_t size);
  void reclaim();
  void unreserve(uint64_t ticket);

  int fd_ = -1;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  ShmOffer offer_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> used_;      // block offset -> block length
  std::map<uint64_t, uint64_t> reserved_;  // block offset -> ticket, until committed
  uint64_t next_ticket_ = 1;
};

// The trainer's view of one worker's arena.
class ShmMapping : public std::enable_shared_from_this<ShmMapping> {
 public:
  // Opens and maps the arena `offer` describes, checking it is that object.
  static Expected<std::shared_ptr<ShmMapping>> open(const ShmOffer& offer);
  ~ShmMapping();
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  // The frame `d` names, viewed in place; released when dropped. An error
  // if `d` is out of bounds, names no block the worker filled, names a
  // block already delivered, or is longer than `max_size`.
  Expected<std::unique_ptr<Frame>> frame(const ShmDescriptor& d, uint64_t max_size);

 private:
  ShmMapping() = default;

  uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

// This node's boot id ("" if unreadable): 36 characters.
constexpr size_t kBootIdLength = 36;
std::string node_boot_id();

// The network namespace this process is in (the inode of
// /proc/self/ns/net; 0 if unreadable). Processes of one kernel in different
// network namespaces (containers, goldminer-devcluster's nodes) share
// memory but not abstract Unix sockets, which UCX 1.13's posix and sysv
// transports rely on to wake their peer.
uint64_t network_namespace_id();

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_SHM_ARENA_H_
