#pragma once
// The tokens the handler fuzz targets' catalogs hold (their seeds, make_seeds.py, send them):
// one per scope, and an upload token limited to the project "demo".

#include <cstdint>
#include <string_view>

#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/catalog/catalog.hpp"

namespace wf::fuzz {

inline constexpr std::string_view kAdmin = "wf_fuzzAdminTokenFuzzAdminTokenFuzzAdminToken0";
inline constexpr std::string_view kUpload = "wf_fuzzUploadTokenFuzzUploadTokenFuzzUploadTok";
inline constexpr std::string_view kRead = "wf_fuzzReadTokenFuzzReadTokenFuzzReadTokenFuzz0";
inline constexpr std::string_view kLimited = "wf_fuzzLimitedTokenFuzzLimitedTokenFuzzLimited";

/// Adds the upload, read and limited tokens (ids in that order after the admin token's, which
/// comes first when `with_admin`).
inline void add_tokens(catalog::Contents& c, bool with_admin) {
  const std::pair<std::string_view, catalog::Scope> tokens[] = {{kAdmin, catalog::Scope::admin},
                                                                {kUpload, catalog::Scope::upload},
                                                                {kRead, catalog::Scope::read},
                                                                {kLimited, catalog::Scope::upload}};
  std::int64_t id = 0;
  for (const auto& [token, scope] : tokens) {
    if (token == kAdmin && !with_admin) continue;
    catalog::TokenRecord t;
    t.id = ++id;
    t.hash = auth::hash_token(token);
    t.scope = scope;
    if (token == kLimited) t.project = "demo";
    c.tokens.push_back(t);
  }
}

}  // namespace wf::fuzz
