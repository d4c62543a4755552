#include "wheelforge/core/claims.hpp"

#include <gtest/gtest.h>

namespace wf::core {
namespace {

const Uploader kAdmin{};
const Uploader kTokenA{false, 1, std::nullopt};
const Uploader kTokenB{false, 2, std::nullopt};
const Uploader kLimitedToDemo{false, 3, std::string("demo")};
const Uploader kLimitedToOther{false, 4, std::string("other")};

const ProjectClaim kUnclaimed{};
const ProjectClaim kAdminOwned{ClaimKind::admin, 0};
const ProjectClaim kOwnedByA{ClaimKind::token, 1};

TEST(Claims, TheFirstUploaderClaimsANewProject) {
  EXPECT_EQ(decide_upload(std::nullopt, kTokenA, "demo"), ClaimDecision::claim);
  EXPECT_EQ(decide_upload(std::nullopt, kAdmin, "demo"), ClaimDecision::claim);
  EXPECT_EQ(claim_for(kTokenA), kOwnedByA);
  EXPECT_EQ(claim_for(kAdmin), kAdminOwned);
}

TEST(Claims, OnlyTheOwnerAdminsAndProjectTokensUploadToAClaimedProject) {
  EXPECT_EQ(decide_upload(kOwnedByA, kTokenA, "demo"), ClaimDecision::allowed);
  EXPECT_EQ(decide_upload(kOwnedByA, kTokenB, "demo"), ClaimDecision::forbidden);
  EXPECT_EQ(decide_upload(kOwnedByA, kAdmin, "demo"), ClaimDecision::allowed);
  EXPECT_EQ(decide_upload(kOwnedByA, kLimitedToDemo, "demo"), ClaimDecision::allowed);
  EXPECT_EQ(decide_upload(kOwnedByA, kLimitedToOther, "demo"), ClaimDecision::forbidden);
}

TEST(Claims, AdminOwnedProjectsTakeAdminsAndProjectTokensOnly) {
  EXPECT_EQ(decide_upload(kAdminOwned, kTokenA, "demo"), ClaimDecision::forbidden);
  EXPECT_EQ(decide_upload(kAdminOwned, kAdmin, "demo"), ClaimDecision::allowed);
  EXPECT_EQ(decide_upload(kAdminOwned, kLimitedToDemo, "demo"), ClaimDecision::allowed);
}

TEST(Claims, AnUnclaimedProjectGoesToTheNextToken) {
  EXPECT_EQ(decide_upload(kUnclaimed, kTokenB, "demo"), ClaimDecision::claim);
  EXPECT_EQ(decide_upload(kUnclaimed, kLimitedToDemo, "demo"), ClaimDecision::claim);
  // Admins upload without taking it over.
  EXPECT_EQ(decide_upload(kUnclaimed, kAdmin, "demo"), ClaimDecision::allowed);
}

TEST(Claims, TextAndMessage) {
  EXPECT_EQ(claim_text(kUnclaimed), "unclaimed");
  EXPECT_EQ(claim_text(kAdminOwned), "admin");
  EXPECT_EQ(claim_text(kOwnedByA), "token:1");
  const auto m = not_owner_message("demo");
  EXPECT_NE(m.find("project 'demo' is claimed by another uploader"), std::string::npos);
  EXPECT_NE(m.find("wheelforge project claim demo --token ID"), std::string::npos);
}

}  // namespace
}  // namespace wf::core
