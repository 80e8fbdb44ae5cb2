// How a trainer session and its data workers prove to each other that
// they run for the same job and user, in the handshake's two round trips:
//
//   worker  --Hello{worker nonce, target}-->                  trainer
//           <--Challenge{trainer nonce, method, trainer's proof}--
//           --Auth{worker's proof}-->                  (then Program)
//
// `target` is the trainer's address as the worker dialed it, numeric
// (dialed_address). The trainer refuses a Hello whose target is not one of
// its own addresses (names_this_session) before it proves anything, and
// both proofs name both nonces, the role of their maker and the target.
// The worker checks the trainer's proof before it answers, so it never
// MACs or signs anything for a peer that has not proved the job first (it
// is no oracle), and it accepts a Program, a Redirect or a pickle only
// after that. A handshake relayed through another address fails: the
// trainer refuses the relay's address, or (a relay that rewrote the Hello's
// target) the worker refuses a proof for an address it did not dial. A
// proof reflected to its maker fails on the role. What the handshake does
// not protect (the frames after it) is in docs/ARCHITECTURE-dataplane.md.
//
// Two methods:
//   kSecret  a per-run secret both hold (runs without Slurm: the parent
//            hands it to the workers it starts). Each proof is
//              HMAC-SHA256(secret, "goldminer handshake 7 " ROLE "\0" ||
//                          worker nonce || trainer nonce || u32le len || target)
//            with ROLE "trainer" or "worker".
//   kMunge   the cluster's own credential (jobs under Slurm: no secret
//            exists, so none can leak into a job's environment, Slurm's
//            state or slurmdbd). Each side sends a munge credential only
//            its own uid can decode, whose payload binds its role, the
//            trainer's job id, both nonces and the target:
//              "goldminer trainer job=J worker-nonce=HEX trainer-nonce=HEX to=TARGET"
//              "goldminer worker job=J worker-nonce=HEX trainer-nonce=HEX to=TARGET"
//            The receiver accepts it only when munged says the same uid
//            made it and the payload is exactly the one expected: a
//            process of another user, or one working for another job of
//            the same user, is refused; munged refuses a replayed
//            credential. A worker checks the trainer's proof before it
//            answers or runs the trainer's program.
// Plain values over an injected CredentialService: unit-tested without
// munged; thread-safe as the service is.
#ifndef GOLDMINER_GMCORE_PEER_AUTH_H_
#define GOLDMINER_GMCORE_PEER_AUTH_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
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

// What one handshake's two proofs are bound to.
struct Handshake {
  Digest worker_nonce{};   // the worker's Hello::nonce
  Digest trainer_nonce{};  // the trainer's Challenge::nonce
  std::string target;      // the worker's Hello::target
};

// The trainer's challenge for `h` (a fresh trainer nonce, the worker's
// nonce and target from its Hello), which carries the trainer's proof.
// Refuses a target that is not `own_address` (the session's listening
// address) by names_this_session.
Expected<wire::Challenge> challenge(const PeerAuth& a, const Handshake& h, const std::string& own_address);
// The trainer's check of a worker's answer; the error says what was wrong.
Status check_answer(const PeerAuth& a, const Handshake& h, const wire::Auth& answer);

// The worker's answer to `c`, whose Hello carried `worker_nonce` and
// `target`: only once the trainer's proof in `c` holds; else the error
// says why it will not answer (and nothing was MACed or signed).
Expected<wire::Auth> answer(const PeerAuth& a, const Digest& worker_nonce, const std::string& target,
                            const wire::Challenge& c);

// The Hello::target for a worker that dials `address`: "ucx://IP:PORT"
// with the numeric address the transport connects to (the first that
// HOST resolves to, as transport::connect does); other schemes as given.
Expected<std::string> dialed_address(const std::string& address);

// Whether `target` (from a Hello, untrusted) is an address of the session
// listening at `own_address` (numeric, as transport::Endpoint::address()
// says): the same scheme and port, and the same IP, or, for a session
// listening on every address (0.0.0.0 or ::), an address of one of this
// host's interfaces or a loopback address; other schemes must be equal.
// The error names both addresses.
Status names_this_session(const std::string& target, const std::string& own_address);

// How this process authenticates, from what its job environment says
// (launch/job_environment.h): `method` "munge" (GOLDMINER_AUTH) with trainer
// job `job` (GOLDMINER_AUTH_JOB, 0 when unset) through munged's
// `munge_socket` ("" = munge's own), as the SPANK plugin sets them; else the
// secret `secret` (GOLDMINER_SECRET, nothing when unset) or the file
// `secret_file`; with none of these, an empty secret and no munge. Errors
// name the variable or file and what is wrong.
Expected<PeerAuth> peer_auth_of(const std::string& method, uint32_t job, const std::string& munge_socket,
                                const std::optional<std::string>& secret, const std::string& secret_file);

}  // namespace goldminer::auth

#endif  // GOLDMINER_GMCORE_PEER_AUTH_H_
