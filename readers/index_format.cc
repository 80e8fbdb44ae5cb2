// The "index" format: no file, records are the integers 0 .. N-1 of
// "index:N". Each batch is one int64 tensor [B] of its record numbers.
// goldminer.DataLoader leases positions of a Python Dataset's sampler
// order this way (its workers map each position to a dataset index).
#include <algorithm>
#include <string>

#include "readers/format.h"
#include "readers/file_io.h"

namespace goldminer::readers::internal {
namespace {

class IndexSource : public RecordSource {
 public:
  explicit IndexSource(const SplitRange& split)
      : next_(split.first_record), end_(split.first_record + split.records) {}

  Expected<Outcome> next(Sample* sample, std::string*) override {
    if (next_ >= end_) return Outcome::kEnd;
    sample->record = next_++;
    return Outcome::kRecord;
  }

  Status skip(uint64_t n) override {
    next_ += std::min(n, end_ - next_);
    return Status();
  }

  std::vector<HostTensor> assemble(const std::vector<const Sample*>& samples) override {
    HostTensor t = make_tensor(wire::DType::kInt64, {static_cast<int64_t>(samples.size())});
    auto* out = reinterpret_cast<int64_t*>(t.data.data());
    for (size_t i = 0; i < samples.size(); ++i) out[i] = static_cast<int64_t>(samples[i]->record);
    std::vector<HostTensor> tensors;
    tensors.push_back(std::move(t));
    return tensors;
  }

 private:
  uint64_t next_;
  uint64_t end_;
};

}  // namespace

Expected<FilePlan> index_plan_file(const std::string& count) {
  uint64_t n = 0;
  bool digits = !count.empty() && count.size() <= 19;
  for (char c : count) {
    if (c < '0' || c > '9') digits = false;
    if (digits) n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!digits || n == 0)
    return Status::error("index: " + quote_value(count) + " is not a record count (a whole number from 1)");
  FilePlan plan;
  plan.records = n;
  return plan;
}

Expected<std::unique_ptr<RecordSource>> open_index_source(const DatasetConfig& config, const SplitRange& split) {
  auto planned = index_plan_file(config.files[split.file_index]);
  if (!planned.ok()) return planned.status();
  if (split.first_record + split.records > planned->records)
    return Status::error("index:" + config.files[split.file_index] + ": split [" + std::to_string(split.first_record) +
                         ", " + std::to_string(split.first_record + split.records) + ") is past the end");
  return std::unique_ptr<RecordSource>(std::make_unique<IndexSource>(split));
}

}  // namespace goldminer::readers::internal
