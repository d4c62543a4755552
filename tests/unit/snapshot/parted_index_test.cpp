#include "snapshot/parted_index.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wf::snapshot {
namespace {

TEST(PartedIndex, FindsAddedEntriesAndForgetsRemovedOnes) {
  const std::vector<std::string> keys = {"a-1.0.tar.gz", "b-2.0-py3-none-any.whl", "c"};
  const int values[3] = {1, 2, 3};
  PartedIndex<int> index(3);
  for (std::size_t i = 0; i < keys.size(); ++i) index.add(keys[i], &values[i]);
  EXPECT_EQ(index.size(), 3U);
  EXPECT_EQ(index.find("b-2.0-py3-none-any.whl"), &values[1]);
  EXPECT_EQ(index.find("d"), nullptr);
  index.remove("c", &values[0]);  // not the value stored under "c": nothing goes
  EXPECT_EQ(index.find("c"), &values[2]);
  index.remove("c", &values[2]);
  EXPECT_EQ(index.find("c"), nullptr);
  EXPECT_EQ(index.size(), 2U);
}

// Copies share their parts: a change to the copy is not seen by the original, and the other
// way round, whichever parts they touch. (The original is filled in one assign().)
TEST(PartedIndex, ACopyChangesOnlyItself) {
  std::vector<std::string> keys;
  std::vector<int> values(2'000);
  for (int i = 0; i < 2'000; ++i) keys.push_back("file-" + std::to_string(i));
  std::vector<std::pair<std::string_view, const int*>> entries;
  for (std::size_t i = 0; i < keys.size(); ++i) entries.emplace_back(keys[i], &values[i]);
  PartedIndex<int> original;
  original.assign(entries);
  ASSERT_GT(original.parts(), 1U);

  PartedIndex<int> copy(original);
  for (std::size_t i = 0; i < keys.size(); i += 2) copy.remove(keys[i], &values[i]);
  const std::string extra = "extra";
  const int extra_value = 0;
  copy.add(extra, &extra_value);

  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(original.find(keys[i]), &values[i]) << keys[i];
    EXPECT_EQ(copy.find(keys[i]), i % 2 == 0 ? nullptr : &values[i]) << keys[i];
  }
  EXPECT_EQ(original.find(extra), nullptr);
  EXPECT_EQ(copy.find(extra), &extra_value);
  EXPECT_EQ(original.size(), 2'000U);
  EXPECT_EQ(copy.size(), 1'001U);

  // A copy of the copy, changed again, leaves both before it as they were.
  PartedIndex<int> third(copy);
  third.remove(extra, &extra_value);
  third.add(keys[0], &values[0]);
  EXPECT_EQ(copy.find(extra), &extra_value);
  EXPECT_EQ(copy.find(keys[0]), nullptr);
  EXPECT_EQ(third.find(keys[0]), &values[0]);
  EXPECT_EQ(third.find(extra), nullptr);
}

// Several values under one key (the same bytes under two file names): removing one leaves the
// other findable. Without repeats, the first value under a key stays.
TEST(PartedIndex, RepeatedKeysAreRemovedByValue) {
  const std::string digest(64, 'a');
  const int first = 1;
  const int second = 2;
  PartedIndex<int, /*kRepeats=*/true> index;
  index.add(digest, &first);
  index.add(digest, &second);
  PartedIndex<int, true> copy(index);
  copy.remove(digest, &first);
  EXPECT_EQ(copy.find(digest), &second);
  EXPECT_NE(index.find(digest), nullptr);
  copy.remove(digest, &second);
  EXPECT_EQ(copy.find(digest), nullptr);
  EXPECT_EQ(index.size(), 2U);

  PartedIndex<int> unique;
  unique.add(digest, &first);
  unique.add(digest, &second);
  EXPECT_EQ(unique.size(), 1U);
  EXPECT_EQ(unique.find(digest), &first);
  unique.remove(digest, &second);
  EXPECT_EQ(unique.find(digest), &first);
}

TEST(PartedIndex, GrowsCrowdedPastFourTimesItsPlannedSize) {
  PartedIndex<int> index(0);
  const std::size_t capacity = index.parts() * PartedIndex<int>::kPerPart * 4;
  std::vector<std::string> keys;
  keys.reserve(capacity + 1);
  const int value = 0;
  for (std::size_t i = 0; i <= capacity; ++i) {
    keys.push_back(std::to_string(i));
    EXPECT_FALSE(index.crowded());
    index.add(keys.back(), &value);
  }
  EXPECT_TRUE(index.crowded());
  index.reset(keys.size());
  EXPECT_FALSE(index.crowded());
  EXPECT_EQ(index.size(), 0U);
  EXPECT_GE(index.parts() * PartedIndex<int>::kPerPart * 2, keys.size());
}

}  // namespace
}  // namespace wf::snapshot
