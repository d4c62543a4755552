#include "wheelforge/catalog/catalog.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backends.hpp"
#include "older_schema.hpp"
#include "wheelforge/core/variant.hpp"

namespace wf::catalog {
namespace {

namespace fs = std::filesystem;

class CatalogTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-catalog-" + std::to_string(::getpid()) + "-" + backends::test_dir_name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto location = backends::fresh_location(backend_);
    ASSERT_TRUE(location) << location.error().message;
    location_ = *location;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static NewFile wheel(std::string filename, std::string sha) {
    NewFile nf;
    nf.file.filename = std::move(filename);
    nf.file.project = "demo-pkg";
    nf.file.version = "1.0";
    nf.file.sha256 = std::move(sha);
    nf.file.size = 10;
    nf.file.upload_time = 1'700'000'000'000'000;
    nf.file.metadata_sha256 = std::string(64, 'm');
    nf.file.metadata_size = 5;
    nf.file.requires_python = ">=3.8";
    nf.file.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
    nf.display_name = "Demo_Pkg";
    nf.requires_dist = {"numpy"};
    return nf;
  }

  Result<std::unique_ptr<Catalog>> open_cat() { return open_catalog(location_, dir_); }

  backends::Backend backend_ = backends::Backend::sqlite;
  std::string location_;
  fs::path dir_;
};

class CatalogTest : public CatalogTestBase,
                    public ::testing::WithParamInterface<backends::Backend> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    CatalogTestBase::SetUp();
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, CatalogTest,
                         ::testing::Values(backends::Backend::sqlite,
                                           backends::Backend::postgresql),
                         backends::BackendName());

/// Tests of SQLite internals (older schemas).
using SqliteCatalogTest = CatalogTestBase;

TEST_P(CatalogTest, InsertIdenticalConflict) {
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  auto a = (*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a')));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, InsertOutcome::inserted);
  EXPECT_GT(a->second.id, 0);
  auto b = (*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a')));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->first, InsertOutcome::identical);
  auto c = (*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'b')));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->first, InsertOutcome::conflict);
  EXPECT_EQ(c->second.sha256, std::string(64, 'a'));

  auto found = (*cat)->find_file("demo_pkg-1.0-py3-none-any.whl");
  ASSERT_TRUE(found);
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->requires_python, ">=3.8");
  EXPECT_EQ((*found)->tags.platform_tag, "any");
  EXPECT_FALSE((*found)->yanked.has_value());
}

TEST_P(CatalogTest, InsertFilesAnswersEachFileAsOneAtATimeInOneTransaction) {
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-0.9-py3-none-any.whl", std::string(64, 'z'))));
  auto generation = (*cat)->generation();
  ASSERT_TRUE(generation);

  const std::vector<NewFile> files = {
      wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a')),  // new
      wheel("demo_pkg-0.9-py3-none-any.whl", std::string(64, 'y')),  // stored with other bytes
      wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a')),  // same as the first
      wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'b')),  // first's name, other bytes
      wheel("demo_pkg-2.0-py3-none-any.whl", std::string(64, 'c')),  // its publish fails
      wheel("demo_pkg-3.0-py3-none-any.whl", std::string(64, 'd')),  // new
  };
  auto other = open_cat();
  ASSERT_TRUE(other);
  std::vector<std::size_t> published;
  int commits = 0;
  auto results = (*cat)->insert_files(
      files,
      [&](std::size_t i) -> Status {
        if (i == 4) return make_error(Errc::storage_full, "no space left for 2.0");
        published.push_back(i);
        return ok_status();
      },
      [&] {
        ++commits;
        // Inside the transaction: another connection does not see the rows yet.
        auto seen = (*other)->find_file("demo_pkg-1.0-py3-none-any.whl");
        EXPECT_TRUE(seen && !seen->has_value());
        return ok_status();
      });
  ASSERT_TRUE(results) << results.error().message;
  ASSERT_EQ(results->size(), files.size());
  EXPECT_EQ(published, (std::vector<std::size_t>{0, 5}));  // only names found free
  EXPECT_EQ(commits, 1);
  const auto outcome = [&](std::size_t i) { return (*results)[i]->first; };
  EXPECT_EQ(outcome(0), InsertOutcome::inserted);
  EXPECT_EQ(outcome(1), InsertOutcome::conflict);
  EXPECT_EQ((*results)[1]->second.sha256, std::string(64, 'z'));
  EXPECT_EQ(outcome(2), InsertOutcome::identical);
  EXPECT_EQ(outcome(3), InsertOutcome::conflict);
  ASSERT_FALSE((*results)[4]);
  EXPECT_EQ((*results)[4].error().code, Errc::storage_full);
  EXPECT_EQ(outcome(5), InsertOutcome::inserted);

  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  std::vector<std::string> names;
  for (const auto& f : contents->files) names.push_back(f.filename);
  EXPECT_EQ(names, (std::vector<std::string>{"demo_pkg-0.9-py3-none-any.whl",
                                             "demo_pkg-1.0-py3-none-any.whl",
                                             "demo_pkg-3.0-py3-none-any.whl"}));
  EXPECT_GT(contents->generation, *generation);
}

TEST_P(CatalogTest, InsertFilesRollsBackWhenTheFlushBeforeCommitFails) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  const std::vector<NewFile> files = {
      wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a')),
      wheel("demo_pkg-2.0-py3-none-any.whl", std::string(64, 'b')),
  };
  auto failed = (*cat)->insert_files(
      files, [](std::size_t) { return ok_status(); },
      [] { return Status(make_error(Errc::io, "syncfs failed")); });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "syncfs failed");
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  EXPECT_TRUE(contents->files.empty());
  EXPECT_TRUE(contents->projects.empty());

  // Nothing to record (every file identical): no flush is asked for, nothing is written.
  ASSERT_TRUE((*cat)->insert_file(files[0]));
  int flushes = 0;
  auto same = (*cat)->insert_files(
      {files[0]}, [](std::size_t) { return ok_status(); },
      [&] {
        ++flushes;
        return ok_status();
      });
  ASSERT_TRUE(same);
  EXPECT_EQ((*same)[0]->first, InsertOutcome::identical);
  EXPECT_EQ(flushes, 0);
}

TEST_P(CatalogTest, GenerationChangesAcrossConnections) {
  auto writer = open_cat();
  auto reader = open_cat();
  ASSERT_TRUE(writer);
  ASSERT_TRUE(reader);
  auto g0 = (*reader)->generation();
  ASSERT_TRUE(g0);
  ASSERT_TRUE((*writer)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'))));
  auto g1 = (*reader)->generation();
  ASSERT_TRUE(g1);
  EXPECT_GT(*g1, *g0);
  TokenRecord t;
  t.hash = std::string(64, 't');
  t.scope = Scope::upload;
  ASSERT_TRUE((*writer)->insert_token(t, wf::catalog::Actor{}));
  EXPECT_GT(*(*reader)->generation(), *g1);
}

TEST_P(CatalogTest, LoadReturnsEverything) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'))));
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py2-none-any.whl", std::string(64, 'c'))));
  TokenRecord t;
  t.hash = std::string(64, 't');
  t.scope = Scope::admin;
  t.project = "demo-pkg";
  ASSERT_TRUE((*cat)->insert_token(t, wf::catalog::Actor{}));
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->projects.size(), 1U);
  EXPECT_EQ(contents->projects[0].display_name, "Demo_Pkg");
  ASSERT_EQ(contents->files.size(), 2U);
  EXPECT_EQ(contents->files[0].filename, "demo_pkg-1.0-py2-none-any.whl");
  ASSERT_EQ(contents->tokens.size(), 1U);
  EXPECT_EQ(contents->tokens[0].scope, Scope::admin);
  EXPECT_EQ(contents->tokens[0].project, "demo-pkg");
}

// A file's provenance blob (PEP 740 attestations) is a column of its row: loaded with it, and
// referenced like its METADATA (gc keeps it, backup copies it, fsck checks it). A file without
// one references none.
TEST_P(CatalogTest, ProvenanceIsLoadedAndReferencedWithItsFile) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  NewFile attested = wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'));
  attested.file.provenance_sha256 = std::string(64, 'p');
  attested.file.provenance_size = 1234;
  ASSERT_TRUE((*cat)->insert_file(attested));
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py2-none-any.whl", std::string(64, 'c'))));
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents) << contents.error().message;
  ASSERT_EQ(contents->files.size(), 2U);
  EXPECT_EQ(contents->files[0].provenance_sha256, "");
  EXPECT_EQ(contents->files[0].provenance_size, 0U);
  EXPECT_EQ(contents->files[1].provenance_sha256, std::string(64, 'p'));
  EXPECT_EQ(contents->files[1].provenance_size, 1234U);
  auto one = (*cat)->load_projects({"demo-pkg"});
  ASSERT_TRUE(one);
  ASSERT_EQ(one->files.size(), 2U);
  EXPECT_EQ(one->files[1].provenance_sha256, std::string(64, 'p'));
  auto refs = (*cat)->referenced_blobs();
  ASSERT_TRUE(refs) << refs.error().message;
  std::vector<std::string> provenance;
  for (const auto& r : *refs) {
    if (r.role == BlobRole::provenance) provenance.push_back(r.filename + " " + r.sha256);
  }
  EXPECT_EQ(provenance,
            std::vector<std::string>{"demo_pkg-1.0-py3-none-any.whl " + std::string(64, 'p')});
}

// Some projects in one read: those that exist, sorted, with their files only; the tokens and
// the generation in full. Names that need quoting in an array literal are found too (1,200
// names: more than SQLite binds in one statement).
TEST_P(CatalogTest, LoadProjectsReadsThoseThatExist) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  for (const char* project : {"alpha", "beta", "gamma", "quote\"back\\slash"}) {
    NewFile nf =
        wheel(std::string(project) + "-1.0-py3-none-any.whl", std::string(63, 'a') + project[0]);
    nf.file.project = project;
    nf.display_name = project;
    ASSERT_TRUE((*cat)->insert_file(nf)) << project;
  }
  TokenRecord t;
  t.hash = std::string(64, 't');
  t.scope = Scope::upload;
  ASSERT_TRUE((*cat)->insert_token(t, wf::catalog::Actor{}));
  std::vector<std::string> names{"gamma", "missing", "quote\"back\\slash", "alpha", "gamma"};
  for (int i = 0; i < 1'200; ++i) names.push_back("absent-" + std::to_string(i));
  auto some = (*cat)->load_projects(names);
  ASSERT_TRUE(some) << some.error().message;
  ASSERT_EQ(some->projects.size(), 3U);
  EXPECT_EQ(some->projects[0].name, "alpha");
  EXPECT_EQ(some->projects[1].name, "gamma");
  EXPECT_EQ(some->projects[2].name, "quote\"back\\slash");
  ASSERT_EQ(some->files.size(), 3U);
  EXPECT_EQ(some->files[0].project, "alpha");
  EXPECT_EQ(some->files[1].project, "gamma");
  EXPECT_EQ(some->files[2].project, "quote\"back\\slash");
  EXPECT_EQ(some->tokens.size(), 1U);
  EXPECT_EQ(some->generation, *(*cat)->generation());
  auto none = (*cat)->load_projects({});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->projects.empty() && none->files.empty());
  EXPECT_EQ(none->tokens.size(), 1U);
}

TEST_P(CatalogTest, ReopenKeepsDataAndSchema) {
  {
    auto cat = open_cat();
    ASSERT_TRUE(cat);
    ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'))));
  }
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  EXPECT_EQ(contents->files.size(), 1U);
}

TEST_P(CatalogTest, StoresVariantHints) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  NewFile nf = wheel("demo_pkg-1.0+cu128torch2.8-py3-none-any.whl", std::string(64, 'a'));
  nf.file.version = "1.0+cu128torch2.8";
  nf.file.hints = core::parse_local_label("cu128torch2.8cxx11abiTRUE.gabc");
  ASSERT_TRUE((*cat)->insert_file(nf));
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->files.size(), 1U);
  EXPECT_EQ(contents->files[0].hints, nf.file.hints);
  EXPECT_EQ(contents->files[0].hints.describe(), "cu128 torch2.8 cxx11abi1");
}

TEST_F(SqliteCatalogTest, BackfillsHintsOfOlderRows) {
  {
    auto cat = open_cat();
    ASSERT_TRUE(cat);
    NewFile nf = wheel("demo_pkg-1.0+cu126-py3-none-any.whl", std::string(64, 'a'));
    nf.file.version = "1.0+cu126";
    nf.requires_dist = {"torch==2.9.*", "numpy"};
    ASSERT_TRUE((*cat)->insert_file(nf));
  }
  // Make the row look as if an older wheelforge, without hint columns, had written it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "wheelforge.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE files SET backend='none', cuda_major=NULL, cuda_minor=NULL,"
                         " torch_major=NULL, torch_minor=NULL, hints_version=0",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  auto cat = open_cat();
  ASSERT_TRUE(cat);
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  const auto& h = contents->files.at(0).hints;
  EXPECT_EQ(h.backend, core::Backend::cuda);
  EXPECT_EQ(h.cuda_minor, 6);
  ASSERT_TRUE(h.torch);  // from the Requires-Dist pin
  EXPECT_EQ(*h.torch, (core::TorchSeries{2, 9}));
}

TEST_P(CatalogTest, YankByVersionAndFile) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  for (const char* v : {"1.0+cu126", "1.0+cu128", "2.0"}) {
    NewFile nf = wheel(std::string("demo_pkg-") + v + "-py3-none-any.whl", std::string(64, v[0]));
    nf.file.version = v;
    ASSERT_TRUE((*cat)->insert_file(nf));
  }
  auto yanked = (*cat)->set_yanked("demo-pkg", std::string("1.0"), std::nullopt,
                                   std::string("broken"), wf::catalog::Actor{});
  ASSERT_TRUE(yanked) << yanked.error().message;
  EXPECT_EQ(yanked->size(), 2U);  // both local variants of 1.0
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  for (const auto& f : contents->files) {
    if (f.version == "2.0") {
      EXPECT_FALSE(f.yanked);
    } else {
      EXPECT_EQ(f.yanked, "broken");
    }
  }
  auto one = (*cat)->set_yanked("demo-pkg", std::nullopt,
                                std::string("demo_pkg-1.0+cu126-py3-none-any.whl"), std::nullopt,
                                wf::catalog::Actor{});
  ASSERT_TRUE(one);
  auto f = (*cat)->find_file("demo_pkg-1.0+cu126-py3-none-any.whl");
  EXPECT_FALSE((**f).yanked);
  EXPECT_EQ((*cat)
                ->set_yanked("demo-pkg", std::string("9.9"), std::nullopt, std::string(),
                             wf::catalog::Actor{})
                .error()
                .code,
            Errc::not_found);
  EXPECT_EQ((*cat)
                ->set_yanked("demo-pkg", std::string("not a version"), std::nullopt, std::string(),
                             wf::catalog::Actor{})
                .error()
                .code,
            Errc::invalid);
}

TEST_P(CatalogTest, DeleteReservesTheName) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  const std::string name = "demo_pkg-1.0-py3-none-any.whl";
  ASSERT_TRUE((*cat)->insert_file(wheel(name, std::string(64, 'a'))));
  auto deleted = (*cat)->delete_file(name, wf::catalog::Actor{});
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->sha256, std::string(64, 'a'));
  EXPECT_FALSE((*cat)->find_file(name)->has_value());
  EXPECT_TRUE(*(*cat)->is_reserved(name));
  EXPECT_EQ((*cat)->delete_file(name, wf::catalog::Actor{}).error().code, Errc::not_found);
  auto again = (*cat)->insert_file(wheel(name, std::string(64, 'a')));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->first, InsertOutcome::reserved);
  EXPECT_EQ(again->second.filename, name);
  EXPECT_EQ(again->second.sha256, std::string(64, 'a'));
}

TEST_P(CatalogTest, DeletedFilesAreListedPerProject) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  for (const auto* name : {"demo_pkg-1.0-1-py3-none-any.whl", "demo_pkg-1.0-py3-none-any.whl",
                           "demo_pkg-2.0-py3-none-any.whl"}) {
    ASSERT_TRUE((*cat)->insert_file(wheel(name, std::string(64, name[9] == '2' ? 'c' : 'a'))));
  }
  EXPECT_TRUE((*cat)->deleted_files("demo-pkg")->empty());
  ASSERT_TRUE((*cat)->delete_file("demo_pkg-1.0-py3-none-any.whl", wf::catalog::Actor{}));
  ASSERT_TRUE((*cat)->delete_file("demo_pkg-1.0-1-py3-none-any.whl", wf::catalog::Actor{}));
  auto listed = (*cat)->deleted_files("demo-pkg");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2U);
  EXPECT_EQ((*listed)[0].filename, "demo_pkg-1.0-1-py3-none-any.whl");
  EXPECT_EQ((*listed)[1].filename, "demo_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ((*listed)[0].project, "demo-pkg");
  EXPECT_TRUE((*cat)->deleted_files("other")->empty());
}

TEST_P(CatalogTest, SpellingsOfOneNameAreOneFile) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  const std::string stored = "demo_pkg-1.0-py2.py3-none-any.whl";
  auto first = wheel(stored, std::string(64, 'a'));
  first.file.tags = core::WheelTags{std::nullopt, "py2.py3", "none", "any", std::nullopt};
  ASSERT_EQ((*cat)->insert_file(first)->first, InsertOutcome::inserted);

  for (const char* spelling :
       {"Demo_Pkg-1.0-py3.py2-none-any.whl", "demo.pkg-1.0.0-py2.py3-none-any.whl",
        "DEMO_PKG-1-PY3.py2-None-Any.whl"}) {
    auto same = (*cat)->insert_file(wheel(spelling, std::string(64, 'a')));
    ASSERT_TRUE(same) << same.error().message;
    EXPECT_EQ(same->first, InsertOutcome::identical) << spelling;
    EXPECT_EQ(same->second.filename, stored) << spelling;
    auto other = (*cat)->insert_file(wheel(spelling, std::string(64, 'b')));
    ASSERT_TRUE(other);
    EXPECT_EQ(other->first, InsertOutcome::conflict) << spelling;
    EXPECT_EQ(other->second.filename, stored) << spelling;
    EXPECT_EQ(other->second.sha256, std::string(64, 'a'));

    auto found = (*cat)->find_same_file(spelling, std::string(64, 'c'));
    ASSERT_TRUE(found);
    ASSERT_TRUE(found->has_value()) << spelling;
    EXPECT_EQ((*found)->filename, stored);
    EXPECT_FALSE((*cat)->find_file(spelling)->has_value()) << "find_file is exact";
  }
  // Other tags, versions or build tags are other files.
  for (const char* different :
       {"demo_pkg-1.0-py3-none-any.whl", "demo_pkg-1.0.1-py2.py3-none-any.whl",
        "demo_pkg-1.0-1-py2.py3-none-any.whl"}) {
    EXPECT_EQ((*cat)->insert_file(wheel(different, std::string(64, 'd')))->first,
              InsertOutcome::inserted)
        << different;
  }
  EXPECT_EQ((*cat)->load()->files.size(), 4U);
}

TEST_P(CatalogTest, OneSdistPerRelease) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  auto sdist = [](std::string filename, std::string sha) {
    NewFile nf = wheel(std::move(filename), std::move(sha));
    nf.file.kind = core::DistKind::sdist;
    nf.file.tags = {};
    return nf;
  };
  ASSERT_EQ((*cat)->insert_file(sdist("demo_pkg-1.0.tar.gz", std::string(64, 'a')))->first,
            InsertOutcome::inserted);
  auto second = (*cat)->insert_file(sdist("Demo-Pkg-1.0.0.tar.gz", std::string(64, 'b')));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->first, InsertOutcome::conflict);
  EXPECT_EQ(second->second.filename, "demo_pkg-1.0.tar.gz");
  EXPECT_EQ(second->second.kind, core::DistKind::sdist);
  // A wheel of the release, and the sdist of another release, are other files.
  EXPECT_EQ(
      (*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'c')))->first,
      InsertOutcome::inserted);
  EXPECT_EQ((*cat)->insert_file(sdist("demo_pkg-1.1.tar.gz", std::string(64, 'd')))->first,
            InsertOutcome::inserted);
}

TEST_P(CatalogTest, DeletionReservesEverySpellingOfTheName) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  const std::string name = "demo_pkg-1.0-py3-none-any.whl";
  ASSERT_TRUE((*cat)->insert_file(wheel(name, std::string(64, 'a'))));
  ASSERT_TRUE((*cat)->delete_file(name, wf::catalog::Actor{}));
  const std::string other = "Demo.Pkg-1.0.0-py3-none-any.whl";
  EXPECT_TRUE(*(*cat)->is_reserved(other));
  auto reservation = (*cat)->find_reservation(other);
  ASSERT_TRUE(reservation);
  ASSERT_TRUE(reservation->has_value());
  EXPECT_EQ((*reservation)->filename, name);
  EXPECT_EQ((*reservation)->project, "demo-pkg");
  for (const char sha : {'a', 'b'}) {
    auto again = (*cat)->insert_file(wheel(other, std::string(64, sha)));
    ASSERT_TRUE(again);
    EXPECT_EQ(again->first, InsertOutcome::reserved);
    EXPECT_EQ(again->second.filename, name);
  }
  EXPECT_FALSE(*(*cat)->is_reserved("demo_pkg-1.0-py2.py3-none-any.whl"));
}

TEST_P(CatalogTest, InsertFilesHoldsABatchToOneFilePerName) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  const std::vector<NewFile> files = {
      wheel("Demo_Pkg-1.0-py3-none-any.whl", std::string(64, 'a')),
      wheel("demo.pkg-1.0-py3-none-any.whl", std::string(64, 'b')),
      wheel("demo_pkg-1.0.0-py3-none-any.whl", std::string(64, 'a')),
  };
  auto results = (*cat)->insert_files(
      files, [](std::size_t) { return ok_status(); }, [] { return ok_status(); });
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0]->first, InsertOutcome::inserted);
  EXPECT_EQ((*results)[1]->first, InsertOutcome::conflict);
  EXPECT_EQ((*results)[1]->second.filename, "Demo_Pkg-1.0-py3-none-any.whl");
  EXPECT_EQ((*results)[2]->first, InsertOutcome::identical);
  EXPECT_EQ((*cat)->load()->files.size(), 1U);
}

TEST_F(SqliteCatalogTest, UpgradeKeepsFilesThatCollideAndRefusesNewOnes) {
  {
    auto cat = open_cat();
    ASSERT_TRUE(cat);
    ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'))));
    ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-2.0-py3-none-any.whl", std::string(64, 'c'))));
    ASSERT_TRUE((*cat)->delete_file("demo_pkg-2.0-py3-none-any.whl", wf::catalog::Actor{}));
  }
  // Make the database look as if an older wheelforge, which compared names exactly, had
  // written it, with a second spelling of the same file name.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "wheelforge.db").c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const std::string older =
      wf::catalog::testing::undo_migrations_after(6) +
      " INSERT INTO files (project_id, filename, version, kind, sha256, size, upload_time,"
      "  metadata_sha256, metadata_size, python_tag, abi_tag, platform_tag)"
      " SELECT project_id, 'Demo.Pkg-1.0.0-py3-none-any.whl', '1.0.0', kind, '" +
      std::string(64, 'b') +
      "', size, upload_time, metadata_sha256, metadata_size, python_tag, abi_tag, platform_tag"
      " FROM files;"
      " PRAGMA user_version = 6;";
  ASSERT_EQ(sqlite3_exec(db, older.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);

  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->files.size(), 2U) << "both colliding files are kept";

  // Identical bytes to either stored file are that file; other bytes conflict.
  for (const char sha : {'a', 'b'}) {
    auto same = (*cat)->insert_file(wheel("DEMO_PKG-1.0-py3-none-any.whl", std::string(64, sha)));
    ASSERT_TRUE(same);
    EXPECT_EQ(same->first, InsertOutcome::identical);
    EXPECT_EQ(same->second.sha256, std::string(64, sha));
  }
  auto other = (*cat)->insert_file(wheel("DEMO_PKG-1.0-py3-none-any.whl", std::string(64, 'z')));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->first, InsertOutcome::conflict);
  // The deleted file's reservation now covers its other spellings too.
  auto reserved =
      (*cat)->insert_file(wheel("Demo.Pkg-2.0.0-py3-none-any.whl", std::string(64, 'c')));
  ASSERT_TRUE(reserved);
  EXPECT_EQ(reserved->first, InsertOutcome::reserved);
  EXPECT_EQ(reserved->second.filename, "demo_pkg-2.0-py3-none-any.whl");
  EXPECT_EQ((*cat)->load()->files.size(), 2U);
}

TEST_P(CatalogTest, ClaimsAreRecordedAndEnforcedInsideTheTransaction) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  TokenRecord t;
  t.hash = std::string(64, '1');
  t.scope = Scope::upload;
  auto a = (*cat)->insert_token(t, wf::catalog::Actor{});
  t.hash = std::string(64, '2');
  auto b = (*cat)->insert_token(t, wf::catalog::Actor{});
  ASSERT_TRUE(a && b);
  const core::Uploader by_a{false, a->id, std::nullopt};
  const core::Uploader by_b{false, b->id, std::nullopt};

  NewFile first = wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'));
  first.uploader = by_a;
  auto inserted = (*cat)->insert_file(first);
  ASSERT_TRUE(inserted);
  EXPECT_EQ(inserted->first, InsertOutcome::inserted);

  auto generation = (*cat)->generation();
  ASSERT_TRUE(generation);
  NewFile other = wheel("demo_pkg-2.0-py3-none-any.whl", std::string(64, 'b'));
  other.uploader = by_b;
  bool published = false;
  auto refused = (*cat)->insert_file(other, [&] {
    published = true;
    return ok_status();
  });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->first, InsertOutcome::forbidden);
  EXPECT_FALSE(published) << "nothing may be published for a refused upload";
  EXPECT_EQ(*(*cat)->generation(), *generation) << "a refused upload changes nothing";
  // Even an identical file is refused to another uploader.
  NewFile again = first;
  again.uploader = by_b;
  EXPECT_EQ((*cat)->insert_file(again)->first, InsertOutcome::forbidden);

  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->projects.size(), 1U);
  EXPECT_EQ(contents->projects[0].claim, (core::ProjectClaim{core::ClaimKind::token, a->id}));

  // An admin hands the project to b.
  auto handed = (*cat)->set_claim("demo-pkg", core::ProjectClaim{core::ClaimKind::token, b->id},
                                  wf::catalog::Actor{});
  ASSERT_TRUE(handed) << handed.error().message;
  EXPECT_EQ(handed->claim.token_id, b->id);
  EXPECT_EQ((*cat)->insert_file(other)->first, InsertOutcome::inserted);
  first.file.filename = "demo_pkg-3.0-py3-none-any.whl";
  EXPECT_EQ((*cat)->insert_file(first)->first, InsertOutcome::forbidden);

  // Released: the next token to upload claims it again.
  ASSERT_TRUE((*cat)->set_claim("demo-pkg", core::ProjectClaim{}, wf::catalog::Actor{}));
  EXPECT_EQ((*cat)->insert_file(first)->first, InsertOutcome::inserted);
  EXPECT_EQ((*cat)->load()->projects[0].claim, (core::ProjectClaim{core::ClaimKind::token, a->id}));

  // Unknown projects and tokens, revoked tokens.
  EXPECT_EQ((*cat)->set_claim("nope", core::ProjectClaim{}, wf::catalog::Actor{}).error().code,
            Errc::not_found);
  EXPECT_EQ((*cat)
                ->set_claim("demo-pkg", core::ProjectClaim{core::ClaimKind::token, 999},
                            wf::catalog::Actor{})
                .error()
                .code,
            Errc::not_found);
  ASSERT_TRUE((*cat)->revoke_token(b->id, wf::catalog::Actor{}));
  EXPECT_EQ((*cat)
                ->set_claim("demo-pkg", core::ProjectClaim{core::ClaimKind::token, b->id},
                            wf::catalog::Actor{})
                .error()
                .code,
            Errc::not_found);
}

TEST_P(CatalogTest, LocalCommandsClaimNewProjectsForAdmins) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'))));
  EXPECT_EQ((*cat)->load()->projects.at(0).claim.kind, core::ClaimKind::admin);
  NewFile by_token = wheel("demo_pkg-2.0-py3-none-any.whl", std::string(64, 'b'));
  by_token.uploader = core::Uploader{false, 7, std::nullopt};
  EXPECT_EQ((*cat)->insert_file(by_token)->first, InsertOutcome::forbidden);
  by_token.uploader.token_project = "demo-pkg";  // limited to the project by an admin
  EXPECT_EQ((*cat)->insert_file(by_token)->first, InsertOutcome::inserted);
}

TEST_F(SqliteCatalogTest, ProjectsOlderThanClaimsAreUnclaimed) {
  {
    auto cat = open_cat();
    ASSERT_TRUE(cat);
    ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'))));
  }
  // Make the database look as if an older wheelforge, without claims, had written it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "wheelforge.db").c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const std::string older =
      wf::catalog::testing::undo_migrations_after(4) + "PRAGMA user_version = 4;";
  ASSERT_EQ(sqlite3_exec(db, older.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);

  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  EXPECT_EQ(contents->projects.at(0).claim.kind, core::ClaimKind::unclaimed);
  NewFile next = wheel("demo_pkg-2.0-py3-none-any.whl", std::string(64, 'b'));
  TokenRecord t;
  t.hash = std::string(64, '5');
  t.scope = Scope::upload;
  auto token = (*cat)->insert_token(t, wf::catalog::Actor{});
  ASSERT_TRUE(token);
  next.uploader = core::Uploader{false, token->id, std::nullopt};
  auto inserted = (*cat)->insert_file(next);
  ASSERT_TRUE(inserted) << inserted.error().message;
  EXPECT_EQ(inserted->first, InsertOutcome::inserted);
  EXPECT_EQ((*cat)->load()->projects.at(0).claim,
            (core::ProjectClaim{core::ClaimKind::token, token->id}));
}

// What a catalog of migration 11 holds after the upgrade: every wheel without findings.
TEST_F(SqliteCatalogTest, FindingsOfWheelsStoredBeforeInspectionAreRecordedOnce) {
  core::WheelFindings other;
  other.binaries.emplace_back();
  other.binaries.back().path = "demo/_C.so";
  {
    auto cat = open_cat();
    ASSERT_TRUE(cat);
    NewFile a = wheel("demo_pkg-1.0+cu130-cp39-abi3-linux_x86_64.whl", std::string(64, 'a'));
    a.file.version = "1.0+cu130";
    a.file.hints = core::parse_local_label("cu130");
    a.requires_dist = {"torch>=2.9", "numpy"};
    ASSERT_TRUE((*cat)->insert_file(a));
    ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'b'))));
    NewFile sdist = wheel("demo_pkg-1.0.tar.gz", std::string(64, 'c'));
    sdist.file.kind = core::DistKind::sdist;
    sdist.file.tags = {};
    ASSERT_TRUE((*cat)->insert_file(sdist));
    NewFile gone = wheel("demo_pkg-0.9-py3-none-any.whl", std::string(64, 'd'));
    ASSERT_TRUE((*cat)->insert_file(gone));
    ASSERT_TRUE((*cat)->delete_file(gone.file.filename, Actor{}));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "wheelforge.db").c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const std::string older =
      wf::catalog::testing::undo_migrations_after(11) + "PRAGMA user_version = 11;";
  ASSERT_EQ(sqlite3_exec(db, older.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);

  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  auto listed = (*cat)->uninspected_wheels();
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->size(), 2U);  // the wheels, by name; neither the sdist nor the deleted one
  const std::string a = "demo_pkg-1.0+cu130-cp39-abi3-linux_x86_64.whl";
  const std::string b = "demo_pkg-1.0-py3-none-any.whl";
  EXPECT_EQ(listed->at(0).file.filename, a);
  EXPECT_EQ(listed->at(0).requires_dist, (std::vector<std::string>{"torch>=2.9", "numpy"}));
  EXPECT_EQ(listed->at(0).file.hints.cuda_major, 13);
  EXPECT_FALSE(listed->at(0).file.binaries);
  EXPECT_EQ(listed->at(1).file.filename, b);

  core::WheelFindings findings;
  findings.torch_from = core::TorchSeries{2, 9};
  core::BinaryFindings& module = findings.binaries.emplace_back();
  module.path = "demo/_C.abi3.so";
  module.size = 12345;
  module.extension_module = true;
  module.arch = "x86_64";
  module.needed = {"libcudart.so.13", "libc.so.6"};
  module.glibc = "2.34";
  module.cuda_major = 13;
  module.cuda_library = "libcudart.so.13";
  module.binding = core::TorchBinding::stable_abi;
  module.binding_symbol = "aoti_torch_get_numel";
  const auto before = *(*cat)->generation();
  auto recorded = (*cat)->record_findings(a, std::string(64, 'a'), findings);
  ASSERT_TRUE(recorded) << recorded.error().message;
  EXPECT_TRUE(*recorded);
  EXPECT_GT(*(*cat)->generation(), before);  // servers reload: views depend on findings
  auto row = (*cat)->find_file(a);
  ASSERT_TRUE(row && row->has_value());
  ASSERT_TRUE((*row)->binaries);
  EXPECT_EQ(*(*row)->binaries, findings);
  ASSERT_EQ((*cat)->uninspected_wheels()->size(), 1U);

  // Once recorded, findings stay: a second run (or a racing one) changes nothing.
  const auto after = *(*cat)->generation();
  recorded = (*cat)->record_findings(a, std::string(64, 'a'), other);
  ASSERT_TRUE(recorded);
  EXPECT_FALSE(*recorded);
  EXPECT_EQ(*(*cat)->find_file(a)->value().binaries, findings);
  EXPECT_EQ(*(*cat)->generation(), after);

  // A wheel without binaries gets empty findings, and is no longer listed.
  EXPECT_TRUE(*(*cat)->record_findings(b, std::string(64, 'b'), core::WheelFindings{}));
  EXPECT_EQ(*(*cat)->find_file(b)->value().binaries, core::WheelFindings{});
  EXPECT_TRUE((*cat)->uninspected_wheels()->empty());

  EXPECT_EQ((*cat)->record_findings(b, std::string(64, 'e'), findings).error().code,
            Errc::conflict);
  EXPECT_EQ((*cat)
                ->record_findings("demo_pkg-0.9-py3-none-any.whl", std::string(64, 'd'), findings)
                .error()
                .code,
            Errc::not_found);
  EXPECT_EQ(
      (*cat)->record_findings("demo_pkg-1.0.tar.gz", std::string(64, 'c'), findings).error().code,
      Errc::invalid);
  EXPECT_FALSE((*cat)->find_file("demo_pkg-1.0.tar.gz")->value().binaries);
}

TEST_P(CatalogTest, ProvenanceIsAddedOnceToAFileWithout) {
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  const std::string name = "demo_pkg-1.0-py3-none-any.whl";
  const std::string sha(64, 'a');
  ASSERT_TRUE((*cat)->insert_file(wheel(name, sha)));
  Actor by;
  by.origin = "http";
  by.address = "127.0.0.1";
  const auto before = *(*cat)->generation();
  auto set = (*cat)->set_provenance(name, sha, std::string(64, 'p'), 1234, by);
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_TRUE(*set);
  EXPECT_GT(*(*cat)->generation(), before);  // servers reload: pages name the provenance
  const auto row = (*cat)->find_file(name)->value();
  EXPECT_EQ(row.provenance_sha256, std::string(64, 'p'));
  EXPECT_EQ(row.provenance_size, 1234U);
  const auto audit = (*cat)->audit(AuditQuery{});
  ASSERT_TRUE(audit && !audit->empty());
  EXPECT_EQ(audit->front().action, "attestations");
  EXPECT_EQ(audit->front().project, "demo-pkg");
  EXPECT_EQ(audit->front().target, name);

  // The same provenance again changes nothing; other provenance is a conflict.
  const auto after = *(*cat)->generation();
  set = (*cat)->set_provenance(name, sha, std::string(64, 'p'), 1234, by);
  ASSERT_TRUE(set);
  EXPECT_FALSE(*set);
  EXPECT_EQ(*(*cat)->generation(), after);
  set = (*cat)->set_provenance(name, sha, std::string(64, 'q'), 99, by);
  ASSERT_FALSE(set);
  EXPECT_EQ(set.error().code, Errc::conflict);
  EXPECT_EQ(set.error().message, provenance_exists_message(name));
  EXPECT_EQ((*cat)->find_file(name)->value().provenance_sha256, std::string(64, 'p'));
  // Other bytes under the name, or no such file.
  EXPECT_EQ(
      (*cat)->set_provenance(name, std::string(64, 'b'), std::string(64, 'q'), 1, by).error().code,
      Errc::conflict);
  EXPECT_EQ((*cat)
                ->set_provenance("demo_pkg-2.0-py3-none-any.whl", sha, std::string(64, 'q'), 1, by)
                .error()
                .code,
            Errc::not_found);
}

TEST_P(CatalogTest, DamagedBlobsWithdrawTheirFilesUntilPublishedAgain) {
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  const std::string a(64, 'a');
  const std::string b(64, 'b');
  NewFile first = wheel("demo_pkg-1.0-py3-none-any.whl", a);
  NewFile second = wheel("demo_pkg-2.0-py3-none-any.whl", b);  // shares the METADATA blob
  ASSERT_TRUE((*cat)->insert_file(first));
  ASSERT_TRUE((*cat)->insert_file(second));
  auto gen = (*cat)->generation();
  ASSERT_TRUE(gen);

  // A blob that turns out to be fine is not recorded, and nothing changes.
  auto kept = (*cat)->mark_damaged(a, "content has sha256 x", [] { return Result<bool>(false); });
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_FALSE(*kept);
  EXPECT_EQ(*(*cat)->generation(), *gen);
  EXPECT_TRUE((*cat)->damaged_blobs()->empty());

  // The quarantine runs inside the transaction; its failure records nothing.
  auto failed = (*cat)->mark_damaged(
      a, "x", [] { return Result<bool>(make_error(Errc::io, "move: Input/output error")); });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, Errc::io);
  EXPECT_TRUE((*cat)->damaged_blobs()->empty());

  bool ran = false;
  auto marked = (*cat)->mark_damaged(a, "content has sha256 x", [&] {
    ran = true;
    return Result<bool>(true);
  });
  ASSERT_TRUE(marked);
  EXPECT_TRUE(*marked && ran);
  EXPECT_GT(*(*cat)->generation(), *gen);  // a running server notices
  auto damaged = (*cat)->damaged_blobs();
  ASSERT_TRUE(damaged);
  ASSERT_EQ(damaged->size(), 1U);
  EXPECT_EQ(damaged->front().sha256, a);
  EXPECT_EQ(damaged->front().detail, "content has sha256 x");
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->files.size(), 2U);
  EXPECT_TRUE(contents->files[0].damaged);
  EXPECT_FALSE(contents->files[1].damaged);
  EXPECT_TRUE((*(*cat)->find_file(first.file.filename))->damaged);

  // A shared METADATA blob withdraws every file that needs it.
  ASSERT_TRUE((*cat)->mark_damaged(std::string(64, 'm'), "missing", {}));
  contents = (*cat)->load_project("demo-pkg");
  ASSERT_TRUE(contents);
  EXPECT_TRUE(contents->files[0].damaged && contents->files[1].damaged);

  // Restoring the first file publishes its blobs again and drops both records.
  auto other = (*cat)->restore_file(first.file.filename, b, [] { return ok_status(); });
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, Errc::conflict);
  auto refused = (*cat)->restore_file(first.file.filename, a, [] {
    return Status(make_error(Errc::io, "fsync: Input/output error"));
  });
  ASSERT_FALSE(refused);
  EXPECT_EQ((*cat)->damaged_blobs()->size(), 2U);
  gen = (*cat)->generation();
  bool published = false;
  auto restored = (*cat)->restore_file(first.file.filename, a, [&] {
    published = true;
    return ok_status();
  });
  ASSERT_TRUE(restored) << restored.error().message;
  EXPECT_TRUE(published);
  EXPECT_FALSE(restored->damaged);
  EXPECT_EQ(restored->sha256, a);
  EXPECT_GT(*(*cat)->generation(), *gen);
  EXPECT_TRUE((*cat)->damaged_blobs()->empty());
  contents = (*cat)->load();
  EXPECT_FALSE(contents->files[0].damaged || contents->files[1].damaged);
  EXPECT_EQ((*cat)->restore_file("nothing-1.0-py3-none-any.whl", a, {}).error().code,
            Errc::not_found);

  // A new file that publishes a damaged blob heals it too; clear_damaged drops records.
  ASSERT_TRUE((*cat)->mark_damaged(b, "missing", {}));
  ASSERT_TRUE((*cat)->mark_damaged(std::string(64, 'c'), "missing", {}));
  ASSERT_TRUE((*cat)->insert_file(wheel("demo_pkg-3.0-py3-none-any.whl", b)));
  ASSERT_EQ((*cat)->damaged_blobs()->size(), 1U);
  ASSERT_TRUE((*cat)->clear_damaged({std::string(64, 'c')}));
  EXPECT_TRUE((*cat)->damaged_blobs()->empty());
}

TEST(Scope, RoundTrip) {
  for (Scope s : {Scope::read, Scope::upload, Scope::admin})
    EXPECT_EQ(parse_scope(scope_name(s)), s);
  EXPECT_FALSE(parse_scope("root"));
}

}  // namespace
}  // namespace wf::catalog
