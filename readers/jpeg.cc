// jpeg: images listed at plan time from folders (recursively) or manifests,
// decoded with libjpeg-turbo to RGB uint8. libjpeg reports errors by
// calling error_exit, which must not return: ours longjmps back to
// decode_jpeg so that a corrupt image is a corrupt record, never exit().
#include <dirent.h>
#include <strings.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "gmcore/splitmix.h"
#include "readers/file_io.h"
#include "readers/image_resize.h"

namespace goldminer::readers::internal {
namespace {

constexpr const char* kFormat = "jpeg";
constexpr uint64_t kMaxPixels = uint64_t{1} << 28;  // 256 Mpixel: a bigger header is corrupt
constexpr size_t kShapeBytes = 2 * sizeof(int64_t);

struct Source {
  std::string base;                 // folder the entries are relative to
  std::vector<std::string> images;  // relative to base (or absolute)
};

std::string join(const std::string& base, const std::string& entry) {
  if (!entry.empty() && entry[0] == '/') return entry;
  if (base.empty()) return entry;
  return base.back() == '/' ? base + entry : base + "/" + entry;
}

bool has_jpeg_extension(const std::string& name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "jpg" || ext == "jpeg";
}

// Appends the *.jpg/*.jpeg files under base/rel (recursively; symlinked
// folders are not followed) to *out.
Status list_folder(const std::string& base, const std::string& rel, std::vector<std::string>* out) {
  std::string dir = rel.empty() ? base : join(base, rel);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno_status(kFormat, dir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string child = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::lstat(join(base, child).c_str(), &st) != 0) return errno_status(kFormat, join(base, child));
    if (S_ISDIR(st.st_mode)) {
      Status s = list_folder(base, child, out);
      if (!s.ok()) return s;
    } else if (has_jpeg_extension(name) && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
      out->push_back(child);
    }
  }
  return Status();
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A manifest: "*.csv" has a header and the file name in its first column;
// any other file has one path per line (empty lines and '#' lines skipped).
// Relative entries resolve against the manifest's folder or, for
// NAME_manifest.csv, against the folder NAME beside it (the shared
// images_jpeg_manifest.csv layout), whichever holds the first entry.
Expected<Source> read_manifest(const std::string& path) {
  FileWindow window;
  Status s = window.open(kFormat, path, 0);
  if (!s.ok()) return s;
  const bool csv = path.size() >= 4 && strcasecmp(path.c_str() + path.size() - 4, ".csv") == 0;
  Source source;
  std::vector<std::string_view> fields;
  std::string scratch, why;
  std::string_view line;
  uint64_t offset = 0;
  bool header = csv;
  uint64_t record = 0;
  for (;;) {
    auto got = window.next_line(csv, &line, &offset);
    if (!got.ok()) return got.status();
    if (!*got) break;
    if (header) {
      header = false;
      continue;
    }
    std::string entry;
    if (csv) {
      if (!split_csv_fields(line, &fields, &scratch, &why)) {
        return Status::error(record_error(kFormat, path, offset, record, why));
      }
      entry = std::string(fields[0]);
    } else {
      if (line.empty() || line[0] == '#') continue;
      entry = std::string(line);
    }
    if (entry.empty()) return Status::error(record_error(kFormat, path, offset, record, "empty file name"));
    source.images.push_back(std::move(entry));
    ++record;
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  source.base = dir;
  const std::string* first = nullptr;
  for (const std::string& e : source.images) {
    if (e[0] != '/') {
      first = &e;
      break;
    }
  }
  if (first != nullptr && !exists(join(dir, *first))) {
    std::string stem = path.substr(slash == std::string::npos ? 0 : slash + 1);
    const std::string suffix = "_manifest.csv";
    std::string alt;
    if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
      alt = join(dir, stem.substr(0, stem.size() - suffix.size()));
    }
    if (alt.empty() || !exists(join(alt, *first))) {
      return Status::error(std::string(kFormat) + ": " + path + ": first entry '" + *first + "' is not under " +
                           dir + (alt.empty() ? "" : " nor " + alt));
    }
    source.base = alt;
  }
  return source;
}

std::string encode_schema(const std::vector<Source>& sources) {
  FieldWriter w;
  w.put("sources", static_cast<uint64_t>(sources.size()));
  for (const Source& s : sources) {
    w.put("base", s.base);
    w.put("images", static_cast<uint64_t>(s.images.size()));
    for (const std::string& image : s.images) w.put("image", image);
  }
  return w.text();
}

// Decodes source `index` of the schema (skipping the others' listings).
Expected<Source> decode_source(const std::string& schema, uint32_t index) {
  FieldReader r("jpeg schema", schema);
  auto n = r.get_uint("sources");
  if (!n.ok()) return n.status();
  if (index >= *n) return r.error("no source " + std::to_string(index) + " (" + std::to_string(*n) + " sources)");
  for (uint32_t i = 0; i <= index; ++i) {
    Source source;
    auto base = r.get_string("base");
    if (!base.ok()) return base.status();
    auto count = r.get_uint("images");
    if (!count.ok()) return count.status();
    if (*count > schema.size()) return r.error("implausible image count");
    for (uint64_t k = 0; k < *count; ++k) {
      auto image = r.get_string("image");
      if (!image.ok()) return image.status();
      if (i == index) source.images.push_back(std::move(*image));
    }
    if (i == index) {
      source.base = std::move(*base);
      return source;
    }
  }
  return r.error("unreachable");
}

struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings: most are benign (extraneous bytes...), but a premature end of
// data means libjpeg filled the rest of the image with gray: corrupt.
void on_emit_message(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (level >= 0) return;
  ++err->pub.num_warnings;
  if (!err->truncated && (err->pub.msg_code == JWRN_JPEG_EOF || err->pub.msg_code == JWRN_HIT_MARKER)) {
    err->truncated = true;
    (*cinfo->err->format_message)(cinfo, err->message);
  }
}

void on_output_message(j_common_ptr) {}

}  // namespace

// torchvision's RandomResizedCrop.get_params (scale 0.08-1, log-uniform
// aspect 3/4-4/3, ten tries, then the whole image clamped to that aspect,
// centred), drawn from the seed and the record.
JpegBox jpeg_crop_box(uint32_t width, uint32_t height, uint64_t seed, uint64_t record) {
  SplitMix64 draws(splitmix64(seed ^ splitmix64(record)));
  SplitMix64* rng = &draws;
  auto uniform = [rng](double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(rng->next() >> 11) * (1.0 / 9007199254740992.0);
  };
  const double area = static_cast<double>(width) * height;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * uniform(0.08, 1.0);
    const double aspect = std::exp(uniform(std::log(3.0 / 4.0), std::log(4.0 / 3.0)));
    const auto w = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      JpegBox b;
      b.w = static_cast<uint32_t>(w);
      b.h = static_cast<uint32_t>(h);
      b.x = static_cast<uint32_t>(rng->next() % (width - b.w + 1));
      b.y = static_cast<uint32_t>(rng->next() % (height - b.h + 1));
      return b;
    }
  }
  JpegBox b{0, 0, width, height};
  const double ratio = static_cast<double>(width) / height;
  if (ratio < 3.0 / 4.0) b.h = static_cast<uint32_t>(std::max<long>(1, std::lround(width / (3.0 / 4.0))));
  else if (ratio > 4.0 / 3.0) b.w = static_cast<uint32_t>(std::max<long>(1, std::lround(height * (4.0 / 3.0))));
  b.h = std::min(b.h, height);
  b.w = std::min(b.w, width);
  b.x = (width - b.w) / 2;
  b.y = (height - b.h) / 2;
  return b;
}

Status jpeg_list_folder(const std::string& folder, std::vector<std::string>* images) {
  return list_folder(folder, "", images);
}

unsigned jpeg_scale_denominator(uint32_t w, uint32_t h, uint32_t size) {
  const uint32_t shorter = std::min(w, h);
  for (unsigned d : {8u, 4u, 2u})
    if (size > 0 && shorter / d >= size) return d;
  return 1;
}

namespace {

// Decodes into out = {int64 height, int64 width, RGB pixels}: the whole
// image, or with `decode` scaled and/or only the crop box of (seed,
// record). No C++ object with a destructor is created between setjmp and a
// longjmp.
bool decode_jpeg(const uint8_t* data, size_t size, const JpegDecodeOption& decode, uint64_t seed, uint64_t record,
                 ByteBuffer* out, std::string* why) {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error_exit;
  err.pub.emit_message = on_emit_message;
  err.pub.output_message = on_output_message;
  err.truncated = false;
  err.message[0] = '\0';
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    why->assign(err.message);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, const_cast<unsigned char*>(data), static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  if (static_cast<uint64_t>(cinfo.image_width) * cinfo.image_height > kMaxPixels) {
    std::snprintf(err.message, sizeof err.message, "image of %llux%llu pixels is too large",
                  static_cast<unsigned long long>(cinfo.image_width),
                  static_cast<unsigned long long>(cinfo.image_height));
    jpeg_destroy_decompress(&cinfo);
    why->assign(err.message);
    return false;
  }
  JpegBox box{0, 0, cinfo.image_width, cinfo.image_height};
  if (decode.mode == JpegDecode::kCrop || decode.mode == JpegDecode::kResizedCrop)
    box = jpeg_crop_box(cinfo.image_width, cinfo.image_height, seed, record);
  unsigned denom = decode.mode == JpegDecode::kFull ? 1 : jpeg_scale_denominator(box.w, box.h, decode.size);
  cinfo.scale_num = 1;
  cinfo.scale_denom = denom;
  jpeg_start_decompress(&cinfo);
  // The box at the output scale: [x0, x1) x [y0, y1).
  const uint64_t out_w = cinfo.output_width, out_h = cinfo.output_height;
  const uint64_t x0 = std::min<uint64_t>(box.x / denom, out_w - 1);
  const uint64_t y0 = std::min<uint64_t>(box.y / denom, out_h - 1);
  const uint64_t x1 = std::clamp<uint64_t>((static_cast<uint64_t>(box.x) + box.w + denom - 1) / denom, x0 + 1, out_w);
  const uint64_t y1 = std::clamp<uint64_t>((static_cast<uint64_t>(box.y) + box.h + denom - 1) / denom, y0 + 1, out_h);
  const uint64_t w = x1 - x0, h = y1 - y0;
  // Only the box's columns: libjpeg widens them to whole iMCUs from
  // `left`, the first column it decodes.
  JDIMENSION left = static_cast<JDIMENSION>(x0), cols = static_cast<JDIMENSION>(w);
  if (w < out_w) jpeg_crop_scanline(&cinfo, &left, &cols);
  else left = 0, cols = static_cast<JDIMENSION>(out_w);
  const uint64_t shift = x0 - left;
  out->resize(kShapeBytes + h * w * 3);
  int64_t shape[2] = {static_cast<int64_t>(h), static_cast<int64_t>(w)};
  std::memcpy(out->data(), shape, sizeof shape);
  const bool whole_rows = shift == 0 && cols == w;
  JSAMPARRAY row_buffer =
      cmyk || !whole_rows ? (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                                      static_cast<JDIMENSION>(cols * (cmyk ? 4 : 3)), 1)
                          : nullptr;
  if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
  while (cinfo.output_scanline < y1) {
    uint8_t* dst = out->data() + kShapeBytes + static_cast<size_t>(cinfo.output_scanline - y0) * w * 3;
    if (row_buffer == nullptr) {
      JSAMPROW row = dst;
      jpeg_read_scanlines(&cinfo, &row, 1);
      continue;
    }
    jpeg_read_scanlines(&cinfo, row_buffer, 1);
    if (!cmyk) {
      std::memcpy(dst, row_buffer[0] + shift * 3, w * 3);
      continue;
    }
    // Adobe writes inverted CMYK: R = C * K / 255 on the stored values.
    const uint8_t* s = row_buffer[0] + shift * 4;
    for (uint64_t x = 0; x < w; ++x, s += 4, dst += 3) {
      dst[0] = static_cast<uint8_t>(s[0] * s[3] / 255);
      dst[1] = static_cast<uint8_t>(s[1] * s[3] / 255);
      dst[2] = static_cast<uint8_t>(s[2] * s[3] / 255);
    }
  }
  // Rows below the box are not decoded (a truncated tail there goes unseen).
  if (cinfo.output_scanline < out_h) jpeg_abort_decompress(&cinfo);
  else jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (err.truncated) {
    why->assign(err.message);
    return false;
  }
  return true;
}

class JpegSource : public RecordSource {
 public:
  JpegSource(std::string source_path, Source source, const SplitRange& split, JpegDecodeOption decode,
             uint64_t seed)
      : source_path_(std::move(source_path)), source_(std::move(source)), split_(split), decode_(decode),
        seed_(seed) {}

  Expected<Outcome> next(Sample* sample, std::string* what) override {
    if (read_ == split_.records) return Outcome::kEnd;
    const uint64_t record = split_.first_record + read_;
    if (record >= source_.images.size()) {
      return Status::error(std::string(kFormat) + ": " + source_path_ + ": split ends at record " +
                           std::to_string(split_.first_record + split_.records) + " past the listing's " +
                           std::to_string(source_.images.size()) + " images");
    }
    ++read_;
    sample->record = record;
    const std::string path = join(source_.base, source_.images[record]);
    auto fail = [&](const std::string& why) {
      *what = std::string(kFormat) + ": " + path + ": record " + std::to_string(record) + " of " +
              source_path_ + ": " + why;
      return Outcome::kCorrupt;
    };
    // An image that vanished since the plan is a bad record, like a
    // corrupt one: it can be skipped under the budget.
    Status s = read_file(kFormat, path, &file_);
    if (!s.ok()) return fail(s.message().substr(std::strlen(kFormat) + 2 + path.size() + 2));
    std::string why;
    // The record's own crop box, however the split is read.
    if (!decode_jpeg(file_.data(), file_.size(), decode_, seed_, record, &sample->bytes, &why)) return fail(why);
    if (decode_.mode == JpegDecode::kResizedCrop) resize_to_size(&sample->bytes);
    return Outcome::kRecord;
  }

  // A listing: the records skipped are not read at all.
  Status skip(uint64_t n) override {
    read_ += std::min(n, split_.records - read_);
    return Status();
  }

  std::vector<HostTensor> assemble(const std::vector<const Sample*>& samples) override {
    size_t total = 0;
    for (const Sample* s : samples) total += s->bytes.size() - kShapeBytes;
    std::vector<HostTensor> t;
    t.push_back(make_tensor(wire::DType::kUInt8, {static_cast<int64_t>(total)}));
    t.push_back(make_tensor(wire::DType::kInt64, {static_cast<int64_t>(samples.size()), 3}));
    uint8_t* dst = t[0].data.data();
    for (size_t i = 0; i < samples.size(); ++i) {
      const ByteBuffer& b = samples[i]->bytes;
      std::memcpy(dst, b.data() + kShapeBytes, b.size() - kShapeBytes);
      dst += b.size() - kShapeBytes;
      int64_t shape[3] = {0, 0, 3};
      std::memcpy(shape, b.data(), kShapeBytes);
      std::memcpy(t[1].data.data() + i * sizeof shape, shape, sizeof shape);
    }
    return t;
  }

 private:
  // {height, width, pixels} -> the same at size x size.
  void resize_to_size(ByteBuffer* image) {
    int64_t shape[2];
    std::memcpy(shape, image->data(), sizeof shape);
    const uint32_t s = decode_.size;
    resized_.resize(kShapeBytes + static_cast<size_t>(s) * s * 3);
    const int64_t out_shape[2] = {s, s};
    std::memcpy(resized_.data(), out_shape, sizeof out_shape);
    resize_bilinear_rgb(image->data() + kShapeBytes, static_cast<uint32_t>(shape[0]), static_cast<uint32_t>(shape[1]),
                        static_cast<size_t>(shape[1]) * 3, resized_.data() + kShapeBytes, s, s, &resize_rows_);
    std::swap(*image, resized_);
  }

  std::string source_path_;
  Source source_;
  SplitRange split_;
  JpegDecodeOption decode_;
  uint64_t seed_;
  uint64_t read_ = 0;
  std::vector<uint8_t> file_;  // the compressed image; reused
  ByteBuffer resized_;          // kResizedCrop: the other image buffer; reused
  std::vector<int32_t> resize_rows_;
};

}  // namespace

Expected<std::string> jpeg_plan_schema(const std::vector<std::string>& files) {
  std::vector<Source> sources;
  for (const std::string& path : files) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return errno_status(kFormat, path);
    if (S_ISDIR(st.st_mode)) {
      Source source;
      source.base = path;
      Status s = jpeg_list_folder(path, &source.images);
      if (!s.ok()) return s;
      sources.push_back(std::move(source));
    } else {
      auto source = read_manifest(path);
      if (!source.ok()) return source.status();
      sources.push_back(std::move(*source));
    }
  }
  return encode_schema(sources);
}

Expected<FilePlan> jpeg_plan_file(const std::string& schema, uint32_t file_index, uint64_t step) {
  auto source = decode_source(schema, file_index);
  if (!source.ok()) return source.status();
  FilePlan plan;
  plan.records = source->images.size();
  plan.split_offsets.assign((plan.records + step - 1) / step, 0);
  return plan;
}

Expected<std::unique_ptr<RecordSource>> open_jpeg_source(const DatasetConfig& config,
                                                         const SplitRange& split, uint64_t seed) {
  auto source = decode_source(config.schema, split.file_index);
  if (!source.ok()) return source.status();
  return std::unique_ptr<RecordSource>(
      std::make_unique<JpegSource>(config.files[split.file_index], std::move(*source), split,
                                   config.options.jpeg_decode, seed));
}

}  // namespace goldminer::readers::internal
