// munge_credentials against a real munged of the test's own (its key, its
// socket in a private directory), started in the foreground and ended by
// its PID.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "gmcore/credential.h"

namespace goldminer {
namespace {

class MungeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/sbin/munged", X_OK) != 0 || ::access("/usr/sbin/mungekey", X_OK) != 0)
      GTEST_SKIP() << "munged not installed (apt-get install munge)";
    char tmpl[] = "/tmp/gm-munge-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);  // munged refuses a socket directory others may write to
    socket_ = dir_ + "/munge.socket";
    const std::string key = dir_ + "/munge.key";
    ASSERT_EQ(std::system(("/usr/sbin/mungekey --create --keyfile=" + key + " 2>/dev/null").c_str()), 0);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_WRONLY);  // its log file has what it says
      if (null >= 0) ::dup2(null, 2);
      const std::string s = "--socket=" + socket_, k = "--key-file=" + key, p = "--pid-file=" + dir_ + "/munged.pid",
                        l = "--log-file=" + dir_ + "/munged.log", seed = "--seed-file=" + dir_ + "/munged.seed";
      ::execl("/usr/sbin/munged", "munged", "--foreground", "--force", s.c_str(), k.c_str(), p.c_str(), l.c_str(),
              seed.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100 && ::access(socket_.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(::access(socket_.c_str(), F_OK), 0) << "munged did not start; see " << dir_ << "/munged.log";
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  std::string dir_, socket_;
  pid_t pid_ = -1;
};

TEST_F(MungeTest, ACredentialCarriesItsPayloadAndMakerOnce) {
  auto munge = munge_credentials(socket_);
  auto cred = munge->encode("job=1\nnonce=2\n", nullptr);
  ASSERT_TRUE(cred.ok()) << cred.status().message();
  EXPECT_EQ(cred->rfind("MUNGE:", 0), 0u) << *cred;
  auto v = munge->decode(*cred);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->payload, "job=1\nnonce=2\n");
  EXPECT_EQ(v->uid, ::getuid());
  auto replay = munge->decode(*cred);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.status().message().find("munge: credential refused: "), std::string::npos);
  EXPECT_NE(replay.status().message().find("Replayed"), std::string::npos) << replay.status().message();
  auto forged = munge->decode("MUNGE:AAAAforged:");
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.status().message().rfind("munge: credential refused: ", 0), 0u) << forged.status().message();
}

TEST_F(MungeTest, ACredentialForAnotherUidCannotBeReadHere) {
  auto munge = munge_credentials(socket_);
  const uid_t other = ::getuid() + 4242;
  auto cred = munge->encode("target=3\n", &other);
  ASSERT_TRUE(cred.ok()) << cred.status().message();
  auto v = munge->decode(*cred);
  EXPECT_FALSE(v.ok()) << "decoded a credential restricted to uid " << other;
}

TEST(MungeNoDaemonTest, AnUnreachableMungedIsNamed) {
  auto munge = munge_credentials("/nonexistent/munge.socket");
  auto cred = munge->encode("x", nullptr);
  ASSERT_FALSE(cred.ok());
  EXPECT_EQ(cred.status().message().rfind("munge: cannot make a credential: ", 0), 0u) << cred.status().message();
  EXPECT_NE(cred.status().message().find("/nonexistent/munge.socket"), std::string::npos) << cred.status().message();
}

}  // namespace
}  // namespace goldminer
