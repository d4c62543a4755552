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

TEST(Tokens, AuthorizeChecksScopeAndProject) {
  TokenRecord upload{1, hash_token("up"), Scope::upload, std::nullopt, "", 0, false};
  TokenRecord limited{2, hash_token("lim"), Scope::upload, std::string("demo"), "", 0, false};
  TokenRecord reader{3, hash_token("rd"), Scope::read, std::nullopt, "", 0, false};
  TokenRecord revoked{4, hash_token("old"), Scope::admin, std::nullopt, "", 0, true};
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

}  // namespace
}  // namespace wf::auth
