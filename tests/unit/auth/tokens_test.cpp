#include "wheelforge/auth/tokens.hpp"

#include <gtest/gtest.h>

#include "wheelforge/util/strings.hpp"

namespace wf::auth {
namespace {

using catalog::Scope;
using catalog::TokenRecord;

TEST(Tokens, GeneratedTokensAreLongAndDistinct) {
  const auto a = generate_token();
  EXPECT_EQ(a.rfind("wf_", 0), 0U);
  EXPECT_EQ(a.size(), 46U);
  EXPECT_NE(a, generate_token());
  EXPECT_EQ(hash_token(a).size(), 64U);
}

TEST(Tokens, ParsesBasicAndBearer) {
  auto basic = token_from_authorization("Basic " + base64_encode("__token__:wf_abc"));
  ASSERT_TRUE(basic);
  EXPECT_EQ(*basic, "wf_abc");
  auto bearer = token_from_authorization("bearer wf_xyz");
  ASSERT_TRUE(bearer);
  EXPECT_EQ(*bearer, "wf_xyz");
  auto none = token_from_authorization("");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
}

TEST(Tokens, RejectsMalformedCredentials) {
  EXPECT_EQ(token_from_authorization("Basic !!!").error().code, Errc::unauthorized);
  EXPECT_EQ(token_from_authorization("Basic " + base64_encode("nocolon")).error().code,
            Errc::unauthorized);
  auto wrong_user = token_from_authorization("Basic " + base64_encode("alice:wf_abc"));
  ASSERT_FALSE(wrong_user);
  EXPECT_NE(wrong_user.error().message.find("__token__"), std::string::npos);
  EXPECT_FALSE(token_from_authorization("Digest abc"));
  EXPECT_FALSE(token_from_authorization("Bearer "));
}

TokenRecord make(std::int64_t id, const std::string& secret, Scope scope,
                 std::optional<std::string> project = std::nullopt, bool revoked = false) {
  TokenRecord t;
  t.id = id;
  t.hash = hash_token(secret);
  t.scope = scope;
  t.project = std::move(project);
  t.revoked = revoked;
  return t;
}

TEST(Tokens, AuthorizeChecksScopeAndProject) {
  TokenRecord upload = make(1, "up", Scope::upload);
  TokenRecord limited = make(2, "lim", Scope::upload, std::string("demo"));
  TokenRecord reader = make(3, "rd", Scope::read);
  TokenRecord revoked = make(4, "old", Scope::admin, std::nullopt, true);
  TokenIndex index({upload, limited, reader, revoked});

  EXPECT_TRUE(authorize(index, std::string("up"), Scope::upload, "demo"));
  EXPECT_TRUE(authorize(index, std::string("up"), Scope::read));
  EXPECT_TRUE(authorize(index, std::string("lim"), Scope::upload, "demo"));
  EXPECT_EQ(authorize(index, std::string("lim"), Scope::upload, "other").error().code,
            Errc::forbidden);
  EXPECT_EQ(authorize(index, std::string("rd"), Scope::upload).error().code, Errc::forbidden);
  EXPECT_EQ(authorize(index, std::string("old"), Scope::read).error().code, Errc::unauthorized);
  EXPECT_EQ(authorize(index, std::string("nope"), Scope::read).error().code, Errc::unauthorized);
  EXPECT_EQ(authorize(index, std::nullopt, Scope::read).error().code, Errc::unauthorized);
}

TEST(Tokens, ExpiredTokensAreRefusedWithTheReason) {
  TokenRecord past = make(5, "past", Scope::upload);
  past.expires_at = now_micros() - 1'000'000;
  TokenRecord future = make(6, "future", Scope::upload);
  future.expires_at = now_micros() + 3600'000'000LL;
  TokenIndex index({past, future});
  auto refused = authorize(index, std::string("past"), Scope::read);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::unauthorized);
  EXPECT_NE(refused.error().message.find("token #5 expired at 20"), std::string::npos)
      << refused.error().message;
  EXPECT_TRUE(authorize(index, std::string("future"), Scope::upload));
  // An expired token is known: no reason to look for it in the catalog again.
  EXPECT_NE(index.find("past"), nullptr);
}

TEST(Tokens, UsesAreNotedOnlyForGrantedRequests) {
  TokenIndex index({make(1, "up", Scope::upload), make(2, "rd", Scope::read)});
  EXPECT_TRUE(index.uses().empty());
  ASSERT_TRUE(authorize(index, std::string("up"), Scope::upload));
  EXPECT_FALSE(authorize(index, std::string("rd"), Scope::upload));  // forbidden: not a use
  const auto uses = index.uses();
  ASSERT_EQ(uses.size(), 1U);
  EXPECT_EQ(uses[0].first, 1);
  EXPECT_GT(uses[0].second, 0);
}

TEST(Tokens, ANewIndexAdoptsTheUsesOfTheOneItReplaces) {
  const TokenIndex old({make(1, "a", Scope::upload), make(2, "b", Scope::upload)});
  old.note_use(*old.find("a"), 100);
  const TokenIndex next({make(1, "a", Scope::upload), make(3, "c", Scope::read)});
  next.note_use(*next.find("c"), 50);
  next.adopt_uses(old);
  const auto uses = next.uses();
  EXPECT_EQ(uses, (std::vector<std::pair<std::int64_t, Micros>>{{1, 100}, {3, 50}}));
  // A later use is never replaced by an earlier one.
  next.note_use(*next.find("a"), 200);
  next.adopt_uses(old);
  EXPECT_EQ(next.uses().front().second, 200);
}

TEST(Tokens, FindsRevokedTokensById) {
  TokenIndex index({make(3, "a", Scope::upload), make(1, "b", Scope::admin, std::nullopt, true)});
  ASSERT_NE(index.find_id(1), nullptr);
  EXPECT_TRUE(index.find_id(1)->revoked);
  EXPECT_EQ(index.find("b"), nullptr);
  EXPECT_EQ(index.find_id(3)->scope, Scope::upload);
  EXPECT_EQ(index.find_id(2), nullptr);
}

TEST(Tokens, MayYankOwnProjectOnly) {
  const TokenRecord admin = make(1, "a", Scope::admin);
  const TokenRecord owner = make(2, "o", Scope::upload);
  const TokenRecord limited = make(3, "l", Scope::upload, std::string("demo"));
  const TokenRecord reader = make(4, "r", Scope::read);
  const core::ProjectClaim by_owner{core::ClaimKind::token, 2};
  const core::ProjectClaim by_admin{core::ClaimKind::admin, 0};
  EXPECT_TRUE(may_yank(admin, "demo", by_admin));
  EXPECT_TRUE(may_yank(owner, "demo", by_owner));
  EXPECT_FALSE(may_yank(owner, "demo", by_admin));
  EXPECT_FALSE(may_yank(owner, "demo", core::ProjectClaim{}));  // unclaimed
  EXPECT_FALSE(may_yank(owner, "demo", std::nullopt));
  EXPECT_TRUE(may_yank(limited, "demo", by_owner));
  EXPECT_FALSE(may_yank(limited, "other", by_admin));
  EXPECT_FALSE(may_yank(reader, "demo", by_owner));
}

TEST(Tokens, ParsesExpiry) {
  const Micros now = 1'800'000'000LL * 1'000'000;  // 2027-01-15T08:00:00Z
  constexpr Micros kDay = 86400LL * 1'000'000;
  EXPECT_EQ(*parse_expiry("90d", now), now + 90 * kDay);
  EXPECT_EQ(*parse_expiry("90", now), now + 90 * kDay);
  EXPECT_EQ(*parse_expiry("2w", now), now + 14 * kDay);
  EXPECT_EQ(*parse_expiry("12h", now), now + 12 * 3600LL * 1'000'000);
  EXPECT_EQ(*parse_expiry("30m", now), now + 30 * 60LL * 1'000'000);
  EXPECT_EQ(*parse_expiry("2027-02-01", now), 1'801'440'000LL * 1'000'000);
  EXPECT_EQ(*parse_expiry("2027-02-01T12:30:00Z", now), (1'801'440'000LL + 45000) * 1'000'000);
  EXPECT_EQ(*parse_expiry("2027-02-01T12:30", now), (1'801'440'000LL + 45000) * 1'000'000);
  for (const char* bad : {"", "d", "-5d", "0d", "5y", "1.5d", "90 d", "2027-02-30", "2027-13-01",
                          "2027-02-01T25:00:00Z", "2026-01-01", "tomorrow", "99999999999999d"}) {
    auto r = parse_expiry(bad, now);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, Errc::invalid) << bad;
    EXPECT_NE(r.error().message.find("expiry"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(parse_expiry("2026-01-01", now).error().message.find("in the past"), std::string::npos);
}

TEST(Tokens, ParsesSince) {
  const Micros now = 1'800'000'000LL * 1'000'000;
  EXPECT_EQ(*parse_since("7d", now), now - 7 * 86400LL * 1'000'000);
  EXPECT_EQ(*parse_since("2026-01-01", now), 1'767'225'600LL * 1'000'000);
  EXPECT_FALSE(parse_since("last week", now));
}

}  // namespace
}  // namespace wf::auth
