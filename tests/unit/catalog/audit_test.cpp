// Token lifecycle and the audit trail in the SQLite catalog: the upgrade of a catalog written
// at schema version 10 (migrations run up to 10, rows written as that schema takes them),
// audit entries per change, last uses that move no generation.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "backends.hpp"
#include "catalog/sqlite_catalog_impl.hpp"
#include "wheelforge/catalog/catalog.hpp"

namespace wf::catalog {
namespace {

namespace fs = std::filesystem;

class AuditTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-audit-" + std::to_string(::getpid()) + "-" + backends::test_dir_name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto location = backends::fresh_location(backend_);
    ASSERT_TRUE(location) << location.error().message;
    location_ = *location;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path db() const { return dir_ / "wheelforge.db"; }

  static NewFile wheel(std::string filename, std::string sha, Actor actor = {}) {
    NewFile nf;
    nf.file.filename = std::move(filename);
    nf.file.project = "demo-pkg";
    nf.file.version = "1.0";
    nf.file.sha256 = std::move(sha);
    nf.file.size = 10;
    nf.file.upload_time = now_micros();
    nf.file.metadata_sha256 = std::string(64, 'm');
    nf.file.metadata_size = 5;
    nf.file.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
    nf.display_name = "demo-pkg";
    nf.actor = std::move(actor);
    return nf;
  }

  static Actor by_token(std::int64_t id) {
    Actor a;
    a.token_id = id;
    a.token_description = "ci";
    a.origin = "http";
    a.address = "198.51.100.4";
    return a;
  }

  static TokenRecord token(std::string secret, Scope scope) {
    TokenRecord t;
    t.hash = "hash-of-" + secret;  // any unique text: the catalog stores what it is given
    t.scope = scope;
    t.created_at = now_micros();
    return t;
  }

  Result<std::unique_ptr<Catalog>> open_cat() { return open_catalog(location_, dir_); }

  backends::Backend backend_ = backends::Backend::sqlite;
  std::string location_;
  fs::path dir_;
};

class AuditTest : public AuditTestBase, public ::testing::WithParamInterface<backends::Backend> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    AuditTestBase::SetUp();
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, AuditTest,
                         ::testing::Values(backends::Backend::sqlite,
                                           backends::Backend::postgresql),
                         backends::BackendName());

TEST_P(AuditTest, PublishersAndMintedTokensAreRecordedAndATokenIdIsUsedOnce) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  PublisherRecord p;
  p.project = "demo-pkg";
  p.issuer = "github";
  p.claims = {{"repository", "o/demo"}, {"environment", "release"}};
  p.created_at = now_micros();
  auto added = (*cat)->insert_publisher(p, Actor{});
  ASSERT_TRUE(added) << added.error().message;
  EXPECT_EQ(added->created_by, "cli");
  // Stored sorted by claim name.
  EXPECT_EQ(added->claims.front().first, "environment");
  auto listed = (*cat)->publishers();
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_EQ(listed->front().claims, added->claims);

  // A second catalog on the same database stands for another server.
  auto other = open_cat();
  ASSERT_TRUE(other);
  MintRequest mint;
  mint.token = token("wf_minted", Scope::upload);
  mint.token.project = "demo-pkg";
  mint.token.expires_at = mint.token.created_at + 900'000'000;
  mint.jti_key = "https://issuer.example jti-1";
  mint.jti_until = mint.token.created_at + 300'000'000;
  mint.detail = "origin=oidc publisher=#1";
  mint.publisher_id = added->id;
  Actor oidc;
  oidc.origin = "oidc";
  auto minted = (*cat)->mint_token(mint, oidc);
  ASSERT_TRUE(minted) << minted.error().message;
  // The token remembers its publisher (the attestations it uploads must be that publisher's);
  // other tokens have none.
  EXPECT_EQ(minted->publisher_id, added->id);
  ASSERT_TRUE((*cat)->insert_token(token("wf_plain", Scope::upload), Actor{}));
  auto loaded = (*other)->load();
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_EQ(loaded->tokens.size(), 2U);
  EXPECT_EQ(loaded->tokens[0].publisher_id, added->id);
  EXPECT_EQ(loaded->tokens[1].publisher_id, 0);
  mint.token.hash = "hash-of-another";
  auto again = (*other)->mint_token(mint, oidc);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::conflict);
  // Ids of expired tokens are forgotten at the next mint.
  mint.jti_key = "https://issuer.example jti-2";
  mint.jti_until = mint.token.created_at - 1;
  ASSERT_TRUE((*other)->mint_token(mint, oidc));
  mint.token.hash = "hash-of-a-third";  // same time: the id expired before it
  ASSERT_TRUE((*cat)->mint_token(mint, oidc));

  auto removed = (*cat)->remove_publisher(added->id, Actor{});
  ASSERT_TRUE(removed);
  EXPECT_EQ((*cat)->remove_publisher(added->id, Actor{}).error().code, Errc::not_found);
  AuditQuery q;
  q.project = "demo-pkg";
  q.limit = 100;
  auto trail = (*cat)->audit(q);
  ASSERT_TRUE(trail);
  std::string actions;
  for (const auto& e : *trail) actions = e.action + (actions.empty() ? "" : " ") + actions;
  EXPECT_EQ(actions, "publisher-add token-create token-create token-create publisher-remove");
  bool origin_named = false;
  for (const auto& e : *trail) {
    if (e.action == "token-create") {
      origin_named = origin_named || (e.detail.find("origin=oidc") != std::string::npos &&
                                      e.actor.origin == "oidc");
    }
  }
  EXPECT_TRUE(origin_named);
}

/// Tests of SQLite internals (older schemas).
using SqliteAuditTest = AuditTestBase;

TEST_F(SqliteAuditTest, UpgradesACatalogOfSchemaVersion10) {
  {
    // The schema as wheelforge left it before token lifecycle and the audit trail.
    auto raw = sqlite::Db::open(db(), sqlite::OpenMode::create);
    ASSERT_TRUE(raw) << raw.error().message;
    ASSERT_TRUE(detail::migrate_to(*raw, 10));
    ASSERT_TRUE(raw->exec(
        "INSERT INTO tokens (id, hash, scope, project, description, created_at, revoked_at)"
        " VALUES (1, 'h1', 'upload', NULL, 'old ci', 1700000000000000, NULL),"
        " (2, 'h2', 'admin', NULL, '', 1700000000000000, 1700000001000000);"
        "INSERT INTO projects (id, name, display_name, created_at, claimed_by, owner_token_id)"
        " VALUES (1, 'demo-pkg', 'Demo_Pkg', 1700000000000000, 'token', 1);"
        "INSERT INTO files (project_id, filename, version, kind, sha256, size, upload_time,"
        " metadata_sha256, metadata_size, python_tag, abi_tag, platform_tag)"
        " VALUES (1, 'demo_pkg-1.0-py3-none-any.whl', '1.0', 'wheel', '" +
        std::string(64, 'a') + "', 10, 1700000000000000, '" + std::string(64, 'm') +
        "', 5, 'py3', 'none', 'any');"));
    sqlite::Stmt v(*raw, "PRAGMA user_version");
    ASSERT_EQ(v.step(), SQLITE_ROW);
    ASSERT_EQ(v.i64(0), 10);
  }
  auto cat = open_cat();
  ASSERT_TRUE(cat) << cat.error().message;
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents) << contents.error().message;
  ASSERT_EQ(contents->tokens.size(), 2U);
  const TokenRecord& old = contents->tokens[0];
  EXPECT_EQ(old.description, "old ci");
  EXPECT_FALSE(old.expires_at);
  EXPECT_FALSE(old.last_used_at);
  EXPECT_EQ(old.created_by, "");
  EXPECT_TRUE(contents->tokens[1].revoked);
  ASSERT_EQ(contents->files.size(), 1U);
  EXPECT_EQ(contents->files[0].uploaded_by, "");  // not known for files stored before
  EXPECT_EQ(contents->files[0].uploaded_by_token, 0);
  EXPECT_EQ(contents->projects[0].claim, (core::ProjectClaim{core::ClaimKind::token, 1}));
  auto trail = (*cat)->audit(AuditQuery{});
  ASSERT_TRUE(trail);
  EXPECT_TRUE(trail->empty());

  // The upgraded catalog records what happens from now on.
  ASSERT_TRUE((*cat)->set_yanked("demo-pkg", std::string("1.0"), std::nullopt, std::string("bad"),
                                 by_token(1)));
  trail = (*cat)->audit(AuditQuery{});
  ASSERT_TRUE(trail);
  ASSERT_EQ(trail->size(), 1U);
  EXPECT_EQ(trail->front().action, "yank");
  EXPECT_EQ(trail->front().actor.label(), "token:1");
  EXPECT_EQ(trail->front().actor.address, "198.51.100.4");
  // A token's last use changes no page; a revocation does.
  const auto before = (*cat)->generation();
  ASSERT_TRUE((*cat)->record_token_uses({{1, 1'800'000'000'000'000}}));
  EXPECT_EQ(*(*cat)->generation(), *before);
  EXPECT_EQ((*cat)->tokens()->front().last_used_at, 1'800'000'000'000'000);
  ASSERT_TRUE((*cat)->revoke_token(1, Actor{}));
  EXPECT_GT(*(*cat)->generation(), *before);
}

TEST_P(AuditTest, AFileOfATokenRevokedOrExpiredSinceItsUploadBeganIsNotRecorded) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  auto revoked = (*cat)->insert_token(token("wf_r", Scope::upload), Actor{});
  auto lapsed = token("wf_e", Scope::upload);
  lapsed.expires_at = now_micros() - 1;
  auto expired = (*cat)->insert_token(lapsed, Actor{});
  ASSERT_TRUE(revoked && expired);
  // The upload was authorized; the token is revoked before the file is recorded.
  ASSERT_TRUE((*cat)->revoke_token(revoked->id, Actor{}));
  bool published = false;
  const auto publish = [&]() -> Status {
    published = true;
    return ok_status();
  };
  auto refused = (*cat)->insert_file(
      wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'), by_token(revoked->id)), publish);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::unauthorized);
  EXPECT_EQ(refused.error().message, "token #" + std::to_string(revoked->id) + " was revoked");
  auto late = (*cat)->insert_file(
      wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'), by_token(expired->id)), publish);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, Errc::unauthorized);
  EXPECT_NE(late.error().message.find(" expired at "), std::string::npos) << late.error().message;
  EXPECT_FALSE(published) << "nothing is published for a refused token";
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  EXPECT_TRUE(contents->files.empty());
  EXPECT_TRUE(contents->projects.empty());
  auto trail = (*cat)->audit(AuditQuery{});
  ASSERT_TRUE(trail);
  for (const auto& e : *trail) EXPECT_NE(e.action, "upload");
  // Without a token (commands, the runner) nothing is checked.
  EXPECT_TRUE((*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'))));
}

TEST_P(AuditTest, EveryChangeIsRecordedWithItsActor) {
  auto cat = open_cat();
  ASSERT_TRUE(cat);
  auto t = token("wf_a", Scope::upload);
  t.expires_at = now_micros() + 1'000'000'000;
  t.description = "ci uploader";
  auto stored = (*cat)->insert_token(t, Actor{});
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->created_by, "cli");
  const Actor uploader = by_token(stored->id);
  auto inserted =
      (*cat)->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'), uploader));
  ASSERT_TRUE(inserted);
  EXPECT_EQ(inserted->second.uploaded_by, "token:" + std::to_string(stored->id));
  // An identical upload changes nothing and records nothing.
  ASSERT_EQ(
      (*cat)
          ->insert_file(wheel("demo_pkg-1.0-py3-none-any.whl", std::string(64, 'a'), uploader))
          ->first,
      InsertOutcome::identical);
  ASSERT_TRUE((*cat)->set_yanked("demo-pkg", std::nullopt,
                                 std::string("demo_pkg-1.0-py3-none-any.whl"), std::nullopt,
                                 uploader));
  ASSERT_TRUE(
      (*cat)->set_claim("demo-pkg", core::ProjectClaim{core::ClaimKind::admin, 0}, Actor{}));
  ASSERT_TRUE((*cat)->set_claim("demo-pkg", core::ProjectClaim{}, Actor{}));
  ASSERT_TRUE((*cat)->delete_file("demo_pkg-1.0-py3-none-any.whl", Actor{}));
  ASSERT_TRUE((*cat)->revoke_token(stored->id, Actor{}));
  ASSERT_TRUE((*cat)->record_audit(AuditRecord{0, 0, "build", uploader, "", "build #1", "x"}));

  auto trail = (*cat)->audit(AuditQuery{});
  ASSERT_TRUE(trail);
  std::vector<std::string> actions;
  for (const auto& e : *trail) actions.push_back(e.action);
  EXPECT_EQ(actions, (std::vector<std::string>{"build", "token-revoke", "delete", "release",
                                               "claim", "unyank", "upload", "token-create"}));
  const AuditRecord& upload = (*trail)[6];
  EXPECT_EQ(upload.project, "demo-pkg");
  EXPECT_EQ(upload.target, "demo_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(upload.actor.token_description, "ci");
  EXPECT_NE(upload.detail.find("sha256=" + std::string(64, 'a')), std::string::npos);
  const AuditRecord& created = trail->back();
  EXPECT_NE(created.detail.find("expires="), std::string::npos);
  EXPECT_NE(created.detail.find("description=ci uploader"), std::string::npos);
  EXPECT_EQ(created.detail.find(t.hash), std::string::npos);

  // Filters: a project's entries, entries since a time, a limit.
  AuditQuery q;
  q.project = "demo-pkg";
  EXPECT_EQ((*cat)->audit(q)->size(), 5U);  // upload, unyank, claim, release, delete
  q = AuditQuery{};
  q.since = now_micros() + 60'000'000;
  EXPECT_TRUE((*cat)->audit(q)->empty());
  q = AuditQuery{};
  q.limit = 2;
  EXPECT_EQ((*cat)->audit(q)->size(), 2U);
  // A failed change records nothing.
  EXPECT_FALSE((*cat)->delete_file("nothing.whl", Actor{}));
  EXPECT_EQ((*cat)->audit(AuditQuery{})->size(), actions.size());
}

}  // namespace
}  // namespace wf::catalog
