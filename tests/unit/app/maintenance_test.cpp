#include "wheelforge/app/maintenance.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../archive/zip_builder.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/store/blob_store.hpp"
#include "wheelforge/util/fs.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void overwrite(const fs::path& p, const std::string& bytes) {
  fs::permissions(p, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  fs::permissions(p, fs::perms::owner_write, fs::perm_options::remove);
}

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_ino;
}

class MaintenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("wf-maint-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    data_ = root_ / "data";
    fs::create_directories(data_);
    auto store = store::BlobStore::open(data_);
    ASSERT_TRUE(store) << store.error().message;
    store_ = std::move(*store);
    auto catalog = catalog::open_sqlite_catalog(data_ / "wheelforge.db");
    ASSERT_TRUE(catalog) << catalog.error().message;
    catalog_ = std::move(*catalog);
  }
  void TearDown() override {
    catalog_.reset();
    store_.reset();
    fs::remove_all(root_);
  }

  struct Added {
    std::string sha256;
    std::string metadata_sha256;
  };

  /// Stores the bytes and METADATA as blobs and records a file row for them.
  Added add_file(const std::string& filename, const std::string& bytes,
                 const std::string& metadata) {
    auto sha = store_->put(bytes);
    EXPECT_TRUE(sha);
    auto meta_sha = store_->put(metadata);
    EXPECT_TRUE(meta_sha);
    catalog::NewFile nf;
    nf.file.filename = filename;
    nf.file.project = "demo";
    nf.file.version = "1.0";
    nf.file.sha256 = *sha;
    nf.file.size = bytes.size();
    nf.file.upload_time = 1'700'000'000'000'000;
    nf.file.metadata_sha256 = *meta_sha;
    nf.file.metadata_size = metadata.size();
    nf.file.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
    nf.display_name = "demo";
    auto inserted = catalog_->insert_file(nf);
    EXPECT_TRUE(inserted);
    return Added{*sha, *meta_sha};
  }

  /// A blob that no row references.
  std::string add_orphan(const std::string& bytes) {
    auto sha = store_->put(bytes);
    EXPECT_TRUE(sha);
    return *sha;
  }

  fs::path blob(const std::string& sha) const { return store_->blob_path(sha); }

  fs::path root_;
  fs::path data_;
  std::unique_ptr<store::BlobStore> store_;
  std::unique_ptr<catalog::Catalog> catalog_;
};

TEST_F(MaintenanceTest, CatalogListsTheBlobsItsRowsReference) {
  const auto a = add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\n");
  const auto b = add_file("demo-1.0.tar.gz", "sdist bytes", "Name: demo\n");
  add_orphan("nobody");
  auto refs = catalog_->referenced_blobs();
  ASSERT_TRUE(refs) << refs.error().message;
  ASSERT_EQ(refs->size(), 4U);
  EXPECT_EQ((*refs)[0].filename, "demo-1.0-py3-none-any.whl");
  EXPECT_EQ((*refs)[0].role, catalog::BlobRole::file);
  EXPECT_EQ((*refs)[0].sha256, a.sha256);
  EXPECT_EQ((*refs)[0].size, 11U);
  EXPECT_EQ((*refs)[1].role, catalog::BlobRole::metadata);
  EXPECT_EQ((*refs)[1].sha256, a.metadata_sha256);
  EXPECT_EQ((*refs)[3].sha256, b.metadata_sha256);  // shared METADATA: listed for each row

  ASSERT_TRUE(catalog_->delete_file("demo-1.0.tar.gz", wf::catalog::Actor{}));
  refs = catalog_->referenced_blobs();
  ASSERT_TRUE(refs);
  EXPECT_EQ(refs->size(), 2U);
}

TEST_F(MaintenanceTest, CatalogBackupRefusesAnExistingFile) {
  std::ofstream(root_ / "taken.db") << "x";
  auto st = catalog_->backup_to(root_ / "taken.db");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, Errc::conflict);
  EXPECT_EQ(read_all(root_ / "taken.db"), "x");
}

TEST_F(MaintenanceTest, BackupCopiesTheCatalogAndTheBlobsItReferences) {
  const auto a = add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\nV: 1\n");
  const auto b = add_file("demo-1.0.tar.gz", "sdist bytes", "Name: demo\nV: 2\n");
  const auto gone = add_file("demo-0.9-py3-none-any.whl", "old wheel", "Name: demo\nV: 0\n");
  ASSERT_TRUE(catalog_->delete_file("demo-0.9-py3-none-any.whl", wf::catalog::Actor{}));
  const auto orphan = add_orphan("nobody");

  const fs::path dest = root_ / "backup";
  auto report = backup_data_dir(data_, BackupOptions{dest, BlobCopy::link});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->files, 2U);
  EXPECT_EQ(report->projects, 1U);
  EXPECT_EQ(report->blobs, 4U);
  EXPECT_EQ(report->linked, 4U);  // same filesystem
  EXPECT_EQ(report->bytes, 11U + 11U + 16U + 16U);
  EXPECT_TRUE(report->missing.empty());
  EXPECT_TRUE(report->corrupt.empty());

  for (const auto& sha : {a.sha256, a.metadata_sha256, b.sha256, b.metadata_sha256}) {
    const fs::path copy = dest / fs::relative(blob(sha), data_);
    EXPECT_EQ(read_all(copy), read_all(blob(sha))) << sha;
  }
  for (const auto& sha : {gone.sha256, orphan}) {
    EXPECT_FALSE(fs::exists(dest / fs::relative(blob(sha), data_))) << sha;
  }
  const std::string info = read_all(dest / "BACKUP-INFO");
  EXPECT_NE(info.find("files = 2\n"), std::string::npos) << info;
  EXPECT_NE(info.find("blobs = 4\n"), std::string::npos) << info;

  // The backup is a data directory: its catalog has the same rows and the deleted name
  // stays reserved.
  auto restored = catalog::open_sqlite_catalog(dest / "wheelforge.db");
  ASSERT_TRUE(restored) << restored.error().message;
  auto contents = (*restored)->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->files.size(), 2U);
  EXPECT_EQ(contents->files[0].filename, "demo-1.0-py3-none-any.whl");
  auto reserved = (*restored)->is_reserved("demo-0.9-py3-none-any.whl");
  ASSERT_TRUE(reserved);
  EXPECT_TRUE(*reserved);
  restored->reset();

  // A backup is checked like any data directory.
  auto fsck_report = check_data_dir(dest, FsckOptions{false, seconds{0}});
  ASSERT_TRUE(fsck_report) << fsck_report.error().message;
  EXPECT_TRUE(fsck_report->clean());
  EXPECT_TRUE(fsck_report->orphans.empty());
}

TEST_F(MaintenanceTest, BackupCopiesByDefault) {
  const auto a = add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\n");
  const fs::path dest = root_ / "backup";
  BackupOptions options;
  options.dest = dest;
  EXPECT_EQ(options.copy, BlobCopy::copy);
  auto report = backup_data_dir(data_, options);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->copied, 2U);
  EXPECT_LE(report->reflinked, report->copied);  // reflinks where the filesystem can
  EXPECT_EQ(report->linked, 0U);
  const fs::path copy = dest / fs::relative(blob(a.sha256), data_);
  EXPECT_EQ(read_all(copy), "wheel bytes");
  EXPECT_NE(inode_of(copy), inode_of(blob(a.sha256)));
  struct stat st {};
  ASSERT_EQ(::stat(blob(a.sha256).c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 1U);
  const std::string info = read_all(dest / "BACKUP-INFO");
  EXPECT_NE(info.find("copied = 2\n"), std::string::npos) << info;
  EXPECT_NE(info.find("hardlinked = 0\n"), std::string::npos) << info;
  // Damage to the live file after the backup does not reach the copy.
  overwrite(blob(a.sha256), "wheel bytez");
  EXPECT_EQ(read_all(copy), "wheel bytes");
  EXPECT_EQ(fs::status(copy).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
}

TEST_F(MaintenanceTest, BackupRefusesANonEmptyDestinationAndAMissingDataDirectory) {
  add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\n");
  const fs::path dest = root_ / "backup";
  fs::create_directories(dest);
  std::ofstream(dest / "something") << "x";
  auto report = backup_data_dir(data_, BackupOptions{dest, BlobCopy::link});
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, Errc::conflict);
  EXPECT_FALSE(fs::exists(dest / "wheelforge.db"));

  std::ofstream(root_ / "a-file") << "x";
  report = backup_data_dir(data_, BackupOptions{root_ / "a-file", BlobCopy::link});
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, Errc::conflict);

  report = backup_data_dir(root_ / "typo", BackupOptions{root_ / "b2", BlobCopy::link});
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, Errc::not_found);
  EXPECT_FALSE(fs::exists(root_ / "typo" / "wheelforge.db"));

  // An existing empty directory is fine.
  fs::create_directories(root_ / "empty");
  EXPECT_TRUE(backup_data_dir(data_, BackupOptions{root_ / "empty", BlobCopy::link}));
}

TEST_F(MaintenanceTest, BackupReportsMissingAndCorruptBlobs) {
  const auto a = add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\n");
  const auto b = add_file("demo-2.0-py3-none-any.whl", "other bytes", "Name: demo\nV: 2\n");
  fs::remove(blob(a.sha256));
  overwrite(blob(b.sha256), "Other bytes");
  auto report = backup_data_dir(data_, BackupOptions{root_ / "backup", BlobCopy::copy});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->missing, std::vector<std::string>{a.sha256});
  EXPECT_EQ(report->corrupt, std::vector<std::string>{b.sha256});
  EXPECT_EQ(report->copied, 2U);  // the two METADATA blobs
  EXPECT_FALSE(fs::exists(root_ / "backup" / fs::relative(blob(b.sha256), data_)));
}

TEST_F(MaintenanceTest, GcRemovesUnreferencedBlobsOnly) {
  const auto kept = add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\n");
  // Same METADATA as the kept file: still referenced after this file is deleted.
  const auto gone = add_file("demo-1.0.tar.gz", "sdist bytes", "Name: demo\n");
  ASSERT_TRUE(catalog_->delete_file("demo-1.0.tar.gz", wf::catalog::Actor{}));
  const auto orphan = add_orphan("nobody");
  fs::create_directories(data_ / "blobs" / "zz");
  std::ofstream(data_ / "blobs" / "zz" / "stray") << "x";

  auto dry = collect_garbage(data_, GcOptions{true, seconds{0}});
  ASSERT_TRUE(dry) << dry.error().message;
  EXPECT_EQ(dry->removed.size(), 2U);
  EXPECT_TRUE(fs::exists(blob(orphan)));
  EXPECT_TRUE(fs::exists(blob(gone.sha256)));

  auto young = collect_garbage(data_, GcOptions{false, seconds{3600}});
  ASSERT_TRUE(young) << young.error().message;
  EXPECT_TRUE(young->removed.empty());
  EXPECT_EQ(young->too_young, 2U);
  EXPECT_TRUE(fs::exists(blob(orphan)));

  auto report = collect_garbage(data_, GcOptions{false, seconds{0}});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->referenced, 2U);
  ASSERT_EQ(report->removed.size(), 2U);
  EXPECT_EQ(report->removed_bytes, 6U + 11U);
  EXPECT_FALSE(fs::exists(blob(orphan)));
  EXPECT_FALSE(fs::exists(blob(gone.sha256)));
  EXPECT_TRUE(fs::exists(blob(kept.sha256)));
  EXPECT_TRUE(fs::exists(blob(kept.metadata_sha256)));
  ASSERT_EQ(report->unexpected.size(), 1U);
  EXPECT_TRUE(fs::exists(data_ / "blobs" / "zz" / "stray"));
}

TEST_F(MaintenanceTest, GcRemovesDeadTempSessions) {
  fs::create_directories(data_ / "tmp" / "s-dead01");
  std::ofstream(data_ / "tmp" / "s-dead01" / "upload-1") << "partial";
  auto report = collect_garbage(data_, GcOptions{false, seconds{0}});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->stale_temp_sessions, 1U);
  EXPECT_FALSE(fs::exists(data_ / "tmp" / "s-dead01"));
  // The live session of this test's own store stays.
  EXPECT_TRUE(fs::exists(store_->tmp_dir()));
}

TEST_F(MaintenanceTest, RemovingCommandsDoNotOverlapABackup) {
  UniqueFd held(::open((data_ / "maintenance.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(::flock(held.get(), LOCK_SH), 0);  // as a running backup holds it

  auto gc = collect_garbage(data_, GcOptions{false, seconds{0}});
  ASSERT_FALSE(gc);
  EXPECT_EQ(gc.error().code, Errc::unavailable);
  auto repair = check_data_dir(data_, FsckOptions{true, seconds{0}});
  ASSERT_FALSE(repair);
  EXPECT_EQ(repair.error().code, Errc::unavailable);
  // Read-only commands share the lock.
  EXPECT_TRUE(collect_garbage(data_, GcOptions{true, seconds{0}}));
  EXPECT_TRUE(check_data_dir(data_, FsckOptions{false, seconds{0}}));
}

TEST_F(MaintenanceTest, FsckFindsMissingCorruptAndOrphanBlobs) {
  const auto good = add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\n");
  const auto bad = add_file("demo-2.0-py3-none-any.whl", "other bytes", "Name: demo\nV: 2\n");
  const auto lost = add_file("demo-3.0-py3-none-any.whl", "third bytes", "Name: demo\nV: 3\n");
  const auto orphan = add_orphan("nobody");

  auto clean = check_data_dir(data_, FsckOptions{false, seconds{3600}});
  ASSERT_TRUE(clean) << clean.error().message;
  EXPECT_TRUE(clean->clean());
  EXPECT_EQ(clean->checked, 6U);
  EXPECT_EQ(clean->files, 3U);
  EXPECT_TRUE(clean->orphans.empty());
  EXPECT_EQ(clean->young_orphans, 1U);

  overwrite(blob(bad.sha256), "other bytez");
  fs::remove(blob(lost.metadata_sha256));
  auto report = check_data_dir(data_, FsckOptions{false, seconds{0}});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->clean());
  ASSERT_EQ(report->corrupt.size(), 1U);
  EXPECT_EQ(report->corrupt[0].sha256, bad.sha256);
  ASSERT_EQ(report->corrupt[0].refs.size(), 1U);
  EXPECT_EQ(report->corrupt[0].refs[0].filename, "demo-2.0-py3-none-any.whl");
  ASSERT_EQ(report->missing.size(), 1U);
  EXPECT_EQ(report->missing[0].sha256, lost.metadata_sha256);
  EXPECT_EQ(report->missing[0].refs[0].role, catalog::BlobRole::metadata);
  EXPECT_EQ(report->orphans, std::vector<std::string>{orphan});
  // Without --repair nothing changes.
  EXPECT_TRUE(fs::exists(blob(orphan)));
  EXPECT_TRUE(fs::exists(blob(bad.sha256)));

  auto generation = catalog_->generation();
  ASSERT_TRUE(generation);
  auto repaired = check_data_dir(data_, FsckOptions{true, seconds{0}});
  ASSERT_TRUE(repaired) << repaired.error().message;
  EXPECT_FALSE(repaired->clean());  // the rows still lack their blobs
  // Both damaged blobs are recorded: a server stops offering their files.
  ASSERT_EQ(repaired->withdrawn.size(), 2U);
  EXPECT_GT(*catalog_->generation(), *generation);
  auto contents = catalog_->load();
  ASSERT_TRUE(contents);
  for (const auto& f : contents->files) {
    EXPECT_EQ(f.damaged, f.filename != "demo-1.0-py3-none-any.whl") << f.filename;
  }
  ASSERT_EQ(repaired->quarantined.size(), 1U);
  EXPECT_EQ(repaired->quarantined[0].parent_path(), data_ / "quarantine");
  EXPECT_EQ(read_all(repaired->quarantined[0]), "other bytez");
  EXPECT_FALSE(fs::exists(blob(bad.sha256)));
  EXPECT_EQ(repaired->removed_orphans, std::vector<std::string>{orphan});
  EXPECT_FALSE(fs::exists(blob(orphan)));
  EXPECT_TRUE(fs::exists(blob(good.sha256)));

  // Now both are missing; deleting the rows makes the data directory clean again.
  auto after = check_data_dir(data_, FsckOptions{false, seconds{0}});
  ASSERT_TRUE(after);
  EXPECT_EQ(after->missing.size(), 2U);
  EXPECT_TRUE(after->corrupt.empty());
  EXPECT_NE(after->missing[0].detail.find("found damaged earlier"), std::string::npos);
  // A second repair records nothing new.
  generation = catalog_->generation();
  auto again = check_data_dir(data_, FsckOptions{true, seconds{0}});
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->withdrawn.empty());
  EXPECT_EQ(*catalog_->generation(), *generation);
  ASSERT_TRUE(catalog_->delete_file("demo-2.0-py3-none-any.whl", wf::catalog::Actor{}));
  ASSERT_TRUE(catalog_->delete_file("demo-3.0-py3-none-any.whl", wf::catalog::Actor{}));
  after = check_data_dir(data_, FsckOptions{false, seconds{0}});
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->clean());
  // The records of blobs no file needs any more go with the next repair.
  EXPECT_EQ(catalog_->damaged_blobs()->size(), 2U);
  ASSERT_TRUE(check_data_dir(data_, FsckOptions{true, seconds{0}}));
  EXPECT_TRUE(catalog_->damaged_blobs()->empty());
}

TEST_F(MaintenanceTest, ABlobRestoredByHandIsServedAgainAfterRepair) {
  const auto a = add_file("demo-1.0-py3-none-any.whl", "wheel bytes", "Name: demo\n");
  overwrite(blob(a.sha256), "wheel bytez");
  auto repaired = check_data_dir(data_, FsckOptions{true, seconds{0}});
  ASSERT_TRUE(repaired) << repaired.error().message;
  ASSERT_EQ(repaired->quarantined.size(), 1U);
  EXPECT_TRUE((*catalog_->find_file("demo-1.0-py3-none-any.whl"))->damaged);

  // The good bytes are copied back (from a backup): the blob store alone does not heal.
  ASSERT_TRUE(store_->put("wheel bytes"));
  auto check = check_data_dir(data_, FsckOptions{false, seconds{0}});
  ASSERT_TRUE(check);
  EXPECT_TRUE(check->clean());
  ASSERT_EQ(check->intact_again.size(), 1U);
  EXPECT_EQ(check->intact_again[0].sha256, a.sha256);
  EXPECT_TRUE((*catalog_->find_file("demo-1.0-py3-none-any.whl"))->damaged);
  auto healed = check_data_dir(data_, FsckOptions{true, seconds{0}});
  ASSERT_TRUE(healed);
  EXPECT_EQ(healed->intact_again.size(), 1U);
  EXPECT_FALSE((*catalog_->find_file("demo-1.0-py3-none-any.whl"))->damaged);
  EXPECT_TRUE(catalog_->damaged_blobs()->empty());
}

TEST_F(MaintenanceTest, FsckComparesTheRecordedSize) {
  auto sha = store_->put("wheel bytes");
  ASSERT_TRUE(sha);
  catalog::NewFile nf;
  nf.file.filename = "demo-1.0-py3-none-any.whl";
  nf.file.project = "demo";
  nf.file.version = "1.0";
  nf.file.sha256 = *sha;
  nf.file.size = 12;
  nf.file.metadata_sha256 = *sha;
  nf.file.metadata_size = 12;
  nf.display_name = "demo";
  ASSERT_TRUE(catalog_->insert_file(nf));
  auto report = check_data_dir(data_, FsckOptions{false, seconds{0}});
  ASSERT_TRUE(report);
  ASSERT_EQ(report->corrupt.size(), 1U);
  EXPECT_NE(report->corrupt[0].detail.find("size is 11"), std::string::npos);
}

// add_file records no findings: every row is a wheel stored before ingest read binaries.
TEST_F(MaintenanceTest, ReinspectRecordsTheFindingsOfWheelsWithoutAndReportsTheRest) {
  using archive::fixtures::build_zip;
  using Outcome = ReinspectedWheel::Outcome;
  const std::string metadata = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n";
  add_file("demo-1.0-py3-none-any.whl",
           build_zip({{"demo/__init__.py", ""}, {"demo-1.0.dist-info/METADATA", metadata}}),
           metadata);
  const std::string not_elf = std::string(1, '\x7f') + "ELF" + std::string(200, '\xff');
  add_file("demo-1.1-py3-none-any.whl", build_zip({{"demo/_C.so", not_elf}}),
           metadata + "V: 1.1\n");
  add_file("demo-1.2-py3-none-any.whl", "not a zip", metadata + "V: 1.2\n");
  const auto lost = add_file("demo-1.3-py3-none-any.whl", build_zip({{"demo/x.py", "x = 3"}}),
                             metadata + "V: 1.3\n");
  fs::remove(blob(lost.sha256));
  const auto damaged = add_file("demo-1.4-py3-none-any.whl", build_zip({{"demo/x.py", "x = 4"}}),
                                metadata + "V: 1.4\n");
  ASSERT_TRUE(catalog_->mark_damaged(damaged.sha256, "corrupt", [] { return Result<bool>(true); }));

  std::vector<std::string> seen;
  auto report = reinspect_data_dir(data_, ReinspectOptions{},
                                   [&](const ReinspectedWheel& w) { seen.push_back(w.filename); });
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_EQ(report->wheels.size(), 5U);
  const auto& w = report->wheels;
  EXPECT_EQ(seen, (std::vector<std::string>{w[0].filename, w[1].filename, w[2].filename,
                                            w[3].filename, w[4].filename}));
  EXPECT_EQ(w[0].filename, "demo-1.0-py3-none-any.whl");
  EXPECT_EQ(w[0].outcome, Outcome::recorded);
  ASSERT_TRUE(w[0].findings);
  EXPECT_TRUE(w[0].findings->binaries.empty());
  EXPECT_EQ(w[1].outcome, Outcome::recorded);  // an unreadable ELF member is a finding
  ASSERT_TRUE(w[1].findings);
  ASSERT_EQ(w[1].findings->binaries.size(), 1U);
  EXPECT_FALSE(w[1].findings->binaries[0].problem.empty());
  EXPECT_EQ(w[2].outcome, Outcome::failed);
  EXPECT_NE(w[2].detail.find("reading the wheel's binaries"), std::string::npos) << w[2].detail;
  EXPECT_EQ(w[3].outcome, Outcome::failed);
  EXPECT_NE(w[3].detail.find(lost.sha256), std::string::npos) << w[3].detail;
  EXPECT_EQ(w[4].outcome, Outcome::skipped);
  EXPECT_EQ(report->count(Outcome::recorded), 2U);
  EXPECT_EQ(report->contradicting(), 0U);

  auto row = catalog_->find_file("demo-1.1-py3-none-any.whl");
  ASSERT_TRUE(row && row->has_value() && (*row)->binaries);
  EXPECT_EQ(*(*row)->binaries, *w[1].findings);
  EXPECT_EQ(catalog_->uninspected_wheels()->size(), 3U);

  // Again: what was recorded is not read again; the rest is tried again.
  auto again = reinspect_data_dir(data_, ReinspectOptions{});
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_EQ(again->wheels.size(), 3U);
  EXPECT_EQ(again->count(Outcome::failed), 2U);
  EXPECT_EQ(again->count(Outcome::skipped), 1U);
  EXPECT_EQ(*catalog_->find_file("demo-1.1-py3-none-any.whl")->value().binaries, *w[1].findings);
}

TEST_F(MaintenanceTest, ReinspectWaitsForNoRemovingCommand) {
  UniqueFd held(::open((data_ / "maintenance.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(::flock(held.get(), LOCK_EX), 0);  // as fsck --repair holds it
  auto blocked = reinspect_data_dir(data_, ReinspectOptions{});
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.error().code, Errc::unavailable);
  ASSERT_EQ(::flock(held.get(), LOCK_SH), 0);  // as a running backup holds it
  EXPECT_TRUE(reinspect_data_dir(data_, ReinspectOptions{}));
  auto missing = reinspect_data_dir(root_ / "empty", ReinspectOptions{});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::not_found);
}

TEST_F(MaintenanceTest, CommandsRefuseADirectoryWithoutCatalog) {
  fs::create_directories(root_ / "empty");
  auto gc = collect_garbage(root_ / "empty", GcOptions{});
  ASSERT_FALSE(gc);
  EXPECT_EQ(gc.error().code, Errc::not_found);
  auto fsck = check_data_dir(root_ / "empty", FsckOptions{});
  ASSERT_FALSE(fsck);
  EXPECT_EQ(fsck.error().code, Errc::not_found);
  EXPECT_FALSE(fs::exists(root_ / "empty" / "wheelforge.db"));
}

}  // namespace
}  // namespace wf::app
