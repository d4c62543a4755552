#include "wheelforge/crypto/signature.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <string>

namespace wf::crypto {
namespace {

struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Bn = std::unique_ptr<BIGNUM, BnFree>;

Bn bn_of(std::string_view bytes) {
  return Bn(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                      static_cast<int>(bytes.size()), nullptr));
}

std::shared_ptr<void> key_from_params(const char* type, OSSL_PARAM_BLD* bld) {
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr);
  EVP_PKEY* pkey = nullptr;
  if (params != nullptr && ctx != nullptr && EVP_PKEY_fromdata_init(ctx) > 0) {
    if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0) pkey = nullptr;
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  if (pkey == nullptr) return nullptr;
  return std::shared_ptr<void>(pkey, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
}

// The DER form of an ES256 signature (r||s, 32 bytes each); "" when it is not 64 bytes.
std::string der_of_raw_ecdsa(std::string_view raw) {
  if (raw.size() != 64) return {};
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (sig == nullptr) return {};
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data() + 32), 32, nullptr);
  if (r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return {};
  }
  unsigned char* der = nullptr;
  const int len = i2d_ECDSA_SIG(sig, &der);
  std::string out;
  if (len > 0) out.assign(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len));
  OPENSSL_free(der);
  ECDSA_SIG_free(sig);
  return out;
}

}  // namespace

std::optional<PublicKey> PublicKey::rsa(std::string_view n, std::string_view e) {
  const Bn bn_n = bn_of(n);
  const Bn bn_e = bn_of(e);
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  std::shared_ptr<void> key;
  if (bld != nullptr && bn_n && bn_e &&
      OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n.get()) > 0 &&
      OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e.get()) > 0) {
    key = key_from_params("RSA", bld);
  }
  OSSL_PARAM_BLD_free(bld);
  if (!key) return std::nullopt;
  return PublicKey(SignatureAlg::rs256, std::move(key));
}

std::optional<PublicKey> PublicKey::p256(std::string_view x, std::string_view y) {
  if (x.size() != 32 || y.size() != 32) return std::nullopt;
  std::string point = "\x04";
  point.append(x);
  point.append(y);
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  std::shared_ptr<void> key;
  if (bld != nullptr &&
      OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) > 0 &&
      OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) >
          0) {
    key = key_from_params("EC", bld);
  }
  OSSL_PARAM_BLD_free(bld);
  if (!key) return std::nullopt;
  return PublicKey(SignatureAlg::es256, std::move(key));
}

bool PublicKey::verify(std::string_view input, std::string_view signature) const {
  std::string der;
  if (alg_ == SignatureAlg::es256) {
    der = der_of_raw_ecdsa(signature);
    if (der.empty()) return false;
    signature = der;
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return false;
  auto* pkey = static_cast<EVP_PKEY*>(pkey_.get());
  const bool ok =
      EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, pkey) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(input.data()),
                       input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

}  // namespace wf::crypto
