// The handshake's proofs (gmcore/peer_auth.h) over a stand-in for munge.
#include "gmcore/peer_auth.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "gmcore/fake_credentials.h"

namespace goldminer::auth {
namespace {

PeerAuth munge_side(uid_t uid, uint32_t job) {
  PeerAuth a;
  a.munge.credentials = std::make_shared<FakeCredentials>(uid);
  a.munge.job = job;
  a.munge.uid = uid;
  return a;
}

Digest nonce(uint8_t fill) {
  Digest d;
  d.fill(fill);
  return d;
}

TEST(PeerAuthTest, TrainerAndWorkerOfOneJobAndUserProveThemselvesToEachOther) {
  PeerAuth trainer = munge_side(1000, 42), worker = munge_side(1000, 42);
  auto c = challenge(trainer, nonce(1), nonce(2));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->method, wire::AuthMethod::kMunge);
  EXPECT_NE(c->credential.find("goldminer trainer job=42 worker-nonce=0101"), std::string::npos);
  auto a = answer(worker, nonce(1), *c);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(check_answer(trainer, nonce(2), *a).ok());
  EXPECT_EQ(check_answer(trainer, nonce(2), *a).message(),
            "the worker's munge: credential refused: Replayed credential")
      << "munged decodes a credential once";
}

TEST(PeerAuthTest, AnotherUsersWorkerIsRefused) {
  PeerAuth trainer = munge_side(1000, 42), mallory = munge_side(1001, 42);
  auto c = challenge(trainer, nonce(1), nonce(2));
  ASSERT_TRUE(c.ok());
  // The trainer's proof is for uid 1000 only: mallory cannot even decode it.
  EXPECT_EQ(answer(mallory, nonce(1), *c).status().message(),
            "the trainer's munge: credential refused: Unauthorized");
  // A credential mallory makes herself carries her uid.
  wire::Auth forged;
  forged.credential = mallory.munge.credentials->encode("goldminer worker job=42 trainer-nonce=" + to_hex(nonce(2)),
                                                        nullptr).value();
  EXPECT_EQ(check_answer(trainer, nonce(2), forged).message(), "the worker runs as uid 1001, this job's user is uid 1000");
}

TEST(PeerAuthTest, AWorkerOfAnotherJobOfTheSameUserIsRefused) {
  PeerAuth trainer = munge_side(1000, 42), other_job = munge_side(1000, 43);
  auto c = challenge(trainer, nonce(1), nonce(2));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(answer(other_job, nonce(1), *c).status().message(),
            "the trainer works for another job: it says 'goldminer trainer job=42 worker-nonce=" + to_hex(nonce(1)) +
                "', expected 'goldminer trainer job=43 ...'")
      << "the worker checks the trainer's job before it answers";
  wire::Auth forged;  // what such a worker would send anyway
  forged.credential =
      other_job.munge.credentials->encode("goldminer worker job=43 trainer-nonce=" + to_hex(nonce(2)), nullptr).value();
  EXPECT_EQ(check_answer(trainer, nonce(2), forged).message(),
            "the worker works for another job: it says 'goldminer worker job=43 trainer-nonce=" + to_hex(nonce(2)) +
                "', expected 'goldminer worker job=42 ...'");
}

TEST(PeerAuthTest, ProofsAreBoundToTheirHandshakeAndRole) {
  PeerAuth trainer = munge_side(1000, 42), worker = munge_side(1000, 42);
  auto c = challenge(trainer, nonce(1), nonce(2));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(answer(worker, nonce(9), *c).status().message(),
            "the trainer's credential is not for this handshake (its nonce differs)")
      << "a trainer's proof relayed from another worker's handshake";
  auto a = answer(munge_side(1000, 42), nonce(1), *c);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(check_answer(trainer, nonce(3), *a).message(),
            "the worker's credential is not for this handshake (its nonce differs)");
  wire::Auth reflected;  // the trainer's own proof sent back
  reflected.credential = trainer.munge.credentials->encode("goldminer trainer job=42 trainer-nonce=" + to_hex(nonce(2)),
                                                           nullptr).value();
  EXPECT_EQ(check_answer(trainer, nonce(2), reflected).message(),
            "the worker's credential is not a proof of its role: it says 'goldminer trainer job=42 trainer-nonce=" +
                to_hex(nonce(2)) + "'");
}

TEST(PeerAuthTest, MethodsMustAgreeAndSecretsStillWork) {
  PeerAuth secret;
  secret.secret = "s3cr3t";
  PeerAuth munge = munge_side(1000, 42);
  auto c = challenge(secret, nonce(1), nonce(2));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->method, wire::AuthMethod::kSecret);
  EXPECT_TRUE(c->credential.empty());
  auto a = answer(secret, nonce(1), *c);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(check_answer(secret, nonce(2), *a).ok());
  PeerAuth wrong;
  wrong.secret = "other";
  EXPECT_EQ(check_answer(secret, nonce(2), *answer(wrong, nonce(1), *c)).message(),
            "the worker does not hold this job's secret");
  EXPECT_EQ(answer(munge, nonce(1), *c).status().message(),
            "the trainer asks for the job secret, this worker has munge (job 42)");
  auto mc = challenge(munge, nonce(1), nonce(2));
  ASSERT_TRUE(mc.ok());
  EXPECT_EQ(answer(secret, nonce(1), *mc).status().message(),
            "the trainer asks for a munge credential, this worker has the job secret");
  wire::Auth mac_only;
  EXPECT_EQ(check_answer(munge, nonce(2), mac_only).message(),
            "the worker sent no munge credential (it uses a job secret)");
}

}  // namespace
}  // namespace goldminer::auth
