#pragma once
// The DER bytes of an OpenSSL object, through its i2d_ function (crypto's own sources only).

#include <openssl/crypto.h>

#include <string>

namespace wf::crypto::detail {

/// `encode(value, &out)`'s bytes; "" when it fails.
template <typename T, typename Encode>
std::string der_of(T* value, Encode encode) {
  unsigned char* der = nullptr;
  const int len = encode(value, &der);
  std::string out;
  if (len > 0) out.assign(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len));
  OPENSSL_free(der);
  return out;
}

}  // namespace wf::crypto::detail
