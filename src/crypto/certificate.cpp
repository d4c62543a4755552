#include "wheelforge/crypto/certificate.hpp"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cstring>

#include "crypto/openssl_der.hpp"

namespace wf::crypto {
namespace {

X509* x509_of(const std::shared_ptr<void>& p) {
  return static_cast<X509*>(p.get());
}

std::shared_ptr<void> own(X509* x) {
  return std::shared_ptr<void>(x, [](void* p) { X509_free(static_cast<X509*>(p)); });
}

std::string text_of(const ASN1_STRING* s) {
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
          static_cast<std::size_t>(ASN1_STRING_length(s))};
}

std::int64_t seconds_of(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::vector<std::string> san_of(X509* x, int type) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == type) out.push_back(text_of(name->d.ia5));
  }
  GENERAL_NAMES_free(names);
  return out;
}

}  // namespace

Result<Certificate> Certificate::from_der(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  X509* x = d2i_X509(nullptr, &p, static_cast<long>(der.size()));
  if (x == nullptr) return make_error(Errc::invalid, "not a DER X.509 certificate");
  if (p != reinterpret_cast<const unsigned char*>(der.data()) + der.size()) {
    X509_free(x);
    return make_error(Errc::invalid, "bytes after the DER X.509 certificate");
  }
  return Certificate(own(x));
}

Result<std::vector<Certificate>> Certificate::from_pem(std::string_view pem) {
  std::vector<Certificate> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return make_error(Errc::internal, "out of memory reading PEM");
  while (true) {
    X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (x == nullptr) break;
    out.push_back(Certificate(own(x)));
  }
  BIO_free(bio);
  // The loop ends at the end of the text or at a block that is not a certificate: the text
  // after the last certificate read says which.
  const std::size_t blocks = [&] {
    std::size_t n = 0;
    for (std::size_t at = pem.find("-----BEGIN "); at != std::string_view::npos;
         at = pem.find("-----BEGIN ", at + 1)) {
      ++n;
    }
    return n;
  }();
  if (out.empty()) return make_error(Errc::invalid, "no PEM certificate in it");
  if (blocks != out.size()) {
    return make_error(Errc::invalid,
                      "PEM block " + std::to_string(out.size() + 1) + " is not a certificate");
  }
  return out;
}

std::optional<std::string> Certificate::text_extension(std::string_view oid) const {
  X509* x = x509_of(x509_);
  ASN1_OBJECT* obj = OBJ_txt2obj(std::string(oid).c_str(), 1);
  if (obj == nullptr) return std::nullopt;
  const int at = X509_get_ext_by_OBJ(x, obj, -1);
  ASN1_OBJECT_free(obj);
  if (at < 0) return std::nullopt;
  const std::string raw = text_of(X509_EXTENSION_get_data(X509_get_ext(x, at)));
  // A DER UTF8String (tag 0x0c) whose length covers the rest; anything else is the raw text.
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
  long length = 0;
  int tag = 0;
  int cls = 0;
  const int info = ASN1_get_object(&p, &length, &tag, &cls, static_cast<long>(raw.size()));
  if ((info & 0x80) == 0 && tag == V_ASN1_UTF8STRING && cls == V_ASN1_UNIVERSAL &&
      p + length == reinterpret_cast<const unsigned char*>(raw.data()) + raw.size()) {
    return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(length));
  }
  return raw;
}

std::vector<std::string> Certificate::san_uris() const {
  return san_of(x509_of(x509_), GEN_URI);
}

std::vector<std::string> Certificate::san_emails() const {
  return san_of(x509_of(x509_), GEN_EMAIL);
}

std::string Certificate::subject() const {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  X509_NAME_print_ex(bio, X509_get_subject_name(x509_of(x509_)), 0, XN_FLAG_ONELINE);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  return out;
}

std::int64_t Certificate::not_before() const {
  return seconds_of(X509_get0_notBefore(x509_of(x509_)));
}

std::int64_t Certificate::not_after() const {
  return seconds_of(X509_get0_notAfter(x509_of(x509_)));
}

std::string Certificate::describe() const {
  if (auto uris = san_uris(); !uris.empty()) return uris.front();
  if (auto emails = san_emails(); !emails.empty()) return emails.front();
  return "\"" + subject() + "\"";
}

std::string Certificate::der() const {
  return detail::der_of(x509_of(x509_), i2d_X509);
}

std::string Certificate::pem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  std::string out;
  if (PEM_write_bio_X509(bio, x509_of(x509_)) == 1) {
    char* data = nullptr;
    const long len = BIO_get_mem_data(bio, &data);
    if (len > 0) out.assign(data, static_cast<std::size_t>(len));
  }
  BIO_free(bio);
  return out;
}

std::string Certificate::public_key_der() const {
  return detail::der_of(X509_get0_pubkey(x509_of(x509_)), i2d_PUBKEY);
}

bool Certificate::for_code_signing() const {
  X509* x = x509_of(x509_);
  return (X509_get_extension_flags(x) & EXFLAG_XKUSAGE) != 0 &&
         (X509_get_extended_key_usage(x) & XKU_CODE_SIGN) != 0;
}

bool Certificate::verify(std::string_view message, std::string_view signature) const {
  EVP_PKEY* key = X509_get0_pubkey(x509_of(x509_));
  if (key == nullptr) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return false;
  const bool ok =
      EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

Result<TrustStore> TrustStore::from_pem(std::string_view pem) {
  auto certificates = Certificate::from_pem(pem);
  if (!certificates) return certificates.error();
  TrustStore store;
  store.certificates_ = std::move(*certificates);
  return store;
}

Status TrustStore::verify(const Certificate& leaf, std::span<const Certificate> intermediates,
                          std::int64_t at) const {
  X509_STORE* store = X509_STORE_new();
  STACK_OF(X509)* untrusted = sk_X509_new_null();
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  Status result = make_error(Errc::internal, "out of memory verifying a certificate");
  if (store != nullptr && untrusted != nullptr && ctx != nullptr) {
    for (const Certificate& c : certificates_) X509_STORE_add_cert(store, x509_of(c.x509_));
    for (const Certificate& c : intermediates) sk_X509_push(untrusted, x509_of(c.x509_));
    if (X509_STORE_CTX_init(ctx, store, x509_of(leaf.x509_), untrusted) == 1) {
      X509_STORE_CTX_set_time(ctx, 0, static_cast<time_t>(at));
      if (X509_verify_cert(ctx) == 1) {
        result = ok_status();
      } else {
        const int err = X509_STORE_CTX_get_error(ctx);
        result = make_error(Errc::unauthorized, "the certificate of " + leaf.describe() +
                                                    " does not chain to a trusted root: " +
                                                    X509_verify_cert_error_string(err));
      }
    }
  }
  X509_STORE_CTX_free(ctx);
  sk_X509_free(untrusted);
  X509_STORE_free(store);
  return result;
}

}  // namespace wf::crypto
