#include "gmcore/peer_auth.h"

namespace goldminer::auth {
namespace {

std::string payload(const char* role, uint32_t job, const Handshake& h) {
  return std::string("goldminer ") + role + " job=" + std::to_string(job) + " worker-nonce=" + to_hex(h.worker_nonce) +
         " trainer-nonce=" + to_hex(h.trainer_nonce) + " to=" + h.target;
}

// The secret method's proof by `role` ("trainer" or "worker") for `h`.
Digest secret_proof(const std::string& secret, const char* role, const Handshake& h) {
  std::string t = std::string("goldminer handshake ") + std::to_string(wire::kVersion) + " " + role;
  t.push_back('\0');
  t.append(reinterpret_cast<const char*>(h.worker_nonce.data()), h.worker_nonce.size());
  t.append(reinterpret_cast<const char*>(h.trainer_nonce.data()), h.trainer_nonce.size());
  const uint32_t n = static_cast<uint32_t>(h.target.size());
  for (int i = 0; i < 4; ++i) t.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  t += h.target;
  return hmac_sha256(secret, reinterpret_cast<const uint8_t*>(t.data()), t.size());
}

// The other side's credential: made by our own uid, for exactly `expected`.
Status check_credential(const PeerAuth& a, const std::string& credential, const std::string& expected,
                        const char* who) {
  if (credential.empty()) return Status::error(std::string(who) + " sent no munge credential (it uses a job secret)");
  auto v = a.munge.credentials->decode(credential);
  if (!v.ok()) return Status::error(std::string(who) + "'s " + v.status().message());
  if (v->uid != a.munge.uid)
    return Status::error(std::string(who) + " runs as uid " + std::to_string(v->uid) + ", this job's user is uid " +
                         std::to_string(a.munge.uid));
  if (v->payload == expected) return Status();
  const size_t job_at = expected.find("job=");
  const std::string job_prefix = expected.substr(0, expected.find(' ', job_at));
  if (v->payload.rfind(job_prefix + " ", 0) == 0)
    return Status::error(std::string(who) +
                         "'s credential is not for this handshake (its nonces or the address the worker dialed differ)");
  const std::string quoted = "'" + v->payload.substr(0, 512) + "'";
  if (v->payload.rfind(expected.substr(0, job_at), 0) == 0)
    return Status::error(std::string(who) + " works for another job: it says " + quoted + ", expected '" + job_prefix +
                         " ...'");
  return Status::error(std::string(who) + "'s credential is not a proof of its role: it says " + quoted);
}

}  // namespace

std::string PeerAuth::describe() const {
  return munge ? "munge (job " + std::to_string(munge.job) + ")" : "the job secret";
}

Expected<wire::Challenge> challenge(const PeerAuth& a, const Handshake& h, const std::string& own_address) {
  // Before anything is proved: a relay's address gets no proof for it.
  Status here = names_this_session(h.target, own_address);
  if (!here.ok()) return here;
  wire::Challenge c;
  c.nonce = h.trainer_nonce;
  c.method = a.method();
  if (!a.munge) {
    c.mac = secret_proof(a.secret, "trainer", h);
    return c;
  }
  auto cred = a.munge.credentials->encode(payload("trainer", a.munge.job, h), &a.munge.uid);
  if (!cred.ok()) return cred.status();
  c.credential = std::move(*cred);
  return c;
}

Status check_answer(const PeerAuth& a, const Handshake& h, const wire::Auth& answer) {
  if (!a.munge) {
    if (!answer.credential.empty())
      return Status::error("the worker answered with a munge credential; this session uses a job secret");
    if (!same_mac(secret_proof(a.secret, "worker", h), answer.mac))
      return Status::error("the worker does not prove this job's secret for this handshake");
    return Status();
  }
  return check_credential(a, answer.credential, payload("worker", a.munge.job, h), "the worker");
}

Expected<wire::Auth> answer(const PeerAuth& a, const Digest& worker_nonce, const std::string& target,
                            const wire::Challenge& c) {
  if (c.method != a.method())
    return Status::error(std::string("the trainer asks for ") +
                         (c.method == wire::AuthMethod::kMunge ? "a munge credential" : "the job secret") +
                         ", this worker has " + a.describe());
  const Handshake h{worker_nonce, c.nonce, target};
  wire::Auth out;
  if (!a.munge) {
    // The trainer proves the secret first: a peer without it gets no MAC.
    if (!same_mac(secret_proof(a.secret, "trainer", h), c.mac))
      return Status::error("the trainer does not prove this job's secret for this handshake (another secret, or a "
                           "handshake relayed from another address than " + target + ")");
    out.mac = secret_proof(a.secret, "worker", h);
    return out;
  }
  Status s = check_credential(a, c.credential, payload("trainer", a.munge.job, h), "the trainer");
  if (!s.ok()) return s;
  auto cred = a.munge.credentials->encode(payload("worker", a.munge.job, h), &a.munge.uid);
  if (!cred.ok()) return cred.status();
  out.credential = std::move(*cred);
  return out;
}

}  // namespace goldminer::auth
