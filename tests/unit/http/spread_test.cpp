#include "http/spread.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace wf::http {
namespace {

/// The threads' connection counts after `n` connections arrive one by one (none busy, none
/// closing), each placed by choose_thread.
std::vector<std::size_t> place(std::size_t threads, std::size_t n, std::size_t pack) {
  std::vector<ThreadLoad> loads(threads);
  for (std::size_t i = 0; i < n; ++i) ++loads[choose_thread(loads, pack)].connections;
  std::vector<std::size_t> counts;
  for (const auto& l : loads) counts.push_back(l.connections);
  return counts;
}

TEST(Spread, FillsThreadsInOrderUpToThePackThenEvenly) {
  EXPECT_EQ(place(4, 3, 8), (std::vector<std::size_t>{3, 0, 0, 0}));
  EXPECT_EQ(place(4, 20, 8), (std::vector<std::size_t>{8, 8, 4, 0}));
  // Past pack × threads the thread with the fewest connections gets the next one.
  EXPECT_EQ(place(4, 32, 8), (std::vector<std::size_t>{8, 8, 8, 8}));
  EXPECT_EQ(place(4, 42, 8), (std::vector<std::size_t>{11, 11, 10, 10}));
  EXPECT_EQ(place(16, 64, kPackedConnections),
            (std::vector<std::size_t>{8, 8, 8, 8, 8, 8, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(place(16, 512, kPackedConnections), std::vector<std::size_t>(16, 32));
}

TEST(Spread, PassesOverABusyThread) {
  std::vector<ThreadLoad> loads(3);
  loads[0] = {2, true};
  EXPECT_EQ(choose_thread(loads, 8), 1U);
  loads[1] = {8, false};
  EXPECT_EQ(choose_thread(loads, 8), 2U);
  loads[2] = {1, true};
  // Every thread is full or busy: the one with the fewest connections, busy or not.
  EXPECT_EQ(choose_thread(loads, 8), 2U);
  loads[2] = {2, true};
  EXPECT_EQ(choose_thread(loads, 8), 0U);  // the first of equals
}

TEST(Spread, UsesAClosedConnectionsPlaceAgain) {
  std::vector<ThreadLoad> loads{{8, false}, {3, false}, {0, false}};
  EXPECT_EQ(choose_thread(loads, 8), 1U);
  loads[0].connections = 7;
  EXPECT_EQ(choose_thread(loads, 8), 0U);
}

TEST(Spread, OneThreadTakesEverything) {
  std::vector<ThreadLoad> loads{{100, true}};
  EXPECT_EQ(choose_thread(loads, 8), 0U);
}

}  // namespace
}  // namespace wf::http
