#pragma once
// The composition root: settings, logging, opening the data directory, and the commands
// that the CLI exposes. Each command returns a process exit code.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "wheelforge/core/build.hpp"
#include "wheelforge/core/records.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::app {

/// Values given on the command line, as typed; unset ones fall back to the environment, the
/// configuration file, then the defaults. One field per setting of Settings.
struct Overrides {
  std::optional<std::string> data_dir;
  std::optional<std::string> listen;
  std::optional<std::string> max_upload_size;
  std::optional<std::string> worker_threads;
  std::optional<std::string> network_threads;
  std::optional<std::string> read_timeout;
  std::optional<std::string> min_upload_rate;
  std::optional<std::string> idle_timeout;
  std::optional<std::string> max_connections;
  std::optional<std::string> shutdown_grace;
  std::optional<std::string> access_log;
  std::optional<std::string> private_reads;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
};

/// The effective configuration. A new setting is a field here, one in Overrides and one row
/// in the table in settings.cpp (which derives its TOML key, WHEELFORGE_* variable and flag).
struct Settings {
  std::filesystem::path data_dir = "data";
  std::string listen = "127.0.0.1:8080";
  std::uint64_t max_upload_size = 8ULL * 1024 * 1024 * 1024;
  /// Threads for blocking work (SQLite, hashing, archive reads, fsync); 1..64.
  std::size_t worker_threads = 2;
  /// Threads that serve connections; 0 (the default): one per CPU core. 0..64.
  std::size_t network_threads = 0;
  /// Deadline for a request's headers and for each chunk of an upload body.
  std::chrono::seconds read_timeout{30};
  /// Slowest accepted upload, in bytes/s, averaged over each read_timeout spent waiting for
  /// the client; 0 turns the check off.
  std::uint64_t min_upload_rate = 1024;
  /// How long an idle keep-alive connection is kept.
  std::chrono::seconds idle_timeout{60};
  /// Connections served at once.
  std::size_t max_connections = 1024;
  /// How long a graceful stop waits for in-flight requests.
  std::chrono::seconds shutdown_grace{10};
  /// One log line per request.
  bool access_log = true;
  /// Every read needs a token of scope read (or higher); 401 with WWW-Authenticate otherwise.
  bool private_reads = false;
  /// HTTPS: PEM certificate chain and private key files (re-read on SIGHUP); both empty: HTTP.
  std::string tls_cert;
  std::string tls_key;

  /// Where these settings came from, so that a reload (SIGHUP) can load them again:
  /// load_settings(settings.config_file, settings.overrides).
  std::optional<std::filesystem::path> config_file;
  Overrides overrides;
};

/// Read when no --config is given and the file exists.
inline constexpr const char* kDefaultConfigFile = "/etc/wheelforge/wheelforge.toml";

/// The configuration file to read: `given` when set (load_settings then fails if it is
/// missing), else kDefaultConfigFile when it exists, else none.
[[nodiscard]] std::optional<std::filesystem::path> resolve_config_file(
    const std::optional<std::string>& given);

/// The outcome of loading settings: the settings, or every problem found (each starts with
/// the setting's name and says where the bad value came from).
struct SettingsCheck {
  std::optional<Settings> settings;
  std::vector<std::string> problems;
};

/// Defaults, then the TOML file (if given), then WHEELFORGE_* environment variables (an empty
/// one counts as unset), then the overrides. Unknown keys and wrongly typed values in the file
/// are problems even when overridden; values are validated once the winner is known.
[[nodiscard]] SettingsCheck check_settings(const std::optional<std::filesystem::path>& config_file,
                                           const Overrides& overrides);

/// check_settings() as a Result: every problem, joined with "; ", in one invalid error.
[[nodiscard]] Result<Settings> load_settings(
    const std::optional<std::filesystem::path>& config_file, const Overrides& overrides);

/// The settings as a TOML document that load_settings() reads back to the same values.
/// Settings marked secret in the table are shown as a comment without their value.
[[nodiscard]] std::string settings_to_toml(const Settings& settings);

/// "30s", "2m", "1h", "1m30s", or a bare number of seconds -> seconds.
[[nodiscard]] std::optional<std::chrono::seconds> parse_duration(std::string_view text);

/// true/false, yes/no, on/off, 1/0 (any case).
[[nodiscard]] std::optional<bool> parse_bool(std::string_view text);

/// `text` as a TOML basic string, quotes included.
[[nodiscard]] std::string toml_quote(std::string_view text);

/// "123", "64K", "512M", "8G" (binary multiples) -> bytes.
[[nodiscard]] std::optional<std::uint64_t> parse_size(std::string_view text);

/// Splits "HOST:PORT" / "[V6]:PORT".
[[nodiscard]] Result<std::pair<std::string, std::uint16_t>> parse_listen(std::string_view text);

/// Sets up logging to stderr (one line per event; never blocks the caller on I/O).
void init_logging();

/// `wheelforge serve`: runs until SIGTERM/SIGINT; prints "listening on http://HOST:PORT".
/// Speaks the systemd protocol when run under it (READY/STATUS/WATCHDOG/RELOADING/STOPPING,
/// socket activation). On SIGHUP it calls `reload` (if given) for fresh settings, applies
/// what can change at runtime, and reloads the catalog.
int serve(const Settings& settings, const std::function<Result<Settings>()>& reload = {});

/// `wheelforge ingest`: imports files and directory trees (*.whl, *.tar.gz found in them).
int ingest(const Settings& settings, const std::vector<std::filesystem::path>& paths);

/// `wheelforge token list`: id, scope, project, description, created, revoked (never the token).
int token_list(const Settings& settings);
/// `wheelforge token revoke ID`: the token stops working (a running server notices within a
/// second).
int token_revoke(const Settings& settings, std::int64_t id);

/// `wheelforge token create`: prints the new token alone on the last line.
int token_create(const Settings& settings, const std::string& scope,
                 const std::optional<std::string>& project, const std::string& description);

/// `wheelforge project list`: every project with its file count and claim.
int project_list(const Settings& settings);
/// `wheelforge project claim|release NAME`: sets who may upload to a project besides admins.
int project_claim(const Settings& settings, const std::string& project,
                  const core::ProjectClaim& claim);

/// `wheelforge yank` / `unyank`: PEP 592 yank of one file or every file of a version.
/// `reason` nullopt means unyank.
int yank(const Settings& settings, const std::string& project,
         const std::optional<std::string>& version, const std::optional<std::string>& filename,
         const std::optional<std::string>& reason);

/// `wheelforge build`: runs one build request in this process with progress on stdout;
/// `server_url` is what {server} stands for in the torch index. Exit 0 when every job
/// succeeded.
int build(const Settings& settings, const core::BuildRequest& request,
          const std::string& server_url);

/// `wheelforge delete`: removes a file from every page; its name stays reserved.
int delete_file(const Settings& settings, const std::string& filename);

}  // namespace wf::app
