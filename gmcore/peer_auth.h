// How a trainer session and its data workers prove to each other that
// they run for the same job and user, in the handshake's two round trips:
//
//   worker  --Hello{worker nonce}-->                          trainer
//           <--Challenge{trainer nonce, method, trainer's proof}--
//           --Auth{worker's proof}-->                  (then Program)
//
// Two methods:
//   kSecret  a per-run secret both hold (runs without Slurm: the parent
//            hands it to the workers it starts). The worker's proof is
//            HMAC-SHA256(secret, trainer nonce); the trainer proves nothing.
//   kMunge   the cluster's own credential (jobs under Slurm: no secret
//            exists, so none can leak into a job's environment, Slurm's
//            state or slurmdbd). Each side sends a munge credential only
//            its own uid can decode, whose payload binds its role, the
//            trainer's job id and the other side's nonce:
//              "goldminer trainer job=J worker-nonce=HEX"
//              "goldminer worker job=J trainer-nonce=HEX"
//            The receiver accepts it only when munged says the same uid
//            made it and the payload is exactly the one expected: a
//            process of another user, or one working for another job of
//            the same user, is refused; munged refuses a replayed
//            credential, and the nonces bind each proof to one handshake.
//            A worker checks the trainer's proof before it runs the
//            trainer's program.
// Plain values over an injected CredentialService: unit-tested without
// munged; thread-safe as the service is.
#ifndef GOLDMINER_GMCORE_PEER_AUTH_H_
#define GOLDMINER_GMCORE_PEER_AUTH_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "gmcore/auth.h"
#include "gmcore/credential.h"
#include "gmcore/status.h"
#include "gmcore/wire.h"

namespace goldminer::auth {

struct MungeAuth {
  std::shared_ptr<CredentialService> credentials;  // null: no munge
  uint32_t job = 0;                                // the trainer's job id
  uid_t uid = 0;                                   // this side's (effective) uid
  explicit operator bool() const { return credentials != nullptr; }
};

// kMunge when `munge` is set, else kSecret.
struct PeerAuth {
  std::string secret;
  MungeAuth munge;
  wire::AuthMethod method() const { return munge ? wire::AuthMethod::kMunge : wire::AuthMethod::kSecret; }
  // For messages: "the job secret" or "munge (job J)".
  std::string describe() const;
};

// The trainer's challenge to a worker whose Hello carried `worker_nonce`;
// `trainer_nonce` is fresh, and kept to check the answer.
Expected<wire::Challenge> challenge(const PeerAuth& a, const Digest& worker_nonce, const Digest& trainer_nonce);
// The trainer's check of a worker's answer; the error says what was wrong.
Status check_answer(const PeerAuth& a, const Digest& trainer_nonce, const wire::Auth& answer);

// The worker's answer to `c` (its Hello carried `worker_nonce`), after it
// checked the trainer's proof; the error says why it will not answer.
Expected<wire::Auth> answer(const PeerAuth& a, const Digest& worker_nonce, const wire::Challenge& c);

// How this process authenticates, from its environment: GOLDMINER_AUTH=
// munge with GOLDMINER_AUTH_JOB=J (GOLDMINER_MUNGE_SOCKET optional), as
// the SPANK plugin sets them; else the secret `secret_env` (the value of
// GOLDMINER_SECRET) or the file `secret_file`; with none of these, an empty
// secret and no munge. Errors name the variable or file and what is wrong.
Expected<PeerAuth> peer_auth_from_environment(const char* secret_env, const std::string& secret_file);

}  // namespace goldminer::auth

#endif  // GOLDMINER_GMCORE_PEER_AUTH_H_
