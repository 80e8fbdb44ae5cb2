#include "gmcore/peer_auth.h"

namespace goldminer::auth {
namespace {

std::string payload(const char* role, uint32_t job, const char* nonce_name, const Digest& nonce) {
  return std::string("goldminer ") + role + " job=" + std::to_string(job) + " " + nonce_name + "=" + to_hex(nonce);
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
  if (v->payload.rfind(job_prefix, 0) == 0)
    return Status::error(std::string(who) + "'s credential is not for this handshake (its nonce differs)");
  const std::string quoted = "'" + v->payload.substr(0, 200) + "'";
  if (v->payload.rfind(expected.substr(0, job_at), 0) == 0)
    return Status::error(std::string(who) + " works for another job: it says " + quoted + ", expected '" + job_prefix +
                         " ...'");
  return Status::error(std::string(who) + "'s credential is not a proof of its role: it says " + quoted);
}

}  // namespace

std::string PeerAuth::describe() const {
  return munge ? "munge (job " + std::to_string(munge.job) + ")" : "the job secret";
}

Expected<wire::Challenge> challenge(const PeerAuth& a, const Digest& worker_nonce, const Digest& trainer_nonce) {
  wire::Challenge c;
  c.nonce = trainer_nonce;
  c.method = a.method();
  if (!a.munge) return c;
  auto cred = a.munge.credentials->encode(payload("trainer", a.munge.job, "worker-nonce", worker_nonce), &a.munge.uid);
  if (!cred.ok()) return cred.status();
  c.credential = std::move(*cred);
  return c;
}

Status check_answer(const PeerAuth& a, const Digest& trainer_nonce, const wire::Auth& answer) {
  if (!a.munge) {
    if (!answer.credential.empty())
      return Status::error("the worker answered with a munge credential; this session uses a job secret");
    if (!verify(a.secret, trainer_nonce, answer.mac)) return Status::error("the worker does not hold this job's secret");
    return Status();
  }
  return check_credential(a, answer.credential, payload("worker", a.munge.job, "trainer-nonce", trainer_nonce),
                          "the worker");
}

Expected<wire::Auth> answer(const PeerAuth& a, const Digest& worker_nonce, const wire::Challenge& c) {
  wire::Auth out;
  if (c.method != a.method())
    return Status::error(std::string("the trainer asks for ") +
                         (c.method == wire::AuthMethod::kMunge ? "a munge credential" : "the job secret") +
                         ", this worker has " + a.describe());
  if (!a.munge) {
    out.mac = auth::answer(a.secret, c.nonce);
    return out;
  }
  Status s = check_credential(a, c.credential, payload("trainer", a.munge.job, "worker-nonce", worker_nonce),
                              "the trainer");
  if (!s.ok()) return s;
  auto cred = a.munge.credentials->encode(payload("worker", a.munge.job, "trainer-nonce", c.nonce), &a.munge.uid);
  if (!cred.ok()) return cred.status();
  out.credential = std::move(*cred);
  return out;
}

}  // namespace goldminer::auth
