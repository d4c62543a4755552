#include "read.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "handlers.hpp"
#include "upstream_pages.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/torch_env.hpp"
#include "wheelforge/core/upstream.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::handlers {
namespace {

Response moved_permanently(std::string location) {
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

// A JSON document rendered once per snapshot (the coverage API, a release's variants.json),
// with its validator; never compressed, so it is served as it is hashed.
Response json_page_response(const Request& req, const std::shared_ptr<const snapshot::Page>& page) {
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

// A release's `{name}-{version}-variants.json` (PEP 825), beside the project page that links
// it, in /simple/ and in every view (the same document: it may name more variants than a
// view lists). Served as it is hashed on the page, never compressed.
Response variants_json_response(const Request& req, const snapshot::Snapshot& snap,
                                const std::string& name, const std::string& filename) {
  if (!core::is_valid_project_name(name)) return not_found("no such project");
  auto page = snap.variants_json(core::normalize_name(name), filename);
  if (!page) {
    return not_found("no variants.json " + sanitize_for_log(filename, 200) +
                     ": no release of that name has a variant wheel that is not yanked");
  }
  return json_page_response(req, page);
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

Response handle_simple(const Request& req, Context& ctx) {
  const snapshot::Snapshot& snap = ctx.snapshot;
  const auto& seg = req.segments;
  // The index of the first "simple" segment: the ones before it select a view.
  const auto at =
      static_cast<std::size_t>(std::find(seg.begin(), seg.end(), "simple") - seg.begin());
  if (at == seg.size()) return not_found("not found");
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
  if (seg.size() == at + 1) return moved_permanently(prefix);
  auto format = core::negotiate(req.header("accept"), req.query_param("format"));
  if (seg.size() == at + 2 && seg[at + 1].empty()) {
    if (!format) return error_response(format.error());
    return page_response(req, view ? snap.view_root_page(*view, *format) : snap.root_page(*format));
  }
  const std::string& name = seg[at + 1];
  if (seg.size() == at + 3 && seg[at + 2].ends_with("-variants.json")) {
    return variants_json_response(req, snap, name, seg[at + 2]);
  }
  const bool trailing_slash = seg.size() == at + 3 && seg[at + 2].empty();
  if (seg.size() > at + 3 || (seg.size() == at + 3 && !trailing_slash))
    return not_found("not found");
  if (!core::is_valid_project_name(name)) return not_found("no such project");
  const std::string normalized = core::normalize_name(name);
  if (!trailing_slash || normalized != name) {
    std::string location = prefix + normalized + "/";
    if (!req.query.empty()) location += "?" + req.query;
    return moved_permanently(std::move(location));
  }
  if (!format) return error_response(format.error());
  // A name an upstream index may serve: a page merged with the upstreams' files, made on a
  // worker (it may fetch). The ownership guard (core::may_serve) keeps local projects here.
  if (Upstreams* upstreams = ctx.env.upstreams;
      upstreams != nullptr &&
      upstreams->any_may_serve(normalized, snap.find_project(normalized) != nullptr)) {
    if (!ctx.on_worker) {
      // The page as rendered while its upstream listings are current (lookups, no I/O).
      if (auto current = current_merged_page(req, ctx, view, normalized, *format)) {
        return std::move(*current);
      }
      ctx.needs_worker = true;
      return Response{};
    }
    return merged_project_page(req, ctx, view, normalized, *format);
  }
  auto page = view ? snap.view_project_page(*view, normalized, *format)
                   : snap.project_page(normalized, *format);
  // Unknown names are answered here and never sent elsewhere: a private index must not
  // redirect to a public one (dependency confusion).
  if (!page) return not_found("no such project: " + normalized);
  return page_response(req, page);
}

// /api/projects/<name>/variants
Response handle_variants(const Request& req, Context& ctx) {
  const std::string& name = req.segments[2];
  if (!core::is_valid_project_name(name)) return not_found("no such project");
  auto page = ctx.snapshot.variants_page(core::normalize_name(name));
  if (!page) return not_found("no such project: " + core::normalize_name(name));
  return json_page_response(req, page);
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
    Response e = error_response(make_error(
        Errc::range_not_satisfiable,
        "requested range not satisfiable: the file has " + std::to_string(size) + " bytes"));
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

Response blob_response(const Request& req, Context& ctx, const BlobAnswer& blob) {
  const store::BlobStore& store = *ctx.env.services.store;
  const auto answer = [&](std::string path) {
    std::uint64_t size = 0;
    if (blob.size) {
      size = *blob.size;
    } else {
      std::error_code ec;
      size = std::filesystem::file_size(path, ec);
      if (ec) {
        return error_response(make_error(
            Errc::io, "the stored " + blob.filename + " cannot be read: " + ec.message()));
      }
    }
    return file_response(req, std::move(path), size, blob.etag, blob.content_type);
  };
  store::ObjectStore* objects = store.object_store();
  if (objects == nullptr) return answer(store.blob_file(blob.sha256));
  if (etag_matches(req.header("if-none-match"), blob.etag)) {
    Response r;
    r.status = 304;
    r.set("ETag", blob.etag);
    r.set("Cache-Control", "public, max-age=31536000, immutable");
    r.body = std::string();
    return r;
  }
  if (ctx.env.file_serving == FileServing::redirect) {
    // Signing is computation only: answered on the network thread. The URL expires, so the
    // redirect is not cached; the bytes behind it are (the store's own headers).
    Response r;
    r.status = 302;
    r.set("Location", objects->presign_get(
                          store::blob_key(blob.sha256), ctx.env.presign_expiry, blob.content_type,
                          "attachment; filename=\"" + blob.filename + "\"", std::time(nullptr)));
    r.set("Cache-Control", "no-store");
    r.set("ETag", blob.etag);
    r.set("Content-Type", "text/plain; charset=utf-8");
    r.body = std::string("found\n");
    return r;
  }
  if (auto cached = store.serving_path(blob.sha256)) return answer(std::move(*cached));
  if (!ctx.on_worker) {
    ctx.needs_worker = true;  // fetched into the read cache on a worker
    return Response{};
  }
  auto local = store.local_copy(blob.sha256);
  if (!local) {
    if (local.error().code == Errc::not_found) {
      return error_response(make_error(
          Errc::io, "the stored " + blob.filename + " is missing from " + store.describe()));
    }
    return error_response(local.error());
  }
  return answer(local->string());
}

// /files/<sha256>/<filename>[.metadata]
Response handle_file(const Request& req, Context& ctx) {
  const snapshot::Snapshot& snap = ctx.snapshot;
  const auto& seg = req.segments;
  if (seg.size() != 3 || !is_sha256_hex(seg[1])) return not_found("no such file");
  std::string_view name = seg[2];
  constexpr std::string_view kMetadataSuffix = ".metadata";
  const bool metadata = name.size() > kMetadataSuffix.size() && name.ends_with(kMetadataSuffix);
  if (metadata) name.remove_suffix(kMetadataSuffix.size());
  const core::FileRecord* file = snap.find_file(name);
  if (file == nullptr) {
    if (const auto* damaged = snap.find_damaged(name); damaged && damaged->sha256 == seg[1]) {
      return error_response(make_error(Errc::unavailable, damaged_message(name)));
    }
  }
  if (file == nullptr || file->sha256 != seg[1]) return not_found("no such file");
  if (metadata) {
    if (file->metadata_sha256.empty()) return not_found("no metadata for this file");
    return blob_response(
        req, ctx,
        BlobAnswer{file->metadata_sha256, file->metadata_size, "\"" + file->metadata_sha256 + "\"",
                   "text/plain; charset=utf-8", file->filename + ".metadata"});
  }
  return blob_response(req, ctx,
                       BlobAnswer{file->sha256, file->size, "\"" + file->sha256 + "\"",
                                  "application/octet-stream", file->filename});
}

namespace {

Response text(int status, std::string body) {
  Response r;
  r.status = status;
  r.set("Content-Type", "text/plain; charset=utf-8");
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

Response handle_healthz(const Request& /*req*/, Context& /*ctx*/) {
  return text(200, "ok\n");
}

Response handle_readyz(const Request& /*req*/, Context& ctx) {
  const ServerStatus* status = ctx.env.status;
  if (status == nullptr) return text(200, "ready\n");
  if (status->stopping.load()) return text(503, "stopping\n");
  // What the server's latest looks at the stores found (Readiness): no store is asked here.
  std::string problems = status->readiness.problems();
  if (!problems.empty()) return text(503, "not ready: a store is unreachable\n" + problems);
  if (status->feed.load() && !status->feed_caught_up.load()) {
    return text(503, "not ready: the catalog's change feed has not caught up yet\n");
  }
  return text(200, "ready\n");
}

Response handle_metrics(const Request& /*req*/, Context& ctx) {
  const auto cache = snapshot::cache_stats();
  const auto& snap = ctx.snapshot;
  const ServerStatus* status = ctx.env.status;
  const auto load = [](const auto& counter) { return static_cast<double>(counter.load()); };
  std::map<std::string, double> gauges{
      {"wheelforge_catalog_generation", static_cast<double>(snap.generation())},
      {"wheelforge_projects", static_cast<double>(snap.project_count())},
      {"wheelforge_files", static_cast<double>(snap.file_count())},
      {"wheelforge_page_cache_hits", static_cast<double>(cache.hits)},
      {"wheelforge_page_cache_misses", static_cast<double>(cache.misses)},
  };
  if (status != nullptr) {
    gauges.emplace("wheelforge_connections_open", load(status->open_connections));
    gauges.emplace("wheelforge_connections_refused", load(status->refused_connections));
    gauges.emplace("wheelforge_connections_evicted", load(status->evicted_connections));
    gauges.emplace("wheelforge_requests_forwarded", load(status->forwarded_requests));
    gauges.emplace("wheelforge_requests_forwarded_malformed", load(status->forwarded_malformed));
    gauges.emplace("wheelforge_requests_refused_per_client", load(status->refused_forwarded));
    if (status->feed.load()) {
      gauges.emplace("wheelforge_feed_position", load(status->feed_position));
      gauges.emplace("wheelforge_feed_lag_seconds",
                     static_cast<double>(status->feed_lag_micros.load()) / 1e6);
      const std::int64_t read_at = status->feed_read_at.load();
      gauges.emplace("wheelforge_feed_age_seconds",
                     read_at == 0 ? 0.0 : static_cast<double>(now_micros() - read_at) / 1e6);
    }
    gauges.emplace("wheelforge_catalog_reachable",
                   status->readiness.reachable(Readiness::Part::catalog) ? 1 : 0);
    gauges.emplace("wheelforge_blob_store_reachable",
                   status->readiness.reachable(Readiness::Part::blob_store) ? 1 : 0);
  }
  std::string body = status != nullptr ? status->metrics.render(gauges) : Metrics().render(gauges);
  if (const StoreMetrics* stores = ctx.env.services.store_metrics; stores != nullptr) {
    body += stores->render();
  }
  if (const Upstreams* upstreams = ctx.env.upstreams; upstreams != nullptr) {
    // Per upstream (a handful, named in the configuration): page cache hits and misses,
    // failed fetches, bytes received.
    body += "# TYPE wheelforge_upstream_page_cache_bytes gauge\n";
    body +=
        "wheelforge_upstream_page_cache_bytes " + std::to_string(upstreams->memory_bytes()) + "\n";
    for (const auto& [metric, help] :
         {std::pair{"hits", "pages answered from the cache within their TTL"},
          std::pair{"misses", "pages fetched or revalidated"},
          std::pair{"errors", "fetches that failed"}, std::pair{"bytes", "bytes received"}}) {
      body += std::string("# HELP wheelforge_upstream_") + metric + "_total " + help + "\n";
      body += std::string("# TYPE wheelforge_upstream_") + metric + "_total counter\n";
      for (std::size_t i = 0; i < upstreams->configs().size(); ++i) {
        const UpstreamCounters& c = upstreams->counters(i);
        const std::string_view m = metric;
        const auto& counter = m == "hits"     ? c.hits
                              : m == "misses" ? c.misses
                              : m == "errors" ? c.errors
                                              : c.bytes;
        body += std::string("wheelforge_upstream_") + metric + "_total{upstream=\"" +
                upstreams->configs()[i].name + "\"} " + std::to_string(counter.load()) + "\n";
      }
    }
    body +=
        "# HELP wheelforge_upstream_connections_opened_total connections opened to upstream "
        "indexes (kept ones are used again)\n"
        "# TYPE wheelforge_upstream_connections_opened_total counter\n"
        "wheelforge_upstream_connections_opened_total " +
        std::to_string(upstreams->connections_opened()) + "\n";
    // Local names that also exist upstream, as far as their pages are known (fetched, or
    // read from their disk copies): the names the ownership guard protects.
    body +=
        "# HELP wheelforge_upstream_shadowed_projects local projects whose name also "
        "exists on the upstream (from cached pages)\n";
    body += "# TYPE wheelforge_upstream_shadowed_projects gauge\n";
    for (std::size_t i = 0; i < upstreams->configs().size(); ++i) {
      const std::size_t shadowed = upstreams->count_known(
          i, [&](std::string_view name) { return snap.find_project(name) != nullptr; });
      body += "wheelforge_upstream_shadowed_projects{upstream=\"" + upstreams->configs()[i].name +
              "\"} " + std::to_string(shadowed) + "\n";
    }
  }
  if (build::Runner* runner = ctx.env.services.runner; runner != nullptr) {
    // What the compile cache did for the builds this server's runner finished.
    const build::Runner::CompileCacheTotals cc = runner->compile_cache_totals();
    body +=
        "# HELP wheelforge_build_compile_cache_hits_total compiles of finished builds answered "
        "from the compile cache\n"
        "# TYPE wheelforge_build_compile_cache_hits_total counter\n"
        "wheelforge_build_compile_cache_hits_total " +
        std::to_string(cc.hits) +
        "\n"
        "# HELP wheelforge_build_compile_cache_misses_total compiles of finished builds that ran "
        "and were stored in the compile cache\n"
        "# TYPE wheelforge_build_compile_cache_misses_total counter\n"
        "wheelforge_build_compile_cache_misses_total " +
        std::to_string(cc.misses) +
        "\n"
        "# HELP wheelforge_build_compile_cache_bytes disk taken by a recipe's compile cache "
        "after its latest build\n"
        "# TYPE wheelforge_build_compile_cache_bytes gauge\n";
    for (const auto& [recipe, bytes] : cc.size_bytes) {
      body += "wheelforge_build_compile_cache_bytes{recipe=\"" + recipe + "\"} " +
              std::to_string(bytes) + "\n";
    }
  }
  Response r;
  r.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  r.body = std::move(body);
  return r;
}

Response handle_not_found(const Request& /*req*/, Context& /*ctx*/) {
  return not_found("not found");
}

}  // namespace wf::handlers
