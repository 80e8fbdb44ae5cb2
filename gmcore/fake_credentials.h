// Tests only: stands in for munge (gmcore/credential.h) without munged.
// A credential is "CRED|uid|for_uid|payload"; each decodes once per
// service (munged's replay cache). `as` is the uid of whoever encodes or
// decodes through it.
#ifndef GOLDMINER_GMCORE_FAKE_CREDENTIALS_H_
#define GOLDMINER_GMCORE_FAKE_CREDENTIALS_H_

#include <mutex>
#include <set>
#include <string>

#include "gmcore/credential.h"

namespace goldminer {

struct FakeCredentials : CredentialService {
  explicit FakeCredentials(uid_t uid) : as(uid) {}
  uid_t as;
  time_t encoded = 0;  // the encode time decoded credentials claim; 0: now
  std::set<std::string> seen;
  std::mutex mu;
  Expected<std::string> encode(const std::string& payload, const uid_t* for_uid) override {
    return "CRED|" + std::to_string(as) + "|" + (for_uid ? std::to_string(*for_uid) : "any") + "|" + payload;
  }
  Expected<Verified> decode(const std::string& c) override {
    std::lock_guard<std::mutex> lock(mu);
    if (c.rfind("CRED|", 0) != 0) return Status::error("munge: credential refused: Invalid credential format");
    if (!seen.insert(c).second) return Status::error("munge: credential refused: Replayed credential");
    size_t a = c.find('|', 5), b = c.find('|', a + 1);
    std::string for_uid = c.substr(a + 1, b - a - 1);
    if (for_uid != "any" && std::stoul(for_uid) != as) return Status::error("munge: credential refused: Unauthorized");
    return Verified{c.substr(b + 1), static_cast<uid_t>(std::stoul(c.substr(5, a - 5))), 0,
                    encoded != 0 ? encoded : std::time(nullptr)};
  }
};

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_FAKE_CREDENTIALS_H_
