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

// 1 to 16 hex digits, masked to 63 bits (never negative: -1 is missing).
inline bool parse_hex63(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    unsigned d;
    if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = static_cast<unsigned>(c - 'A' + 10);
    else return false;
    v = (v << 4) | d;
  }
  *out = static_cast<int64_t>(v & 0x7fffffffffffffffull);
  return true;
}

}  // namespace goldminer::readers::internal

#endif  // GOLDMINER_READERS_NUMBER_H_
