#pragma once
// Internal to the app module: how settings' values are read from text and written back as TOML
// (values.cpp), shared by the top-level settings (settings.cpp) and the [s3] table
// (s3_config.cpp).

#include <toml++/toml.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/app/app.hpp"

namespace wf::app::detail {

inline constexpr std::uint64_t kKiB = 1ULL << 10U;
inline constexpr std::uint64_t kMiB = 1ULL << 20U;
inline constexpr std::uint64_t kGiB = 1ULL << 30U;
inline constexpr std::uint64_t kTiB = 1ULL << 40U;

/// A size as TOML: "2G", "512M", or bytes.
[[nodiscard]] std::string format_size(std::uint64_t bytes);
/// A duration as TOML: "1h", "5m", or "30s".
[[nodiscard]] std::string format_duration(std::chrono::seconds d);
/// A value quoted for an error message ('...', control characters escaped).
[[nodiscard]] std::string quoted(std::string_view value);

/// Each parses `text` into `field` and returns why it is invalid (nullopt: it was valid).
/// A whole number from `min` to `max`.
[[nodiscard]] std::optional<std::string> apply_count(std::size_t& field, std::string_view text,
                                                     std::uint64_t min, std::uint64_t max);
/// A byte count ("1048576", "64K", "8G") of at least `min`; `expected` names the form in the
/// error message.
[[nodiscard]] std::optional<std::string> apply_size(std::uint64_t& field, std::string_view text,
                                                    std::uint64_t min, std::string_view expected);
[[nodiscard]] std::optional<std::string> apply_bool(bool& field, std::string_view text);
/// A duration from `min` to `max`.
[[nodiscard]] std::optional<std::string> apply_duration(std::chrono::seconds& field,
                                                        std::string_view text,
                                                        std::chrono::seconds min,
                                                        std::chrono::seconds max);

/// The keys of [s3] (s3_config.cpp).
inline constexpr std::array<std::string_view, 6> kS3Keys = {
    "endpoint",      "region", "addressing", "access_key_id", "secret_access_key_file",
    "presign_expiry"};
/// Reads the [s3] table of `root` (the file at `path`) into `s3`, adding every problem
/// ("s3.KEY: ...").
void read_s3_table(const toml::table& root, const std::filesystem::path& path, S3Settings& s3,
                   std::vector<std::string>& problems);
/// With an S3 blob store: the credentials, from [s3] or the environment (the client's rule,
/// store::load_s3_credentials); adds a problem when there are none.
void resolve_s3_credentials(S3Settings& s3, std::vector<std::string>& problems);

}  // namespace wf::app::detail
