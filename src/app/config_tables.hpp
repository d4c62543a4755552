#pragma once
// Internal to the app module: the pieces of the configuration loader (settings.cpp) that read
// the build runner's tables (build_config.cpp). toml++ stays inside app.

#include <toml++/toml.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/auth/attestation.hpp"
#include "wheelforge/auth/oidc.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/core/upstream.hpp"
#include "wheelforge/crypto/certificate.hpp"

namespace wf::app::detail {

/// " (did you mean 'KNOWN'?)" for the entry of `known` closest to `key` (a small edit
/// distance, or one a prefix of the other), or "" when none is close.
[[nodiscard]] std::string did_you_mean(std::string_view key,
                                       const std::vector<std::string_view>& known);

/// "unknown setting 'KEY' in WHERE" plus did_you_mean(); WHERE names the table ("[build]",
/// "[recipes.demo.matrix]") or the file for top-level keys.
[[nodiscard]] std::string unknown_key(std::string_view key, std::string_view where,
                                      const std::vector<std::string_view>& known);

/// Reads [build] and [recipes] of the parsed file into `config`, adding every problem (each
/// starts with the dotted key, e.g. "recipes.demo.timeout: ..."). Whatever could be read is
/// kept in `config` even when there are problems, so that the host can still be checked.
void read_build_tables(const toml::table& root, build::RunnerConfig& config,
                       std::vector<std::string>& problems);

/// What the host lacks of what `host` names: interpreters that do not exist or are not
/// executable files, CUDA homes that are not directories or have no executable bin/nvcc.
/// Blocks on the file system (stat, access).
[[nodiscard]] std::vector<std::string> check_build_host(const build::HostConfig& host);

/// Reads the [[upstream]] tables of the parsed file (upstream_config.cpp), adding every problem
/// (each starts with "upstream.NAME.KEY"); only tables without problems are kept. Reads password
/// files and the environment.
void read_upstream_tables(const toml::table& root, std::vector<core::UpstreamConfig>& upstreams,
                          std::vector<std::string>& problems);

/// Reads the [[oidc_issuer]] tables of the parsed file (oidc_config.cpp), adding every problem
/// (each starts with "oidc_issuer.NAME.KEY"); only tables without problems are kept.
void read_oidc_tables(const toml::table& root, std::vector<auth::oidc::IssuerConfig>& issuers,
                      std::vector<std::string>& problems);

/// The keys read_oidc_tables() accepts ("oidc_issuer.url").
[[nodiscard]] std::vector<std::string> oidc_keys();

/// The [attestations] table.
struct AttestationTable {
  std::filesystem::path trust_roots;
  std::shared_ptr<const crypto::TrustStore> roots;
  /// signing_key and signing_certificate, read and checked; null when not set.
  std::shared_ptr<const auth::BuildSigner> signer;
};

/// Reads the [attestations] table (oidc_config.cpp): trust_roots, an absolute path to a PEM
/// file of CA certificates, and signing_key with signing_certificate, absolute paths to a PEM
/// private key and its certificate; the files are read and checked here (a problem names the
/// file and what is wrong).
void read_attestations_table(const toml::table& root, AttestationTable& out,
                             std::vector<std::string>& problems);

/// The keys read_attestations_table() accepts ("attestations.trust_roots", ...).
[[nodiscard]] std::vector<std::string> attestation_keys();

/// The keys read_upstream_tables() accepts ("upstream.url").
[[nodiscard]] std::vector<std::string> upstream_keys();

/// The keys read_build_tables() accepts, as dotted paths ("build.python.*", "recipes.*.env.*").
[[nodiscard]] std::vector<std::string> build_keys();

}  // namespace wf::app::detail
