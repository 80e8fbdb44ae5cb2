// The handshake's proofs (gmcore/peer_auth.h): over a stand-in for munge,
// and with a job secret; what an impostor, a relay and a reflected proof
// get (nothing).
#include "gmcore/peer_auth.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "gmcore/fake_credentials.h"

namespace goldminer::auth {
namespace {

const std::string kTrainer = "ucx://10.0.0.1:5000";  // where the trainer listens
const std::string kRelay = "ucx://10.0.0.9:5000";    // another host's address, the same port

PeerAuth munge_side(uid_t uid, uint32_t job) {
  PeerAuth a;
  a.munge.credentials = std::make_shared<FakeCredentials>(uid);
  a.munge.job = job;
  a.munge.uid = uid;
  return a;
}

PeerAuth secret_side(const std::string& secret) {
  PeerAuth a;
  a.secret = secret;
  return a;
}

Digest nonce(uint8_t fill) {
  Digest d;
  d.fill(fill);
  return d;
}

// A handshake of worker nonce 1 and trainer nonce 2 to `target`.
Handshake hs(const std::string& target = kTrainer) { return Handshake{nonce(1), nonce(2), target}; }

TEST(PeerAuthTest, TrainerAndWorkerOfOneJobAndUserProveThemselvesToEachOther) {
  PeerAuth trainer = munge_side(1000, 42), worker = munge_side(1000, 42);
  auto c = challenge(trainer, hs(), kTrainer);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->method, wire::AuthMethod::kMunge);
  EXPECT_NE(c->credential.find("goldminer trainer job=42 worker-nonce=0101"), std::string::npos);
  EXPECT_NE(c->credential.find(" trainer-nonce=0202"), std::string::npos) << "both nonces";
  EXPECT_NE(c->credential.find(" to=" + kTrainer), std::string::npos) << "and the address the worker dialed";
  auto a = answer(worker, nonce(1), kTrainer, *c);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(check_answer(trainer, hs(), *a).ok());
  EXPECT_EQ(check_answer(trainer, hs(), *a).message(), "the worker's munge: credential refused: Replayed credential")
      << "munged decodes a credential once";
}

TEST(PeerAuthTest, AnotherUsersWorkerIsRefused) {
  PeerAuth trainer = munge_side(1000, 42), mallory = munge_side(1001, 42);
  auto c = challenge(trainer, hs(), kTrainer);
  ASSERT_TRUE(c.ok());
  // The trainer's proof is for uid 1000 only: mallory cannot even decode it.
  EXPECT_EQ(answer(mallory, nonce(1), kTrainer, *c).status().message(),
            "the trainer's munge: credential refused: Unauthorized");
  // A credential mallory makes herself carries her uid.
  wire::Auth forged;
  forged.credential = mallory.munge.credentials
                          ->encode("goldminer worker job=42 worker-nonce=" + to_hex(nonce(1)) +
                                       " trainer-nonce=" + to_hex(nonce(2)) + " to=" + kTrainer,
                                   nullptr)
                          .value();
  EXPECT_EQ(check_answer(trainer, hs(), forged).message(), "the worker runs as uid 1001, this job's user is uid 1000");
}

TEST(PeerAuthTest, AWorkerOfAnotherJobOfTheSameUserIsRefused) {
  PeerAuth trainer = munge_side(1000, 42), other_job = munge_side(1000, 43);
  auto c = challenge(trainer, hs(), kTrainer);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(answer(other_job, nonce(1), kTrainer, *c).status().message(),
            "the trainer works for another job: it says 'goldminer trainer job=42 worker-nonce=" + to_hex(nonce(1)) +
                " trainer-nonce=" + to_hex(nonce(2)) + " to=" + kTrainer + "', expected 'goldminer trainer job=43 ...'")
      << "the worker checks the trainer's job before it answers";
  wire::Auth forged;  // what such a worker would send anyway
  forged.credential =
      other_job.munge.credentials->encode("goldminer worker job=43 trainer-nonce=" + to_hex(nonce(2)), nullptr).value();
  EXPECT_EQ(check_answer(trainer, hs(), forged).message(),
            "the worker works for another job: it says 'goldminer worker job=43 trainer-nonce=" + to_hex(nonce(2)) +
                "', expected 'goldminer worker job=42 ...'");
}

TEST(PeerAuthTest, MungeProofsAreBoundToTheirHandshakeRoleAndAddress) {
  PeerAuth trainer = munge_side(1000, 42), worker = munge_side(1000, 42);
  auto c = challenge(trainer, hs(), kTrainer);
  ASSERT_TRUE(c.ok());
  const std::string elsewhere = "the trainer's credential is not for this handshake (its nonces or the address the "
                                "worker dialed differ)";
  EXPECT_EQ(answer(worker, nonce(9), kTrainer, *c).status().message(), elsewhere)
      << "a trainer's proof relayed from another worker's handshake";
  auto c2 = challenge(trainer, Handshake{nonce(1), nonce(4), kTrainer}, kTrainer);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(answer(worker, nonce(1), kRelay, *c2).status().message(), elsewhere)
      << "a worker that dialed a relay, which rewrote its Hello's address to the trainer's";
  auto c3 = challenge(trainer, Handshake{nonce(1), nonce(5), kTrainer}, kTrainer);
  ASSERT_TRUE(c3.ok());
  auto a = answer(munge_side(1000, 42), nonce(1), kTrainer, *c3);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(check_answer(trainer, Handshake{nonce(1), nonce(3), kTrainer}, *a).message(),
            "the worker's credential is not for this handshake (its nonces or the address the worker dialed differ)");
  wire::Auth reflected;  // the trainer's own proof sent back
  reflected.credential = c3->credential;
  EXPECT_EQ(check_answer(trainer, Handshake{nonce(1), nonce(5), kTrainer}, reflected).message().rfind(
                "the worker's credential is not a proof of its role: it says 'goldminer trainer job=42 ", 0),
            0u)
      << "a proof reflected to its maker";
}

TEST(PeerAuthTest, SecretModeProvesBothWays) {
  PeerAuth trainer = secret_side("s3cr3t"), worker = secret_side("s3cr3t");
  auto c = challenge(trainer, hs(), kTrainer);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->method, wire::AuthMethod::kSecret);
  EXPECT_TRUE(c->credential.empty());
  EXPECT_NE(c->mac, Digest{}) << "the trainer proves the secret too";
  auto a = answer(worker, nonce(1), kTrainer, *c);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_NE(a->mac, c->mac) << "the proofs differ by role";
  EXPECT_TRUE(check_answer(trainer, hs(), *a).ok());
  wire::Auth wrong = *answer(secret_side("other"), nonce(1), kTrainer, *challenge(secret_side("other"), hs(), kTrainer));
  EXPECT_EQ(check_answer(trainer, hs(), wrong).message(),
            "the worker does not prove this job's secret for this handshake");
}

// A peer without the secret, posing as the trainer: the worker answers
// nothing (no MAC of anything the impostor chose or could reuse).
TEST(PeerAuthTest, SecretModeWorkerAnswersNoTrainerThatDoesNotProveTheSecret) {
  PeerAuth worker = secret_side("s3cr3t");
  auto impostor = challenge(secret_side("guess"), hs(), kTrainer);
  ASSERT_TRUE(impostor.ok());
  auto a = answer(worker, nonce(1), kTrainer, *impostor);
  ASSERT_FALSE(a.ok()) << "a MAC for an impostor";
  EXPECT_EQ(a.status().message(),
            "the trainer does not prove this job's secret for this handshake (another secret, or a handshake relayed "
            "from another address than " + kTrainer + ")");
  wire::Challenge blank = *impostor;  // no proof at all (a trainer of wire version 6 sent none)
  blank.mac = Digest{};
  EXPECT_FALSE(answer(worker, nonce(1), kTrainer, blank).ok());
  // The real trainer's proof from an earlier handshake, replayed to a worker
  // whose Hello carried a fresh nonce.
  auto genuine = challenge(secret_side("s3cr3t"), hs(), kTrainer);
  ASSERT_TRUE(genuine.ok());
  EXPECT_FALSE(answer(worker, nonce(7), kTrainer, *genuine).ok()) << "a replayed trainer proof";
}

TEST(PeerAuthTest, SecretModeRelayAndReflectionGainNothing) {
  PeerAuth trainer = secret_side("s3cr3t"), worker = secret_side("s3cr3t");
  // The worker dialed the relay at kRelay; the relay forwards its Hello as is.
  auto forwarded = challenge(trainer, hs(kRelay), kTrainer);
  ASSERT_FALSE(forwarded.ok()) << "the trainer proved itself for a relay's address";
  EXPECT_EQ(forwarded.status().message(),
            "the worker dialed '" + kRelay + "', not this session (" + kTrainer +
                "): another IP address (a handshake relayed through another address, or a NAT between worker and "
                "trainer)");
  // The relay rewrites the Hello's address to the trainer's: the trainer
  // proves itself for kTrainer, which the worker did not dial.
  auto rewritten = challenge(trainer, hs(kTrainer), kTrainer);
  ASSERT_TRUE(rewritten.ok());
  EXPECT_FALSE(answer(worker, nonce(1), kRelay, *rewritten).ok()) << "the worker answered through a relay";
  // Reflection: the trainer's proof sent back as a worker's.
  wire::Auth reflected;
  reflected.mac = rewritten->mac;
  EXPECT_FALSE(check_answer(trainer, hs(), reflected).ok()) << "the trainer accepted its own proof";
  // And a worker's proof offered to another worker as a trainer's.
  auto a = answer(worker, nonce(1), kTrainer, *rewritten);
  ASSERT_TRUE(a.ok());
  wire::Challenge mirrored = *rewritten;
  mirrored.mac = a->mac;
  EXPECT_FALSE(answer(secret_side("s3cr3t"), nonce(1), kTrainer, mirrored).ok()) << "a worker's proof as a trainer's";
}

TEST(PeerAuthTest, MethodsMustAgree) {
  PeerAuth secret = secret_side("s3cr3t");
  PeerAuth munge = munge_side(1000, 42);
  auto c = challenge(secret, hs(), kTrainer);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(answer(munge, nonce(1), kTrainer, *c).status().message(),
            "the trainer asks for the job secret, this worker has munge (job 42)");
  auto mc = challenge(munge, hs(), kTrainer);
  ASSERT_TRUE(mc.ok());
  EXPECT_EQ(answer(secret, nonce(1), kTrainer, *mc).status().message(),
            "the trainer asks for a munge credential, this worker has the job secret");
  wire::Auth mac_only;
  EXPECT_EQ(check_answer(munge, hs(), mac_only).message(), "the worker sent no munge credential (it uses a job secret)");
  wire::Auth credential;
  credential.credential = "CRED|1000|any|x";
  EXPECT_EQ(check_answer(secret, hs(), credential).message(),
            "the worker answered with a munge credential; this session uses a job secret");
}

TEST(PeerAuthTest, OnlyTheSessionsOwnAddressIsAccepted) {
  EXPECT_TRUE(names_this_session(kTrainer, kTrainer).ok());
  EXPECT_TRUE(names_this_session("ucx://[fd00:0::1]:7", "ucx://[fd00::1]:7").ok()) << "compared as addresses";
  EXPECT_TRUE(names_this_session("local://s", "local://s").ok());
  EXPECT_TRUE(names_this_session("ucx://127.0.1.1:5000", "ucx://0.0.0.0:5000").ok())
      << "a session on every address: a loopback address is this host's";
  auto refused = [](const std::string& target, const std::string& own) {
    Status s = names_this_session(target, own);
    return s.ok() ? std::string("accepted") : s.message();
  };
  const std::string why = " (a handshake relayed through another address, or a NAT between worker and trainer)";
  EXPECT_EQ(refused("ucx://10.0.0.1:5001", kTrainer),
            "the worker dialed 'ucx://10.0.0.1:5001', not this session (" + kTrainer + "): another port" + why);
  EXPECT_EQ(refused("ucx://node7:5000", kTrainer),
            "the worker dialed 'ucx://node7:5000', not this session (" + kTrainer + "): not a numeric IP address" + why)
      << "the trainer resolves no name a peer sends";
  EXPECT_EQ(refused("ucx://192.0.2.1:5000", "ucx://0.0.0.0:5000"),
            "the worker dialed 'ucx://192.0.2.1:5000', not this session (ucx://0.0.0.0:5000): not an address of this "
            "host" + why)
      << "TEST-NET-1, no interface's";
  EXPECT_EQ(refused("local://t", "local://s"),
            "the worker dialed 'local://t', not this session (local://s): another address" + why);
  EXPECT_EQ(refused("local://s", kTrainer),
            "the worker dialed 'local://s', not this session (" + kTrainer + "): another transport" + why);
  EXPECT_EQ(refused("", kTrainer), "the worker dialed '', not this session (" + kTrainer + "): no address" + why)
      << "a Hello of an older worker names no address";
  const std::string junk = "ucx://" + std::string(300, '\x1b');
  EXPECT_EQ(refused(junk, kTrainer), "the worker dialed 'ucx://" + std::string(74, '?') +
                                         "...', not this session (" + kTrainer + "): longer than 256 bytes" + why)
      << "a peer's text is bounded and printable in the log";
}

TEST(PeerAuthTest, TheDialedAddressIsNumeric) {
  EXPECT_EQ(dialed_address("ucx://127.0.0.1:4000").value(), "ucx://127.0.0.1:4000");
  EXPECT_EQ(dialed_address("ucx://[::1]:4000").value(), "ucx://[::1]:4000");
  EXPECT_EQ(dialed_address("local://s").value(), "local://s");
  EXPECT_EQ(dialed_address("ucx://no-such-host.invalid:4000").ok(), false);
  EXPECT_EQ(dialed_address("10.0.0.1:4000").status().message(), "trainer address '10.0.0.1:4000': expected SCHEME://...");
}

}  // namespace
}  // namespace goldminer::auth
