// libFuzzer target: the wire decoder must refuse malformed input with an
// error and never read outside what it was given (run under ASan/UBSan).
#include <cstddef>
#include <cstdint>
#include <variant>

#include "gmcore/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goldminer::wire;
  auto m = decode_frame(data, size, 1 << 20);
  if (m.ok()) {
    if (const auto* b = std::get_if<BatchView>(&*m)) {
      // Touch every byte the views claim, so ASan catches a bad bound.
      volatile uint8_t sink = 0;
      for (const TensorView& t : b->tensors)
        for (uint64_t i = 0; i < t.nbytes; ++i) sink = sink ^ t.data[i];
    }
  }
  // Also every payload type over the raw bytes, without a header.
  for (uint16_t type = 1; type <= static_cast<uint16_t>(MessageType::kCredit); ++type)
    (void)decode_payload(static_cast<MessageType>(type), data, size);
  return 0;
}
