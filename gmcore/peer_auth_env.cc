// peer_auth_of (gmcore/peer_auth.h): beside munge_credential.cc since it
// makes a munge service; the rest of peer_auth is in the core.
#include <unistd.h>

#include "gmcore/peer_auth.h"

namespace goldminer::auth {

Expected<PeerAuth> peer_auth_of(const std::string& method, uint32_t job, const std::string& munge_socket,
                                const std::optional<std::string>& secret, const std::string& secret_file) {
  PeerAuth a;
  if (method == "munge") {
    if (job == 0) return Status::error("GOLDMINER_AUTH=munge needs GOLDMINER_AUTH_JOB, the trainer's job id; it is unset");
    a.munge.job = job;
    a.munge.uid = ::geteuid();
    a.munge.credentials = munge_credentials(munge_socket);
    return a;
  }
  if (!secret && secret_file.empty()) return a;  // neither: the caller says what it needs
  auto loaded = load_secret(secret ? secret->c_str() : nullptr, secret_file);
  if (!loaded.ok()) return loaded.status();
  a.secret = std::move(*loaded);
  return a;
}

}  // namespace goldminer::auth
