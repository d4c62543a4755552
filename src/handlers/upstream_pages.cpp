// /simple/<name>/ for a name upstream indexes may serve (README, "Upstreams"): the local files
// and those of every upstream allowed to serve the name, merged into one page. Runs on a worker
// (the upstream pages may have to be fetched).

#include "upstream_pages.hpp"

#include <algorithm>
#include <set>

#include "read.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/render/simple.hpp"

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
      continue;
    }
    if (!listing.entry->found) continue;
    found = true;
    for (const auto& f : listing.entry->page.files) {
      if (core::in_cooldown(f, listing.upstream->cooldown_days, now)) continue;
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

Response merged_project_page(const Request& req, Context& ctx, std::string_view project,
                             core::PageFormat format) {
  auto merged = merge_upstream_files(ctx.snapshot, *ctx.env.upstreams, project, now_micros());
  if (!merged) return error_response(merged.error());
  render::ProjectPage page;
  page.name = std::string(project);
  page.files = ctx.snapshot.files_of(project);
  for (const auto& f : merged->upstream_files) page.files.push_back(&f);
  std::stable_sort(page.files.begin(), page.files.end(), listing_before);
  for (const auto* f : page.files) {
    if (page.versions.empty() || page.versions.back() != f->version) {
      page.versions.push_back(f->version);
    }
  }
  page.stale = merged->stale;
  auto rendered = std::make_shared<snapshot::Page>();
  rendered->body = render::render_project(format, page);
  rendered->gzip = render::gzip(rendered->body);
  rendered->etag = "\"" + crypto::sha256_hex(rendered->body).substr(0, 32) + "\"";
  rendered->format = format;
  Response r;
  r.set("Content-Type", std::string(core::content_type(format)));
  r.set("Vary", "Accept, Accept-Encoding");
  r.set("Cache-Control", "max-age=0, must-revalidate");
  if (!merged->stale.empty()) {
    std::string value;
    for (const auto& s : merged->stale) {
      if (!value.empty()) value += ", ";
      value += s.name + "; age=" + std::to_string(s.age_seconds);
    }
    r.set("Wheelforge-Upstream-Stale", value);
  }
  return with_page_body(req, rendered, std::move(r));
}

}  // namespace wf::handlers
