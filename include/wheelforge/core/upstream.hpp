#pragma once
// Upstream indexes: what the configuration says about each one (UpstreamConfig), which names
// an upstream may serve (the ownership guard), the model of an upstream project page
// (UpstreamPage) and its PEP 503 HTML form's parser, and the cooldown. Pure: no I/O, safe on
// any thread. The PEP 691 JSON form is parsed by render (parse_upstream_json), which owns the
// JSON library. The facts these rest on are in docs/packaging.md ("Simple API: HTML", "Simple
// API: JSON") and docs/upstreams.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"
#include "wheelforge/util/time.hpp"
#include "wheelforge/util/url.hpp"

namespace wf::core {

/// One `[[upstream]]` table of the configuration.
struct UpstreamConfig {
  std::string name;  ///< [a-z0-9-], unique: the `<upstream>` segment of /upstream/ URLs
  std::string url;   ///< the simple index root, http:// or https://, ending in '/'
  std::string username;
  /// Never logged or printed; read from the file, a password file or an environment variable.
  std::string password;
  std::chrono::seconds metadata_ttl{600};  ///< how long a fetched page is used without asking
  /// How long fetching a page from it may take in all (connecting, redirects, the whole body).
  std::chrono::seconds page_timeout{60};
  bool all_projects = true;           ///< `projects = "all"`
  std::vector<std::string> projects;  ///< normalized; the allow-list when !all_projects
  std::optional<std::uint32_t> cooldown_days;
  /// Normalized names of projects that exist here which this upstream may still serve (the
  /// explicit per-name override of the ownership guard).
  std::vector<std::string> serve_local;

  bool operator==(const UpstreamConfig&) const = default;
};

/// Whether `upstream` may list files for `project` (normalized). `local`: the project exists
/// here (uploaded, built or claimed): then only a name in `serve_local` lets the upstream in
/// (the ownership guard: a public project of the same name never reaches users of a private
/// one). Otherwise `projects` decides.
[[nodiscard]] bool may_serve(const UpstreamConfig& upstream, std::string_view project, bool local);

/// True when some upstream may serve every name (`projects = "all"`): this index then holds
/// everything an install needs, and the commands it prints name it alone (`--index-url`).
[[nodiscard]] bool serves_every_name(const std::vector<UpstreamConfig>& upstreams);

/// One file of an upstream project page.
struct UpstreamFile {
  std::string filename;  ///< the last path segment of the URL, percent-decoded
  std::string url;       ///< absolute, without fragment
  std::string sha256;    ///< lower-case hex; files without one are dropped by the parsers
  std::optional<std::string> requires_python;
  std::optional<std::string> yanked;  ///< as FileRecord::yanked
  /// The core metadata file's sha256 (lower-case hex); empty when the page offers none or
  /// offers one without a sha256 (not verifiable, so not offered here either).
  std::string metadata_sha256;
  std::optional<Micros> upload_time;  ///< JSON pages only
  std::optional<std::uint64_t> size;  ///< JSON pages only
};

struct UpstreamPage {
  std::string name;                      ///< as the request asked (normalized)
  std::vector<UpstreamFile> files;       ///< in page order, each with a sha256
  std::size_t dropped_without_hash = 0;  ///< files the page listed without a sha256
};

/// Limits on what an upstream page may hold; a page over them is refused as a whole.
inline constexpr std::size_t kMaxUpstreamPageBytes = 64ULL * 1024 * 1024;
inline constexpr std::size_t kMaxUpstreamFiles = 200'000;

/// Parses a PEP 503 HTML project page fetched from `page_url`: every `<a>` element's `href`
/// (resolved against `page_url`, or against an absolute `<base href>`), its `#sha256=` fragment,
/// `data-requires-python`, `data-yanked`, `data-core-metadata` / `data-dist-info-metadata`
/// (`sha256=<hex>`; `true` without a hash counts as none), with HTML entities decoded.
/// Anchors whose href has no sha256 are counted in dropped_without_hash and left out (they
/// cannot be verified). Errc::invalid for a page over the limits. Bounded: linear in the body.
[[nodiscard]] Result<UpstreamPage> parse_upstream_html(std::string_view body,
                                                       std::string_view page_url);

/// Decodes HTML character references: the named ones the simple API uses (&amp; &lt; &gt;
/// &quot; &apos; &nbsp;) and numeric ones (&#60; &#x3C;); anything else is kept as written.
[[nodiscard]] std::string decode_html_entities(std::string_view text);

/// A link `ref` (surrounding spaces trimmed) resolved against the page's URL `base`
/// (wf::resolve_url: RFC 3986 section 5.2, without the fragment), as a string; nullopt when
/// there is no base or the result is not an http(s) URL.
[[nodiscard]] std::optional<std::string> resolve_link(const std::optional<Url>& base,
                                                      std::string_view ref);

/// The file name in an absolute URL: its last path segment, percent-decoded; nullopt when it is
/// empty or holds '/', '\\' or a control character after decoding.
[[nodiscard]] std::optional<std::string> url_filename(std::string_view url);

/// True when the cooldown hides `file` at `now`: the upstream has a cooldown of `days` and the
/// file was uploaded less than that long ago, or its upload time is unknown (stricter).
[[nodiscard]] bool in_cooldown(const UpstreamFile& file, std::optional<std::uint32_t> days,
                               Micros now);

/// Parses an RFC 3339 UTC time as the simple API's upload-time writes it,
/// "YYYY-MM-DDTHH:MM:SS[.frac]Z" (up to 6 fraction digits kept; "+00:00" also accepted).
[[nodiscard]] std::optional<Micros> parse_upload_time(std::string_view text);

}  // namespace wf::core
