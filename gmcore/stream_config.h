// What a trainer session tells its workers about the stream, besides the
// program: batch size, shuffle buffer and the dataset configuration
// (readers::DatasetConfig::encode(), opaque here). Sent as the reader_config
// of the wire Program message:
//   "batch_size=256\nshuffle_buffer=0\n\n" + dataset
// with "ordered=1\n" before the blank line in deterministic order
// (SessionOptions::deterministic): workers then work on and send first
// the split they hold that comes first in the epoch's order
// (wire::LeaseGrant::rank), the one the trainer delivers next.
#ifndef GOLDMINER_GMCORE_STREAM_CONFIG_H_
#define GOLDMINER_GMCORE_STREAM_CONFIG_H_

#include <cstdint>
#include <string>

#include "gmcore/status.h"

namespace goldminer {

struct StreamConfig {
  uint32_t batch_size = 0;
  uint32_t shuffle_buffer = 0;
  bool ordered = false;
  std::string dataset;

  std::string encode() const;
  // Errors name the line and what is wrong.
  static Expected<StreamConfig> decode(const std::string& text);
};

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_STREAM_CONFIG_H_
