// The provenance of the runner's own wheels (docs/runner.md, "Provenance"): where their source
// came from, and the statement the server signs when a wheel is ingested.

#include <algorithm>

#include "files.hpp"
#include "steps.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::build {

namespace fs = std::filesystem;

Status record_git_commit(JobContext& ctx, const fs::path& root) {
  const fs::path output = ctx.work_dir / "source-commit.txt";
  if (auto st = remove_tree(output); !st) return st;
  auto status = ctx.run(ctx.command({"/usr/bin/git", "-C", root.string(), "rev-parse", "HEAD"},
                                    ctx.base_env, ctx.work_dir, output));
  if (!status) return make_error(status.error().code, "fetch source: " + status.error().message);
  if (ctx.stopped()) return make_error(Errc::unavailable, "stopped");
  const std::string commit(trim(ctx.executor.read_log(output, 0, 4096)));
  const bool hex = !commit.empty() && std::all_of(commit.begin(), commit.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (!status->success() || !hex || (commit.size() != 40 && commit.size() != 64)) {
    return make_error(Errc::invalid,
                      ctx.failure("fetch source: git rev-parse HEAD", *status, output, 0));
  }
  ctx.source_digest = {"gitCommit", commit};
  ctx.note("[preparing] source at commit " + commit);
  return ok_status();
}

std::optional<ingest::Attestations> signed_provenance(const JobContext& ctx) {
  if (!ctx.services.signer) return std::nullopt;
  render::BuildFacts facts;
  facts.builder = ctx.server_url;
  facts.recipe = ctx.recipe.name;
  facts.project = ctx.recipe.project;
  facts.version = ctx.job.version;
  facts.python = ctx.job.cell.python;
  facts.torch = ctx.job.cell.torch.str();
  facts.cuda = ctx.job.cell.cuda.str();
  facts.arch_list = ctx.recipe.arch_value;
  switch (ctx.recipe.source.kind) {
    case core::SourceSpec::Kind::git:
      facts.source_kind = "git";
      break;
    case core::SourceSpec::Kind::path:
      facts.source_kind = "path";
      break;
    case core::SourceSpec::Kind::index_sdist:
      facts.source_kind = "index-sdist";
      break;
  }
  facts.source_uri = ctx.source_uri;
  facts.source_digest = ctx.source_digest;
  facts.toolchain = ctx.toolchain;
  facts.container = ctx.provenance;
  facts.container.engine_command.clear();
  facts.build_id = ctx.job.build_id;
  facts.job_id = ctx.job.id;
  facts.runner = ctx.runner;
  if (ctx.job.started_at) facts.started_at = iso8601_micros(*ctx.job.started_at);
  ingest::Attestations a;
  a.sign = [signer = ctx.services.signer, facts = std::move(facts)](std::string_view filename,
                                                                    std::string_view sha256) {
    return signer->provenance(facts, filename, sha256);
  };
  return a;
}

}  // namespace wf::build
