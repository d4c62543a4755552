#pragma once
// The composition root: settings, logging, opening the data directory, and the commands
// that the CLI exposes. Each command returns a process exit code.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::app {

struct Settings {
  std::filesystem::path data_dir = "data";
  std::string listen = "127.0.0.1:8080";
  std::uint64_t max_upload_size = 8ULL * 1024 * 1024 * 1024;
};

/// Values given on the command line; unset ones fall back to the config file, then defaults.
struct Overrides {
  std::optional<std::string> data_dir;
  std::optional<std::string> listen;
  std::optional<std::string> max_upload_size;
};

/// Defaults, then the TOML file (if given), then the overrides. Every invalid value is
/// reported, by name, in one error.
[[nodiscard]] Result<Settings> load_settings(
    const std::optional<std::filesystem::path>& config_file, const Overrides& overrides);

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

/// `wheelforge token create`: prints the new token alone on the last line.
int token_create(const Settings& settings, const std::string& scope,
                 const std::optional<std::string>& project, const std::string& description);

/// `wheelforge yank` / `unyank`: PEP 592 yank of one file or every file of a version.
/// `reason` nullopt means unyank.
int yank(const Settings& settings, const std::string& project,
         const std::optional<std::string>& version, const std::optional<std::string>& filename,
         const std::optional<std::string>& reason);

/// `wheelforge delete`: removes a file from every page; its name stays reserved.
int delete_file(const Settings& settings, const std::string& filename);

}  // namespace wf::app
