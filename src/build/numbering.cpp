// Step 8, number the build, and the yanks of the ingest step: how a rebuild of a cell is
// published next to the builds before it.
//
// A wheel's file name is taken forever once published (files are immutable; deleted names stay
// reserved), and a rebuild produces the same name with other bytes. So a rebuild is published
// under the next build tag (`...+cu128torch2.8-1-cp312-...`, then `-2-`), which pip prefers
// over the same version and tags without one (docs/packaging.md, "Build tags"), and which the
// variant views rank first.
// The number is one more than the highest any file of that name has had: the catalog's live
// files and its deleted ones, compared by core::rebuild_key (project, version with its label,
// python, ABI and platform tags). A rebuild whose contents equal those of the published build
// with the highest number (archive::wheel_content_digest: the same files with the same bytes;
// the build tag, RECORD and zip metadata do not count) publishes nothing: the job succeeds,
// naming the file that is already there.

#include "steps.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/util/log.hpp"

namespace wf::build {

namespace {

// The wheels of the catalog whose name is `key` whatever their build tag.
struct Family {
  std::optional<std::uint64_t> highest;     ///< over live and deleted files
  std::optional<core::FileRecord> current;  ///< the live file with the highest number
  std::uint64_t current_number = 0;
  std::vector<core::FileRecord> live;
  std::vector<std::uint64_t> live_numbers;
};

Result<Family> family_of(JobContext& ctx, const std::string& key) {
  Family family;
  auto contents = ctx.services.catalog.load_project(ctx.recipe.project);
  if (!contents) return contents.error();
  for (const auto& f : contents->files) {
    auto name = core::parse_dist_filename(f.filename);
    if (!name || name->kind != core::DistKind::wheel || core::rebuild_key(*name) != key) continue;
    const std::uint64_t n = core::build_number(name->tags);
    if (!family.highest || n > *family.highest) family.highest = n;
    if (!family.current || n > family.current_number) {
      family.current = f;
      family.current_number = n;
    }
    family.live.push_back(f);
    family.live_numbers.push_back(n);
  }
  auto deleted = ctx.services.catalog.deleted_files(ctx.recipe.project);
  if (!deleted) return deleted.error();
  for (const auto& d : *deleted) {
    auto name = core::parse_dist_filename(d.filename);
    if (!name || name->kind != core::DistKind::wheel || core::rebuild_key(*name) != key) continue;
    const std::uint64_t n = core::build_number(name->tags);
    if (!family.highest || n > *family.highest) family.highest = n;
  }
  return family;
}

}  // namespace

Status number_build(JobContext& ctx) {
  auto name = core::parse_dist_filename(ctx.wheel.filename().string());
  if (!name) return make_error(Errc::internal, "built wheel: " + name.error().message);
  ctx.build_number = core::build_number(name->tags);
  auto family = family_of(ctx, core::rebuild_key(*name));
  if (!family)
    return make_error(family.error().code, "number the build: " + family.error().message);
  if (!family->highest) {
    ctx.note("[retagging] " + ctx.wheel.filename().string() +
             " is the first build of its file name");
    return ok_status();
  }

  if (family->current) {
    // Contents, not bytes: no two builds have the same bytes (zip times, and nvcc's own
    // temporary names inside the binaries), and the build tag changes WHEEL and RECORD.
    const core::FileRecord& published = *family->current;
    auto ours = archive::wheel_content_digest(ctx.wheel);
    if (!ours) return make_error(ours.error().code, "number the build: " + ours.error().message);
    auto published_file = ctx.services.store.local_copy(published.sha256);
    auto theirs = published_file ? archive::wheel_content_digest(*published_file)
                                 : Result<std::string>(published_file.error());
    if (!theirs) {
      ctx.note("[retagging] cannot compare with the published " + published.filename + " (" +
               theirs.error().message + "); publishing a new build");
    } else if (*ours == *theirs) {
      ctx.build_number = family->current_number;
      ctx.done_early = "the identical file is already published: " + published.filename +
                       " (build " + std::to_string(family->current_number) +
                       "); nothing new to publish";
      ctx.keep(ctx.services.jobs.record_wheel(ctx.job.id, published.filename, ctx.build_number),
               "the wheel's name");
      ctx.note("[retagging] " + ctx.wheel.filename().string() +
               " has the contents of the published " + published.filename +
               ": nothing new to publish");
      return ok_status();
    }
  }
  ctx.build_number = *family->highest + 1;
  ctx.note("[retagging] " + ctx.wheel.filename().string() +
           " was published before (highest build " + std::to_string(*family->highest) +
           (family->current ? ", other contents" : ", deleted") + "): this rebuild is build " +
           std::to_string(ctx.build_number));
  archive::WheelChanges changes;
  changes.build_tag = std::to_string(ctx.build_number);
  return rewrite_job_wheel(ctx, changes, "numbered");
}

void yank_superseded_builds(JobContext& ctx, const std::string& published) {
  if (ctx.build_number == 0) return;
  auto build = ctx.services.jobs.find_build(ctx.job.build_id);
  if (!build || !build->has_value() || !(*build)->yank_superseded) return;
  auto name = core::parse_dist_filename(published);
  if (!name) return;
  auto family = family_of(ctx, core::rebuild_key(*name));
  if (!family) {
    ctx.note("[ingesting] cannot yank the superseded builds: " + family.error().message);
    return;
  }
  const std::string reason = "superseded by build " + std::to_string(ctx.build_number);
  for (std::size_t i = 0; i < family->live.size(); ++i) {
    const core::FileRecord& f = family->live[i];
    if (family->live_numbers[i] >= ctx.build_number || f.yanked) continue;
    catalog::Actor runner;
    runner.origin = "build";
    runner.address = "job " + std::to_string(ctx.job.id);
    auto yanked =
        ctx.services.catalog.set_yanked(f.project, std::nullopt, f.filename, reason, runner);
    if (!yanked) {
      ctx.note("[ingesting] cannot yank " + f.filename + ": " + yanked.error().message);
      log::warn("job={} cannot yank {}: {}", ctx.job.id, f.filename, yanked.error().message);
      continue;
    }
    ctx.note("[ingesting] yanked " + f.filename + " (" + reason + ")");
  }
}

}  // namespace wf::build
