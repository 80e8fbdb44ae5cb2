// Readers: turn input files into batches of host tensors for a data
// worker. Slurm-, torch- and transport-free; the worker runs its program
// on what a SplitStream yields and sends the result.
//
// The trainer plans a dataset once (plan_dataset): it expands the input
// paths, counts the records of every file and cuts them into splits of
// consecutive records. It ships DatasetConfig::encode() to its workers in
// the wire Program message and leases splits; a worker opens a SplitStream
// per leased split. Sample identity is (file index, record index), stable
// across runs. A split read twice with the same seed yields the same batches
// in the same order (the lease table's exactly-once rests on that).
//
// Errors name the file, the byte offset and the record, e.g.
//   "criteo-tsv: /data/day_0: byte 81723 (record 12): field 15: ..."
// A corrupt record is an error unless max_bad_records > 0; then up to that
// many records per split are skipped, and each batch says how many were
// skipped to make it (the trainer enforces the budget over the epoch).
#ifndef GOLDMINER_READERS_READER_H_
#define GOLDMINER_READERS_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gmcore/status.h"
#include "gmcore/tensor.h"

namespace goldminer::readers {

enum class Format { kCriteoTsv, kCsv, kTfRecord, kJpeg, kText, kIndex };

// "criteo-tsv", "csv", "tfrecord", "jpeg", "text", "index" ("index:N": no
// file; the records are 0 .. N-1, each batch an int64 tensor [B] of them).
Expected<Format> parse_format(const std::string& name);
const char* format_name(Format format);

// "FORMAT:PATH[,PATH...]" as given to goldminer-consume --input.
struct InputSpec {
  Format format = Format::kText;
  std::vector<std::string> paths;
};
Expected<InputSpec> parse_input_spec(const std::string& text);

// How the jpeg format decodes (off by default: kFull). Both options trade
// exactness for speed as users of PIL's draft mode and DALI's ROI decoders
// know them; readers/README.md gives the PSNR against a full decode.
//   kScale ("scale:S"): DCT-scaled decode at 1/2, 1/4 or 1/8 size, the
//     smallest whose shorter side stays >= S (full size when even 1/2
//     would not), as PIL's Image.draft; for Resize(S) pipelines.
//   kCrop ("crop:S"): per image a crop box drawn as torchvision's
//     RandomResizedCrop(S) draws it (area 8-100 %, aspect 3/4-4/3, from
//     the split's seed and the record: a re-read split crops alike), and
//     only that region decoded (libjpeg-turbo's jpeg_crop_scanline and
//     jpeg_skip_scanlines), DCT-scaled while its shorter side stays >= S.
//     The image is the crop; the program resizes it to S x S.
//   kResizedCrop ("resized-crop:S"): all of kCrop, then the crop resized
//     to S x S in the reader (bilinear, sampled as torch's interpolate
//     with align_corners=False and no antialias; readers/image_resize.h):
//     RandomResizedCrop(S) whole, every image of a batch S x S x 3, the
//     program left only the per-pixel work (e.g. normalization).
enum class JpegDecode { kFull, kScale, kCrop, kResizedCrop };
struct JpegDecodeOption {
  JpegDecode mode = JpegDecode::kFull;
  uint32_t size = 0;  // S of kScale, kCrop and kResizedCrop
};
constexpr uint32_t kMaxResizedCrop = 8192;
// "full", "scale:S", "crop:S" or "resized-crop:S" (S from 1 to 65535, to
// kMaxResizedCrop for resized-crop); errors say which part is wrong.
Expected<JpegDecodeOption> parse_jpeg_decode(const std::string& text);
std::string jpeg_decode_name(const JpegDecodeOption& option);

struct ReaderOptions {
  uint64_t max_bad_records = 0;  // per split; 0 = the first corrupt record is an error
  JpegDecodeOption jpeg_decode;  // jpeg only
};

// What every worker needs to read any split: made by plan_dataset on the
// trainer, shipped as text (encode/decode round-trip exactly).
struct DatasetConfig {
  Format format = Format::kText;
  // One entry per record source. jpeg: a folder or a manifest (records are
  // its images in listing order); other formats: a data file.
  std::vector<std::string> files;
  // Format-specific layout fixed at plan time (csv column types, tfrecord
  // features, jpeg listings), so every worker produces the same tensors.
  std::string schema;
  ReaderOptions options;

  std::string encode() const;
  static Expected<DatasetConfig> decode(const std::string& text);
};

// A range of consecutive records of one file.
struct SplitRange {
  uint32_t file_index = 0;
  uint64_t first_record = 0;
  uint64_t records = 0;
  uint64_t byte_offset = 0;  // where first_record starts (file formats; 0 for jpeg)
  // Of those, the first `skip` are not read into batches (another rank's:
  // gmcore/rank_share.h).
  uint64_t skip = 0;
};

struct DatasetPlan {
  DatasetConfig config;
  std::vector<uint64_t> records_per_file;
  std::vector<SplitRange> splits;  // file order, then record order
  uint64_t total_records = 0;
};

// Scans the inputs (record boundaries only, not a full decode) and cuts
// each file into splits of at most `records_per_split` records.
Expected<DatasetPlan> plan_dataset(const InputSpec& input, const ReaderOptions& options,
                                   uint64_t records_per_split);

// Bytes that resize() leaves uninitialised: the readers write every byte
// of what they size (decoded images, batch tensors), and zero-filling them
// first cost ~3 % of a JPEG worker's CPU (a steady-state profile: memset
// of each decoded image and each batch tensor before it was written).
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using ByteBuffer = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

// A tensor owned by the host: the data plane's tensor description
// (wire::TensorDesc: dtype, row-major shape) and its bytes.
struct HostTensor : wire::TensorDesc {
  ByteBuffer data;
  // The same tensor as the worker program and the wire see it, without a copy.
  wire::TensorView view() const { return {*this, data.data(), data.size()}; }
};

// One batch as a reader produces it. The tensors of each format are fixed
// (documented in readers/README.md); variable-sized samples (jpeg images,
// text lines) are packed: a flat tensor of all samples' bytes plus a tensor
// of per-sample shapes or lengths.
struct Batch {
  std::vector<HostTensor> tensors;
  std::vector<uint64_t> records;  // record index of each sample, in batch order
  uint64_t bad_records = 0;       // corrupt records skipped to make this batch
};

// Reads one split: records -> optional shuffle buffer -> batches.
class SplitStream {
 public:
  virtual ~SplitStream() = default;

  // `seed` seeds the shuffle buffer (LeaseTable::split_seed); with
  // shuffle_buffer 0 or 1, samples come in record order. `batches`: the
  // split is cut into that many batches (batch_size_at in
  // gmcore/rank_share.h: a data-parallel rank's share); 0: as many as the
  // batch size makes.
  static Expected<std::unique_ptr<SplitStream>> open(const DatasetConfig& config,
                                                     const SplitRange& split, uint64_t seed,
                                                     uint32_t batch_size, uint32_t shuffle_buffer,
                                                     uint64_t batches = 0);

  // The next batch (the split's last ones may be short), or nothing at the
  // end of the split.
  virtual Expected<std::optional<Batch>> next() = 0;
};

}  // namespace goldminer::readers

#endif  // GOLDMINER_READERS_READER_H_
