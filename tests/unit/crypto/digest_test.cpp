#include "wheelforge/crypto/digest.hpp"

#include <gtest/gtest.h>

#include "wheelforge/util/strings.hpp"

namespace wf::crypto {
namespace {

TEST(Digest, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Hasher md5(Algorithm::md5);
  md5.update("abc");
  EXPECT_EQ(md5.finish_hex(), "900150983cd24fb0d6963f7d28e17f72");
}

TEST(Digest, IncrementalEqualsOneShot) {
  Hasher h(Algorithm::sha256);
  h.update("hello ");
  h.update("world");
  EXPECT_EQ(h.finish_hex(), sha256_hex("hello world"));
}

TEST(Digest, HmacSha256MatchesRfc4231) {
  // RFC 4231, test cases 1 and 2.
  EXPECT_EQ(hex_encode(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex_encode(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Digest, RandomAndCompare) {
  EXPECT_EQ(random_bytes(32).size(), 32U);
  EXPECT_NE(random_bytes(16), random_bytes(16));
  EXPECT_TRUE(constant_time_equals("abc", "abc"));
  EXPECT_FALSE(constant_time_equals("abc", "abd"));
  EXPECT_FALSE(constant_time_equals("abc", "ab"));
}

}  // namespace
}  // namespace wf::crypto
