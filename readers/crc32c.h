// CRC-32C (Castagnoli), as TFRecord frames use it. Internal.
#ifndef GOLDMINER_READERS_CRC32C_H_
#define GOLDMINER_READERS_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace goldminer::readers::internal {

// Table-driven (slice-by-8); crc32c("123456789") == 0xe3069283.
uint32_t crc32c(const void* data, size_t size);

// TFRecord stores CRCs masked so that a CRC of data holding CRCs is robust.
inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace goldminer::readers::internal

#endif  // GOLDMINER_READERS_CRC32C_H_
