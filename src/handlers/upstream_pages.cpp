// /simple/<name>/ for a name upstream indexes may serve (docs/upstreams.md): the local files
// and those of every upstream allowed to serve the name, merged into one page. Runs on a worker
// (the upstream pages may have to be fetched).

#include "upstream_pages.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "handlers.hpp"
#include "read.hpp"
#include "wheelforge/archive/reader.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/simple.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

/// The record a listing needs of an upstream file; nullopt when its name is not a wheel or
/// sdist of `project` (a page may list anything; only what a client could install is offered).
std::optional<core::FileRecord> record_of(const core::UpstreamFile& f, std::string_view upstream,
                                          std::string_view project) {
  auto name = core::parse_dist_filename(f.filename);
  if (!name || name->normalized_name != project) return std::nullopt;
  core::FileRecord r;
  r.filename = f.filename;
  r.project = std::string(project);
  r.version = name->version.str();
  r.kind = name->kind;
  r.sha256 = f.sha256;
  r.size = f.size.value_or(0);
  r.upload_time = f.upload_time.value_or(0);
  r.requires_python = f.requires_python;
  r.metadata_sha256 = f.metadata_sha256;
  r.yanked = f.yanked;
  r.tags = name->tags;
  const std::vector<std::string> no_requirements;
  auto hints = core::hints_for_distribution(project, name->version.public_str(),
                                            name->version.local_str(), no_requirements);
  r.hints = hints ? std::move(*hints) : core::parse_local_label(name->version.local_str());
  r.upstream = std::string(upstream);
  return r;
}

/// The key of a rendered merged page: the snapshot's generation (a local change makes a new
/// one), the format, the view and the project.
std::string merged_key(const Context& ctx, const std::optional<core::ViewSelector>& view,
                       std::string_view project, core::PageFormat format) {
  std::string key = std::to_string(ctx.snapshot.generation());
  key += '\n';
  key += std::to_string(static_cast<int>(format));
  key += '\n';
  if (view) key += "/" + view->path();
  key += '\n';
  key += project;
  return key;
}

Response merged_response(const Request& req, const std::shared_ptr<const snapshot::Page>& page,
                         const std::vector<render::StaleUpstream>& stale) {
  Response r;
  r.set("Content-Type", std::string(core::content_type(page->format)));
  r.set("Vary", "Accept, Accept-Encoding");
  r.set("Cache-Control", "max-age=0, must-revalidate");
  if (!stale.empty()) {
    std::string value;
    for (const auto& s : stale) {
      if (!value.empty()) value += ", ";
      value += s.name + "; age=" + std::to_string(s.age_seconds);
    }
    r.set("Wheelforge-Upstream-Stale", value);
  }
  return with_page_body(req, page, std::move(r));
}

bool listing_before(const core::FileRecord* a, const core::FileRecord* b) {
  const auto va = core::Version::parse(a->version);
  const auto vb = core::Version::parse(b->version);
  if (va && vb && *va != *vb) return *va < *vb;
  return a->filename < b->filename;
}

}  // namespace

Result<MergedFiles> merge_upstream_files(const snapshot::Snapshot& snap, Upstreams& upstreams,
                                         std::string_view project, Micros now) {
  const bool local = snap.find_project(project) != nullptr;
  MergedFiles out;
  out.local = local;
  std::set<std::string> names;
  for (const auto* f : snap.files_of(project)) {
    names.insert(core::canonical_file_key(f->filename));
  }
  bool found = local;
  std::optional<Error> failure;
  for (const auto& listing : upstreams.pages(project, local, now)) {
    if (listing.stale_age) {
      out.stale.push_back(
          render::StaleUpstream{listing.upstream->name, listing.stale_age->count()});
    }
    if (!listing.entry) {
      if (listing.error && !failure) failure = listing.error;
      out.complete = false;
      continue;
    }
    const Micros ttl = static_cast<Micros>(listing.upstream->metadata_ttl.count()) * 1'000'000;
    out.valid_until = std::min(out.valid_until, listing.entry->validated + ttl);
    out.sources.push_back(Upstreams::RenderedMerge::Source{
        static_cast<std::size_t>(listing.upstream - upstreams.configs().data()), listing.entry});
    if (!listing.entry->found) continue;
    found = true;
    for (const auto& f : listing.entry->page.files) {
      if (core::in_cooldown(f, listing.upstream->cooldown_days, now)) {
        // Offered once its cooldown is over: the page changes then.
        if (f.upload_time) {
          out.valid_until =
              std::min(out.valid_until,
                       *f.upload_time + static_cast<Micros>(*listing.upstream->cooldown_days) *
                                            86'400 * 1'000'000);
        }
        continue;
      }
      auto record = record_of(f, listing.upstream->name, project);
      // A name listed here already (locally, or by an earlier upstream) keeps that file.
      if (!record || !names.insert(core::canonical_file_key(record->filename)).second) continue;
      out.upstream_files.push_back(std::move(*record));
    }
  }
  if (!found) {
    // Nothing here and no upstream has it: a 404, unless an upstream could not be asked, when
    // a 404 would tell clients something nobody knows.
    if (failure) {
      return make_error(Errc::upstream,
                        "no such project here, and an upstream index could not "
                        "be asked: " +
                            failure->message);
    }
    return make_error(Errc::not_found, "no such project: " + std::string(project));
  }
  return out;
}

std::optional<Response> current_merged_page(const Request& req, Context& ctx,
                                            const std::optional<core::ViewSelector>& view,
                                            std::string_view project, core::PageFormat format) {
  Upstreams* upstreams = ctx.env.upstreams;
  if (upstreams == nullptr) return std::nullopt;
  auto page =
      upstreams->rendered_merge(merged_key(ctx, view, project, format), project, now_micros());
  if (!page) return std::nullopt;
  return merged_response(req, page, {});
}

Response merged_project_page(const Request& req, Context& ctx,
                             const std::optional<core::ViewSelector>& view,
                             std::string_view project, core::PageFormat format) {
  // Another request may have made it meanwhile.
  if (auto current = current_merged_page(req, ctx, view, project, format)) {
    return std::move(*current);
  }
  const Micros now = now_micros();
  auto merged = merge_upstream_files(ctx.snapshot, *ctx.env.upstreams, project, now);
  if (!merged) return error_response(merged.error());
  render::ProjectPage page;
  page.name = std::string(project);
  page.files = ctx.snapshot.files_of(project);
  for (const auto& f : merged->upstream_files) page.files.push_back(&f);
  std::stable_sort(page.files.begin(), page.files.end(), listing_before);
  if (view) {
    std::vector<std::string> public_versions;
    public_versions.reserve(page.files.size());
    for (const auto* f : page.files) {
      const auto v = core::Version::parse(f->version);
      public_versions.push_back(v ? v->public_str() : f->version);
    }
    std::vector<const core::FileRecord*> chosen;
    for (const std::size_t i : snapshot::select_view_files(*view, page.files, public_versions)) {
      chosen.push_back(page.files[i]);
    }
    page.files = std::move(chosen);
  }
  for (const auto* f : page.files) {
    if (page.versions.empty() || page.versions.back() != f->version) {
      page.versions.push_back(f->version);
    }
  }
  page.stale = merged->stale;
  std::shared_ptr<const snapshot::Page> rendered =
      snapshot::make_page(render::render_project(format, page), format);
  // Kept as rendered while its listings stay current; a page with a stale or missing upstream
  // (it names ages, or lacks files) is made for each request.
  if (merged->stale.empty() && merged->complete && now < merged->valid_until) {
    ctx.env.upstreams->keep_rendered_merge(
        merged_key(ctx, view, project, format),
        Upstreams::RenderedMerge{rendered, std::move(merged->sources), merged->valid_until});
  }
  return merged_response(req, rendered, merged->stale);
}

Response growing_file_answer(const Request& req, const GrowingFile& growing) {
  const FileDownload& d = *growing.download;
  const FileDownload::Progress p = d.progress();
  if (p.state == FileDownload::State::failed) return error_response(d.error());
  if (p.state == FileDownload::State::running) {
    return error_response(make_error(Errc::internal, d.shown() + ": still downloading"));
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(growing.blob_path, ec);
  if (ec) {
    // Evicted at once by a later download (a tiny file cache bound): fetched again next time.
    return error_response(make_error(Errc::unavailable, d.shown() + ": stored, then evicted"));
  }
  return file_response(req, growing.blob_path, size, growing.etag, growing.content_type);
}

// /upstream/<upstream>/<sha256>/<filename>[.metadata]
Response handle_upstream_file(const Request& req, Context& ctx) {
  const auto& seg = req.segments;
  const auto not_found = [](std::string message) {
    return error_response(make_error(Errc::not_found, std::move(message)));
  };
  Upstreams* upstreams = ctx.env.upstreams;
  if (upstreams == nullptr || seg.size() != 4) return not_found("no such file");
  const core::UpstreamConfig* upstream = upstreams->find(seg[1]);
  if (upstream == nullptr) return not_found("no such upstream: " + sanitize_for_log(seg[1]));
  const std::string& sha256 = seg[2];
  std::string_view name = seg[3];
  constexpr std::string_view kMetadataSuffix = ".metadata";
  const bool metadata = name.size() > kMetadataSuffix.size() && name.ends_with(kMetadataSuffix);
  if (metadata) name.remove_suffix(kMetadataSuffix.size());
  auto parsed = core::parse_dist_filename(name);
  if (!is_sha256_hex(sha256) || !parsed) return not_found("no such file");
  const std::string& project = parsed->normalized_name;
  // Only a file the upstream's page lists now, for a name it may serve: the URL is not a way
  // around the ownership guard or the cooldown.
  const bool local = ctx.snapshot.find_project(project) != nullptr;
  const Micros now = now_micros();
  auto listed = upstreams->listed_file(*upstream, project, name, sha256, local, now);
  if (!listed) return error_response(listed.error());
  if (!*listed) return not_found("no such file");
  const core::UpstreamFile& file = **listed;
  const store::BlobStore& store = *ctx.env.services.store;
  if (metadata && file.metadata_sha256.empty()) {
    // The upstream offers no core metadata: read from the wheel once it is stored here
    // (bounded: archive::Limits), never fetched for it.
    if (parsed->kind != core::DistKind::wheel) return not_found("no metadata for this file");
    // The blob file, or ranged reads of an object store's blob: only the parts read_wheel
    // needs (docs/storage.md, "Reading parts of a blob").
    auto wheel = store.open_reader(file.sha256);
    if (!wheel) {
      if (wheel.error().code == Errc::not_found) return not_found("no metadata for this file");
      return error_response(wheel.error());
    }
    auto contents = archive::read_wheel(**wheel, project, parsed->version_text);
    if (!contents) {
      if (contents.error().code == Errc::unavailable) return error_response(contents.error());
      return not_found("no metadata for this file: the stored wheel cannot be read: " +
                       contents.error().message);
    }
    Response r;
    r.set("Content-Type", "text/plain; charset=utf-8");
    r.set("ETag", "\"" + crypto::sha256_hex(contents->metadata) + "\"");
    r.set("Cache-Control", "public, max-age=31536000, immutable");
    r.body = std::move(contents->metadata);
    return r;
  }
  const std::string want = metadata ? file.metadata_sha256 : file.sha256;
  if (want.empty()) return not_found("no metadata for this file");
  const std::string content_type =
      metadata ? "text/plain; charset=utf-8" : "application/octet-stream";

  std::string path = store.blob_file(want);
  const BlobAnswer answer{want, std::nullopt, "\"" + want + "\"", content_type,
                          std::string(name) + (metadata ? std::string(kMetadataSuffix) : "")};
  std::error_code ec;
  // Stored here: as a file (file backend), or as an object (a copy cached, or a HEAD).
  const bool stored = store.backend() == store::BlobBackend::file
                          ? std::filesystem::is_regular_file(path, ec)
                          : store.serving_path(want) || store.contains(want);
  if (stored) {
    // Its last use orders the eviction of the file cache (at most one write a minute).
    if (catalog::Catalog* cat = ctx.env.services.catalog;
        cat != nullptr && upstreams->use_to_record(want, now)) {
      if (auto st = cat->touch_upstream_blob(want, now); !st) {
        ctx.note = "upstream " + upstream->name + ": cannot record the use of " +
                   std::string(name) + ": " + st.error().message;
      }
    }
    return blob_response(req, ctx, answer);
  }
  // First download: fetched into the store's crash-safe temp file, hashed as it arrives, and
  // published only when its sha256 is the one the page lists; streamed to the client while it
  // is written. Requests for it meanwhile share the download.
  FileFetch fetch;
  fetch.upstream = upstream;
  fetch.url = metadata ? file.url + std::string(kMetadataSuffix) : file.url;
  fetch.sha256 = want;
  fetch.shown = std::string(name) + (metadata ? std::string(kMetadataSuffix) : "");
  if (!metadata) fetch.listed_size = file.size;
  fetch.max_bytes = ctx.env.services.ingestor != nullptr
                        ? ctx.env.services.ingestor->limits().max_file_size
                        : std::uint64_t{8} << 30U;
  fetch.request_id = req.id;
  auto started = upstreams->download_file(std::move(fetch), store, ctx.env.services.catalog);
  if (!started) return error_response(started.error());
  if (!started->download) {
    // Stored meanwhile (a download that just ended).
    if (store.backend() == store::BlobBackend::object_store ||
        std::filesystem::is_regular_file(path, ec)) {
      return blob_response(req, ctx, answer);
    }
    return error_response(make_error(
        Errc::io, "upstream " + upstream->name + ": " + std::string(name) + ": stored, then gone"));
  }
  ctx.note = "upstream " + upstream->name + ": " +
             (started->run ? "downloading " : "joining the download of ") +
             started->download->shown();
  GrowingFile growing;
  growing.download = started->download;
  growing.content_type = content_type;
  growing.etag = "\"" + want + "\"";
  growing.blob_path = std::move(path);
  // What needs the whole file is answered from it once stored.
  growing.wait_for_end = req.method == Method::head || !req.header("range").empty() ||
                         !req.header("if-none-match").empty();
  ctx.growing = std::move(growing);
  ctx.after_answer = std::move(started->run);
  Response r;
  r.status = 202;  // not sent: the server streams `growing`
  return r;
}

}  // namespace wf::handlers
