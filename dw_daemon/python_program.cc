// Python dataset children of a data worker: see python_program.h.
#include "dw_daemon/python_program.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "dw_daemon/python_child_command.h"
#include "dw_daemon/python_program_header.h"
#include "gmcore/log.h"

extern char** environ;

namespace goldminer::dw {

const char* const kPythonProgramMagic = "GOLDMINER-PYTHON 1\n";

bool is_python_program(const std::string& bytes) { return bytes.rfind(kPythonProgramMagic, 0) == 0; }

namespace {

constexpr const char* kWhat = "python dataset";
// Replies from the child (python/goldminer/_dw_pipe.py).
constexpr uint8_t kReplyTensors = 0;
constexpr uint8_t kReplyError = 1;
// The dataset raised an error of the machine, not the data (MemoryError,
// an OSError such as EIO: _dw_pipe.py's of_environment).
constexpr uint8_t kReplyEnvironmentError = 2;
constexpr uint8_t kReplyEnd = 3;  // an iterable shard has no batch of that index
constexpr uint32_t kMaxTensors = 4096;
constexpr uint32_t kMaxDims = 16;

// All `n` bytes through `io` (::read or ::write) at `p`, again after EINTR;
// false where `io` fails or moves nothing (the child's end closed).
template <class Byte, class Io>
bool transfer_all(int fd, Byte* p, size_t n, Io io) {
  while (n > 0) {
    ssize_t done = io(fd, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    p += done;
    n -= static_cast<size_t>(done);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t n) {
  return transfer_all(fd, static_cast<const char*>(data), n, ::write);
}

bool read_all(int fd, void* data, size_t n) { return transfer_all(fd, static_cast<char*>(data), n, ::read); }

template <class T>
bool read_value(int fd, T* v) { return read_all(fd, v, sizeof(T)); }

class Child;

// Tensors in a child's shared memory: valid until the output is destroyed,
// which hands the child back to `release` (nothing else uses it meanwhile).
class Output : public ProgramOutput {
 public:
  ~Output() override {
    if (release) release(std::move(child));
  }
  const std::vector<wire::TensorView>& tensors() const override { return tensors_; }
  std::vector<wire::TensorView> tensors_;
  std::unique_ptr<Child> child;
  std::function<void(std::unique_ptr<Child>)> release;
};

// One Python process: requests go down its stdin (a socket, which first
// carries the shared memory's descriptors), replies come up its stdout.
class Child {
 public:
  ~Child() {
    if (map_ != nullptr) ::munmap(map_, mapped_);
    if (shm_ >= 0) ::close(shm_);
    if (in_map_ != nullptr) ::munmap(in_map_, in_mapped_);
    if (in_ >= 0) ::close(in_);
    if (to_ >= 0) ::close(to_);  // EOF: the child ends by itself
    if (from_ >= 0) ::close(from_);
    if (pid_ <= 0) return;
    for (int i = 0; i < 50; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  static Expected<std::unique_ptr<Child>> start(const PythonProgramHeader& h) {
    const std::string what = h.described();
    int down[2], up[2];
    // What fails before the child runs is this machine's (descriptors,
    // memory, processes): environment errors, as the child's death is.
    // Requests go down a socket, not a pipe, so that the memfds can follow
    // them (SCM_RIGHTS): a container runtime between this process and the
    // child closes every inherited descriptor above 2.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, down) != 0)
      return Status::environment_error(what + ": socketpair: " + std::strerror(errno));
    if (::pipe2(up, O_CLOEXEC) != 0) {
      ::close(down[0]);
      ::close(down[1]);
      return Status::environment_error(what + ": pipe: " + std::strerror(errno));
    }
    auto child = std::make_unique<Child>();
    child->what_ = what;
    child->to_ = down[0];
    child->from_ = up[0];
    // The batches' bytes come through shared memory (grown by the child),
    // not the pipe: one copy fewer on each side.
    child->shm_ = ::memfd_create("goldminer-python-batches", MFD_CLOEXEC);
    // A TorchScript child reads the reader's tensors from a second one
    // (grown here).
    if (h.torchscript) child->in_ = ::memfd_create("goldminer-python-inputs", MFD_CLOEXEC);
    if (child->shm_ < 0 || (h.torchscript && child->in_ < 0)) {
      ::close(down[1]);
      ::close(up[1]);
      return Status::environment_error(what + ": memfd_create: " + std::strerror(errno));
    }
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
    auto command = child_command(h, environment, h.package_dir);
    if (!command.ok()) {
      ::close(down[1]);
      ::close(up[1]);
      return command.status();
    }
    std::vector<char*> argv, envp;
    for (auto& a : command->argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : command->env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, down[1], 0);
    posix_spawn_file_actions_adddup2(&fa, up[1], 1);
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(down[1]);
    ::close(up[1]);
    if (rc != 0)
      return Status::environment_error(what + ": cannot start " + command->argv[0] + ": " + std::strerror(rc));
    child->pid_ = pid;
    if (!child->send_memory()) return Status::environment_error(child->ended("before it received its shared memory"));
    uint64_t n = h.payload.size();
    if (!write_all(child->to_, &n, sizeof n) || !write_all(child->to_, h.payload.data(), h.payload.size()))
      return Status::environment_error(
          child->ended(h.torchscript ? "while it read the program" : "while it read the dataset"));
    auto ready = child->reply();
    if (!ready.ok()) return ready.status();
    return child;
  }

  // One batch: the positions of its samples in the epoch's order.
  Expected<std::unique_ptr<ProgramOutput>> run(const std::vector<uint64_t>& positions, uint64_t seed,
                                               uint32_t epoch) {
    std::vector<uint8_t> req(4 + 8 + 4 + 8 * positions.size());
    uint32_t n = static_cast<uint32_t>(positions.size());
    std::memcpy(req.data(), &epoch, 4);
    std::memcpy(req.data() + 4, &seed, 8);
    std::memcpy(req.data() + 12, &n, 4);
    if (!positions.empty()) std::memcpy(req.data() + 16, positions.data(), 8 * positions.size());
    if (!write_all(to_, req.data(), req.size())) return Status::environment_error(ended("while it was sent a batch"));
    auto out = reply();
    if (!out.ok()) return out.status();
    return std::unique_ptr<ProgramOutput>(std::move(out).value());
  }

  // Batch `index` of an iterable's shard; nullptr past its end.
  Expected<std::unique_ptr<Output>> shard_batch(uint32_t epoch, uint32_t shard, uint64_t seed, uint64_t index) {
    uint8_t req[24];
    std::memcpy(req, &epoch, 4);
    std::memcpy(req + 4, &shard, 4);
    std::memcpy(req + 8, &seed, 8);
    std::memcpy(req + 16, &index, 8);
    if (!write_all(to_, req, sizeof req)) return Status::environment_error(ended("while it was asked for a batch"));
    return reply(true);
  }

  // One reader batch through a TorchScript program: the tensors go
  // through the input memfd (64-byte aligned), their table down the pipe.
  Expected<std::unique_ptr<ProgramOutput>> run_tensors(const readers::Batch& batch, uint64_t seed, uint32_t epoch) {
    if (batch.tensors.size() > kMaxTensors)
      return Status::error(what_ + ": a batch of " + std::to_string(batch.tensors.size()) + " tensors");
    std::vector<uint8_t> req(16);
    uint32_t count = static_cast<uint32_t>(batch.tensors.size());
    std::memcpy(req.data(), &epoch, 4);
    std::memcpy(req.data() + 4, &seed, 8);
    std::memcpy(req.data() + 12, &count, 4);
    std::vector<uint64_t> offsets;
    uint64_t end = 0;
    for (const auto& t : batch.tensors) {
      offsets.push_back(end);
      end += (t.data.size() + 63) / 64 * 64;
    }
    Status grown = grow_inputs(end);
    if (!grown.ok()) return grown;
    for (size_t i = 0; i < batch.tensors.size(); ++i) {
      const auto& t = batch.tensors[i];
      if (t.shape.size() > kMaxDims)
        return Status::error(what_ + ": tensor " + std::to_string(i) + " has " + std::to_string(t.shape.size()) +
                             " dimensions");
      if (!t.data.empty()) std::memcpy(static_cast<uint8_t*>(in_map_) + offsets[i], t.data.data(), t.data.size());
      const uint8_t head[2] = {static_cast<uint8_t>(t.dtype), static_cast<uint8_t>(t.shape.size())};
      const uint64_t tail[2] = {t.data.size(), offsets[i]};
      const auto* shape = reinterpret_cast<const uint8_t*>(t.shape.data());
      req.insert(req.end(), head, head + 2);
      req.insert(req.end(), shape, shape + 8 * t.shape.size());
      req.insert(req.end(), reinterpret_cast<const uint8_t*>(tail), reinterpret_cast<const uint8_t*>(tail) + 16);
    }
    if (!write_all(to_, req.data(), req.size())) return Status::environment_error(ended("while it was sent a batch"));
    auto out = reply();
    if (!out.ok()) return out.status();
    return std::unique_ptr<ProgramOutput>(std::move(out).value());
  }

  bool broken() const { return broken_; }

 private:
  // A batch (or, end_allowed, nullptr for the end of a shard).
  Expected<std::unique_ptr<Output>> reply(bool end_allowed = false) {
    uint8_t kind = 0;
    if (!read_value(from_, &kind)) return Status::environment_error(ended("before it answered"));
    if (kind == kReplyEnd && end_allowed) return std::unique_ptr<Output>();
    if (kind == kReplyError || kind == kReplyEnvironmentError) {
      uint64_t len = 0;
      if (!read_value(from_, &len) || len > (64u << 20)) return Status::environment_error(ended("in the middle of its error"));
      std::string message(len, '\0');
      if (!read_all(from_, message.data(), len)) return Status::environment_error(ended("in the middle of its error"));
      return kind == kReplyEnvironmentError ? Status::environment_error(message) : Status::error(message);
    }
    if (kind != kReplyTensors) return Status::error(protocol("reply kind " + std::to_string(kind)));
    uint32_t count = 0;
    if (!read_value(from_, &count)) return Status::environment_error(ended("in the middle of a batch"));
    if (count > kMaxTensors) return Status::error(protocol(std::to_string(count) + " tensors"));
    auto out = std::make_unique<Output>();
    // The views are made once all are read: mapping further moves the
    // mapping, and a view made before would point into the old one.
    std::vector<uint64_t> offsets;
    uint64_t end = 0;
    for (uint32_t i = 0; i < count; ++i) {
      uint8_t dtype = 0, dims = 0;
      if (!read_value(from_, &dtype) || !read_value(from_, &dims)) return Status::environment_error(ended("in the middle of a batch"));
      const auto d = static_cast<wire::DType>(dtype);
      if (wire::dtype_size(d) == 0 || dims > kMaxDims)
        return Status::error(protocol("tensor " + std::to_string(i) + ": dtype " + std::to_string(dtype) + ", " +
                                      std::to_string(dims) + " dimensions"));
      std::vector<int64_t> shape(dims);
      uint64_t nbytes = 0, offset = 0;
      if ((dims > 0 && !read_all(from_, shape.data(), 8 * dims)) || !read_value(from_, &nbytes) ||
          !read_value(from_, &offset))
        return Status::environment_error(ended("in the middle of a batch"));
      uint64_t elements = 1;
      for (int64_t s : shape) elements *= static_cast<uint64_t>(s < 0 ? 0 : s);
      if (elements * wire::dtype_size(d) != nbytes)
        return Status::error(protocol("tensor " + std::to_string(i) + ": " + std::to_string(nbytes) +
                                      " bytes for its shape"));
      if (offset + nbytes < offset)
        return Status::error(protocol("tensor " + std::to_string(i) + ": offset " + std::to_string(offset)));
      end = std::max(end, offset + nbytes);
      offsets.push_back(offset);
      out->tensors_.push_back({d, std::move(shape), nullptr, nbytes});
    }
    Status mapped = map_through(end);
    if (!mapped.ok()) return mapped;
    for (uint32_t i = 0; i < count; ++i) out->tensors_[i].data = static_cast<const uint8_t*>(map_) + offsets[i];
    return out;
  }

  // The memfds, once, before any request: one SCM_RIGHTS message whose
  // payload is their count (u32): the replies' memory, then a TorchScript
  // child's inputs (python/goldminer/_dw_pipe.py). False where the child's
  // end is closed.
  bool send_memory() {
    int fds[2] = {shm_, in_};
    const uint32_t count = in_ >= 0 ? 2 : 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
    iovec iov{const_cast<uint32_t*>(&count), sizeof count};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, count * sizeof(int));
    for (;;) {
      ssize_t sent = ::sendmsg(to_, &msg, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      // The payload is 4 bytes into an empty socket buffer: all or nothing.
      return sent == static_cast<ssize_t>(sizeof count);
    }
  }

  // Grows the input memfd (and this side's mapping) to at least `end` bytes.
  Status grow_inputs(uint64_t end) {
    if (end <= in_mapped_) return Status();
    const size_t size = std::max<size_t>({static_cast<size_t>(end), 2 * in_mapped_, size_t{1} << 20});
    if (::ftruncate(in_, static_cast<off_t>(size)) != 0)
      return Status::environment_error(what_ + ": ftruncate of the input memory: " + std::strerror(errno));
    if (in_map_ != nullptr) ::munmap(in_map_, in_mapped_);
    in_map_ = nullptr;
    in_mapped_ = 0;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, in_, 0);
    if (p == MAP_FAILED) return Status::environment_error(what_ + ": mmap: " + std::strerror(errno));
    in_map_ = p;
    in_mapped_ = size;
    return Status();
  }

  // Maps the shared memory at least through byte `end` (the child grew it).
  Status map_through(uint64_t end) {
    if (end <= mapped_) return Status();
    struct stat st {};
    if (::fstat(shm_, &st) != 0)
      return Status::environment_error(what_ + ": fstat: " + std::strerror(errno));
    if (static_cast<uint64_t>(st.st_size) < end)
      return Status::error(protocol("a tensor ends at byte " + std::to_string(end) + " of " +
                                    std::to_string(st.st_size) + " bytes of shared memory"));
    if (map_ != nullptr) ::munmap(map_, mapped_);
    map_ = nullptr;
    mapped_ = 0;
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, shm_, 0);
    if (p == MAP_FAILED) return Status::environment_error(what_ + ": mmap: " + std::strerror(errno));
    map_ = p;
    mapped_ = static_cast<size_t>(st.st_size);
    return Status();
  }

  std::string ended(const std::string& when) {
    broken_ = true;
    int status = 0;
    std::string how = "ended";
    for (int i = 0; i < 20 && pid_ > 0; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        how = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                  : "exited with status " + std::to_string(WEXITSTATUS(status));
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return what_ + ": the Python process " + how + " " + when + " (its stderr is this worker's)";
  }

  std::string protocol(const std::string& what) {
    broken_ = true;
    return what_ + ": the Python process sent a bad reply: " + what;
  }

  std::string what_;  // "python dataset", "torchscript program"
  pid_t pid_ = -1;
  int to_ = -1;    // this side of the child's stdin (a socket)
  int from_ = -1;  // the child's stdout (a pipe)
  int shm_ = -1;  // memfd the child writes batches into
  void* map_ = nullptr;
  size_t mapped_ = 0;
  int in_ = -1;  // memfd of a TorchScript child's inputs
  void* in_map_ = nullptr;
  size_t in_mapped_ = 0;
  bool broken_ = false;
};

// Idle children, shared with the outputs that hold one. A child that died
// (killed by the OOM killer, say: its split failed, and the worker gives
// that split back) is not put back; the next batch that needs a child
// starts a new one, so the worker goes on.
struct Pool {
  std::mutex mu;
  std::vector<std::unique_ptr<Child>> idle;
  uint64_t lost = 0;  // children that died or broke
  void put(std::unique_ptr<Child> c) {
    if (c == nullptr) return;
    std::lock_guard<std::mutex> lock(mu);
    if (c->broken()) {
      ++lost;
      return;
    }
    idle.push_back(std::move(c));
  }
  // An idle child, else a new one (another thread holds each one).
  Expected<std::unique_ptr<Child>> take(const PythonProgramHeader& header) {
    uint64_t replaced = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        std::unique_ptr<Child> c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
      replaced = lost;
    }
    if (replaced > 0)
      log::info(std::string(header.what()) + ": starting a Python process (" + std::to_string(replaced) +
                " ended or broke so far)");
    return Child::start(header);
  }
};

// One shard of an IterableDataset: the child is this generator's until it
// ends (so it keeps its place in the shard's iterator).
class ShardGenerator : public BatchGenerator {
 public:
  ShardGenerator(std::unique_ptr<Child> child, std::shared_ptr<Pool> pool, uint32_t shard, uint64_t seed,
                 uint32_t epoch)
      : child_(std::move(child)), pool_(std::move(pool)), shard_(shard), seed_(seed), epoch_(epoch) {}
  ~ShardGenerator() override { pool_->put(std::move(child_)); }

  Expected<std::optional<GeneratedBatch>> next(uint64_t index) override {
    if (child_ == nullptr || child_->broken())
      return Status::environment_error(std::string(kWhat) + ": the shard's process is gone");
    auto out = child_->shard_batch(epoch_, shard_, seed_, index);
    if (!out.ok()) return out.status();
    if (*out == nullptr) return std::optional<GeneratedBatch>();
    // The first tensor is (first item, items) of the batch in the shard.
    auto& t = (*out)->tensors_;
    if (t.empty() || t[0].dtype != wire::DType::kInt64 || t[0].nbytes != 16)
      return Status::error(std::string(kWhat) + ": a shard batch without its (first item, items) tensor");
    int64_t span[2];
    std::memcpy(span, t[0].data, sizeof span);
    t.erase(t.begin());
    GeneratedBatch b;
    for (int64_t i = 0; i < span[1]; ++i)
      b.records.push_back((uint64_t{shard_} << 40) + static_cast<uint64_t>(span[0] + i));
    b.output = std::move(out).value();
    return std::optional<GeneratedBatch>(std::move(b));
  }

 private:
  std::unique_ptr<Child> child_;
  std::shared_ptr<Pool> pool_;
  uint32_t shard_;
  uint64_t seed_;
  uint32_t epoch_;
};

class PythonProgram : public WorkerProgram {
 public:
  PythonProgram(PythonProgramHeader header, std::unique_ptr<Child> first) : header_(std::move(header)) {
    pool_->put(std::move(first));
  }

  bool generates_batches() const override { return header_.iterable; }

  void warm_up(int calls) override {
    size_t idle = 0;
    {
      std::lock_guard<std::mutex> lock(pool_->mu);
      idle = pool_->idle.size();
    }
    std::vector<std::thread> starts;
    std::mutex failed_mu;
    std::string failed;
    for (int i = static_cast<int>(idle); i < calls; ++i)
      starts.emplace_back([&] {
        auto child = Child::start(header_);
        if (child.ok()) return pool_->put(std::move(child).value());
        std::lock_guard<std::mutex> lock(failed_mu);
        failed = child.status().message();
      });
    for (auto& t : starts) t.join();
    if (!failed.empty()) log::info(std::string(header_.what()) + ": a process did not start ahead (" + failed + ")");
  }

  Expected<std::unique_ptr<BatchGenerator>> generate(const readers::SplitRange& split, uint64_t seed,
                                                     uint32_t epoch) override {
    if (!header_.iterable) return WorkerProgram::generate(split, seed, epoch);
    auto child = pool_->take(header_);
    if (!child.ok()) return child.status();
    return std::unique_ptr<BatchGenerator>(std::make_unique<ShardGenerator>(
        std::move(child).value(), pool_, static_cast<uint32_t>(split.first_record), seed, epoch));
  }

  Expected<std::unique_ptr<ProgramOutput>> run(const readers::Batch& batch, uint64_t seed, uint32_t epoch) override {
    auto taken = pool_->take(header_);
    if (!taken.ok()) return taken.status();
    std::unique_ptr<Child> child = std::move(taken).value();
    auto out = header_.torchscript ? child->run_tensors(batch, seed, epoch) : child->run(batch.records, seed, epoch);
    if (!out.ok()) {
      pool_->put(std::move(child));
      return out;
    }
    // The tensors live in the child's shared memory: it serves no other
    // batch until the worker has copied them out.
    auto* o = static_cast<Output*>(out->get());
    o->child = std::move(child);
    o->release = [pool = pool_](std::unique_ptr<Child> c) { pool->put(std::move(c)); };
    return out;
  }

 private:
  PythonProgramHeader header_;
  std::shared_ptr<Pool> pool_ = std::make_shared<Pool>();
};

}  // namespace

Expected<std::unique_ptr<WorkerProgram>> load_python_program(const std::string& bytes, int threads,
                                                             const std::string& python, bool enter_container) {
  auto header = parse_python_program_header(bytes, python);
  if (!header.ok()) return header.status();
  header->threads = threads < 1 ? 1 : threads;
  if (enter_container && !header->container.empty()) {
    auto package = find_python_package();
    if (!package.ok()) return Status::error(header->described() + ": " + package.status().message());
    header->package_dir = *package;
  }
  auto first = Child::start(*header);
  if (!first.ok()) return first.status();
  if (header->torchscript)
    log::info(header->described() + ": " + header->python + " runs it with its own torch (saved by torch " +
              header->saved_by + "), " + std::to_string(header->threads) + " intra-op thread(s) per process");
  else
    log::info(header->described() + ": " + header->python + " runs it" +
              (header->main.empty() ? "" : " (with " + header->main + " as __mp_main__)"));
  return std::unique_ptr<WorkerProgram>(std::make_unique<PythonProgram>(std::move(*header), std::move(*first)));
}

}  // namespace goldminer::dw
