// Allocation-free number parsing for the text formats. Internal.
#ifndef GOLDMINER_READERS_NUMBER_H_
#define GOLDMINER_READERS_NUMBER_H_

#include <charconv>
#include <cstdint>
#include <string_view>

namespace goldminer::readers::internal {

// A decimal number ("12", "-3.5", "1e-3", "+7", ".5"); not "nan" or "inf",
// which would make any text column look numeric. Surrounding spaces are
// allowed. False if `s` is not entirely a number.
inline bool parse_float(std::string_view s, float* out) {
  // Fast path: a plain integer of up to 7 digits is exact in a float
  // (most Criteo dense values).
  {
    size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
    if (s.size() > i && s.size() - i <= 7) {
      int32_t v = 0;
      size_t k = i;
      for (; k < s.size() && s[k] >= '0' && s[k] <= '9'; ++k) v = v * 10 + (s[k] - '0');
      if (k == s.size()) {
        *out = static_cast<float>(i == 1 ? -v : v);
        return true;
      }
    }
  }
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  char c = s.front() == '-' && s.size() > 1 ? s[1] : s.front();
  if (!((c >= '0' && c <= '9') || c == '.')) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  // Out of float range: keep the infinity/zero the value rounds to.
  if (r.ec == std::errc::result_out_of_range && r.ptr == s.data() + s.size()) {
    double d = 0;
    std::from_chars(s.data(), s.data() + s.size(), d);
    *out = static_cast<float>(d);
    return true;
  }
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Hex digit values; 0xff for any other byte.
struct HexTable {
  uint8_t value[256];
  constexpr HexTable() : value() {
    for (int i = 0; i < 256; ++i) value[i] = 0xff;
    for (int i = 0; i < 10; ++i) value['0' + i] = static_cast<uint8_t>(i);
    for (int i = 0; i < 6; ++i) {
      value['a' + i] = static_cast<uint8_t>(10 + i);
      value['A' + i] = static_cast<uint8_t>(10 + i);
    }
  }
};
inline constexpr HexTable kHex{};

// 1 to 16 hex digits, masked to 63 bits (never negative: -1 is missing).
inline bool parse_hex63(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  uint8_t bad = 0;
  for (char c : s) {
    uint8_t d = kHex.value[static_cast<unsigned char>(c)];
    bad |= d;
    v = (v << 4) | (d & 0xf);
  }
  if (bad & 0xf0) return false;
  *out = static_cast<int64_t>(v & 0x7fffffffffffffffull);
  return true;
}

}  // namespace goldminer::readers::internal

#endif  // GOLDMINER_READERS_NUMBER_H_
