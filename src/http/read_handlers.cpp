#include "read_handlers.hpp"

#include <algorithm>
#include <cctype>

#include "wheelforge/core/name.hpp"
#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

Response not_found(std::string message) {
  return error_response(make_error(Errc::not_found, std::move(message)));
}

Response redirect(std::string location) {
  Response r;
  r.status = 301;
  r.set("Location", std::move(location));
  r.set("Content-Type", "text/plain; charset=utf-8");
  r.body = std::string("moved permanently\n");
  return r;
}

Response page_response(const Request& req, const std::shared_ptr<const snapshot::Page>& page) {
  Response r;
  r.set("Content-Type", std::string(core::content_type(page->format)));
  r.set("Vary", "Accept, Accept-Encoding");
  r.set("Cache-Control", "max-age=0, must-revalidate");
  return with_page_body(req, page, std::move(r));
}

}  // namespace

Response with_page_body(const Request& req, const std::shared_ptr<const snapshot::Page>& page,
                        Response r) {
  const bool gz = accepts_gzip(req);
  // The compressed representation is a different entity: it gets its own validator.
  const std::string etag =
      gz ? page->etag.substr(0, page->etag.size() - 1) + "-gzip\"" : page->etag;
  r.set("ETag", etag);
  if (etag_matches(req.header("if-none-match"), etag)) {
    r.status = 304;
    r.body = std::string();
    return r;
  }
  if (gz) {
    r.set("Content-Encoding", "gzip");
    r.body = std::shared_ptr<const std::string>(page, &page->gzip);
  } else {
    r.body = std::shared_ptr<const std::string>(page, &page->body);
  }
  return r;
}

namespace {

// /simple/... and /<selector...>/simple/...; `at` is the index of the "simple" segment.
Response simple_api(const Request& req, const snapshot::Snapshot& snap, std::size_t at) {
  const auto& seg = req.segments;
  std::optional<core::ViewSelector> view;
  std::string prefix = "/";
  if (at > 0) {
    std::vector<std::string_view> parts(seg.begin(), seg.begin() + static_cast<std::ptrdiff_t>(at));
    auto parsed = core::parse_view_selector(parts);
    if (!parsed) return error_response(parsed.error());
    view = *parsed;
    for (std::size_t i = 0; i < at; ++i) prefix += percent_encode_path(seg[i]) + "/";
  }
  prefix += "simple/";
  // ".../simple" -> ".../simple/"
  if (seg.size() == at + 1) return redirect(prefix);
  auto format = core::negotiate(req.header("accept"), req.query_param("format"));
  if (seg.size() == at + 2 && seg[at + 1].empty()) {
    if (!format) return error_response(format.error());
    return page_response(req, view ? snap.view_root_page(*view, *format) : snap.root_page(*format));
  }
  const std::string& name = seg[at + 1];
  const bool trailing_slash = seg.size() == at + 3 && seg[at + 2].empty();
  if (seg.size() > at + 3 || (seg.size() == at + 3 && !trailing_slash))
    return not_found("not found");
  if (!core::is_valid_project_name(name)) return not_found("no such project");
  const std::string normalized = core::normalize_name(name);
  if (!trailing_slash || normalized != name) {
    std::string location = prefix + normalized + "/";
    if (!req.query.empty()) location += "?" + req.query;
    return redirect(std::move(location));
  }
  if (!format) return error_response(format.error());
  auto page = view ? snap.view_project_page(*view, normalized, *format)
                   : snap.project_page(normalized, *format);
  // Unknown names are answered here and never sent elsewhere: a private index must not
  // redirect to a public one (dependency confusion).
  if (!page) return not_found("no such project: " + normalized);
  return page_response(req, page);
}

/// Maps an installed torch's version string (torch.__version__, e.g. "2.8.0+cu128") and an
/// optional ABI flag ("1"/"0", torch._C._GLIBCXX_USE_CXX11_ABI) to the view that fits it.
Result<render::Resolution> resolve_torch(std::string_view torch, std::string_view abi) {
  if (torch.empty()) {
    return make_error(Errc::invalid,
                      "missing torch=<version>: pass torch.__version__, e.g. torch=2.8.0%2Bcu128");
  }
  auto version = core::Version::parse(torch);
  if (!version) return make_error(Errc::invalid, "torch: " + version.error().message);
  const auto series = core::torch_series_of_version(version->public_str());
  if (!series)
    return make_error(Errc::invalid, "torch: no major.minor in '" + version->str() + "'");
  render::Resolution r;
  r.torch = std::string(torch);
  r.selector.torch = *series;
  const core::VariantHints hints = core::parse_local_label(version->local_str());
  r.selector.backend = hints.backend;
  r.selector.cuda_major = hints.cuda_major;
  r.selector.cuda_minor = hints.cuda_minor;
  r.selector.rocm_major = hints.rocm_major;
  r.selector.rocm_minor = hints.rocm_minor;
  if (hints.backend == core::Backend::none) {
    r.notes.emplace_back(
        "the torch version names no CUDA/ROCm/CPU build; the view selects by torch series only");
  }
  if (abi == "1" || abi == "true" || abi == "True") {
    r.selector.cxx11_abi = true;
  } else if (abi == "0" || abi == "false" || abi == "False") {
    r.selector.cxx11_abi = false;
  } else if (!abi.empty()) {
    return make_error(Errc::invalid, "abi: expected 1 or 0");
  }
  return r;
}

// /api/projects/<name>/variants and /api/resolve
Response api(const Request& req, const snapshot::Snapshot& snap) {
  const auto& seg = req.segments;
  if (seg.size() == 4 && seg[1] == "projects" && seg[3] == "variants") {
    if (!core::is_valid_project_name(seg[2])) return not_found("no such project");
    auto page = snap.variants_page(core::normalize_name(seg[2]));
    if (!page) return not_found("no such project: " + core::normalize_name(seg[2]));
    Response r;
    r.set("Content-Type", "application/json");
    r.set("Cache-Control", "max-age=0, must-revalidate");
    r.set("ETag", page->etag);
    if (etag_matches(req.header("if-none-match"), page->etag)) {
      r.status = 304;
      r.body = std::string();
      return r;
    }
    r.body = std::shared_ptr<const std::string>(page, &page->body);
    return r;
  }
  if (seg.size() == 2 && seg[1] == "resolve") {
    auto resolution = resolve_torch(req.query_param("torch"), req.query_param("abi"));
    if (!resolution) return error_response(resolution.error());
    resolution->base_url = base_url(req);
    if (const auto project = req.query_param("project"); !project.empty()) {
      if (!core::is_valid_project_name(project)) {
        return error_response(make_error(Errc::invalid, "invalid project name"));
      }
      resolution->project = core::normalize_name(project);
    }
    Response r;
    r.set("Content-Type", "application/json");
    r.body = render::render_resolution(*resolution);
    return r;
  }
  return not_found("not found");
}

Response file_response(const Request& req, std::string path, std::uint64_t size,
                       const std::string& etag, std::string content_type) {
  Response r;
  r.set("Content-Type", std::move(content_type));
  r.set("ETag", etag);
  r.set("Accept-Ranges", "bytes");
  r.set("Cache-Control", "public, max-age=31536000, immutable");
  if (etag_matches(req.header("if-none-match"), etag)) {
    r.status = 304;
    r.body = std::string();
    return r;
  }
  std::optional<ByteRange> range;
  const auto if_range = req.header("if-range");
  if (if_range.empty() || if_range == etag) range = parse_range(req.header("range"), size);
  if (range && !range->satisfiable) {
    Response e = error_response(make_error(Errc::invalid, "requested range not satisfiable"));
    e.status = 416;
    e.reason.clear();
    e.set("Content-Range", "bytes */" + std::to_string(size));
    return e;
  }
  if (range) {
    r.status = 206;
    r.set("Content-Range", "bytes " + std::to_string(range->offset) + "-" +
                               std::to_string(range->offset + range->length - 1) + "/" +
                               std::to_string(size));
    r.body = FileRange{std::move(path), range->offset, range->length};
  } else {
    r.body = FileRange{std::move(path), 0, size};
  }
  return r;
}

// /files/<sha256>/<filename>[.metadata]
Response files(const Request& req, const snapshot::Snapshot& snap, const store::BlobStore& store) {
  const auto& seg = req.segments;
  if (seg.size() != 3 || !is_sha256_hex(seg[1])) return not_found("no such file");
  std::string_view name = seg[2];
  constexpr std::string_view kMetadataSuffix = ".metadata";
  const bool metadata = name.size() > kMetadataSuffix.size() && name.ends_with(kMetadataSuffix);
  if (metadata) name.remove_suffix(kMetadataSuffix.size());
  const core::FileRecord* file = snap.find_file(name);
  if (file == nullptr || file->sha256 != seg[1]) return not_found("no such file");
  if (metadata) {
    if (file->metadata_sha256.empty()) return not_found("no metadata for this file");
    return file_response(req, store.blob_file(file->metadata_sha256), file->metadata_size,
                         "\"" + file->metadata_sha256 + "\"", "text/plain; charset=utf-8");
  }
  return file_response(req, store.blob_file(file->sha256), file->size, "\"" + file->sha256 + "\"",
                       "application/octet-stream");
}

Response text(int status, std::string body,
              std::string content_type = "text/plain; charset=utf-8") {
  Response r;
  r.status = status;
  r.set("Content-Type", std::move(content_type));
  r.body = std::move(body);
  return r;
}

}  // namespace

bool accepts_gzip(const Request& req) {
  for (auto part : split(req.header("accept-encoding"), ',')) {
    part = trim(part);
    const auto semi = part.find(';');
    const auto coding = trim(part.substr(0, semi));
    if (!iequals(coding, "gzip") && coding != "*") continue;
    if (semi != std::string_view::npos) {
      const auto params = trim(part.substr(semi + 1));
      if (params == "q=0" || params == "q=0.0" || params == "q=0.00" || params == "q=0.000") {
        return false;
      }
    }
    return true;
  }
  return false;
}

bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  if (if_none_match.empty()) return false;
  for (auto candidate : split(if_none_match, ',')) {
    candidate = trim(candidate);
    if (candidate == "*") return true;
    if (candidate.starts_with("W/")) candidate.remove_prefix(2);
    if (candidate == etag) return true;
  }
  return false;
}

std::optional<ByteRange> parse_range(std::string_view header, std::uint64_t size) {
  header = trim(header);
  if (!header.starts_with("bytes=")) return std::nullopt;
  const std::string_view spec = trim(header.substr(6));
  if (spec.find(',') != std::string_view::npos) return std::nullopt;
  const auto dash = spec.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::string_view first = trim(spec.substr(0, dash));
  const std::string_view last = trim(spec.substr(dash + 1));
  if (first.empty()) {  // suffix range: the last N bytes
    const auto n = parse_u64(last);
    if (!n) return std::nullopt;
    if (*n == 0 || size == 0) return ByteRange{size, 0, false};
    const std::uint64_t len = std::min(*n, size);
    return ByteRange{size - len, len, true};
  }
  const auto start = parse_u64(first);
  if (!start) return std::nullopt;
  std::uint64_t end = size == 0 ? 0 : size - 1;
  if (!last.empty()) {
    const auto e = parse_u64(last);
    if (!e || *e < *start) return std::nullopt;
    end = std::min(*e, end);
  }
  if (*start >= size) return ByteRange{size, 0, false};
  return ByteRange{*start, end - *start + 1, true};
}

Response handle_read(const Request& req, const snapshot::Snapshot& snap,
                     const store::BlobStore& store) {
  const auto& seg = req.segments;
  if (seg.empty()) return not_found("not found");
  if (seg[0] == "files") return files(req, snap, store);
  if (seg[0] == "api") return api(req, snap);
  if (seg.size() == 1 && seg[0] == "healthz") return text(200, "ok\n");
  // /simple/... or a variant view /<selector...>/simple/...
  const auto simple = std::find(seg.begin(), seg.end(), "simple");
  if (simple != seg.end()) {
    return simple_api(req, snap, static_cast<std::size_t>(simple - seg.begin()));
  }
  return not_found("not found");
}

}  // namespace wf::http
