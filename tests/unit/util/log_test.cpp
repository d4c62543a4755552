#include "wheelforge/util/log.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace wf {
namespace {

struct Logged {
  log::Level level;
  std::chrono::system_clock::time_point time;
  std::string line;
};

/// Counts how often it is formatted: a line below the level must not format its arguments.
struct Counted {
  int* formatted;
};

}  // namespace
}  // namespace wf

template <>
struct fmt::formatter<wf::Counted> : fmt::formatter<std::string_view> {
  auto format(const wf::Counted& c, fmt::format_context& ctx) const {
    ++*c.formatted;
    return fmt::formatter<std::string_view>::format("counted", ctx);
  }
};

namespace wf {
namespace {

class Log : public ::testing::Test {
 protected:
  void SetUp() override {
    lines_ = std::make_shared<std::vector<Logged>>();
    log::set_output([lines = lines_](log::Level level, std::chrono::system_clock::time_point time,
                                     std::string_view line) {
      lines->push_back({level, time, std::string(line)});
    });
    log::set_level(log::Level::info);
  }
  void TearDown() override { log::shutdown(); }

  std::shared_ptr<std::vector<Logged>> lines_;
};

TEST_F(Log, FormatsEachLineOnceWithItsLevelAndTime) {
  const auto before = std::chrono::system_clock::now();
  log::info("job={} {} started", 7, "fa2");
  log::warn("req={} upload of {} aborted: {}", 3, std::string("a.whl"), "client went away");
  log::error("{}", std::string_view("disk full"));
  const auto after = std::chrono::system_clock::now();
  ASSERT_EQ(lines_->size(), 3U);
  EXPECT_EQ((*lines_)[0].level, log::Level::info);
  EXPECT_EQ((*lines_)[0].line, "job=7 fa2 started");
  EXPECT_EQ((*lines_)[1].level, log::Level::warn);
  EXPECT_EQ((*lines_)[1].line, "req=3 upload of a.whl aborted: client went away");
  EXPECT_EQ((*lines_)[2].level, log::Level::error);
  EXPECT_EQ((*lines_)[2].line, "disk full");
  for (const auto& l : *lines_) {
    EXPECT_LE(before, l.time);
    EXPECT_LE(l.time, after);
  }
}

TEST_F(Log, WriteTakesTheLineAsItIs) {
  log::write(log::Level::info, "GET /simple/ 200 {not a placeholder}");
  ASSERT_EQ(lines_->size(), 1U);
  EXPECT_EQ((*lines_)[0].line, "GET /simple/ 200 {not a placeholder}");
}

TEST_F(Log, LinesBelowTheLevelAreNeitherFormattedNorWritten) {
  int formatted = 0;
  log::debug("{}", Counted{&formatted});
  EXPECT_TRUE(lines_->empty());
  EXPECT_EQ(formatted, 0);
  EXPECT_FALSE(log::enabled(log::Level::debug));
  EXPECT_TRUE(log::enabled(log::Level::info));

  log::set_level(log::Level::error);
  log::info("{}", Counted{&formatted});
  log::warn("{}", Counted{&formatted});
  log::write(log::Level::warn, "dropped");
  EXPECT_TRUE(lines_->empty());
  EXPECT_EQ(formatted, 0);
  log::error("{}", Counted{&formatted});
  EXPECT_EQ(formatted, 1);
  ASSERT_EQ(lines_->size(), 1U);
  EXPECT_EQ((*lines_)[0].line, "counted");

  log::set_level(log::Level::debug);
  log::debug("{}", Counted{&formatted});
  EXPECT_EQ(formatted, 2);
  EXPECT_EQ(lines_->size(), 2U);
}

TEST_F(Log, ShutdownLetsGoOfTheOutputAndDropsLaterLines) {
  const std::weak_ptr<std::vector<Logged>> watched = lines_;
  lines_.reset();
  log::shutdown();
  EXPECT_TRUE(watched.expired());
  EXPECT_FALSE(log::enabled(log::Level::error));
  log::error("after shutdown {}", 1);  // dropped, and no crash
  log::write(log::Level::error, "after shutdown");
}

}  // namespace
}  // namespace wf
