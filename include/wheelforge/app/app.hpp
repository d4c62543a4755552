#pragma once
// The composition root: settings, logging, opening the data directory, and the commands
// that the CLI exposes. Each command returns a process exit code.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wheelforge/auth/attestation.hpp"
#include "wheelforge/auth/oidc.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/core/build.hpp"
#include "wheelforge/core/records.hpp"
#include "wheelforge/core/upstream.hpp"
#include "wheelforge/crypto/certificate.hpp"
#include "wheelforge/http/client_address.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::app {

/// Values given on the command line, as typed; unset ones fall back to the environment, the
/// configuration file, then the defaults. One field per setting of Settings.
struct Overrides {
  std::optional<std::string> data_dir;
  std::optional<std::string> catalog;
  std::optional<std::string> listen;
  std::optional<std::string> max_upload_size;
  std::optional<std::string> max_inflated_size;
  std::optional<std::string> max_compression_ratio;
  std::optional<std::string> max_archive_members;
  std::optional<std::string> worker_threads;
  std::optional<std::string> network_threads;
  std::optional<std::string> read_timeout;
  std::optional<std::string> first_byte_timeout;
  std::optional<std::string> min_upload_rate;
  std::optional<std::string> idle_timeout;
  std::optional<std::string> max_connections;
  std::optional<std::string> max_connections_per_client;
  std::optional<std::string> trusted_proxies;
  std::optional<std::string> forwarded_header;
  std::optional<std::string> shutdown_grace;
  std::optional<std::string> access_log;
  std::optional<std::string> private_reads;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> base_url;
  std::optional<std::string> upstream_page_cache;
  std::optional<std::string> upstream_file_cache;
  std::optional<std::string> upstream_page_disk_cache;
  std::optional<std::string> blob_store;
  std::optional<std::string> file_serving;
  std::optional<std::string> blob_cache;
};

/// The [s3] table: the object store that `blob_store = "s3://BUCKET/PREFIX"` names
/// (docs/configuration.md, docs/storage.md). Read from the file only.
struct S3Settings {
  /// Scheme, host and port of the S3 API; empty: AWS's for the region
  /// (https://s3.REGION.amazonaws.com).
  std::string endpoint;
  std::string region = "us-east-1";
  /// "path" (https://ENDPOINT/BUCKET/KEY) or "virtual" (https://BUCKET.ENDPOINT/KEY).
  std::string addressing = "path";
  /// Credentials: this key id with the secret in `secret_access_key_file`; when unset, the
  /// environment's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN).
  std::string access_key_id;
  std::string secret_access_key_file;
  /// How long the presigned URLs of file_serving = "redirect" are valid.
  std::chrono::seconds presign_expiry{300};
  /// Resolved when the configuration is loaded with an S3 blob store; secrets (registered
  /// for redaction, never printed).
  std::string secret_access_key;
  std::string session_token;
  /// Where the credentials came from, for `config check`: "[s3]" or "environment".
  std::string credentials_from;
};

/// The effective configuration. A new setting is a field here, one in Overrides and one row
/// in the table in settings.cpp (which derives its TOML key, WHEELFORGE_* variable and flag).
struct Settings {
  std::filesystem::path data_dir = "data";
  /// Where the catalog lives (docs/storage.md, "Catalog backends"): "sqlite" (DATA_DIR/
  /// wheelforge.db) or a libpq URI "postgresql://USER:PASSWORD@HOST:PORT/DBNAME".
  std::string catalog = "sqlite";
  std::string listen = "127.0.0.1:8080";
  std::uint64_t max_upload_size = 8ULL * 1024 * 1024 * 1024;
  /// The archive policy for uploads and imports (docs/security.md): the largest total of the
  /// member sizes an archive declares (a torch CUDA wheel: 2 to 4 GiB), the largest ratio of
  /// that total to the file's size (judged above 16 MiB inflated; real wheels: 2 to 10), and
  /// the most members.
  std::uint64_t max_inflated_size = 16ULL * 1024 * 1024 * 1024;
  std::size_t max_compression_ratio = 100;
  std::size_t max_archive_members = 200'000;
  /// Threads for blocking work (SQLite, hashing, archive reads, fsync); 1..64.
  std::size_t worker_threads = 2;
  /// Threads that serve connections; 0 (the default): one per CPU core. 0..64.
  std::size_t network_threads = 0;
  /// Deadline for a request's headers and for each chunk of an upload body.
  std::chrono::seconds read_timeout{30};
  /// A new connection that sends no byte within this is closed (plain and TLS), so that
  /// silent sockets do not hold places under max_connections for the whole read_timeout.
  std::chrono::seconds first_byte_timeout{10};
  /// Slowest accepted upload, in bytes/s, averaged over each read_timeout spent waiting for
  /// the client; 0 turns the check off.
  std::uint64_t min_upload_rate = 1024;
  /// How long an idle keep-alive connection is kept.
  std::chrono::seconds idle_timeout{60};
  /// Connections served at once; at the cap connections that have sent no whole request yet
  /// are closed first (oldest first), then idle keep-alive ones, then new ones answered 503
  /// with Retry-After.
  std::size_t max_connections = 1024;
  /// Connections served at once from one client address (an IPv6 /64), so that one client
  /// cannot take them all; more are answered 503 with Retry-After.
  std::size_t max_connections_per_client = 256;
  /// Load balancers and reverse proxies whose `forwarded_header` names the client
  /// (docs/configuration.md, "Behind a load balancer"). Empty: nobody's header is believed.
  http::TrustedProxies trusted_proxies;
  /// The header they write: X-Forwarded-For or Forwarded (RFC 7239).
  http::ForwardedHeader forwarded_header = http::ForwardedHeader::x_forwarded_for;
  /// How long a graceful stop waits for in-flight requests.
  std::chrono::seconds shutdown_grace{10};
  /// One log line per request.
  bool access_log = true;
  /// Every read needs a token of scope read (or higher); 401 with WWW-Authenticate otherwise.
  bool private_reads = false;
  /// HTTPS: PEM certificate chain and private key files (re-read on SIGHUP); both empty: HTTP.
  std::string tls_cert;
  std::string tls_key;
  /// The URL this server is reached at ("https://wheels.example.com", a path prefix allowed,
  /// no trailing slash): what {server} stands for in the build runner's torch_index, and
  /// where `wheelforge build` finds the server. Empty: derived from `listen` (server_url()).
  std::string base_url;
  /// The memory the upstream pages kept in memory may take (docs/upstreams.md); the disk
  /// copy under DATA_DIR/upstream/pages is not bounded by it.
  std::uint64_t upstream_page_cache = 64ULL * 1024 * 1024;
  /// The bound on the bytes of files kept from upstreams (docs/upstreams.md): beyond it the
  /// least recently used are evicted (never a local file's blob). 0: no bound.
  std::uint64_t upstream_file_cache = 0;
  /// Bound on the disk copies of upstream pages (docs/upstreams.md); 0: none.
  std::uint64_t upstream_page_disk_cache = 1ULL << 30U;
  /// Where the blobs live (docs/storage.md): "file" (DATA_DIR/blobs) or "s3://BUCKET/PREFIX"
  /// (the object store of the [s3] table, with a local read cache under DATA_DIR/cache).
  std::string blob_store = "file";
  /// With an S3 blob store: "redirect" (302 to a presigned GET) or "proxy" (the server sends
  /// the bytes from its read cache). Ignored with the file backend (files are sent from disk).
  std::string file_serving = "redirect";
  /// The bound on the local read cache of an S3 blob store (DATA_DIR/cache/blobs).
  std::uint64_t blob_cache = 2ULL << 30U;
  /// The [s3] table.
  S3Settings s3;

  /// Where these settings came from, so that a reload (SIGHUP) can load them again:
  /// check_configuration(settings.config_file, settings.overrides).
  std::optional<std::filesystem::path> config_file;
  Overrides overrides;
};

/// Read when no --config is given and the file exists.
inline constexpr const char* kDefaultConfigFile = "/etc/wheelforge/wheelforge.toml";

/// The configuration file to read: `given` when set (check_configuration then fails if it is
/// missing), else kDefaultConfigFile when it exists, else none.
[[nodiscard]] std::optional<std::filesystem::path> resolve_config_file(
    const std::optional<std::string>& given);

/// The whole configuration file, read once: the server's settings (top-level keys, with the
/// environment and flags over them) and the build runner's [build] and [recipes] tables.
struct Configuration {
  Settings settings;
  /// [build] and [recipes]; no recipes leaves the runner off.
  build::RunnerConfig build;
  /// [[upstream]] tables, in file order; none by default (docs/upstreams.md).
  std::vector<core::UpstreamConfig> upstreams;
  /// [[oidc_issuer]] tables, in file order; none by default (docs/publishing.md).
  std::vector<auth::oidc::IssuerConfig> oidc_issuers;
  /// [attestations] trust_roots: the PEM file, and the certificates read from it, that the
  /// signing certificates of uploaded attestations must chain to; none by default, and then
  /// uploads with attestations are refused (docs/publishing.md, "Attestations").
  std::filesystem::path attestation_trust_roots;
  std::shared_ptr<const crypto::TrustStore> attestation_roots;
  /// [attestations] signing_key and signing_certificate: what signs the provenance of the build
  /// runner's wheels. Null when they are not set: the server's own key in DATA_DIR/keys, made on
  /// first use (docs/runner.md, "Provenance").
  std::shared_ptr<const auth::BuildSigner> build_signer;
};

/// The outcome of loading the configuration.
struct ConfigCheck {
  /// Set when `problems` is empty.
  std::optional<Configuration> config;
  /// What makes the configuration unusable, every one of them: syntax errors, unknown keys
  /// (with the table they are in and the closest known key), wrongly typed or invalid values,
  /// invalid recipes and matrices, matrix values without a configured interpreter or CUDA
  /// toolkit. Each starts with the key's name (or "unknown setting") and says where the value
  /// came from when that is not the file.
  std::vector<std::string> problems;
  /// What [build] names that this host lacks: an interpreter that does not exist or is not
  /// executable, a CUDA home without bin/nvcc. Problems for `config check`; warnings for
  /// serve, its reload and `wheelforge build` (jobs of the cells that need them fail).
  /// Checked even when there are other problems.
  std::vector<std::string> host_problems;
};

/// Reads the configuration: defaults, then the TOML file (if given, parsed once), then
/// WHEELFORGE_* environment variables (an empty one counts as unset), then the overrides.
/// Unknown keys and wrongly typed values in the file are problems even when overridden;
/// values are validated once the winner is known. A valid configuration's secrets (upstream
/// passwords, the credentials of recipes' git sources) are registered for redaction
/// (util/redact.hpp). Blocks on the file system (the file, and the interpreters and CUDA homes
/// [build] names).
[[nodiscard]] ConfigCheck check_configuration(
    const std::optional<std::filesystem::path>& config_file, const Overrides& overrides);

/// check_configuration() as a Result: every problem, joined with "; ", in one invalid error.
/// Host problems are not errors here (see ConfigCheck).
[[nodiscard]] Result<Configuration> load_configuration(
    const std::optional<std::filesystem::path>& config_file, const Overrides& overrides);

/// What the build host lacks of what `host` names (ConfigCheck::host_problems). Blocks on the
/// file system.
[[nodiscard]] std::vector<std::string> build_host_problems(const build::HostConfig& host);

/// Every key the configuration file accepts, as dotted paths in file order: "listen",
/// "build.torch_index", "build.python.*" (a table of user-named entries),
/// "recipes.*.source.git", "recipes.*.matrix.exclude.torch", ... (documentation checks).
[[nodiscard]] std::vector<std::string> configuration_keys();

/// The settings as a TOML document that check_configuration() reads back to the same values.
/// Settings marked secret in the table are shown as a comment without their value.
[[nodiscard]] std::string settings_to_toml(const Settings& settings);

/// A short description of the build runner's configuration, as TOML comment lines
/// ("# build runner: ..."), for `config check`.
[[nodiscard]] std::string build_summary(const build::RunnerConfig& build);

/// The upstreams as TOML comment lines ("# upstream pypi: https://pypi.org/simple/, ..."), for
/// `config check`; never a password.
[[nodiscard]] std::string upstream_summary(const std::vector<core::UpstreamConfig>& upstreams);

/// The [[oidc_issuer]] tables as TOML comment lines ("# oidc_issuer github: URL, audience ...,
/// keys from ..., jwks_refetch_interval 60s"), for `config check`.
[[nodiscard]] std::string oidc_summary(const std::vector<auth::oidc::IssuerConfig>& issuers);

/// The URL the server described by `settings` is reached at: base_url when set, else
/// http(s)://HOST:PORT from `listen` (https when tls_cert is set; a wildcard host 0.0.0.0 or
/// [::] becomes the loopback address of its family). Fails with invalid when listen has port 0
/// (the port is only known once the server runs) and base_url is empty.
[[nodiscard]] Result<std::string> server_url(const Settings& settings);

/// "30s", "2m", "1h", "1m30s", or a bare number of seconds -> seconds.
[[nodiscard]] std::optional<std::chrono::seconds> parse_duration(std::string_view text);

/// true/false, yes/no, on/off, 1/0 (any case).
[[nodiscard]] std::optional<bool> parse_bool(std::string_view text);

/// `text` as a TOML basic string, quotes included.
[[nodiscard]] std::string toml_quote(std::string_view text);

/// "123", "64K", "512M", "8G" (binary multiples) -> bytes.
[[nodiscard]] std::optional<std::uint64_t> parse_size(std::string_view text);

/// The bucket and key prefix of a blob_store URL.
struct BlobStoreUrl {
  std::string bucket;
  std::string prefix;  ///< without leading or trailing '/'; may be empty
};
/// "s3://BUCKET/PREFIX" (a valid S3 bucket name, an optional prefix) -> its parts.
[[nodiscard]] std::optional<BlobStoreUrl> parse_blob_store_url(std::string_view text);

/// Splits "HOST:PORT" / "[V6]:PORT".
[[nodiscard]] Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text);

/// Sets up logging to stderr (one line per event; never blocks the caller on I/O).
void init_logging();

/// `wheelforge serve`: runs until SIGTERM/SIGINT; prints "listening on http://HOST:PORT".
/// Speaks the systemd protocol when run under it (READY/STATUS/WATCHDOG/RELOADING/STOPPING,
/// socket activation). On SIGHUP it calls `reload` (if given) for a fresh configuration and
/// applies what can change at runtime (upload limit, TLS files, base_url, the build runner's
/// [build] and [recipes] for jobs that start afterwards); a configuration with problems is
/// not applied, and each problem is logged. Then it reloads the catalog.
int serve(const Configuration& config, const std::function<ConfigCheck()>& reload = {});

/// `wheelforge runner`: runs build jobs from the catalog's job queue without serving HTTP
/// (docs/runner.md, "Runners on many hosts"): claims queued jobs with a lease its heartbeat
/// renews, takes over jobs whose runner let its lease pass, and publishes into the catalog and
/// blob store of the configuration. Prints "runner ID" once it runs. SIGTERM/SIGINT stop it
/// (its running jobs are left for the next start of this data directory, or for another
/// runner once their leases pass); SIGUSR2 drains it. Exits 2 without recipes.
int runner(const Configuration& config);

/// `wheelforge ingest`: imports files and directory trees (*.whl, *.tar.gz found in them).
int ingest(const Settings& settings, const std::vector<std::filesystem::path>& paths);

/// `wheelforge token list`: id, scope, project, state (active, expired, revoked), created (and
/// by whom), expires, last used, description (never the token).
int token_list(const Settings& settings);
/// `wheelforge token revoke ID`: the token stops working (a running server notices within a
/// second).
int token_revoke(const Settings& settings, std::int64_t id);

/// `wheelforge token create`: prints the new token alone on the last line. `expires`:
/// auth::parse_expiry's forms ("90d", "12h", "2027-01-31"); a bad value exits 2.
int token_create(const Settings& settings, const std::string& scope,
                 const std::optional<std::string>& project, const std::string& description,
                 const std::optional<std::string>& expires);

/// `wheelforge publisher add PROJECT --issuer NAME --claim NAME=VALUE...`: a trusted publisher
/// of the project (docs/publishing.md); the issuer must be one of `configuration`'s
/// [[oidc_issuer]] tables. Bad arguments exit 2.
int publisher_add(const Configuration& configuration, const std::string& project,
                  const std::string& issuer, const std::vector<std::string>& claims,
                  const std::string& description);
/// `wheelforge publisher list [--project NAME]`: id, project, issuer, claims, created (and by
/// whom), description.
int publisher_list(const Settings& settings, const std::optional<std::string>& project);
/// `wheelforge publisher remove ID`.
int publisher_remove(const Settings& settings, std::int64_t id);

/// `wheelforge audit`: the audit trail, newest first: time, action, actor, address, project,
/// target, detail. `since`: auth::parse_since's forms; a bad value or project exits 2.
int audit(const Settings& settings, const std::optional<std::string>& project,
          const std::optional<std::string>& since, std::size_t limit);

/// `wheelforge project list`: every project with its file count and claim.
/// `upstreams` (the configuration's): each local project is looked up on them, and the upstreams
/// that also have a project of that name are listed (the ownership guard keeps them off its
/// pages; docs/upstreams.md). Fetches (blocks on the network).
int project_list(const Settings& settings, const std::vector<core::UpstreamConfig>& upstreams = {});
/// `wheelforge project claim|release NAME`: sets who may upload to a project besides admins.
int project_claim(const Settings& settings, const std::string& project,
                  const core::ProjectClaim& claim);

/// `wheelforge yank` / `unyank`: yanks one file or every file of a version (docs/packaging.md,
/// "Yanking").
/// `reason` nullopt means unyank.
int yank(const Settings& settings, const std::string& project,
         const std::optional<std::string>& version, const std::optional<std::string>& filename,
         const std::optional<std::string>& reason);

/// `wheelforge build`: runs one build request in this process. Prints each job's log path,
/// its state changes, a live tail of its log and, at the end, each job's final state and
/// elapsed time and the total; a terminal gets colours and a status line, anything else plain
/// lines without control characters. SIGINT or SIGTERM cancels the build's jobs (their process
/// trees are killed and they are recorded cancelled) and ends with 130 or 143. `server_url`
/// (when given) is what {server} stands for in the torch index; otherwise server_url() of the
/// settings. Exit 0 when every job succeeded, 1 when one did not, 2 on a bad request or
/// configuration. Blocks signals SIGINT and SIGTERM for the process: call before any thread
/// starts (it sets up logging itself).
int build(const Configuration& config, const core::BuildRequest& request,
          const std::optional<std::string>& server_url);

/// `wheelforge delete`: removes a file from every page; its name stays reserved.
int delete_file(const Settings& settings, const std::string& filename);

}  // namespace wf::app
