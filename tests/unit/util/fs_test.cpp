#include "wheelforge/util/fs.hpp"

#include <gtest/gtest.h>

#include <cerrno>

namespace wf {
namespace {

TEST(ErrnoError, TheKindOfFailureDecidesTheAnswer) {
  EXPECT_EQ(errno_code(ENOSPC), Errc::storage_full);
  EXPECT_EQ(errno_code(EDQUOT), Errc::storage_full);
  // A store this process may not write waits for an administrator: unavailable (503).
  EXPECT_EQ(errno_code(EROFS), Errc::unavailable);
  EXPECT_EQ(errno_code(EACCES), Errc::unavailable);
  EXPECT_EQ(errno_code(EPERM), Errc::unavailable);
  // A failing disk is the server's fault (500), never the client's.
  EXPECT_EQ(errno_code(EIO), Errc::io);
  EXPECT_EQ(errno_code(ENOENT), Errc::io);

  const Error e = errno_error(EIO, "fsync /d/tmp/x");
  EXPECT_EQ(e.code, Errc::io);
  EXPECT_EQ(e.message, "fsync /d/tmp/x: Input/output error");
}

}  // namespace
}  // namespace wf
