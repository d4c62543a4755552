#pragma once
// Certificates made with OpenSSL at test time: a root CA, an intermediate CA and Fulcio-style
// signing certificates (code signing, a SAN URI, claim extensions as DER UTF8Strings).

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace wf::testing {

using Key = std::shared_ptr<EVP_PKEY>;
using Cert = std::shared_ptr<X509>;

inline Key make_p256_key() {
  return Key(EVP_EC_gen("P-256"), EVP_PKEY_free);
}

inline Key make_rsa_key() {
  return Key(EVP_RSA_gen(2048), EVP_PKEY_free);
}

struct CertSpec {
  std::string common_name;  ///< "": an empty subject (as Fulcio's signing certificates have)
  bool ca = false;
  bool code_signing = true;
  std::vector<std::string> san_uris;
  std::vector<std::string> san_emails;
  /// Extensions whose contents are a DER UTF8String of the value: {oid, value}.
  std::vector<std::pair<std::string, std::string>> utf8_extensions;
  /// Extensions whose contents are the raw value (Fulcio's .1.1 to .1.6).
  std::vector<std::pair<std::string, std::string>> raw_extensions;
  std::int64_t not_before = std::time(nullptr) - 60;
  std::int64_t not_after = std::time(nullptr) + 600;
};

inline void add_conf_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

inline void add_raw_extension(X509* cert, const std::string& oid, const std::string& contents) {
  ASN1_OBJECT* obj = OBJ_txt2obj(oid.c_str(), 1);
  ASN1_OCTET_STRING* data = ASN1_OCTET_STRING_new();
  ASN1_OCTET_STRING_set(data, reinterpret_cast<const unsigned char*>(contents.data()),
                        static_cast<int>(contents.size()));
  X509_EXTENSION* ext = X509_EXTENSION_create_by_OBJ(nullptr, obj, 0, data);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  ASN1_OCTET_STRING_free(data);
  ASN1_OBJECT_free(obj);
}

inline std::string der_utf8(const std::string& value) {
  ASN1_UTF8STRING* s = ASN1_UTF8STRING_new();
  ASN1_STRING_set(s, value.data(), static_cast<int>(value.size()));
  unsigned char* der = nullptr;
  const int len = i2d_ASN1_UTF8STRING(s, &der);
  std::string out(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len));
  OPENSSL_free(der);
  ASN1_UTF8STRING_free(s);
  return out;
}

/// A certificate of `key` for `spec`, signed by `issuer_key` as `issuer` (nullptr: self-signed).
inline Cert make_cert(const CertSpec& spec, const Key& key, const Cert& issuer,
                      const Key& issuer_key) {
  static long serial = 1;
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  ASN1_TIME_set(X509_getm_notBefore(x), static_cast<time_t>(spec.not_before));
  ASN1_TIME_set(X509_getm_notAfter(x), static_cast<time_t>(spec.not_after));
  X509_NAME* name = X509_get_subject_name(x);
  if (!spec.common_name.empty()) {
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1,
                               -1, 0);
  }
  X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer.get()) : name);
  X509_set_pubkey(x, key.get());
  X509* signer = issuer ? issuer.get() : x;
  if (spec.ca) {
    add_conf_extension(x, signer, NID_basic_constraints, "critical,CA:TRUE");
    add_conf_extension(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_conf_extension(x, signer, NID_key_usage, "critical,digitalSignature");
    if (spec.code_signing) add_conf_extension(x, signer, NID_ext_key_usage, "codeSigning");
  }
  add_conf_extension(x, signer, NID_subject_key_identifier, "hash");
  add_conf_extension(x, signer, NID_authority_key_identifier, "keyid:always");
  std::string san;
  for (const std::string& u : spec.san_uris) san += (san.empty() ? "URI:" : ",URI:") + u;
  for (const std::string& e : spec.san_emails) san += (san.empty() ? "email:" : ",email:") + e;
  if (!san.empty()) {
    add_conf_extension(x, signer, NID_subject_alt_name,
                       (spec.common_name.empty() ? "critical," : "") + san);
  }
  for (const auto& [oid, value] : spec.utf8_extensions) add_raw_extension(x, oid, der_utf8(value));
  for (const auto& [oid, value] : spec.raw_extensions) add_raw_extension(x, oid, value);
  X509_sign(x, issuer_key.get(), EVP_sha256());
  return Cert(x, X509_free);
}

inline std::string der_of(const Cert& c) {
  unsigned char* der = nullptr;
  const int len = i2d_X509(c.get(), &der);
  std::string out(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len));
  OPENSSL_free(der);
  return out;
}

inline std::string pem_of(const Cert& c) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, c.get());
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  return out;
}

/// The SHA-256 signature of `message` under `key` (ECDSA: its DER form).
inline std::string sign(const Key& key, const std::string& message) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key.get());
  std::size_t len = 0;
  EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(message.data()),
                 message.size());
  std::string out(len, '\0');
  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(out.data()), &len,
                 reinterpret_cast<const unsigned char*>(message.data()), message.size());
  out.resize(len);
  EVP_MD_CTX_free(ctx);
  return out;
}

/// A CA certificate's spec.
inline CertSpec ca_spec(std::string name) {
  CertSpec spec;
  spec.common_name = std::move(name);
  spec.ca = true;
  return spec;
}

/// A root CA, an intermediate CA under it, and their keys.
struct TestPki {
  Key root_key = make_p256_key();
  Cert root = make_cert(ca_spec("wheelforge test root"), root_key, nullptr, root_key);
  Key intermediate_key = make_p256_key();
  Cert intermediate =
      make_cert(ca_spec("wheelforge test intermediate"), intermediate_key, root, root_key);

  /// The bundle an operator configures: the root and the intermediate.
  [[nodiscard]] std::string trust_pem() const { return pem_of(root) + pem_of(intermediate); }
  /// A signing certificate for `key` issued by the intermediate.
  [[nodiscard]] Cert leaf(const CertSpec& spec, const Key& key) const {
    return make_cert(spec, key, intermediate, intermediate_key);
  }
};

}  // namespace wf::testing
