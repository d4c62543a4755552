// Catalog::export_rows and import_rows (`wheelforge migrate`): every table (trusted publishers
// and exchanged OIDC token ids too) copied from one backend into the other, equal after the
// copy; a second import skips every row; ids kept and later ids after them; a row held with
// other values is a conflict naming it.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "backends.hpp"
#include "wheelforge/catalog/catalog.hpp"

namespace wf::catalog {
namespace {

namespace fs = std::filesystem;
using backends::Backend;

class ExportTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-export-" + std::to_string(::getpid()) + "-" + backends::test_dir_name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "source");
    fs::create_directories(dir_ / "target");
    // The source on the backend under test, the target on the other.
    auto from = backends::fresh_location(GetParam());
    auto to = backends::fresh_location(GetParam() == Backend::sqlite ? Backend::postgresql
                                                                     : Backend::sqlite);
    ASSERT_TRUE(from) << from.error().message;
    ASSERT_TRUE(to) << to.error().message;
    auto source = open_catalog(*from, dir_ / "source");
    auto target = open_catalog(*to, dir_ / "target");
    ASSERT_TRUE(source) << source.error().message;
    ASSERT_TRUE(target) << target.error().message;
    source_ = std::move(*source);
    target_ = std::move(*target);
  }
  void TearDown() override {
    source_.reset();
    target_.reset();
    fs::remove_all(dir_);
  }

  static NewFile wheel(std::string filename, char sha, Actor actor) {
    NewFile nf;
    nf.file.filename = std::move(filename);
    nf.file.project = "demo-pkg";
    nf.file.version = "1.0";
    nf.file.sha256 = std::string(64, sha);
    nf.file.size = 10;
    nf.file.upload_time = now_micros();
    nf.file.metadata_sha256 = std::string(64, 'm');
    nf.file.metadata_size = 5;
    nf.file.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
    nf.display_name = "Demo-Pkg";
    nf.actor = std::move(actor);
    return nf;
  }

  // A source with a row in every table but the build runner's.
  void fill_source() {
    TokenRecord t;
    t.hash = std::string(64, 'h');
    t.scope = Scope::upload;
    t.description = "ci";
    t.created_at = now_micros();
    auto token = source_->insert_token(t, Actor{});
    ASSERT_TRUE(token) << token.error().message;
    Actor by = Actor::of_token(*token, "198.51.100.4");
    for (const auto& [name, sha] : {std::pair{"demo_pkg-1.0-py3-none-any.whl", 'a'},
                                    std::pair{"demo_pkg-1.0-1-py3-none-any.whl", 'b'}}) {
      auto ins = source_->insert_file(wheel(name, sha, by));
      ASSERT_TRUE(ins) << ins.error().message;
      ASSERT_EQ(ins->first, InsertOutcome::inserted);
    }
    ASSERT_TRUE(source_->set_claim("demo-pkg",
                                   core::ProjectClaim{core::ClaimKind::token, token->id}, Actor{}));
    ASSERT_TRUE(source_->set_yanked("demo-pkg", std::nullopt,
                                    std::string("demo_pkg-1.0-py3-none-any.whl"),
                                    std::string("broken"), Actor{}));
    ASSERT_TRUE(source_->delete_file("demo_pkg-1.0-1-py3-none-any.whl", Actor{}));
    ASSERT_TRUE(source_->record_upstream_blob(
        UpstreamBlob{std::string(64, 'u'), "pypi", "six-1.16.0-py2.py3-none-any.whl", 7, 1, 2}));
    PublisherRecord p;
    p.project = "demo-pkg";
    p.issuer = "github";
    p.claims = {{"repository", "example-org/demo-pkg"}, {"environment", "release"}};
    p.description = "release job";
    p.created_at = now_micros();
    auto publisher = source_->insert_publisher(p, Actor{});
    ASSERT_TRUE(publisher) << publisher.error().message;
    MintRequest mint;
    mint.token.hash = std::string(64, 'o');
    mint.token.scope = Scope::upload;
    mint.token.project = "demo-pkg";
    mint.token.created_at = now_micros();
    mint.token.expires_at = mint.token.created_at + 900'000'000;
    mint.jti_key = "https://issuer.example jti-1";
    mint.jti_until = mint.token.created_at + 600'000'000;
    mint.publisher_id = publisher->id;
    ASSERT_TRUE(source_->mint_token(mint, Actor{}));
  }

  fs::path dir_;
  std::unique_ptr<Catalog> source_;
  std::unique_ptr<Catalog> target_;
};

TEST_P(ExportTest, CopiesEveryTableIntoTheOtherBackendAndAgainSkipsEveryRow) {
  fill_source();
  auto tables = source_->export_rows();
  ASSERT_TRUE(tables) << tables.error().message;
  ASSERT_EQ(tables->size(), 11U);
  std::size_t rows = 0;
  for (const auto& t : *tables) {
    auto counts = target_->import_rows(t);
    ASSERT_TRUE(counts) << t.table << ": " << counts.error().message;
    EXPECT_EQ(counts->inserted, t.rows.size()) << t.table;
    EXPECT_EQ(counts->skipped, 0U) << t.table;
    rows += t.rows.size();
  }
  EXPECT_GE(rows,
            10U);  // tokens, project, file, deleted file, upstream blob, publisher, jti, audit

  auto copied = target_->export_rows();
  ASSERT_TRUE(copied) << copied.error().message;
  for (std::size_t i = 0; i < tables->size(); ++i) {
    EXPECT_EQ((*copied)[i].rows, (*tables)[i].rows) << (*tables)[i].table;
  }
  auto contents = target_->load();
  ASSERT_TRUE(contents) << contents.error().message;
  ASSERT_EQ(contents->files.size(), 1U);
  EXPECT_EQ(contents->files[0].yanked, std::optional<std::string>("broken"));
  ASSERT_EQ(contents->projects.size(), 1U);
  EXPECT_EQ(contents->projects[0].claim.kind, core::ClaimKind::token);
  // Trusted publishers are copied, and an exchanged OIDC token id stays used.
  auto publishers = target_->publishers();
  ASSERT_TRUE(publishers) << publishers.error().message;
  ASSERT_EQ(publishers->size(), 1U);
  EXPECT_EQ((*publishers)[0].project, "demo-pkg");
  EXPECT_EQ((*publishers)[0].claims.size(), 2U);
  MintRequest replay;
  replay.token.hash = std::string(64, 'r');
  replay.token.created_at = now_micros();
  replay.jti_key = "https://issuer.example jti-1";
  replay.jti_until = replay.token.created_at + 600'000'000;
  auto replayed = target_->mint_token(replay, Actor{});
  ASSERT_FALSE(replayed);
  EXPECT_EQ(replayed.error().code, Errc::conflict);
  auto reserved = target_->is_reserved("demo_pkg-1.0-1-py3-none-any.whl");
  ASSERT_TRUE(reserved);
  EXPECT_TRUE(*reserved);

  // Again (an interrupted migration run once more): every row present, nothing written.
  for (const auto& t : *tables) {
    auto counts = target_->import_rows(t);
    ASSERT_TRUE(counts) << t.table << ": " << counts.error().message;
    EXPECT_EQ(counts->inserted, 0U) << t.table;
    EXPECT_EQ(counts->skipped, t.rows.size()) << t.table;
  }

  // Rows written after the import get ids after the imported ones.
  TokenRecord t;
  t.hash = std::string(64, 'k');
  t.created_at = now_micros();
  auto later = target_->insert_token(t, Actor{});
  ASSERT_TRUE(later) << later.error().message;
  EXPECT_GT(later->id, contents->tokens.back().id);
}

TEST_P(ExportTest, ARowHeldWithOtherValuesIsAConflictNamingIt) {
  fill_source();
  auto tables = source_->export_rows();
  ASSERT_TRUE(tables) << tables.error().message;
  for (const auto& t : *tables) ASSERT_TRUE(target_->import_rows(t));
  for (auto t : *tables) {
    if (t.table != "files") continue;
    const auto sha = t.column("sha256");
    ASSERT_TRUE(sha);
    t.rows[0][*sha] = std::string(64, 'c');
    auto counts = target_->import_rows(t);
    ASSERT_FALSE(counts);
    EXPECT_EQ(counts.error().code, Errc::conflict);
    EXPECT_NE(counts.error().message.find("files"), std::string::npos) << counts.error().message;
    EXPECT_NE(counts.error().message.find("sha256"), std::string::npos) << counts.error().message;
  }
  TableRows unknown;
  unknown.table = "meta";
  auto refused = target_->import_rows(unknown);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::invalid);
}

INSTANTIATE_TEST_SUITE_P(Backends, ExportTest,
                         ::testing::Values(Backend::sqlite, Backend::postgresql),
                         backends::BackendName());

}  // namespace
}  // namespace wf::catalog
