// The maintenance commands (backup, gc, fsck, reinspect, config check): what they print, and their
// exit statuses, around the functions of maintenance.cpp.

#include <algorithm>
#include <iostream>
#include <utility>

#include "command_support.hpp"
#include "wheelforge/app/maintenance.hpp"
#include "wheelforge/build/executor.hpp"
#include "wheelforge/build/host_check.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using detail::format_bytes;

// `s` as a shell word: as it is when it needs no quoting, else in single quotes.
std::string shell_word(std::string_view s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '/' || c == '+' || c == ',' || c == ':' || c == '=' ||
           c == '@';
  });
  return plain ? std::string(s) : shell_quote(s);
}

std::string_view role_name(catalog::BlobRole role) {
  switch (role) {
    case catalog::BlobRole::file:
      return "file";
    case catalog::BlobRole::metadata:
      return "METADATA";
    case catalog::BlobRole::provenance:
      return "provenance";
  }
  return "file";
}

std::string describe_refs(const std::vector<catalog::BlobRef>& refs) {
  std::string out;
  for (const auto& r : refs) {
    if (!out.empty()) out += ", ";
    out += std::string(role_name(r.role)) + " of " + r.filename;
  }
  return out;
}

// One line of what a wheel's binaries say: "2 binaries, torch stable-abi (from 2.9 on), CUDA 13
// (libcudart.so.13), glibc 2.34"; "no torch" when none binds to torch.
std::string describe_findings(const core::WheelFindings& w) {
  if (w.binaries.empty()) return "no binaries";
  std::string out =
      std::to_string(w.binaries.size()) + (w.binaries.size() == 1 ? " binary, " : " binaries, ");
  out += w.binding() == core::TorchBinding::none
             ? std::string("no torch")
             : "torch " + std::string(core::binding_name(w.binding()));
  if (w.torch_from) out += " (from " + w.torch_from->str() + " on)";
  if (const auto* cuda = w.cuda_evidence()) {
    out += cuda->cuda_major ? ", CUDA " + std::to_string(*cuda->cuda_major) : ", links CUDA";
    out += " (" + cuda->cuda_library + ")";
  }
  if (const auto glibc = w.glibc(); !glibc.empty()) out += ", glibc " + glibc;
  const auto unreadable = std::count_if(w.binaries.begin(), w.binaries.end(),
                                        [](const auto& b) { return !b.problem.empty(); });
  if (unreadable > 0) out += ", " + std::to_string(unreadable) + " unreadable";
  return out;
}

}  // namespace

int backup(const Settings& settings, const BackupOptions& options) {
  auto report = backup_data_dir(settings, options);
  if (!report) {
    std::cerr << "error: " << report.error().message << "\n";
    return 2;
  }
  std::cout << "backed up " << report->files << " files of " << report->projects << " projects and "
            << report->tokens << " tokens to " << options.dest.string() << "\n"
            << report->blobs << " blobs (" << format_bytes(report->bytes) << "): " << report->copied
            << " copied (" << report->reflinked << " as reflinks), " << report->linked
            << " hard-linked\n";
  if (report->linked > 0) {
    std::cout << "note: hard-linked blobs are the live files themselves: damage to one is "
                 "damage to both (back up without --link for independent copies)\n";
  }
  for (const auto& sha : report->missing) {
    std::cerr << "missing blob " << sha << " (not in the backup; run wheelforge fsck)\n";
  }
  for (const auto& sha : report->corrupt) {
    std::cerr << "corrupt blob " << sha << " (not in the backup; run wheelforge fsck)\n";
  }
  if (!report->missing.empty() || !report->corrupt.empty()) return 1;
  if (!report->catalog_dump.empty()) {
    std::cout << "catalog: " << report->catalog_dump.string() << " (pg_dump, custom format)\n"
              << "restore: createdb NEW && pg_restore --no-owner --dbname postgresql://.../NEW "
              << shell_word(report->catalog_dump.string())
              << ", then wheelforge serve --catalog postgresql://.../NEW --data-dir "
              << shell_word(options.dest.string()) << " (docs/operations.md)\n";
    return 0;
  }
  std::cout << "restore: wheelforge serve --data-dir " << shell_word(options.dest.string()) << "\n";
  return 0;
}

int gc(const Settings& settings, const GcOptions& options) {
  auto report = collect_garbage(settings, options);
  if (!report) {
    std::cerr << "error: " << report.error().message << "\n";
    return 1;
  }
  const char* verb = options.dry_run ? "would remove " : "removed ";
  for (const auto& name : report->evicted) std::cout << "evicted upstream " << name << "\n";
  if (options.upstream_file_cache != 0 && !options.dry_run) {
    std::cout << "evicted " << report->evicted.size() << " upstream files ("
              << format_bytes(report->evicted_bytes) << ") beyond upstream_file_cache "
              << format_bytes(options.upstream_file_cache) << "\n";
  }
  if (report->page_copies_removed != 0) {
    std::cout << "removed " << report->page_copies_removed << " upstream page copies ("
              << format_bytes(report->page_copies_bytes) << ") beyond upstream_page_disk_cache "
              << format_bytes(options.upstream_page_disk_cache) << "\n";
  }
  if (report->pip_cache_removed != 0) {
    std::cout << "removed " << report->pip_cache_removed << " files of the builds' pip cache ("
              << format_bytes(report->pip_cache_bytes) << ") beyond pip_cache "
              << format_bytes(options.pip_cache) << "\n";
  }
  for (const auto& sha : report->removed) std::cout << verb << sha << "\n";
  for (const auto& p : report->unexpected) {
    std::cerr << "warning: " << p.string() << " is not a blob (left alone)\n";
  }
  std::cout << verb << report->removed.size() << " unreferenced blobs ("
            << format_bytes(report->removed_bytes) << "); kept " << report->referenced
            << " referenced and " << report->too_young << " younger than "
            << options.min_age.count() << "s; removed " << report->stale_temp_sessions
            << " stale temp sessions\n";
  return 0;
}

int fsck(const Settings& settings, const FsckOptions& options) {
  auto report = check_data_dir(settings, options);
  if (!report) {
    std::cerr << "error: " << report.error().message << "\n";
    return 2;
  }
  const FsckReport& r = *report;
  const std::string data = shell_word(settings.data_dir.string());
  const bool objects = settings.blob_store != "file";
  std::cout << "checked " << r.checked << " blobs referenced by " << r.files << " files\n";
  for (const auto& p : r.missing) {
    std::cout << "missing blob " << p.sha256 << ": " << p.detail << " (" << describe_refs(p.refs)
              << ")\n";
  }
  for (const auto& p : r.corrupt) {
    std::cout << "corrupt blob " << p.sha256 << ": " << p.detail << " (" << describe_refs(p.refs)
              << ")\n";
  }
  for (const auto& q : r.quarantined) std::cout << "quarantined " << q.string() << "\n";
  std::set<std::string> withdrawn;
  for (const auto& p : r.withdrawn) {
    for (const auto& ref : p.refs) withdrawn.insert(ref.filename);
  }
  for (const auto& name : withdrawn) {
    std::cout << "withdrew " << name
              << " (damaged: no longer listed, its URL answers 503 until it is healed)\n";
  }
  for (const auto& p : r.intact_again) {
    std::cout << "blob " << p.sha256 << " is intact again (" << describe_refs(p.refs)
              << "): " << (options.repair ? "served again" : "fsck --repair serves it again")
              << "\n";
  }
  for (const auto& p : r.unexpected) {
    std::cout << "unexpected file " << p.string() << " (not a blob; left alone)\n";
  }
  if (options.repair) {
    for (const auto& sha : r.removed_orphans) std::cout << "removed orphan blob " << sha << "\n";
  } else {
    for (const auto& sha : r.orphans) {
      std::cout << "orphan blob " << sha << " (no file references it; gc removes it)\n";
    }
  }
  std::cout << r.orphans.size() << " orphan blobs";
  if (r.young_orphans > 0) {
    std::cout << " (and " << r.young_orphans << " younger than " << options.min_age.count()
              << "s, not counted: maybe uploads in progress)";
  }
  std::cout << "\n";
  if (r.clean()) {
    std::cout << "ok\n";
    return 0;
  }
  // Rows are never removed here: the operator decides between healing and deleting.
  std::set<std::string> broken;
  for (const auto* list : {&r.missing, &r.corrupt}) {
    for (const auto& p : *list) {
      for (const auto& ref : p.refs) broken.insert(ref.filename);
    }
  }
  std::cout << r.missing.size() << " missing and " << r.corrupt.size() << " corrupt blobs; "
            << (options.repair ? "the files below are withdrawn (their URLs answer 503).\n"
                               : "the files below cannot be served correctly (fsck --repair "
                                 "withdraws them).\n")
            << "Heal a file by uploading or ingesting the same file again (wheelforge ingest "
               "--data-dir "
            << data << " FILE), or copy its blob back from a backup (BACKUP/blobs/... to the same ";
  if (objects) {
    std::cout << "key, blobs/..., under the object store's prefix";
  } else {
    std::cout << "path under " << data << "/blobs";
  }
  std::cout << ") and run wheelforge fsck --repair; or remove it:\n";
  for (const auto& name : broken) {
    std::cout << "  wheelforge delete --data-dir " << data << " " << shell_word(name) << "\n";
  }
  return 1;
}

int reinspect(const Settings& settings) {
  using Outcome = ReinspectedWheel::Outcome;
  const std::string data = shell_word(settings.data_dir.string());
  ReinspectOptions options;
  options.max_members = settings.max_archive_members;
  options.max_inflated_bytes = settings.max_inflated_size;
  auto report = reinspect_data_dir(settings, options, [&](const ReinspectedWheel& w) {
    switch (w.outcome) {
      case Outcome::recorded:
        std::cout << "recorded " << w.filename << ": " << describe_findings(*w.findings) << "\n";
        if (!w.detail.empty()) {
          std::cout << "warning: " << w.filename
                    << ": the binaries contradict the label (ingest refuses such a wheel now; "
                       "this one stays served): "
                    << sanitize_for_log(w.detail) << "\n";
        }
        break;
      case Outcome::already:
        std::cout << "kept " << w.filename << ": findings were recorded meanwhile\n";
        break;
      case Outcome::gone:
        std::cout << "skipped " << w.filename << ": deleted meanwhile\n";
        break;
      case Outcome::skipped:
        std::cout << "skipped " << w.filename << ": " << sanitize_for_log(w.detail) << "\n";
        break;
      case Outcome::failed:
        std::cout << "failed " << w.filename << ": " << sanitize_for_log(w.detail) << "\n";
        break;
    }
    std::cout << std::flush;
  });
  if (!report) {
    std::cerr << "error: " << report.error().message << "\n";
    return 2;
  }
  const std::size_t left = report->count(Outcome::skipped) + report->count(Outcome::failed);
  std::cout << "recorded the findings of " << report->count(Outcome::recorded) << " of "
            << report->wheels.size() << " wheels without findings (" << report->contradicting()
            << " contradicting their labels); " << report->count(Outcome::already)
            << " recorded meanwhile, " << report->count(Outcome::gone) << " deleted meanwhile, "
            << left << " left without findings\n";
  if (report->contradicting() > 0) {
    std::cout << "Wheels whose binaries contradict their labels stay stored and served; yank "
                 "them (wheelforge yank) or remove them (wheelforge delete --data-dir "
              << data << " FILE) where they cannot load.\n";
  }
  if (left > 0) {
    std::cout << "Wheels left without findings are served as before; wheelforge fsck "
                 "--data-dir "
              << data << " checks their blobs, and running reinspect again retries them.\n";
    return 1;
  }
  return 0;
}

int config_check(const std::optional<fs::path>& config_file, const Overrides& overrides) {
  const auto checked = check_configuration(config_file, overrides);
  std::vector<std::string> host_problems = checked.host_problems;
  if (checked.config) {
    // What only running things tells: the sources exist, each nvcc is its key's release.
    for (auto& p : build::check_build_toolchains(checked.config->build, std::chrono::seconds(30))) {
      host_problems.push_back(std::move(p));
    }
  }
  for (const std::vector<std::string>* list : {&checked.problems, &std::as_const(host_problems)}) {
    for (const auto& p : *list) std::cerr << "error: " << p << "\n";
  }
  if (!checked.config || !host_problems.empty()) return 2;
  std::cout << settings_to_toml(checked.config->settings) << build_summary(checked.config->build)
            << upstream_summary(checked.config->upstreams)
            << oidc_summary(checked.config->oidc_issuers);
  // What only the executor can tell: the engine and images are there, a batch job sees the
  // builds directory.
  const build::ExecutorConfig& executor_config = checked.config->build.host.executor;
  if (executor_config.kind == build::ExecutorConfig::Kind::local) return 0;
  std::cout << std::flush;
  const auto executor = build::make_executor(executor_config);
  std::vector<std::string> notes;
  std::vector<std::string> problems;
  // A cluster's batch jobs as the recipes would ask for them, fitted to its nodes; the probe
  // is as large as the largest of them.
  static const core::Recipe kNoRecipe;  // what a recipe naming nothing asks for
  build::ResourceRequest probe = build::cluster_request(kNoRecipe, *executor);
  if (executor->admission() == build::Executor::Admission::cluster) {
    bool sized = false;
    for (const auto& [name, rc] : checked.config->build.recipes) {
      auto fitted = executor->fit_request(build::cluster_request(rc.recipe, *executor));
      if (!fitted) {
        problems.push_back("recipes." + name + ".cpus: " + fitted.error().message);
        continue;
      }
      if (!fitted->note.empty()) notes.push_back("recipe " + name + ": " + fitted->note);
      const auto& r = fitted->request;
      if (!sized || std::pair(r.cpus, r.memory_bytes) > std::pair(probe.cpus, probe.memory_bytes)) {
        probe = r;
        sized = true;
      }
    }
    if (!sized) {
      if (auto fitted = executor->fit_request(probe)) probe = fitted->request;
    }
  }
  std::error_code ec;
  const fs::path data_dir = fs::absolute(checked.config->settings.data_dir, ec);
  for (auto& p : executor->check((ec ? checked.config->settings.data_dir : data_dir) / "builds",
                                 probe, std::chrono::seconds(60), notes)) {
    problems.push_back(std::move(p));
  }
  for (const auto& n : notes) std::cout << "#   executor check: " << sanitize_for_log(n) << "\n";
  for (const auto& p : problems) std::cerr << "error: " << p << "\n";
  return problems.empty() ? 0 : 2;
}

}  // namespace wf::app
