#pragma once
// The configured OIDC issuers of trusted publishing and their keys: each issuer's discovery
// document and JWKS are fetched (through the Fetcher, so on a worker) when a token from it is
// first exchanged, kept, and fetched again when a token names a key the kept set lacks: at most
// once per the issuer's jwks_refetch_interval, so tokens with made-up key ids cost no fetch.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/auth/oidc.hpp"
#include "wheelforge/handlers/fetcher.hpp"

namespace wf::handlers {

/// What OidcIssuers::keys() may fetch.
enum class KeyFetch : std::uint8_t {
  kept,         ///< the kept keys; fetched only when none are kept yet
  unknown_key,  ///< fetched again, unless the last fetch began less than the interval ago
};

class OidcIssuers {
 public:
  /// `fetcher` outlives this object.
  OidcIssuers(std::vector<auth::oidc::IssuerConfig> issuers, Fetcher& fetcher)
      : issuers_(std::move(issuers)), fetcher_(fetcher), cache_(issuers_.size()) {}

  [[nodiscard]] const std::vector<auth::oidc::IssuerConfig>& issuers() const { return issuers_; }
  /// The issuer whose URL is `iss`; nullptr when none is configured.
  [[nodiscard]] const auth::oidc::IssuerConfig* by_url(std::string_view iss) const;
  /// The issuer's keys: the kept set, or a fresh one from its JWKS when none is kept, or when
  /// `how` is KeyFetch::unknown_key and the last fetch began at least the issuer's
  /// jwks_refetch_interval ago (concurrent callers within the interval get the kept set).
  /// Errc::unavailable when the issuer cannot be reached or answers nonsense. Blocks: call
  /// from a worker. Thread-safe.
  [[nodiscard]] Result<auth::oidc::KeySet> keys(const auth::oidc::IssuerConfig& issuer,
                                                KeyFetch how);

 private:
  struct Cached {
    bool loaded = false;
    auth::oidc::KeySet keys;
    /// When the last fetch began (steady clock); nullopt before the first.
    std::optional<std::chrono::steady_clock::time_point> fetched;
  };
  Result<std::string> fetch_json(const std::string& url, std::string_view what);

  std::vector<auth::oidc::IssuerConfig> issuers_;
  Fetcher& fetcher_;
  std::mutex mu_;
  std::vector<Cached> cache_;
};

}  // namespace wf::handlers
