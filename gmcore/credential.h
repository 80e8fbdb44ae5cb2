// The cluster's own credential (munge, as Slurm itself uses) for the
// handshake of a trainer and its workers (gmcore/peer_auth.h) and the
// channel between trainer sessions and goldminer-ctld: a credential
// carries a payload and proves the uid that made it. Behind an interface
// so that the ctld's service and client are unit-tested without munged.
#ifndef GOLDMINER_GMCORE_CREDENTIAL_H_
#define GOLDMINER_GMCORE_CREDENTIAL_H_

#include <sys/types.h>

#include <ctime>

#include <memory>
#include <string>

#include "gmcore/status.h"

namespace goldminer {

struct Verified {
  std::string payload;
  uid_t uid = 0;  // who made the credential
  gid_t gid = 0;
  time_t encoded = 0;  // when it was made (munge's encode time, seconds since the epoch); 0: unknown
};

// Thread-safe.
class CredentialService {
 public:
  virtual ~CredentialService() = default;
  // A credential for `payload`; with `for_uid` set only that uid can
  // decode it (munge's uid restriction).
  virtual Expected<std::string> encode(const std::string& payload, const uid_t* for_uid) = 0;
  // The payload and its maker; an error says why it is refused (invalid,
  // expired, replayed, not for this uid, munged unreachable).
  virtual Expected<Verified> decode(const std::string& credential) = 0;
};

// munge through libmunge; `socket` "" is munged's default socket. Each
// credential decodes once (munged refuses a replay).
std::unique_ptr<CredentialService> munge_credentials(const std::string& socket);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_CREDENTIAL_H_
