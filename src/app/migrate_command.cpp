// `wheelforge migrate`: copies an index (its catalog rows and the blobs they reference) into
// another catalog and blob store, either backend to either (docs/operations.md, "Moving an
// index"). Blobs first, each streamed through a temp file of the target and checked against
// the catalog's sha256; then the rows, table by table, through Catalog::import_rows.

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "command_support.hpp"
#include "wheelforge/app/maintenance.hpp"
#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using detail::format_bytes;

// A blob that rows of the source reference: what it must hold, and one row that names it.
struct WantedBlob {
  std::string sha256;
  std::uint64_t size = 0;
  std::string what;  ///< "file NAME", "METADATA of NAME", "upstream file NAME"
};

std::uint64_t to_u64(const std::optional<std::string>& text) {
  if (!text) return 0;
  return std::strtoull(text->c_str(), nullptr, 10);
}

const catalog::TableRows* find_table(const std::vector<catalog::TableRows>& tables,
                                     std::string_view name) {
  for (const auto& t : tables) {
    if (t.table == name) return &t;
  }
  return nullptr;
}

// Every blob the rows reference (files: bytes and METADATA; upstream blobs), each once, in the
// order the rows name them; blobs recorded damaged are left out (their records move with the
// rows, and the target withdraws their files as the source does).
std::vector<WantedBlob> wanted_blobs(const std::vector<catalog::TableRows>& tables,
                                     std::size_t& damaged) {
  std::set<std::string> damaged_shas;
  if (const auto* t = find_table(tables, "damaged_blobs")) {
    const auto sha = t->column("sha256");
    for (const auto& row : t->rows) {
      if (sha && row[*sha]) damaged_shas.insert(*row[*sha]);
    }
  }
  std::vector<WantedBlob> out;
  std::set<std::string> seen;
  auto want = [&](const std::optional<std::string>& sha, std::uint64_t size, std::string what) {
    if (!sha || sha->empty()) return;
    if (damaged_shas.count(*sha) != 0) {
      if (seen.insert(*sha).second) ++damaged;
      return;
    }
    if (!seen.insert(*sha).second) return;
    out.push_back({*sha, size, std::move(what)});
  };
  if (const auto* t = find_table(tables, "files")) {
    const auto name = t->column("filename");
    const auto sha = t->column("sha256");
    const auto size = t->column("size");
    const auto msha = t->column("metadata_sha256");
    const auto msize = t->column("metadata_size");
    if (name && sha && size && msha && msize) {
      for (const auto& row : t->rows) {
        const std::string filename = row[*name].value_or("");
        want(row[*sha], to_u64(row[*size]), "file " + filename);
        want(row[*msha], to_u64(row[*msize]), "METADATA of " + filename);
      }
    }
  }
  if (const auto* t = find_table(tables, "upstream_blobs")) {
    const auto name = t->column("filename");
    const auto sha = t->column("sha256");
    const auto size = t->column("size");
    if (name && sha && size) {
      for (const auto& row : t->rows) {
        want(row[*sha], to_u64(row[*size]), "upstream file " + row[*name].value_or(""));
      }
    }
  }
  return out;
}

enum class BlobOutcome { copied, skipped };

// Copies one blob: the source's bytes, streamed into a temp file of the target (hashed on the
// way), published only when they are what the catalog records. Errc::conflict when the
// target holds another size under the key, or the source's bytes do not match.
Result<BlobOutcome> copy_blob(const store::BlobStore& from, const store::BlobStore& to,
                              const WantedBlob& blob) {
  auto present = to.stat(blob.sha256);
  if (!present) return present.error();
  if (*present) {
    if ((*present)->size == blob.size) return BlobOutcome::skipped;
    return make_error(Errc::conflict, "blob " + blob.sha256 + " (" + blob.what +
                                          "): " + to.describe() + " holds " +
                                          format_bytes((*present)->size) + " under its key, the " +
                                          "catalog records " + format_bytes(blob.size));
  }
  auto local = from.local_copy(blob.sha256);
  if (!local) {
    if (local.error().code == Errc::not_found) {
      return make_error(Errc::not_found, "blob " + blob.sha256 + " (" + blob.what +
                                             ") is missing from " + from.describe() +
                                             " (run wheelforge fsck on the source)");
    }
    return make_error(local.error().code,
                      "blob " + blob.sha256 + " (" + blob.what + "): " + local.error().message);
  }
  std::FILE* in = std::fopen(local->c_str(), "rb");
  if (in == nullptr) {
    return make_error(Errc::io, "blob " + blob.sha256 + " (" + blob.what + "): open " +
                                    local->string() + " failed");
  }
  auto temp = to.create_temp();
  if (!temp) {
    std::fclose(in);
    return temp.error();
  }
  std::vector<char> buffer(std::size_t{1} << 20U);
  Status written = ok_status();
  while (written) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), in);
    if (n > 0) written = temp->write(buffer.data(), n);
    if (n < buffer.size()) break;
  }
  const bool read_error = std::ferror(in) != 0;
  std::fclose(in);
  if (!written) return written.error();
  if (read_error) {
    return make_error(Errc::io, "blob " + blob.sha256 + " (" + blob.what + "): read " +
                                    local->string() + " failed");
  }
  if (auto st = temp->finish(store::Sync::deferred); !st) return st.error();
  if (temp->sha256() != blob.sha256 || temp->size() != blob.size) {
    return make_error(Errc::conflict, "blob " + blob.sha256 + " (" + blob.what + ") in " +
                                          from.describe() + " is corrupt: its bytes have sha256 " +
                                          temp->sha256() + " (" + format_bytes(temp->size()) +
                                          "), the catalog records " + format_bytes(blob.size) +
                                          " with sha256 " + blob.sha256 +
                                          "; refused (run wheelforge fsck on the source)");
  }
  if (auto published = to.commit(std::move(*temp), store::Sync::deferred); !published) {
    return published.error();
  }
  return BlobOutcome::copied;
}

// A test hook: the process kills itself (SIGKILL, as `kill -9` would) after this many blobs
// were copied, so that tests interrupt a migration at a known point.
std::optional<std::size_t> kill_after_blobs() {
  const char* env = std::getenv("WHEELFORGE_TEST_MIGRATE_KILL_AFTER_BLOBS");
  if (env == nullptr || *env == '\0') return std::nullopt;
  return static_cast<std::size_t>(std::strtoull(env, nullptr, 10));
}

bool same_data_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec1;
  std::error_code ec2;
  const auto ca = fs::weakly_canonical(a, ec1);
  const auto cb = fs::weakly_canonical(b, ec2);
  return !ec1 && !ec2 ? ca == cb : a == b;
}

}  // namespace

int migrate(const Settings& settings, const MigrateOptions& options) {
  using detail::report;
  Settings target = settings;
  if (options.to_catalog) target.catalog = *options.to_catalog;
  if (options.to_blob_store) target.blob_store = *options.to_blob_store;
  if (options.to_data_dir) target.data_dir = *options.to_data_dir;
  if (auto st = catalog::validate_catalog_location(target.catalog); !st) {
    return report(make_error(Errc::invalid, "--to-" + st.error().message), 2);
  }
  if (target.blob_store != "file" && !parse_blob_store_url(target.blob_store)) {
    std::cerr << "error: --to-blob-store: expected \"file\" or s3://BUCKET/PREFIX, got '"
              << sanitize_for_log(target.blob_store) << "'\n";
    return 2;
  }
  const bool source_pg = catalog::is_postgres_location(settings.catalog);
  const bool target_pg = catalog::is_postgres_location(target.catalog);
  const bool same_catalog =
      source_pg == target_pg && (source_pg ? catalog::describe_catalog_location(settings.catalog) ==
                                                 catalog::describe_catalog_location(target.catalog)
                                           : same_data_dir(settings.data_dir, target.data_dir));
  const bool same_store =
      settings.blob_store == target.blob_store &&
      (settings.blob_store != "file" || same_data_dir(settings.data_dir, target.data_dir));
  const std::string target_catalog_name =
      target_pg ? catalog::describe_catalog_location(target.catalog)
                : "sqlite (" + (target.data_dir / "wheelforge.db").string() + ")";
  if (same_catalog && same_store) {
    std::cerr << "error: the target is the source (catalog "
              << catalog::describe_catalog_location(settings.catalog) << ", blob store "
              << sanitize_for_log(settings.blob_store)
              << "): name another with --to-catalog, --to-blob-store or --to-data-dir\n";
    return 2;
  }
  if (!source_pg) {
    std::error_code ec;
    if (!fs::exists(settings.data_dir / "wheelforge.db", ec)) {
      std::cerr << "error: no catalog to migrate: "
                << (settings.data_dir / "wheelforge.db").string()
                << " does not exist (--data-dir, --catalog)\n";
      return 2;
    }
  }

  auto source = detail::open_data_dir(settings);
  if (!source) return report(source.error(), 2);
  std::unique_ptr<catalog::Catalog> target_catalog;
  std::unique_ptr<store::BlobStore> target_store;
  {
    std::error_code ec;
    fs::create_directories(target.data_dir, ec);
    if (ec) {
      std::cerr << "error: create " << target.data_dir.string() << ": " << ec.message() << "\n";
      return 2;
    }
  }
  if (!same_store) {
    if (target.blob_store != "file" && settings.blob_store == "file") {
      // The loader reads the [s3] credentials for the configured blob store only.
      if (auto st = detail::resolve_s3_credentials_for(target); !st) return report(st.error(), 2);
    }
    auto store_options = detail::blob_store_options(target);
    if (!store_options) return report(store_options.error(), 2);
    auto opened = store::BlobStore::open(target.data_dir, std::move(*store_options));
    if (!opened) return report(opened.error(), 2);
    target_store = std::move(*opened);
  }
  if (!same_catalog) {
    auto opened = catalog::open_catalog(target.catalog, target.data_dir);
    if (!opened) return report(opened.error(), 2);
    target_catalog = std::move(*opened);
  }
  std::cout << "migrating the index of catalog "
            << catalog::describe_catalog_location(settings.catalog) << " and "
            << source->store->describe() << "\n  to catalog "
            << (same_catalog ? std::string("(unchanged)") : target_catalog_name) << " and "
            << (same_store ? std::string("(blob store unchanged)") : target_store->describe())
            << "\n"
            << std::flush;

  auto tables = source->catalog->export_rows();
  if (!tables) return report(tables.error(), 2);

  // Blobs first: a row reaches the target only after every blob it references.
  std::size_t copied = 0;
  std::size_t skipped = 0;
  std::size_t damaged = 0;
  std::uint64_t copied_bytes = 0;
  std::uint64_t skipped_bytes = 0;
  std::vector<std::string> failures;
  const auto blobs = wanted_blobs(*tables, damaged);
  if (!same_store) {
    const auto kill_after = kill_after_blobs();
    for (std::size_t i = 0; i < blobs.size(); ++i) {
      const auto& blob = blobs[i];
      auto done = copy_blob(*source->store, *target_store, blob);
      const std::string position = std::to_string(i + 1) + "/" + std::to_string(blobs.size());
      if (!done) {
        if (done.error().code != Errc::conflict && done.error().code != Errc::not_found) {
          return report(done.error(), 2);  // a store unreachable, a disk full: nothing to go on
        }
        std::cerr << "error: " << done.error().message << "\n";
        failures.push_back(done.error().message);
        continue;
      }
      if (*done == BlobOutcome::copied) {
        ++copied;
        copied_bytes += blob.size;
        std::cout << "blob " << position << " copied: " << blob.what << " ("
                  << format_bytes(blob.size) << ")\n"
                  << std::flush;
        if (kill_after && copied >= *kill_after) ::kill(::getpid(), SIGKILL);
      } else {
        ++skipped;
        skipped_bytes += blob.size;
        std::cout << "blob " << position << " present: " << blob.what << "\n";
      }
    }
    if (auto st = target_store->flush(); !st) return report(st.error(), 2);
  }
  if (damaged > 0) {
    std::cout << damaged << " blob" << (damaged == 1 ? " is" : "s are")
              << " recorded damaged in the source: not copied (the damage records are)\n";
  }
  if (!failures.empty()) {
    std::cerr << "error: " << failures.size() << " blob" << (failures.size() == 1 ? "" : "s")
              << " could not be copied: no catalog row was copied; repair the source "
                 "(wheelforge fsck) and run wheelforge migrate again\n";
    return 1;
  }

  std::size_t inserted_rows = 0;
  std::size_t skipped_rows = 0;
  std::string table_summary;
  if (!same_catalog) {
    for (const auto& table : *tables) {
      auto counts = target_catalog->import_rows(table);
      if (!counts) {
        std::cerr << "error: " << table.table << ": " << counts.error().message << "\n";
        return counts.error().code == Errc::conflict ? 1 : 2;
      }
      inserted_rows += counts->inserted;
      skipped_rows += counts->skipped;
      std::cout << "table " << table.table << ": " << counts->inserted << " copied, "
                << counts->skipped << " present\n"
                << std::flush;
      if (!table_summary.empty()) table_summary += ", ";
      table_summary += table.table + " " + std::to_string(table.rows.size());
    }
  }

  std::cout << "migrated: ";
  if (same_catalog) {
    std::cout << "catalog unchanged";
  } else {
    std::cout << inserted_rows << " rows copied, " << skipped_rows << " present (" << table_summary
              << ")";
  }
  std::cout << "; ";
  if (same_store) {
    std::cout << "blob store unchanged\n";
  } else {
    std::cout << copied << " blobs copied (" << format_bytes(copied_bytes) << "), " << skipped
              << " present (" << format_bytes(skipped_bytes) << ")\n";
  }
  std::cout << "serve it with --catalog "
            << (target_pg ? catalog::describe_catalog_location(target.catalog) : "sqlite")
            << " --blob-store " << sanitize_for_log(target.blob_store) << " --data-dir "
            << target.data_dir.string() << "\n";
  return 0;
}

}  // namespace wf::app
