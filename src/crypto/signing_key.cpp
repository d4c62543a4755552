#include "wheelforge/crypto/signing_key.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>

#include "crypto/openssl_der.hpp"

namespace wf::crypto {
namespace {

EVP_PKEY* pkey_of(const std::shared_ptr<void>& p) {
  return static_cast<EVP_PKEY*>(p.get());
}

std::shared_ptr<void> own_key(EVP_PKEY* k) {
  return std::shared_ptr<void>(k, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<std::size_t>(len)) : std::string();
}

// True for the keys this server signs with: P-256, or RSA of 2048 bits or more.
bool usable(EVP_PKEY* k) {
  if (EVP_PKEY_is_a(k, "RSA") == 1) return EVP_PKEY_get_bits(k) >= 2048;
  if (EVP_PKEY_is_a(k, "EC") != 1) return false;
  char group[64] = {};
  std::size_t len = 0;
  return EVP_PKEY_get_group_name(k, group, sizeof group, &len) == 1 &&
         (std::strcmp(group, "prime256v1") == 0 || std::strcmp(group, "P-256") == 0);
}

bool add_extension(X509* x, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool added = X509_add_ext(x, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return added;
}

}  // namespace

Result<SigningKey> SigningKey::generate() {
  EVP_PKEY* k = EVP_EC_gen("P-256");
  if (k == nullptr) return make_error(Errc::internal, "cannot generate a P-256 key");
  return SigningKey(own_key(k));
}

Result<SigningKey> SigningKey::from_pem(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return make_error(Errc::internal, "out of memory reading PEM");
  // No passphrase callback input: an encrypted key fails here instead of prompting.
  EVP_PKEY* k = PEM_read_bio_PrivateKey(
      bio, nullptr, [](char*, int, int, void*) { return 0; }, nullptr);
  BIO_free(bio);
  if (k == nullptr) {
    return make_error(Errc::invalid, "no unencrypted PEM private key in it");
  }
  if (!usable(k)) {
    EVP_PKEY_free(k);
    return make_error(Errc::invalid,
                      "the private key is neither P-256 (ECDSA) nor RSA of 2048 bits or more");
  }
  return SigningKey(own_key(k));
}

std::string SigningKey::private_pem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  std::string out;
  if (PEM_write_bio_PrivateKey(bio, pkey_of(pkey_), nullptr, nullptr, 0, nullptr, nullptr) == 1) {
    out = bio_text(bio);
  }
  BIO_free(bio);
  return out;
}

std::string SigningKey::public_key_der() const {
  return detail::der_of(pkey_of(pkey_), i2d_PUBKEY);
}

Result<std::string> SigningKey::sign(std::string_view message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return make_error(Errc::internal, "out of memory signing");
  std::string out;
  std::size_t len = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(message.data());
  bool ok = EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, pkey_of(pkey_)) == 1 &&
            EVP_DigestSign(ctx, nullptr, &len, in, message.size()) == 1;
  if (ok) {
    out.resize(len);
    ok = EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(out.data()), &len, in,
                        message.size()) == 1;
    out.resize(len);
  }
  EVP_MD_CTX_free(ctx);
  if (!ok) return make_error(Errc::internal, "signing failed");
  return out;
}

Result<std::string> SigningKey::self_signed_certificate(std::string_view common_name,
                                                        std::string_view uri, std::int64_t now,
                                                        int days) const {
  X509* x = X509_new();
  if (x == nullptr) return make_error(Errc::internal, "out of memory making a certificate");
  EVP_PKEY* k = pkey_of(pkey_);
  unsigned char serial_bytes[16];
  bool ok = RAND_bytes(serial_bytes, sizeof serial_bytes) == 1;
  serial_bytes[0] &= 0x7FU;  // a positive serial number
  BIGNUM* serial = ok ? BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr) : nullptr;
  const std::string cn(common_name);
  auto at = static_cast<time_t>(now);
  X509_NAME* name = X509_get_subject_name(x);
  ok = ok && serial != nullptr && X509_set_version(x, 2) == 1 &&
       BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) != nullptr &&
       X509_time_adj_ex(X509_getm_notBefore(x), 0, -3600, &at) != nullptr &&
       X509_time_adj_ex(X509_getm_notAfter(x), days, 0, &at) != nullptr &&
       X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                  reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                  0) == 1 &&
       X509_set_issuer_name(x, name) == 1 && X509_set_pubkey(x, k) == 1;
  BN_free(serial);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
  ok = ok && add_extension(x, &v3, NID_basic_constraints, "critical,CA:FALSE") &&
       add_extension(x, &v3, NID_ext_key_usage, "codeSigning") &&
       add_extension(x, &v3, NID_subject_key_identifier, "hash") &&
       (uri.empty() || add_extension(x, &v3, NID_subject_alt_name, "URI:" + std::string(uri))) &&
       X509_sign(x, k, EVP_sha256()) > 0;
  std::string out = ok ? detail::der_of(x, i2d_X509) : std::string();
  X509_free(x);
  if (out.empty()) return make_error(Errc::internal, "cannot make a self-signed certificate");
  return out;
}

}  // namespace wf::crypto
