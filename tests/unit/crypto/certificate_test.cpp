// X.509 certificates and trust roots, with certificates made by OpenSSL at test time.

#include "wheelforge/crypto/certificate.hpp"

#include <gtest/gtest.h>

#include <ctime>

#include "crypto/test_certificates.hpp"

namespace wf::crypto {
namespace {

using wf::testing::CertSpec;
using wf::testing::TestPki;

const std::int64_t kNow = std::time(nullptr);

CertSpec fulcio_like() {
  CertSpec spec;
  spec.san_uris = {"https://github.com/org/repo/.github/workflows/release.yml@refs/tags/v1"};
  spec.utf8_extensions = {{"1.3.6.1.4.1.57264.1.8", "https://token.actions.githubusercontent.com"},
                          {"1.3.6.1.4.1.57264.1.12", "https://github.com/org/repo"}};
  spec.raw_extensions = {{"1.3.6.1.4.1.57264.1.1", "https://token.actions.githubusercontent.com"}};
  return spec;
}

TEST(Certificate, ReadsItsIdentityAndExtensions) {
  const TestPki pki;
  const auto key = wf::testing::make_p256_key();
  const auto c = Certificate::from_der(wf::testing::der_of(pki.leaf(fulcio_like(), key)));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->san_uris(),
            std::vector<std::string>{
                "https://github.com/org/repo/.github/workflows/release.yml@refs/tags/v1"});
  EXPECT_TRUE(c->san_emails().empty());
  EXPECT_EQ(c->describe(), c->san_uris().front());
  EXPECT_EQ(c->text_extension("1.3.6.1.4.1.57264.1.8"),
            "https://token.actions.githubusercontent.com");
  EXPECT_EQ(c->text_extension("1.3.6.1.4.1.57264.1.12"), "https://github.com/org/repo");
  // The older claims hold the raw text, without a DER string around it.
  EXPECT_EQ(c->text_extension("1.3.6.1.4.1.57264.1.1"),
            "https://token.actions.githubusercontent.com");
  EXPECT_EQ(c->text_extension("1.3.6.1.4.1.57264.1.9"), std::nullopt);
  EXPECT_TRUE(c->for_code_signing());
  EXPECT_LE(c->not_before(), kNow);
  EXPECT_GT(c->not_after(), kNow);
}

TEST(Certificate, AnEmailIdentityAndNoCodeSigning) {
  const TestPki pki;
  const auto key = wf::testing::make_p256_key();
  CertSpec spec;
  spec.code_signing = false;
  spec.san_emails = {"ci@example.org"};
  const auto c = Certificate::from_der(wf::testing::der_of(pki.leaf(spec, key)));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->san_emails(), std::vector<std::string>{"ci@example.org"});
  EXPECT_EQ(c->describe(), "ci@example.org");
  EXPECT_FALSE(c->for_code_signing());
}

TEST(Certificate, RefusesWhatIsNotOne) {
  EXPECT_EQ(Certificate::from_der("not a certificate").error().code, Errc::invalid);
  const TestPki pki;
  EXPECT_EQ(Certificate::from_der(wf::testing::der_of(pki.root) + "x").error().message,
            "bytes after the DER X.509 certificate");
  EXPECT_EQ(Certificate::from_pem("").error().message, "no PEM certificate in it");
  const std::string bad = wf::testing::pem_of(pki.root) +
                          "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  EXPECT_EQ(Certificate::from_pem(bad).error().message, "PEM block 2 is not a certificate");
  const auto both = Certificate::from_pem(pki.trust_pem());
  ASSERT_TRUE(both);
  EXPECT_EQ(both->size(), 2U);
}

TEST(Certificate, VerifiesSignaturesOfItsKey) {
  const TestPki pki;
  for (const auto& key : {wf::testing::make_p256_key(), wf::testing::make_rsa_key()}) {
    const auto c = Certificate::from_der(wf::testing::der_of(pki.leaf(fulcio_like(), key)));
    ASSERT_TRUE(c);
    const std::string sig = wf::testing::sign(key, "the message");
    EXPECT_TRUE(c->verify("the message", sig));
    EXPECT_FALSE(c->verify("the message!", sig));
    EXPECT_FALSE(c->verify("the message", sig.substr(1)));
    EXPECT_FALSE(
        c->verify("the message", wf::testing::sign(wf::testing::make_p256_key(), "the message")));
  }
}

TEST(TrustStore, ChainsThroughTheIntermediateToTheRoot) {
  const TestPki pki;
  const auto store = TrustStore::from_pem(pki.trust_pem());
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ(store->size(), 2U);
  const auto key = wf::testing::make_p256_key();
  const auto leaf = Certificate::from_der(wf::testing::der_of(pki.leaf(fulcio_like(), key)));
  ASSERT_TRUE(leaf);
  EXPECT_TRUE(store->verify(*leaf, {}, kNow)) << store->verify(*leaf, {}, kNow).error().message;

  // The intermediate may come with the leaf instead of with the roots.
  const auto root_only = TrustStore::from_pem(wf::testing::pem_of(pki.root));
  ASSERT_TRUE(root_only);
  EXPECT_FALSE(root_only->verify(*leaf, {}, kNow));
  const auto intermediate = Certificate::from_der(wf::testing::der_of(pki.intermediate));
  ASSERT_TRUE(intermediate);
  EXPECT_TRUE(root_only->verify(*leaf, std::span(&*intermediate, 1), kNow));
}

TEST(TrustStore, RefusesAnotherRootAndTimesOutsideTheValidity) {
  const TestPki pki;
  const TestPki other;
  const auto store = TrustStore::from_pem(pki.trust_pem());
  ASSERT_TRUE(store);
  const auto key = wf::testing::make_p256_key();
  const auto foreign = Certificate::from_der(wf::testing::der_of(other.leaf(fulcio_like(), key)));
  ASSERT_TRUE(foreign);
  const Status refused = store->verify(*foreign, {}, kNow);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::unauthorized);
  EXPECT_NE(refused.error().message.find("https://github.com/org/repo/.github/workflows/"
                                         "release.yml@refs/tags/v1 does not chain to a trusted "
                                         "root: unable to get local issuer certificate"),
            std::string::npos)
      << refused.error().message;

  const auto leaf = Certificate::from_der(wf::testing::der_of(pki.leaf(fulcio_like(), key)));
  ASSERT_TRUE(leaf);
  const Status late = store->verify(*leaf, {}, kNow + 3600);
  ASSERT_FALSE(late);
  EXPECT_NE(late.error().message.find("certificate has expired"), std::string::npos)
      << late.error().message;
  const Status early = store->verify(*leaf, {}, kNow - 3600);
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message.find("certificate is not yet valid"), std::string::npos)
      << early.error().message;
}

}  // namespace
}  // namespace wf::crypto
