// The clients' side of goldminer-ctld (ctld/ctld_service.h): a trainer
// session each interval sends its SessionReport as a credential and takes
// back its worker target, checked to come from the ctld (a credential of
// root or of the ctld's user, for this uid only, answering this report's
// nonce); goldminer-top's GETs carry a credential of
// view_credential_payload.
#ifndef GOLDMINER_CTLD_CLIENT_CTLD_CLIENT_H_
#define GOLDMINER_CTLD_CLIENT_CTLD_CLIENT_H_

#include <sys/types.h>

#include <memory>
#include <random>
#include <string>

#include "gmcore/credential.h"
#include "gmcore/status.h"
#include "sched/worker_registry.h"

namespace goldminer {

// The payload of the credential a GET of `path` carries.
std::string view_credential_payload(const std::string& path);

// Thread-compatible.
class CtldClient {
 public:
  // `address`: HOST:PORT; `ctld_uid`: the uid goldminer-ctld runs as
  // (root's answers are taken too).
  CtldClient(std::string address, std::shared_ptr<CredentialService> credentials, uid_t ctld_uid,
             double timeout_s = 2);

  // Sends `report` (its nonce replaced by a fresh one); the job's target,
  // or why there is none (unreachable, refused: the ctld's reason).
  Expected<int> report(SessionReport report);

  const std::string& address() const { return address_; }

 private:
  std::string address_;
  std::shared_ptr<CredentialService> credentials_;
  uid_t ctld_uid_;
  double timeout_s_;
  std::mt19937_64 nonces_;
};

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_CLIENT_CTLD_CLIENT_H_
