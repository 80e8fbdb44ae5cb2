#include "gmcore/stream_config.h"

#include <charconv>

namespace goldminer {

std::string StreamConfig::encode() const {
  return "batch_size=" + std::to_string(batch_size) + "\nshuffle_buffer=" + std::to_string(shuffle_buffer) +
         (ordered ? "\nordered=1" : "") + "\n\n" + dataset;
}

Expected<StreamConfig> StreamConfig::decode(const std::string& text) {
  StreamConfig c;
  bool have_batch = false, have_shuffle = false;
  uint32_t ordered = 0;
  size_t pos = 0;
  for (int line = 1;; ++line) {
    const size_t nl = text.find('\n', pos);
    const std::string where = "stream config: line " + std::to_string(line) + ": ";
    if (nl == std::string::npos) return Status::error(where + "no blank line before the dataset");
    const std::string l = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (l.empty()) break;
    const size_t eq = l.find('=');
    const std::string key = l.substr(0, eq == std::string::npos ? l.size() : eq);
    uint32_t* target = key == "batch_size"       ? &c.batch_size
                       : key == "shuffle_buffer" ? &c.shuffle_buffer
                       : key == "ordered"        ? &ordered
                                                 : nullptr;
    if (target == nullptr || eq == std::string::npos) return Status::error(where + "unknown entry '" + l + "'");
    const char* b = l.data() + eq + 1;
    const char* e = l.data() + l.size();
    auto [ptr, ec] = std::from_chars(b, e, *target);
    if (ec != std::errc() || ptr != e || b == e)
      return Status::error(where + key + ": not a number: '" + std::string(b, e) + "'");
    if (target == &ordered && ordered > 1) return Status::error(where + "ordered: 0 or 1, not " + std::string(b, e));
    if (target == &c.batch_size) have_batch = true;
    if (target == &c.shuffle_buffer) have_shuffle = true;
  }
  if (!have_batch || c.batch_size == 0) return Status::error("stream config: batch_size missing or 0");
  if (!have_shuffle) return Status::error("stream config: shuffle_buffer missing");
  c.ordered = ordered == 1;
  c.dataset = text.substr(pos);
  return c;
}

}  // namespace goldminer
