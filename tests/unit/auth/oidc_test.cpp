// JWT verification for trusted publishing, with keys made by OpenSSL at test time.

#include "wheelforge/auth/oidc.hpp"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "wheelforge/util/strings.hpp"

namespace wf::auth::oidc {
namespace {

std::string b64url(std::string_view bytes) {
  return base64url_nopad_encode(bytes);
}

std::string bn_bytes(const BIGNUM* bn, int width = 0) {
  std::string out(static_cast<std::size_t>(std::max(width, BN_num_bytes(bn))), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  return out;
}

struct TestKey {
  std::shared_ptr<EVP_PKEY> pkey;
  std::string alg;
  std::string kid;

  [[nodiscard]] std::string jwk() const {
    if (alg == "RS256") {
      BIGNUM* n = nullptr;
      BIGNUM* e = nullptr;
      EVP_PKEY_get_bn_param(pkey.get(), OSSL_PKEY_PARAM_RSA_N, &n);
      EVP_PKEY_get_bn_param(pkey.get(), OSSL_PKEY_PARAM_RSA_E, &e);
      std::string out = R"({"kty":"RSA","kid":")" + kid + R"(","n":")" + b64url(bn_bytes(n)) +
                        R"(","e":")" + b64url(bn_bytes(e)) + R"("})";
      BN_free(n);
      BN_free(e);
      return out;
    }
    unsigned char point[65];
    std::size_t len = 0;
    EVP_PKEY_get_octet_string_param(pkey.get(), OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &len);
    const std::string p(reinterpret_cast<const char*>(point), len);
    return R"({"kty":"EC","crv":"P-256","kid":")" + kid + R"(","x":")" + b64url(p.substr(1, 32)) +
           R"(","y":")" + b64url(p.substr(33, 32)) + R"("})";
  }

  [[nodiscard]] std::string sign(std::string_view input) const {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, pkey.get());
    std::size_t len = 0;
    EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                   input.size());
    std::string sig(len, '\0');
    EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                   reinterpret_cast<const unsigned char*>(input.data()), input.size());
    sig.resize(len);
    EVP_MD_CTX_free(ctx);
    if (alg == "RS256") return sig;
    const auto* der = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &der, static_cast<long>(sig.size()));
    std::string raw = bn_bytes(ECDSA_SIG_get0_r(es), 32) + bn_bytes(ECDSA_SIG_get0_s(es), 32);
    ECDSA_SIG_free(es);
    return raw;
  }
};

TestKey rsa_key(std::string kid) {
  return {std::shared_ptr<EVP_PKEY>(
              EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(2048)),
              EVP_PKEY_free),
          "RS256", std::move(kid)};
}

TestKey ec_key(std::string kid) {
  return {
      std::shared_ptr<EVP_PKEY>(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free),
      "ES256", std::move(kid)};
}

/// A JWT signed by `key`; its header's alg is `alg_override` when given (even "").
std::string make_jwt(const TestKey& key, const std::string& payload,
                     const std::optional<std::string>& alg_override = std::nullopt) {
  const std::string header =
      R"({"alg":")" + alg_override.value_or(key.alg) + R"(","kid":")" + key.kid + R"("})";
  const std::string input = b64url(header) + "." + b64url(payload);
  return input + "." + b64url(key.sign(input));
}

std::string claims(std::int64_t now, const std::string& extra = "") {
  return R"({"iss":"https://issuer.example","aud":["other","wheelforge"],"sub":"repo:o/r",)"
         R"("repository":"o/r","ref":"refs/heads/main","jti":"id-1","run_attempt":2,)"
         R"("iat":)" +
         std::to_string(now) + R"(,"nbf":)" + std::to_string(now) + R"(,"exp":)" +
         std::to_string(now + 300) + extra + "}";
}

const Expectations kExpect{"https://issuer.example", "wheelforge", 1'900'000'000, 60};

TEST(Oidc, Rs256AndEs256TokensVerify) {
  for (const auto& key : {rsa_key("r1"), ec_key("e1")}) {
    const auto set = KeySet::parse(R"({"keys":[)" + key.jwk() + "]}");
    ASSERT_TRUE(set) << set.error().message;
    ASSERT_EQ(set->size(), 1U);
    const auto jwt = parse_jwt(make_jwt(key, claims(kExpect.now)));
    ASSERT_TRUE(jwt) << jwt.error().message;
    EXPECT_TRUE(set->verify(*jwt)) << key.alg;
    EXPECT_TRUE(check_claims(*jwt, kExpect));
    EXPECT_EQ(jwt->claims.at("repository"), "o/r");
    EXPECT_EQ(jwt->claims.at("run_attempt"), "2");
    EXPECT_EQ(jwt->jti, "id-1");
  }
}

TEST(Oidc, TamperedTokensAndOtherKeysFail) {
  const auto key = rsa_key("k");
  const auto other = rsa_key("k");
  const auto set = KeySet::parse(R"({"keys":[)" + key.jwk() + "]}");
  ASSERT_TRUE(set);
  const auto forged = parse_jwt(make_jwt(other, claims(kExpect.now)));
  ASSERT_TRUE(forged);
  EXPECT_FALSE(set->verify(*forged));
  // The payload swapped for another after signing.
  std::string token = make_jwt(key, claims(kExpect.now));
  const auto d1 = token.find('.');
  const auto d2 = token.find('.', d1 + 1);
  token = token.substr(0, d1 + 1) + b64url(claims(kExpect.now, R"(,"x":"y")")) + token.substr(d2);
  const auto tampered = parse_jwt(token);
  ASSERT_TRUE(tampered);
  EXPECT_FALSE(set->verify(*tampered));
}

TEST(Oidc, OnlyRs256AndEs256AreAllowed) {
  const auto key = rsa_key("k");
  const auto set = KeySet::parse(R"({"keys":[)" + key.jwk() + "]}");
  ASSERT_TRUE(set);
  for (const char* alg : {"none", "HS256", "RS512", "PS256", "ES384", ""}) {
    const auto jwt = parse_jwt(make_jwt(key, claims(kExpect.now), alg));
    ASSERT_TRUE(jwt);
    const auto st = set->verify(*jwt);
    ASSERT_FALSE(st) << alg;
    EXPECT_NE(st.error().message.find("not allowed"), std::string::npos) << st.error().message;
  }
  // An RSA key does not verify an ES256 token, whatever it says.
  const auto es = parse_jwt(make_jwt(key, claims(kExpect.now), "ES256"));
  ASSERT_TRUE(es);
  EXPECT_FALSE(set->verify(*es));
  EXPECT_FALSE(parse_alg("none"));
  EXPECT_FALSE(parse_alg("rs256"));
}

TEST(Oidc, UnknownKeyIdsAreNamed) {
  const auto key = ec_key("known");
  const auto set = KeySet::parse(R"({"keys":[)" + key.jwk() + "]}");
  ASSERT_TRUE(set);
  EXPECT_TRUE(set->has("known"));
  EXPECT_FALSE(set->has("stranger"));
  const auto stranger = ec_key("stranger");
  const auto jwt = parse_jwt(make_jwt(stranger, claims(kExpect.now)));
  ASSERT_TRUE(jwt);
  const auto st = set->verify(*jwt);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("unknown signing key"), std::string::npos);
}

TEST(Oidc, RegisteredClaimsAreChecked) {
  const auto key = rsa_key("k");
  const auto check = [&](const std::string& payload) {
    auto jwt = parse_jwt(make_jwt(key, payload));
    EXPECT_TRUE(jwt);
    const auto st = check_claims(*jwt, kExpect);
    return st ? std::string() : st.error().message;
  };
  const auto now = kExpect.now;
  EXPECT_EQ(check(claims(now)), "");
  EXPECT_NE(check(R"({"iss":"https://evil.example","aud":"wheelforge","exp":)" +
                  std::to_string(now + 60) + R"(,"jti":"x"})")
                .find("wrong issuer"),
            std::string::npos);
  EXPECT_NE(check(R"({"iss":"https://issuer.example","aud":"pypi","exp":)" +
                  std::to_string(now + 60) + R"(,"jti":"x"})")
                .find("wrong audience"),
            std::string::npos);
  const auto timed = [&](std::int64_t exp, std::int64_t nbf) {
    return check(R"({"iss":"https://issuer.example","aud":"wheelforge","jti":"x","exp":)" +
                 std::to_string(exp) + R"(,"nbf":)" + std::to_string(nbf) + "}");
  };
  EXPECT_NE(timed(now - 61, now - 600).find("expired"), std::string::npos);
  EXPECT_EQ(timed(now - 30, now - 600), "");  // within the leeway
  EXPECT_NE(timed(now + 600, now + 61).find("not valid yet"), std::string::npos);
  EXPECT_EQ(timed(now + 600, now + 30), "");
  EXPECT_NE(
      check(R"({"iss":"https://issuer.example","aud":"wheelforge","jti":"x"})").find("no expiry"),
      std::string::npos);
  EXPECT_NE(check(R"({"iss":"https://issuer.example","aud":"wheelforge","exp":)" +
                  std::to_string(now + 60) + "}")
                .find("no id"),
            std::string::npos);
}

TEST(Oidc, MalformedTokensAreInvalid) {
  for (const char* t : {"", "a.b", "a.b.c.d", "!!!.e30.", "e30.bm90IGpzb24.", "W10.e30."}) {
    const auto jwt = parse_jwt(t);
    EXPECT_FALSE(jwt) << t;
  }
  EXPECT_FALSE(KeySet::parse("[]"));
  EXPECT_FALSE(KeySet::parse(R"({"keys":{}})"));
  const auto skipped = KeySet::parse(R"({"keys":[{"kty":"oct","k":"c2VjcmV0"},)"
                                     R"({"kty":"EC","crv":"P-384","x":"AA","y":"AA"}]})");
  ASSERT_TRUE(skipped);
  EXPECT_EQ(skipped->size(), 0U);
}

TEST(Oidc, PublishersMatchEveryClaimExactly) {
  const auto key = rsa_key("k");
  const auto jwt = parse_jwt(make_jwt(key, claims(kExpect.now)));
  ASSERT_TRUE(jwt);
  catalog::PublisherRecord p;
  p.claims = {{"repository", "o/r"}, {"ref", "refs/heads/main"}};
  EXPECT_TRUE(publisher_matches(p, *jwt));
  p.claims = {{"repository", "o/r"}, {"environment", "release"}};
  EXPECT_FALSE(publisher_matches(p, *jwt));  // a claim the token lacks
  p.claims = {{"repository", "O/R"}};
  EXPECT_FALSE(publisher_matches(p, *jwt));  // exact values only
  p.claims = {};
  EXPECT_FALSE(publisher_matches(p, *jwt));  // no rules: nobody
}

TEST(Oidc, PublisherRequestsAreChecked) {
  const std::vector<std::string> issuers{"github"};
  auto ok = decode_publisher_request({{"project", "My_Pkg"},
                                      {"issuer", "github"},
                                      {"claim.repository", "o/r"},
                                      {"claim", "environment=release"}},
                                     issuers, 1);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->project, "my-pkg");
  EXPECT_EQ(ok->claims.size(), 2U);
  const auto bad = decode_publisher_request(
      {{"project", "x"}, {"issuer", "gitlab"}, {"claim.aud", "wheelforge"}, {"claim", "nope"}},
      issuers, 1);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not a configured"), std::string::npos);
  EXPECT_NE(bad.error().message.find("'aud' is not allowed"), std::string::npos);
  EXPECT_NE(bad.error().message.find("expected NAME=VALUE"), std::string::npos);
  EXPECT_FALSE(decode_publisher_request({{"project", "x"}, {"issuer", "github"}}, issuers, 1));
}

TEST(Oidc, ClaimsRoundTripThroughTheirStoredForm) {
  const std::vector<std::pair<std::string, std::string>> c{{"ref", "refs/tags/v1=2"},
                                                           {"repository", "o/r"}};
  EXPECT_EQ(catalog::decode_claims(catalog::encode_claims(c)), c);
}

}  // namespace
}  // namespace wf::auth::oidc
