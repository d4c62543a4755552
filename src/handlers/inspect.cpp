// The wheel inspector: GET /api/files/<sha256>/contents (JSON) and its page /inspect/<sha256>.
// Both read the stored wheel (its central directory and the tables of its ELF members, never
// extracting anything), so they run on a worker; the answer is cached per snapshot under the
// file's digest.

#include <functional>
#include <memory>
#include <optional>
#include <variant>

#include "handlers.hpp"
#include "read.hpp"
#include "ui.hpp"
#include "wheelforge/archive/elf.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/ui/pages.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

// What the stored wheel holds; a wheel the reader cannot take apart any more (it was accepted
// once) is the server's problem, not the request's.
Result<core::WheelInspection> inspect_stored(const core::FileRecord& file,
                                             const store::BlobStore& store) {
  // The blob file, or ranged reads of an object store's blob: only the parts inspected.
  auto reader = store.open_reader(file.sha256);
  if (!reader) {
    return make_error(reader.error().code == Errc::not_found ? Errc::internal : reader.error().code,
                      "cannot read the stored " + file.filename + ": " + reader.error().message);
  }
  auto members = archive::list_wheel_members(**reader);
  if (!members) {
    return make_error(members.error().code == Errc::invalid ? Errc::internal : members.error().code,
                      "cannot read the stored " + file.filename + ": " + members.error().message);
  }
  auto binaries = archive::inspect_wheel_binaries(**reader);
  if (!binaries) {
    return make_error(
        binaries.error().code == Errc::invalid ? Errc::internal : binaries.error().code,
        "cannot read the binaries of the stored " + file.filename + ": " +
            binaries.error().message);
  }
  return core::inspect_contents(std::move(*members), *binaries);
}

// The file a request names by digest: found, or the error to answer.
Result<const core::FileRecord*> file_of(const Context& ctx, const std::string& sha256) {
  if (!is_sha256_hex(sha256)) return make_error(Errc::not_found, "no such file");
  const core::FileRecord* file = ctx.snapshot.find_file_by_sha256(sha256);
  if (file == nullptr) return make_error(Errc::not_found, "no such file");
  if (file->kind != core::DistKind::wheel) {
    return make_error(Errc::not_found, file->filename +
                                           " is a source distribution: only wheels "
                                           "are inspected");
  }
  if (ctx.env.services.store == nullptr) return make_error(Errc::unavailable, "no store");
  return file;
}

// The page under `key`, rendered from the inspection; an inspection that fails is answered as
// its error and not cached.
Result<std::shared_ptr<const snapshot::Page>> inspected_page(
    const Context& ctx, const core::FileRecord& file, const std::string& key,
    const std::function<std::string(const core::WheelInspection&)>& render) {
  std::optional<Error> failed;
  auto page = ctx.snapshot.derived_page(key, [&]() -> std::string {
    auto inspection = inspect_stored(file, *ctx.env.services.store);
    if (!inspection) {
      failed = inspection.error();
      return {};
    }
    return render(*inspection);
  });
  if (!page->body.empty()) return page;
  if (!failed) {
    // Cached empty by an earlier failure: inspect again for the reason.
    auto inspection = inspect_stored(file, *ctx.env.services.store);
    if (!inspection) return inspection.error();
    return make_error(Errc::internal, "the inspection of " + file.filename + " is empty");
  }
  return *failed;
}

}  // namespace

Response handle_file_contents(const Request& req, Context& ctx) {
  auto file = file_of(ctx, req.segments[2]);
  if (!file) return error_response(file.error());
  auto page = inspected_page(ctx, **file, "/api/files/" + (*file)->sha256 + "/contents",
                             [&](const core::WheelInspection& inspection) {
                               return render::render_file_contents(**file, inspection);
                             });
  if (!page) return error_response(page.error());
  Response r;
  r.set("Content-Type", "application/json");
  r.set("Cache-Control", "max-age=0, must-revalidate");
  r.set("ETag", (*page)->etag);
  if (etag_matches(req.header("if-none-match"), (*page)->etag)) {
    r.status = 304;
    r.body = std::string();
    return r;
  }
  r.body = std::shared_ptr<const std::string>(*page, &(*page)->body);
  return r;
}

Response handle_inspect_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = call.require_read()) return std::move(*denied);
  auto file = file_of(ctx, req.segments[1]);
  if (!file) {
    if (file.error().code == Errc::not_found) return call.not_found_page(file.error().message);
    return error_response(file.error());
  }
  // The inspection runs only when the page is rendered (not when it is cached), at most once.
  std::optional<core::WheelInspection> inspection;
  std::optional<Error> failed;
  const auto render = [&](const ui::Site& site) -> std::string {
    if (!inspection && !failed) {
      auto inspected = inspect_stored(**file, *ctx.env.services.store);
      if (inspected) {
        inspection = std::move(*inspected);
      } else {
        failed = inspected.error();
      }
    }
    return inspection ? ui::render_file_page(site, **file, *inspection) : std::string();
  };
  Response r = call.shared_page("/inspect/" + (*file)->sha256, render);
  if (failed) return error_response(*failed);
  const auto* cached = std::get_if<std::shared_ptr<const std::string>>(&r.body);
  if (r.status == 200 && cached != nullptr && *cached && (*cached)->empty()) {
    // Cached empty by an earlier failure: inspect again for the reason.
    auto again = inspect_stored(**file, *ctx.env.services.store);
    return error_response(again ? make_error(Errc::internal, "the inspection page is empty")
                                : again.error());
  }
  return r;
}

}  // namespace wf::handlers
