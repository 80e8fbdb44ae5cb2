// Internal interface between the format-independent split stream
// (reader.cc: shuffle buffer, bad-record budget, batching) and the formats.
// Not part of the public API; only readers/*.cc include it.
#ifndef GOLDMINER_READERS_FORMAT_H_
#define GOLDMINER_READERS_FORMAT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gmcore/status.h"
#include "readers/reader.h"

namespace goldminer::readers::internal {

// One decoded record. `bytes` holds a format-defined encoding of the
// decoded values; samples are recycled so its capacity is reused.
struct Sample {
  uint64_t record = 0;
  ByteBuffer bytes;  // resize() does not zero-fill: decoders write it all
};

enum class Outcome { kRecord, kCorrupt, kEnd };

// Reads the records of one split, in record order. Thread-compatible;
// owned by one SplitStream.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // kRecord: *sample holds the next record (sample->record set).
  // kCorrupt: the next record is corrupt; *what says why, with file, byte
  //   offset and record index; the source has moved past it.
  // kEnd: the split is exhausted.
  // An error Status is fatal (I/O, file shorter than planned).
  virtual Expected<Outcome> next(Sample* sample, std::string* what) = 0;
  // Moves past the next `n` records, good or corrupt (another rank reads
  // them: rank_share.h); by default reads them. An error as for next().
  virtual Status skip(uint64_t n);
  // The batch tensors of `samples` (in that order).
  virtual std::vector<HostTensor> assemble(const std::vector<const Sample*>& samples) = 0;
};

// What plan_dataset learns about one file (or jpeg source).
struct FilePlan {
  uint64_t records = 0;
  // Byte offset of records 0, step, 2*step, ... (as many as there are
  // splits); for jpeg all zero.
  std::vector<uint64_t> split_offsets;
};

// Per-format entry points. `schema` is written by plan_schema (before the
// files are counted) and read by open_source.
Expected<std::string> csv_plan_schema(const std::vector<std::string>& files);
Expected<std::string> tfrecord_plan_schema(const std::vector<std::string>& files);
Expected<std::string> jpeg_plan_schema(const std::vector<std::string>& files);

Expected<FilePlan> csv_plan_file(const std::string& path, uint64_t step);
Expected<FilePlan> tfrecord_plan_file(const std::string& path, uint64_t step);
Expected<FilePlan> jpeg_plan_file(const std::string& schema, uint32_t file_index, uint64_t step);
// The *.jpg / *.jpeg files under `folder` (recursively, symlinked folders
// not followed), relative to it, sorted: what a jpeg plan lists.
Status jpeg_list_folder(const std::string& folder, std::vector<std::string>* images);
// A crop box in source pixels (jpeg, JpegDecode::kCrop and kResizedCrop).
struct JpegBox {
  uint32_t x = 0, y = 0, w = 0, h = 0;
};
// The crop box of `record` of a split with `seed` in a width x height image.
JpegBox jpeg_crop_box(uint32_t width, uint32_t height, uint64_t seed, uint64_t record);
// The DCT scale denominator (1, 2, 4 or 8): the largest that keeps the
// shorter side of w x h >= size.
unsigned jpeg_scale_denominator(uint32_t w, uint32_t h, uint32_t size);

// "N" of "index:N": N records, no file.
Expected<FilePlan> index_plan_file(const std::string& count);

Expected<std::unique_ptr<RecordSource>> open_criteo_source(const DatasetConfig& config,
                                                           const SplitRange& split);
Expected<std::unique_ptr<RecordSource>> open_csv_source(const DatasetConfig& config,
                                                        const SplitRange& split);
Expected<std::unique_ptr<RecordSource>> open_tfrecord_source(const DatasetConfig& config,
                                                             const SplitRange& split);
// `seed`: the split's (crop boxes of JpegDecode::kCrop and kResizedCrop).
Expected<std::unique_ptr<RecordSource>> open_jpeg_source(const DatasetConfig& config,
                                                         const SplitRange& split, uint64_t seed);
Expected<std::unique_ptr<RecordSource>> open_text_source(const DatasetConfig& config,
                                                         const SplitRange& split);
Expected<std::unique_ptr<RecordSource>> open_index_source(const DatasetConfig& config, const SplitRange& split);

// Splits one CSV record (RFC 4180) into `fields`; unescaped quoted fields
// live in `scratch` (reserved up front so the views stay valid). False,
// with *why, on bad quoting.
bool split_csv_fields(std::string_view record, std::vector<std::string_view>* fields,
                      std::string* scratch, std::string* why);

// Tensor helpers shared by the formats.
HostTensor make_tensor(wire::DType dtype, std::vector<int64_t> shape);

}  // namespace goldminer::readers::internal

#endif  // GOLDMINER_READERS_FORMAT_H_
