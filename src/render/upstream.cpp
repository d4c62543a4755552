#include "wheelforge/render/upstream.hpp"

#include "render/json_text.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/url.hpp"

namespace wf::render {
namespace {

using detail::Json;

std::string sha256_in(const Json& hashes) {
  if (!hashes.is_object()) return {};
  const auto it = hashes.find("sha256");
  if (it == hashes.end() || !it->is_string()) return {};
  std::string hex = to_lower(it->get<std::string>());
  return is_sha256_hex(hex) ? hex : std::string{};
}

}  // namespace

Result<core::UpstreamPage> parse_upstream_json(std::string_view body, std::string_view page_url) {
  if (body.size() > core::kMaxUpstreamPageBytes) {
    return make_error(Errc::invalid, "upstream page of " + std::to_string(body.size()) +
                                         " bytes is larger than the limit of " +
                                         std::to_string(core::kMaxUpstreamPageBytes));
  }
  const Json doc = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return make_error(Errc::invalid, "upstream page is not a JSON object");
  }
  if (const auto meta = doc.find("meta"); meta != doc.end() && meta->is_object()) {
    const auto v = meta->find("api-version");
    if (v != meta->end() && v->is_string() && !v->get<std::string>().starts_with("1.")) {
      return make_error(Errc::invalid, "upstream page has api-version '" +
                                           sanitize_for_log(v->get<std::string>()) +
                                           "' (only 1.x is understood)");
    }
  }
  const auto files = doc.find("files");
  if (files == doc.end() || !files->is_array()) {
    return make_error(Errc::invalid, "upstream page has no 'files' list");
  }
  core::UpstreamPage page;
  if (const auto name = doc.find("name"); name != doc.end() && name->is_string()) {
    page.name = name->get<std::string>();
  }
  std::optional<Url> base;
  if (auto parsed = parse_url(page_url); parsed) base = std::move(*parsed);
  for (const Json& f : *files) {
    if (!f.is_object()) continue;
    const auto url_it = f.find("url");
    if (url_it == f.end() || !url_it->is_string()) continue;
    auto url = core::resolve_link(base, url_it->get<std::string>());
    if (!url) continue;
    core::UpstreamFile file;
    if (const auto fn = f.find("filename"); fn != f.end() && fn->is_string()) {
      file.filename = fn->get<std::string>();
    }
    const auto from_url = core::url_filename(*url);
    // The name is the URL's last segment (as in HTML pages), so that the file downloaded is the
    // one listed; a page whose two names disagree is not trusted for that file.
    if (!from_url || (!file.filename.empty() && file.filename != *from_url)) continue;
    file.filename = *from_url;
    if (const auto h = f.find("hashes"); h != f.end()) file.sha256 = sha256_in(*h);
    if (file.sha256.empty()) {
      ++page.dropped_without_hash;
      continue;
    }
    if (page.files.size() == core::kMaxUpstreamFiles) {
      return make_error(Errc::invalid, "upstream page lists more than " +
                                           std::to_string(core::kMaxUpstreamFiles) + " files");
    }
    file.url = std::move(*url);
    if (const auto rp = f.find("requires-python"); rp != f.end() && rp->is_string()) {
      file.requires_python = rp->get<std::string>();
    }
    if (const auto y = f.find("yanked"); y != f.end()) {
      if (y->is_string()) {
        file.yanked = y->get<std::string>();
      } else if (y->is_boolean() && y->get<bool>()) {
        file.yanked = std::string();
      }
    }
    for (const char* key : {"core-metadata", "dist-info-metadata"}) {
      const auto m = f.find(key);
      if (m != f.end() && file.metadata_sha256.empty()) file.metadata_sha256 = sha256_in(*m);
    }
    if (const auto s = f.find("size"); s != f.end() && s->is_number_unsigned()) {
      file.size = s->get<std::uint64_t>();
    }
    if (const auto t = f.find("upload-time"); t != f.end() && t->is_string()) {
      file.upload_time = core::parse_upload_time(t->get<std::string>());
    }
    page.files.push_back(std::move(file));
  }
  return page;
}

}  // namespace wf::render
