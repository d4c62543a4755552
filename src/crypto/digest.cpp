#include "wheelforge/crypto/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <optional>
#include <stdexcept>

#include "wheelforge/crypto/blake2b.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::crypto {

// Exactly one of the two is in use: OpenSSL for what it offers, our own BLAKE2b otherwise.
struct Hasher::Impl {
  EVP_MD_CTX* ctx = nullptr;
  std::optional<Blake2b> blake2b;
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

namespace {
const EVP_MD* md_for(Algorithm a) {
  switch (a) {
    case Algorithm::sha256:
      return EVP_sha256();
    case Algorithm::md5:
      return EVP_md5();
    case Algorithm::blake2b_256:
      return nullptr;
  }
  return nullptr;
}
}  // namespace

Hasher::Hasher(Algorithm algorithm) : impl_(std::make_unique<Impl>()) {
  if (algorithm == Algorithm::blake2b_256) {
    impl_->blake2b.emplace(32);
    return;
  }
  impl_->ctx = EVP_MD_CTX_new();
  const EVP_MD* md = md_for(algorithm);
  if (impl_->ctx == nullptr || md == nullptr || EVP_DigestInit_ex(impl_->ctx, md, nullptr) != 1) {
    throw std::runtime_error("cannot initialise message digest");
  }
}

Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;
Hasher::~Hasher() = default;

void Hasher::update(std::string_view bytes) {
  update(bytes.data(), bytes.size());
}

void Hasher::update(const void* data, std::size_t size) {
  if (impl_->blake2b) {
    impl_->blake2b->update(data, size);
    return;
  }
  EVP_DigestUpdate(impl_->ctx, data, size);
}

std::string Hasher::finish() {
  if (impl_->blake2b) return impl_->blake2b->finish();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Hasher::finish_hex() {
  return hex_encode(finish());
}

std::string sha256_raw(std::string_view bytes) {
  Hasher h(Algorithm::sha256);
  h.update(bytes);
  return h.finish();
}

std::string sha256_hex(std::string_view bytes) {
  return hex_encode(sha256_raw(bytes));
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &len) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  return out;
}

bool constant_time_equals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace wf::crypto
