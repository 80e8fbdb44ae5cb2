#include "gmcore/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace goldminer::auth {
namespace {

std::string hex_sha(const std::string& s) {
  return to_hex(sha256(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

std::string hex_hmac(const std::string& key, const std::string& data) {
  return to_hex(hmac_sha256(key, reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

TEST(AuthTest, Sha256MatchesFips180Vectors) {
  EXPECT_EQ(hex_sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex_sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex_sha(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(AuthTest, HmacMatchesRfc4231Vectors) {
  EXPECT_EQ(hex_hmac(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex_hmac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Case 6: a key longer than the block is hashed first.
  EXPECT_EQ(hex_hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(AuthTest, NoncesDifferAndMacsCompareWhole) {
  auto nonce = random_nonce();
  ASSERT_TRUE(nonce.ok()) << nonce.status().message();
  auto other = random_nonce();
  EXPECT_NE(*nonce, *other);
  Digest mac = hmac_sha256("job-secret", nonce->data(), nonce->size());
  EXPECT_TRUE(same_mac(mac, hmac_sha256("job-secret", nonce->data(), nonce->size())));
  EXPECT_FALSE(same_mac(mac, hmac_sha256("other-secret", nonce->data(), nonce->size()))) << "another secret";
  EXPECT_FALSE(same_mac(mac, hmac_sha256("job-secret", other->data(), other->size()))) << "another nonce";
  Digest last = mac;
  last[31] ^= 1;  // only the last byte differs
  EXPECT_FALSE(same_mac(mac, last));
}

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/goldminer-secret-test.XXXXXX";
    int fd = mkstemp(name);  // mode 0600
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = name;
    std::ofstream(path_) << "s3cret\n";
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(SecretFileTest, EnvironmentFirstThenAPrivateFile) {
  EXPECT_EQ(*load_secret("from-env", path_), "from-env");
  EXPECT_EQ(load_secret("", path_).status().message(), "auth: GOLDMINER_SECRET is set but empty");
  auto s = load_secret(nullptr, path_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s, "s3cret") << "trailing newline dropped";
}

TEST_F(SecretFileTest, RefusesFilesOthersCanRead) {
  chmod(path_.c_str(), 0644);
  EXPECT_EQ(load_secret(nullptr, path_).status().message(),
            "auth: " + path_ + ": mode 0644 lets others read it (chmod 600)");
  EXPECT_EQ(load_secret(nullptr, "/nonexistent/secret").status().message(),
            "auth: /nonexistent/secret: No such file or directory");
  std::string link = path_ + ".link";
  ASSERT_EQ(symlink(path_.c_str(), link.c_str()), 0);
  EXPECT_EQ(load_secret(nullptr, link).status().message(), "auth: " + link + ": Too many levels of symbolic links");
  std::remove(link.c_str());
}

}  // namespace
}  // namespace goldminer::auth
