#include "sluice/units.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "sluice/device.hpp"
#include "sluice/error.hpp"

namespace sluice {
namespace {

TEST(ParseSize, PlainNumbers) {
  EXPECT_EQ(parse_size("0"), 0U);
  EXPECT_EQ(parse_size("1"), 1U);
  EXPECT_EQ(parse_size("4096"), 4096U);
  EXPECT_EQ(parse_size("007"), 7U);
  EXPECT_EQ(parse_size("18446744073709551615"), std::numeric_limits<std::uint64_t>::max());
}

TEST(ParseSize, BinaryUnitsInEveryAcceptedSpelling) {
  for (const char* s : {"4k", "4K", "4KiB", "4kib", "4KB", "4kb"}) {
    EXPECT_EQ(parse_size(s), 4 * KiB) << s;
  }
  EXPECT_EQ(parse_size("1m"), MiB);
  EXPECT_EQ(parse_size("1MiB"), MiB);
  EXPECT_EQ(parse_size("1MB"), MiB);  // binary, as in fio and gdsio
  EXPECT_EQ(parse_size("2G"), 2 * GiB);
  EXPECT_EQ(parse_size("1T"), 1024 * GiB);
  EXPECT_EQ(parse_size("1P"), 1024 * 1024 * GiB);
  EXPECT_EQ(parse_size("512b"), 512U);
  EXPECT_EQ(parse_size("512B"), 512U);
  EXPECT_EQ(parse_size("0K"), 0U);
}

TEST(ParseSize, RejectsJunk) {
  for (const char* s : {"", "k", "K4", "-1", "+1", " 1", "1 ", "1 K", "1.5K", "1Q", "1KiBB",
                        "1iB", "1Kb2", "0x10", "1e3", "one", "4KK", "1bi"}) {
    EXPECT_EQ(parse_size(s), std::nullopt) << "'" << s << "'";
  }
}

TEST(ParseSize, RejectsOverflow) {
  EXPECT_EQ(parse_size("18446744073709551616"), std::nullopt);  // 2^64
  EXPECT_EQ(parse_size("99999999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_size("16777216T"), std::nullopt);  // 2^24 * 2^40 = 2^64
  EXPECT_EQ(parse_size("16777215T"), 16777215ULL << 40);
  EXPECT_EQ(parse_size("16384P"), std::nullopt);     // 2^14 * 2^50 = 2^64
  EXPECT_EQ(parse_size("16383P"), 16383ULL << 50);
  EXPECT_EQ(parse_size("17179869184G"), std::nullopt);  // 2^34 * 2^30
}

TEST(FormatSize, Bytes) {
  EXPECT_EQ(format_size(0), "0 B");
  EXPECT_EQ(format_size(1), "1 B");
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(1023), "1023 B");
}

TEST(FormatSize, LargerUnitsWithThreeSignificantDigits) {
  EXPECT_EQ(format_size(KiB), "1.00 KiB");
  EXPECT_EQ(format_size(1536), "1.50 KiB");
  EXPECT_EQ(format_size(10 * KiB), "10.0 KiB");
  EXPECT_EQ(format_size(100 * KiB), "100 KiB");
  EXPECT_EQ(format_size(MiB), "1.00 MiB");
  EXPECT_EQ(format_size(3 * GiB / 2), "1.50 GiB");
  EXPECT_EQ(format_size(1024 * GiB), "1.00 TiB");
  EXPECT_EQ(format_size(1024 * 1024 * GiB), "1.00 PiB");
  // PiB is the largest unit: 2^64 - 1 bytes is 16384 PiB.
  EXPECT_EQ(format_size(std::numeric_limits<std::uint64_t>::max()), "16384 PiB");
}

TEST(FormatSize, RoundingNeverShowsFourDigitsOrAnOverfullUnit) {
  EXPECT_EQ(format_size(MiB - 1), "1.00 MiB");      // not "1024 KiB"
  EXPECT_EQ(format_size(GiB - 1), "1.00 GiB");
  EXPECT_EQ(format_size(10 * KiB - 1), "10.0 KiB");  // 9.999 KiB, not "10.00 KiB"
  EXPECT_EQ(format_size(100 * KiB - 1), "100 KiB");  // not "100.0 KiB"
  EXPECT_EQ(format_size(1023 * KiB), "1023 KiB");
  EXPECT_EQ(format_size(1024 * 1024 * 1024 * GiB - 1), "1024 PiB");  // no unit above PiB
}

TEST(FormatSize, RoundTripsThroughParseForWholeUnits) {
  for (std::uint64_t v : {KiB, 4 * KiB, MiB, 2 * GiB}) {
    const std::string s = format_size(v);  // "4.00 KiB"
    const std::string compact = s.substr(0, s.find('.')) + s.substr(s.find(' ') + 1);
    EXPECT_EQ(parse_size(compact), v) << s;
  }
}

TEST(Rounding, UpAndDown) {
  static_assert(round_down(4097, 4096) == 4096);
  static_assert(round_up(4097, 4096) == 8192);
  static_assert(round_up(4096, 4096) == 4096);
  static_assert(round_up(0, 512) == 0);
  static_assert(round_down(511, 512) == 0);
  EXPECT_EQ(round_up(1, 1), 1U);
}

TEST(ParseDuration, EveryUnit) {
  EXPECT_DOUBLE_EQ(*parse_duration("10"), 10.0);  // a bare number is seconds
  EXPECT_DOUBLE_EQ(*parse_duration("10s"), 10.0);
  EXPECT_DOUBLE_EQ(*parse_duration("500us"), 500e-6);
  EXPECT_DOUBLE_EQ(*parse_duration("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(*parse_duration("2m"), 120.0);
  EXPECT_DOUBLE_EQ(*parse_duration("2min"), 120.0);
  EXPECT_DOUBLE_EQ(*parse_duration("1h"), 3600.0);
  EXPECT_DOUBLE_EQ(*parse_duration("1.5h"), 5400.0);
  EXPECT_DOUBLE_EQ(*parse_duration(".5s"), 0.5);
  EXPECT_DOUBLE_EQ(*parse_duration("1e-3"), 1e-3);
  EXPECT_DOUBLE_EQ(*parse_duration("0"), 0.0);
}

TEST(ParseDuration, RejectsJunk) {
  for (const char* s : {"", "s", "ms", "-1", "-1s", "+1s", " 1s", "1s ", "1 s", "10x", "1sec", "1S",
                        "1MS", "1hr", "inf", "nan", "1e999", "0x10", "1.5.5s", "1d", "2mm"}) {
    EXPECT_EQ(parse_duration(s), std::nullopt) << "'" << s << "'";
  }
}

TEST(ParseDuration, ErrorsNameTheOption) {
  EXPECT_DOUBLE_EQ(parse_seconds("500ms", "--time"), 0.5);
  for (const char* bad : {"5x", "-3s", ""}) {
    try {
      (void)parse_seconds(bad, "--stonewall");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.domain(), ErrorDomain::usage) << bad;
      EXPECT_EQ(std::string(e.what()).rfind("--stonewall: ", 0), 0U) << e.what();
    }
  }
  try {
    (void)parse_seconds("-3s", "--time");
    ADD_FAILURE() << "a negative duration was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
  }
}

TEST(ParseMemoryKind, CanonicalNamesAliasesAndPrintedNames) {
  for (const char* s : {"device", "gpu"}) EXPECT_EQ(parse_memory_kind(s), MemoryKind::device) << s;
  for (const char* s : {"pinned", "pinned-host", "pinned_host"}) EXPECT_EQ(parse_memory_kind(s), MemoryKind::pinned_host) << s;
  for (const char* s : {"pageable", "host", "pageable-host", "pageable_host"}) {
    EXPECT_EQ(parse_memory_kind(s), MemoryKind::pageable_host) << s;
  }
  for (auto k : {MemoryKind::device, MemoryKind::pinned_host, MemoryKind::pageable_host}) {
    EXPECT_EQ(parse_memory_kind(to_string(k)), k) << to_string(k);  // printed kinds read back
  }
  for (const char* s : {"", "Device", "pin", "cuda", "managed", "host "}) {
    EXPECT_EQ(parse_memory_kind(s), std::nullopt) << "'" << s << "'";
  }
}

}  // namespace
}  // namespace sluice
