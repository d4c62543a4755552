#pragma once
// The configured OIDC issuers of trusted publishing and their keys: each issuer's discovery
// document and JWKS are fetched (through the Fetcher, so on a worker) when a token from it is
// first exchanged, kept, and fetched again once when a token names a key the kept set lacks.

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/auth/oidc.hpp"
#include "wheelforge/handlers/fetcher.hpp"

namespace wf::handlers {

class OidcIssuers {
 public:
  /// `fetcher` outlives this object.
  OidcIssuers(std::vector<auth::oidc::IssuerConfig> issuers, Fetcher& fetcher)
      : issuers_(std::move(issuers)), fetcher_(fetcher), cache_(issuers_.size()) {}

  [[nodiscard]] const std::vector<auth::oidc::IssuerConfig>& issuers() const { return issuers_; }
  /// The issuer whose URL is `iss`; nullptr when none is configured.
  [[nodiscard]] const auth::oidc::IssuerConfig* by_url(std::string_view iss) const;
  /// The issuer's keys: the kept set, or (none kept, or `refresh`) a fresh one from its JWKS.
  /// Errc::unavailable when the issuer cannot be reached or answers nonsense. Blocks: call
  /// from a worker. Thread-safe.
  [[nodiscard]] Result<auth::oidc::KeySet> keys(const auth::oidc::IssuerConfig& issuer,
                                                bool refresh);

 private:
  struct Cached {
    bool loaded = false;
    auth::oidc::KeySet keys;
  };
  Result<std::string> fetch_json(const std::string& url, std::string_view what);

  std::vector<auth::oidc::IssuerConfig> issuers_;
  Fetcher& fetcher_;
  std::mutex mu_;
  std::vector<Cached> cache_;
};

}  // namespace wf::handlers
