// peer_auth_from_environment (gmcore/peer_auth.h): beside munge_credential.cc
// since it makes a munge service; the rest of peer_auth is in the core.
#include <unistd.h>

#include <cstdlib>

#include "gmcore/peer_auth.h"

namespace goldminer::auth {

Expected<PeerAuth> peer_auth_from_environment(const char* secret_env, const std::string& secret_file) {
  PeerAuth a;
  const char* method = std::getenv("GOLDMINER_AUTH");
  if (method != nullptr && *method != '\0' && std::string(method) != "secret") {
    if (std::string(method) != "munge")
      return Status::error("GOLDMINER_AUTH: unknown method '" + std::string(method) + "' (known: munge, secret)");
    const char* job = std::getenv("GOLDMINER_AUTH_JOB");
    char* end = nullptr;
    unsigned long id = job != nullptr ? std::strtoul(job, &end, 10) : 0;
    if (job == nullptr || *job == '\0' || *end != '\0' || id == 0 || id > UINT32_MAX)
      return Status::error(std::string("GOLDMINER_AUTH=munge needs GOLDMINER_AUTH_JOB, the trainer's job id; it is ") +
                           (job == nullptr ? "unset" : "'" + std::string(job) + "'"));
    const char* socket = std::getenv("GOLDMINER_MUNGE_SOCKET");
    a.munge.job = static_cast<uint32_t>(id);
    a.munge.uid = ::geteuid();
    a.munge.credentials = munge_credentials(socket != nullptr ? socket : "");
    return a;
  }
  if (secret_env == nullptr && secret_file.empty()) return a;  // neither: the caller says what it needs
  auto secret = load_secret(secret_env, secret_file);
  if (!secret.ok()) return secret.status();
  a.secret = std::move(*secret);
  return a;
}

}  // namespace goldminer::auth
