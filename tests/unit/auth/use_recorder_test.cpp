// Writing tokens' last uses (UseRecorder) into a real catalog: at most once per interval.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "wheelforge/auth/tokens.hpp"

namespace wf::auth {
namespace {

namespace fs = std::filesystem;
using catalog::Actor;
using catalog::Scope;
using catalog::TokenRecord;

class UseRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("wf-uses-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(UseRecorderTest, LastUsesAreWrittenAtMostOncePerInterval) {
  auto cat = catalog::open_sqlite_catalog(dir_ / "wheelforge.db");
  ASSERT_TRUE(cat);
  TokenRecord t;
  t.hash = hash_token("wf_a");
  t.scope = Scope::upload;
  t.created_at = now_micros();
  ASSERT_TRUE((*cat)->insert_token(t, Actor{}));
  auto contents = (*cat)->load();
  ASSERT_TRUE(contents);
  const TokenIndex index(contents->tokens);
  const auto* record = index.find("wf_a");
  ASSERT_NE(record, nullptr);
  UseRecorder recorder(60'000'000);
  const Micros t0 = 1'800'000'000'000'000;
  const auto last_used = [&] { return (*cat)->tokens()->front().last_used_at; };
  const auto generation = (*cat)->generation();

  ASSERT_TRUE(recorder.flush(index, **cat, t0));  // nothing used yet
  EXPECT_FALSE(last_used());
  index.note_use(*record, t0);
  ASSERT_TRUE(recorder.flush(index, **cat, t0));
  EXPECT_EQ(last_used(), t0);
  // Used again within the interval: kept back.
  index.note_use(*record, t0 + 5'000'000);
  ASSERT_TRUE(recorder.flush(index, **cat, t0 + 10'000'000));
  EXPECT_EQ(last_used(), t0);
  // Once the interval has passed since the last write, the latest use is written.
  ASSERT_TRUE(recorder.flush(index, **cat, t0 + 61'000'000));
  EXPECT_EQ(last_used(), t0 + 5'000'000);
  // Nothing new: nothing written.
  ASSERT_TRUE(recorder.flush(index, **cat, t0 + 200'000'000));
  EXPECT_EQ(last_used(), t0 + 5'000'000);
  // A new index (the next snapshot) starts empty; the recorder remembers what it wrote.
  const TokenIndex next(contents->tokens);
  next.note_use(*next.find("wf_a"), t0 + 201'000'000);
  ASSERT_TRUE(recorder.flush(next, **cat, t0 + 202'000'000));
  EXPECT_EQ(last_used(), t0 + 201'000'000);  // the last write was 141 s before
  // When the server stops, a use within the interval is written all the same.
  next.note_use(*next.find("wf_a"), t0 + 203'000'000);
  ASSERT_TRUE(recorder.flush(next, **cat, t0 + 204'000'000));
  EXPECT_EQ(last_used(), t0 + 201'000'000);
  ASSERT_TRUE(recorder.flush(next, **cat, t0 + 204'000'000, UseRecorder::Due::all));
  EXPECT_EQ(last_used(), t0 + 203'000'000);
  // Pages do not depend on last uses: the generation never moved.
  EXPECT_EQ(*(*cat)->generation(), *generation);
}

}  // namespace
}  // namespace wf::auth
