// The primitives of the handshake's proofs (gmcore/peer_auth.h): SHA-256,
// HMAC-SHA256, nonces and the job secret. The secret reaches workers through the job environment or a file readable by
// its owner only, never a command line (other users can read those in
// /proc). SHA-256 and HMAC are implemented here (FIPS 180-4, RFC 2104) so
// the core needs no crypto library; tests use the published vectors.
#ifndef GOLDMINER_GMCORE_AUTH_H_
#define GOLDMINER_GMCORE_AUTH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gmcore/status.h"

namespace goldminer::auth {

using Digest = std::array<uint8_t, 32>;

Digest sha256(const uint8_t* data, size_t size);
Digest hmac_sha256(const std::string& key, const uint8_t* data, size_t size);

// 32 bytes from the kernel's CSPRNG (getrandom).
Expected<Digest> random_nonce();

// Whether two MACs are equal; in constant time (no early exit that would
// tell a forger how many leading bytes it got right).
bool same_mac(const Digest& a, const Digest& b);

// The job secret: the value of GOLDMINER_SECRET when set (passed in by the
// caller, which reads the environment), else the contents of `path`, which
// must be a regular file owned by this user with no group or other access.
// Errors name the file and what is wrong with it.
Expected<std::string> load_secret(const char* env_value, const std::string& path);

std::string to_hex(const Digest& d);

// A fresh random job secret (64 hex digits).
Expected<std::string> make_secret();

}  // namespace goldminer::auth

#endif  // GOLDMINER_GMCORE_AUTH_H_
