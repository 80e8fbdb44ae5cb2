// goldminer-dw's producers (producer.h): each runs the worker program over
// the splits it takes and queues their batches for the connection thread.
#include "dw_daemon/producer.h"

namespace goldminer::dw::producer_internal {

void Producer::run() {
  for (;;) {
    wire::LeaseGrant lease;
    {
      std::unique_lock<std::mutex> lock(s_->mu);
      s_->cv.wait(lock, [&] { return s_->quit || s_->draining || !s_->leases.empty(); });
      if (s_->quit || s_->draining) return;
      auto next = s_->leases.begin();
      if (s_->ordered)
        next = std::min_element(s_->leases.begin(), s_->leases.end(), [](const auto& a, const auto& b) {
          return std::make_pair(a.epoch, a.rank) < std::make_pair(b.epoch, b.rank);
        });
      lease = std::move(*next);
      s_->leases.erase(next);
      ++s_->busy;
    }
    Status st = work(lease);
    // A failure of this worker's environment (its Python process
    // killed, a read error of the OS) is not the input's: the split goes
    // back to the trainer, which re-leases it (to another worker while
    // one may take it), and this worker goes on with its next split (a
    // Python program starts a new process for it). Any other error (a
    // corrupt record beyond max_bad_records, the program's own
    // exception) would fail on every worker: it ends the run.
    if (!st.ok() && st.is_environment_error())
      log::error("goldminer-dw: split " + std::to_string(lease.split_id) + " of " + lease.file +
                 " failed here, given back to be re-run: " + st.message());
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      --s_->busy;
      if (!st.ok() && st.is_environment_error()) {
        Outgoing r;
        r.kind = Outgoing::Kind::kReturn;
        r.split_id = lease.split_id;
        r.message = st.message().substr(0, kMaxFailureText);  // a Python traceback may be long
        r.failed = true;
        s_->outbox.push_back(std::move(r));
      } else if (!st.ok()) {
        Outgoing e;
        e.kind = Outgoing::Kind::kError;
        e.message = st.message();
        s_->outbox.push_back(std::move(e));
        s_->quit = true;
      }
      s_->cv.notify_all();
    }
    s_->wake();
  }
}

bool Producer::push(Outgoing o) {
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->cv.wait(lock, [&] {
    const bool first = s_->ordered && s_->first_in_hand() == o.split_id;
    return s_->quit || s_->outbox.size() < (first ? 2 : 1) * s_->outbox_limit;
  });
  if (s_->quit) return false;
  s_->outbox.push_back(std::move(o));
  s_->cv.notify_all();
  lock.unlock();
  s_->wake();
  return true;
}

std::unique_ptr<wire::BatchWriter> Producer::writer() {
  std::lock_guard<std::mutex> lock(s_->mu);
  if (s_->spare.empty()) return std::make_unique<wire::BatchWriter>();
  auto w = std::move(s_->spare.back());
  s_->spare.pop_back();
  return w;
}

bool Producer::draining() {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->draining || s_->quit;
}

Status Producer::give_back(uint64_t split_id, const std::string& why) {
  Outgoing r;
  r.kind = Outgoing::Kind::kReturn;
  r.split_id = split_id;
  r.message = why;
  push(std::move(r));
  return Status();
}

Status Producer::work(const wire::LeaseGrant& g) {
  readers::SplitRange range;
  range.file_index = g.file_index;
  range.first_record = g.begin;
  range.records = g.end - g.begin;
  range.byte_offset = g.offset;
  range.skip = g.skip;
  if (program_ != nullptr && program_->generates_batches()) return work_generated(g, range);
  auto stream = readers::SplitStream::open(*dataset_, range, g.seed, stream_->batch_size, stream_->shuffle_buffer,
                                           g.batches);
  if (!stream.ok()) return stream.status();
  auto current = (*stream)->next();
  if (!current.ok()) return current.status();
  uint32_t sequence = 0;
  bool first = true;
  for (;;) {
    if (draining()) return give_back(g.split_id, "worker draining");
    const bool empty_split = first && !current->has_value();
    if (!empty_split && !current->has_value()) return Status();
    first = false;
    auto following = empty_split ? Expected<std::optional<readers::Batch>>(std::optional<readers::Batch>())
                                 : (*stream)->next();
    if (!following.ok()) return following.status();
    const bool last = !following->has_value();
    if (sequence >= g.skip_batches) {
      readers::Batch empty;
      const readers::Batch& b = empty_split ? empty : **current;
      Status why;
      if (!queue(g, last, make_batch(g, sequence, last, b), &why)) return why;
    }
    if (last) return Status();
    ++sequence;
    current = std::move(following);
  }
}

Status Producer::work_generated(const wire::LeaseGrant& g, const readers::SplitRange& range) {
  auto gen = program_->generate(range, g.seed, g.epoch);
  if (!gen.ok()) return with_context(gen.status(), " (split " + std::to_string(g.split_id) + ")");
  for (uint64_t sequence = g.skip_batches;; ++sequence) {
    if (draining()) return give_back(g.split_id, "worker draining");
    auto next = (*gen)->next(sequence);
    if (!next.ok())
      return with_context(next.status(),
                          " (split " + std::to_string(g.split_id) + ", batch " + std::to_string(sequence) + ")");
    const bool last = !next->has_value();
    const std::vector<wire::TensorView> none_made;
    const std::vector<uint64_t> none;
    const std::vector<wire::TensorView>& views = last ? none_made : (*next)->output->tensors();
    Status why;
    if (!queue(g, last, frame(g, static_cast<uint32_t>(sequence), last, views, last ? none : (*next)->records, 0),
               &why))
      return why;
    if (last) return Status();
  }
}

bool Producer::queue(const wire::LeaseGrant& g, bool last, Expected<std::unique_ptr<wire::BatchWriter>> made,
                     Status* why) {
  if (!made.ok()) {
    *why = made.status();
    return false;
  }
  Outgoing o;
  o.batch = std::move(made).value();
  o.last_of_split = last;
  o.split_id = g.split_id;
  return push(std::move(o));
}

Expected<std::unique_ptr<wire::BatchWriter>> Producer::make_batch(const wire::LeaseGrant& g, uint32_t sequence,
                                                                bool last, const readers::Batch& b) {
  std::vector<wire::TensorView> views;
  if (program_ != nullptr && !b.records.empty()) {
    auto r = program_->run(b, batch_seed(g.seed, sequence), g.epoch);
    if (!r.ok())
      return with_context(r.status(), " (split " + std::to_string(g.split_id) + " of " + g.file + ", batch " +
                                          std::to_string(sequence) + ")");
    const std::unique_ptr<ProgramOutput> out = std::move(r).value();
    return frame(g, sequence, last, out->tensors(), b.records, b.bad_records);
  }
  if (!b.records.empty())
    for (const auto& t : b.tensors) views.push_back(t.view());
  return frame(g, sequence, last, views, b.records, b.bad_records);
}

Expected<std::unique_ptr<wire::BatchWriter>> Producer::frame(const wire::LeaseGrant& g, uint32_t sequence, bool last,
                                                           const std::vector<wire::TensorView>& views,
                                                           const std::vector<uint64_t>& records,
                                                           uint64_t bad_records) {
  std::vector<wire::TensorDesc> specs(views.begin(), views.end());
  const int64_t n = static_cast<int64_t>(records.size());
  specs.push_back({wire::DType::kInt64, {n, 2}});
  wire::BatchHeader h;
  h.split_id = g.split_id;
  h.sequence = sequence;
  h.last_of_split = last;
  h.samples = static_cast<uint32_t>(n);
  h.bad_records = static_cast<uint32_t>(bad_records);
  // Built straight in the transport's shared memory where it has room,
  // so that the copy below is the only one on this side.
  auto size = wire::BatchWriter::frame_size_for(specs);
  if (!size.ok()) return size.status();
  auto w = writer();
  Status s = w->reset(h, specs, s_->reserve(*size));
  if (!s.ok()) return s;
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].nbytes != w->tensor_bytes(i))
      return Status::error("program output " + std::to_string(i) + ": " + std::to_string(views[i].nbytes) +
                           " bytes for its shape's " + std::to_string(w->tensor_bytes(i)));
    std::memcpy(w->tensor_data(i), views[i].data, views[i].nbytes);  // the one copy
  }
  auto* ids = reinterpret_cast<int64_t*>(w->tensor_data(views.size()));
  for (int64_t i = 0; i < n; ++i) {
    ids[2 * i] = g.file_index;
    ids[2 * i + 1] = static_cast<int64_t>(records[i]);
  }
  return w;
}

}  // namespace goldminer::dw::producer_internal
