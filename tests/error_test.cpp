#include "sluice/error.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace sluice {
namespace {

TEST(Error, OsErrorCarriesEverything) {
  const Error e(ErrorDomain::os, EIO,
                {.op = "read", .path = "/data/x.bin", .offset = 4096, .size = 512, .has_range = true},
                "read failed");
  EXPECT_EQ(e.domain(), ErrorDomain::os);
  EXPECT_EQ(e.code(), EIO);
  EXPECT_EQ(e.op(), "read");
  EXPECT_EQ(e.path(), "/data/x.bin");
  EXPECT_EQ(e.offset(), 4096U);
  EXPECT_EQ(e.size(), 512U);
  EXPECT_EQ(e.detail(), "read failed");
  EXPECT_EQ(std::string(e.what()),
            std::string("read '/data/x.bin' [offset 4096, 512 bytes]: read failed: ") +
                std::strerror(EIO) + " (errno 5)");
}

TEST(Error, NoRangeNoPath) {
  const Error e(ErrorDomain::os, ENOENT, {.op = "open"}, "cannot open");
  EXPECT_EQ(std::string(e.what()), std::string("open: cannot open: ") + std::strerror(ENOENT) +
                                       " (errno " + std::to_string(ENOENT) + ")");
  EXPECT_EQ(e.path(), "");
}

TEST(Error, PathWithoutRange) {
  const Error e(ErrorDomain::os, EISDIR, {.op = "open", .path = "/tmp"}, "is a directory");
  const std::string w = e.what();
  EXPECT_EQ(w.rfind("open '/tmp': is a directory: ", 0), 0U) << w;
  EXPECT_EQ(w.find("offset"), std::string::npos) << w;
}

TEST(Error, WithoutDetailTheCodeSpeaks) {
  const Error e(ErrorDomain::os, ENOSPC, {.op = "write", .path = "f"});
  EXPECT_EQ(std::string(e.what()),
            std::string("write 'f': ") + std::strerror(ENOSPC) + " (errno " + std::to_string(ENOSPC) + ")");
}

TEST(Error, UsageAndDataErrorsDoNotAppendAnErrnoText) {
  const Error u(ErrorDomain::usage, EINVAL, {.op = "config"}, "unknown setting 'x'");
  EXPECT_EQ(std::string(u.what()), "config: unknown setting 'x'");
  const Error d(ErrorDomain::data, EIO, {.op = "read", .path = "p", .offset = 0, .size = 1, .has_range = true},
                "truncated during the read");
  EXPECT_EQ(std::string(d.what()), "read 'p' [offset 0, 1 bytes]: truncated during the read");
  const Error bare(ErrorDomain::usage, EINVAL, {.op = "x"});
  EXPECT_EQ(std::string(bare.what()), "x: invalid argument");
}

TEST(Error, EmptyOpIsNamedSluice) {
  const Error e(ErrorDomain::usage, EINVAL, {}, "bad");
  EXPECT_EQ(std::string(e.what()), "sluice: bad");
}

TEST(Error, CudaAndCufileCodes) {
  // A CUDA or cuFile detail already names its code; without one the code is printed.
  const Error c(ErrorDomain::cuda, 2, {.op = "cuMemAlloc"}, "CUDA_ERROR_OUT_OF_MEMORY (2)");
  EXPECT_EQ(std::string(c.what()), "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)");
  EXPECT_EQ(c.code(), 2);
  const Error bare(ErrorDomain::cuda, 2, {.op = "cuMemAlloc"});
  EXPECT_EQ(std::string(bare.what()), "cuMemAlloc: CUDA driver error 2");
  const Error f(ErrorDomain::cufile, 5030, {.op = "cuFileRead"});
  EXPECT_EQ(std::string(f.what()), "cuFileRead: cuFile error 5030");
}

TEST(Error, ThrowHelpers) {
  try {
    throw_os_error(EACCES, {.op = "open", .path = "/secret"}, "cannot open");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.domain(), ErrorDomain::os);
    EXPECT_EQ(e.code(), EACCES);
    EXPECT_EQ(e.path(), "/secret");
  }
  try {
    throw_usage_error({.op = "read", .path = "f", .offset = 1, .size = 2, .has_range = true}, "null buffer");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.domain(), ErrorDomain::usage);
    EXPECT_EQ(e.code(), EINVAL);
    EXPECT_EQ(std::string(e.what()), "read 'f' [offset 1, 2 bytes]: null buffer");
  }
}

TEST(Error, IsAStdException) {
  try {
    throw_usage_error({.op = "x"}, "y");
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "x: y");
  }
}

}  // namespace
}  // namespace sluice
