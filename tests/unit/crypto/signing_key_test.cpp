// The server's signing key: generated, read back from PEM, signing what Certificate::verify
// checks, and its self-signed certificate usable as a trust root.

#include "wheelforge/crypto/signing_key.hpp"

#include <gtest/gtest.h>

#include <ctime>

#include "crypto/test_certificates.hpp"
#include "wheelforge/crypto/certificate.hpp"

namespace wf::crypto {
namespace {

std::string pem_of(const wf::testing::Key& key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  return out;
}

TEST(SigningKey, AGeneratedKeyReadsBackFromItsPem) {
  auto key = SigningKey::generate();
  ASSERT_TRUE(key) << key.error().message;
  const std::string pem = key->private_pem();
  EXPECT_TRUE(pem.starts_with("-----BEGIN PRIVATE KEY-----")) << pem;
  auto again = SigningKey::from_pem(pem);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->public_key_der(), key->public_key_der());
  EXPECT_FALSE(key->public_key_der().empty());
}

TEST(SigningKey, ItsSelfSignedCertificateNamesItAndVerifiesItsSignatures) {
  auto key = SigningKey::generate();
  ASSERT_TRUE(key);
  const std::int64_t now = std::time(nullptr);
  auto der = key->self_signed_certificate("wheelforge build provenance", "http://127.0.0.1:8080",
                                          now, 3650);
  ASSERT_TRUE(der) << der.error().message;
  auto certificate = Certificate::from_der(*der);
  ASSERT_TRUE(certificate) << certificate.error().message;
  EXPECT_EQ(certificate->der(), *der);
  EXPECT_EQ(certificate->public_key_der(), key->public_key_der());
  EXPECT_TRUE(certificate->for_code_signing());
  EXPECT_EQ(certificate->san_uris(), std::vector<std::string>{"http://127.0.0.1:8080"});
  EXPECT_EQ(certificate->subject(), "CN = wheelforge build provenance");
  EXPECT_LE(certificate->not_before(), now - 3600);
  EXPECT_GE(certificate->not_after(), now + 3650LL * 86400 - 1);

  auto signature = key->sign("the message");
  ASSERT_TRUE(signature) << signature.error().message;
  EXPECT_TRUE(certificate->verify("the message", *signature));
  EXPECT_FALSE(certificate->verify("another message", *signature));

  // The certificate is its own trust root, valid now and not after it expires.
  EXPECT_TRUE(certificate->pem().starts_with("-----BEGIN CERTIFICATE-----\n"));
  auto store = TrustStore::from_pem(certificate->pem());
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_TRUE(store->verify(*certificate, {}, now))
      << store->verify(*certificate, {}, now).error().message;
  EXPECT_FALSE(store->verify(*certificate, {}, now + 3651LL * 86400));
}

TEST(SigningKey, RsaKeysSignToo) {
  auto key = SigningKey::from_pem(pem_of(wf::testing::make_rsa_key()));
  ASSERT_TRUE(key) << key.error().message;
  auto der = key->self_signed_certificate("rsa", "", std::time(nullptr), 1);
  ASSERT_TRUE(der) << der.error().message;
  auto certificate = Certificate::from_der(*der);
  ASSERT_TRUE(certificate);
  EXPECT_TRUE(certificate->san_uris().empty());
  auto signature = key->sign("m");
  ASSERT_TRUE(signature);
  EXPECT_TRUE(certificate->verify("m", *signature));
}

TEST(SigningKey, WhatIsNotAUsablePrivateKeyIsRefused) {
  for (const std::string& text :
       {std::string("not a key"), std::string("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END "
                                              "PRIVATE KEY-----\n")}) {
    auto key = SigningKey::from_pem(text);
    ASSERT_FALSE(key) << text;
    EXPECT_EQ(key.error().code, Errc::invalid);
    EXPECT_EQ(key.error().message, "no unencrypted PEM private key in it");
  }
  // A curve other than P-256, and an RSA key under 2048 bits.
  for (const wf::testing::Key& other : {wf::testing::Key(EVP_EC_gen("P-384"), EVP_PKEY_free),
                                        wf::testing::Key(EVP_RSA_gen(1024), EVP_PKEY_free)}) {
    auto key = SigningKey::from_pem(pem_of(other));
    ASSERT_FALSE(key);
    EXPECT_EQ(key.error().message,
              "the private key is neither P-256 (ECDSA) nor RSA of 2048 bits or more");
  }
  // An encrypted key: refused, never a passphrase prompt.
  const wf::testing::Key encrypted_key = wf::testing::make_p256_key();
  BIO* bio = BIO_new(BIO_s_mem());
  char pass[] = "secret";
  PEM_write_bio_PrivateKey(bio, encrypted_key.get(), EVP_aes_256_cbc(), nullptr, 0, nullptr, pass);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  const std::string encrypted(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  ASSERT_NE(encrypted.find("ENCRYPTED"), std::string::npos);
  EXPECT_FALSE(SigningKey::from_pem(encrypted));
}

}  // namespace
}  // namespace wf::crypto
