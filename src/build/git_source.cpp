#include "wheelforge/build/git_source.hpp"

#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/redact.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace {

// The userinfo of a URL: between "://" and the last '@' of the authority.
struct Userinfo {
  std::size_t begin = 0;
  std::size_t end = 0;  // the '@'
};

std::optional<Userinfo> userinfo_of(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const std::size_t begin = scheme_end + 3;
  const std::size_t authority_end = std::min(url.find_first_of("/?#", begin), url.size());
  const std::size_t at = url.substr(0, authority_end).rfind('@');
  if (at == std::string_view::npos || at < begin) return std::nullopt;
  return Userinfo{begin, at};
}

bool is_http(std::string_view url) {
  return starts_with_icase(url, "http://") || starts_with_icase(url, "https://");
}

}  // namespace

SplitGitUrl split_git_url(std::string_view url) {
  SplitGitUrl out;
  out.url = std::string(url);
  const auto info = userinfo_of(url);
  if (!info || !is_http(url)) return out;
  const std::string_view userinfo = url.substr(info->begin, info->end - info->begin);
  if (userinfo.find(':') == std::string_view::npos) return out;
  const std::size_t authority_end = std::min(url.find_first_of("/?#", info->end), url.size());
  out.url = std::string(url.substr(0, info->begin)) + std::string(url.substr(info->end + 1));
  out.credential_line = std::string(url.substr(0, authority_end));
  return out;
}

std::vector<std::string> credential_secrets(std::string_view store_text) {
  std::vector<std::string> out;
  for (const auto raw : split(store_text, '\n')) {
    const std::string_view line = trim(raw);
    const auto info = userinfo_of(line);
    if (!info) continue;
    const std::string_view userinfo = line.substr(info->begin, info->end - info->begin);
    out.emplace_back(userinfo);
    const std::size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view password = userinfo.substr(colon + 1);
    out.emplace_back(password);
    if (auto decoded = percent_decode(password); decoded && *decoded != password) {
      out.push_back(std::move(*decoded));
    }
  }
  return out;
}

void register_source_secrets(const core::SourceSpec& source) {
  if (source.kind != core::SourceSpec::Kind::git) return;
  for (const auto& s : credential_secrets(source.location)) add_secret(s);
  if (source.credentials.empty()) return;
  if (auto text = read_small_file(source.credentials, 1U << 20U); text.ok()) {
    for (const auto& s : credential_secrets(text.value())) add_secret(s);
  }
}

std::vector<std::string> git_fetch_options(const core::SourceSpec& source, std::string_view store) {
  std::vector<std::string> out;
  // Whatever helper the system's gitconfig names is dropped first.
  out.emplace_back("-c");
  out.emplace_back("credential.helper=");
  if (!store.empty()) {
    out.emplace_back("-c");
    out.push_back(
        "credential.helper=!wf_get() { test \"$1\" = get && exec git credential-store --file=" +
        shell_quote(store) + " get; }; wf_get");
  }
  const std::string_view url = source.location;
  if (url.starts_with("/") || starts_with_icase(url, "file://")) {
    out.emplace_back("-c");
    out.emplace_back("protocol.file.allow=always");
  }
  return out;
}

}  // namespace wf::build
