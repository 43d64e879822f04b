#include "sluice/file.hpp"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <iostream>

#include "sluice/error.hpp"
#include "sluice/transfer.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::Folder;
using test::TempDir;
using test::error_of;


TEST(File, MissingFileNamesThePath) {
  TempDir dir("/tmp");
  const std::string path = dir.file("missing.bin");
  const auto e = error_of([&] { (void)File::open(path, OpenMode::read); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::os);
  EXPECT_EQ(e->code(), ENOENT);
  EXPECT_EQ(e->path(), path);
  EXPECT_EQ(e->op(), "open");
  EXPECT_NE(std::string(e->what()).find(path), std::string::npos) << e->what();
  // Without create, writing needs the file to exist too.
  const auto w = error_of([&] { (void)File::open(path, OpenMode::write, {.create = false}); });
  ASSERT_TRUE(w);
  EXPECT_EQ(w->code(), ENOENT);
}

TEST(File, DirectoryIsRefused) {
  TempDir dir("/tmp");
  for (const OpenMode mode : {OpenMode::read, OpenMode::write, OpenMode::read_write}) {
    const auto e = error_of([&] { (void)File::open(dir.path(), mode); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), EISDIR) << e->what();
    EXPECT_EQ(e->path(), dir.path());
    EXPECT_NE(std::string(e->what()).find(dir.path()), std::string::npos) << e->what();
  }
}

TEST(File, CharacterDeviceIsRefused) {
  const auto e = error_of([] { (void)File::open("/dev/null", OpenMode::read); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path(), "/dev/null");
  EXPECT_NE(std::string(e->what()).find("not a regular file"), std::string::npos) << e->what();
}

TEST(File, FifoIsRefused) {
  TempDir dir("/tmp");
  const std::string path = dir.file("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // read_write: opening a FIFO O_RDWR does not wait for a peer.
  const auto e = error_of([&] { (void)File::open(path, OpenMode::read_write); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find(path), std::string::npos) << e->what();
}

TEST(File, PermissionDeniedIsAnOsError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores file permissions";
  TempDir dir("/tmp");
  const std::string path = dir.file("locked.bin");
  test::write_file(path, test::random_bytes(10, 1));
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const auto e = error_of([&] { (void)File::open(path, OpenMode::read); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EACCES);
}

TEST(File, TmpfsHasNoDirectIoAndSaysWhy) {
  std::string why;
  const auto root = test::folder_root(Folder::tmpfs, &why);
  if (!root) GTEST_SKIP() << why;
  TempDir dir(*root);
  const std::string path = dir.file("t.bin");
  test::write_file(path, test::random_bytes(100, 1));
  const File f = File::open(path, OpenMode::read);
  EXPECT_EQ(f.fs_type(), "tmpfs");
  EXPECT_FALSE(f.has_direct());
  EXPECT_EQ(f.direct_fd(), -1);
  EXPECT_EQ(f.mem_align(), 1U);
  EXPECT_NE(f.direct_reason().find("tmpfs"), std::string::npos) << f.direct_reason();
  EXPECT_FALSE(f.is_block_device());
}

TEST(File, DiskFolderDirectIo) {
  std::string why;
  const auto root = test::folder_root(Folder::disk, &why);
  if (!root) GTEST_SKIP() << why;
  TempDir dir(*root);
  const std::string path = dir.file("d.bin");
  test::write_file(path, test::random_bytes(8192, 1));
  const File f = File::open(path, OpenMode::read);
  EXPECT_FALSE(f.fs_type().empty());
  EXPECT_NE(f.fs_type(), "tmpfs");
  if (!f.has_direct()) GTEST_SKIP() << "no O_DIRECT in " << *root << ": " << f.direct_reason();
  std::cout << "[ info ] " << *root << ": " << f.fs_type() << ", dio offset align " << f.offset_align()
            << ", mem align " << f.mem_align() << "\n";
  EXPECT_GE(f.direct_fd(), 0);
  EXPECT_NE(f.direct_fd(), f.fd());
  EXPECT_TRUE(f.direct_reason().empty()) << f.direct_reason();
  EXPECT_TRUE(std::has_single_bit(f.offset_align())) << f.offset_align();
  EXPECT_TRUE(std::has_single_bit(f.mem_align())) << f.mem_align();
  EXPECT_LE(f.offset_align(), 65536U);
  // A third descriptor, buffered with readahead off, for reads of what the page cache holds.
  EXPECT_GE(f.cache_fd(), 0);
  EXPECT_NE(f.cache_fd(), f.fd());
  EXPECT_NE(f.cache_fd(), f.direct_fd());
  // Write-only files get a direct descriptor too, and no readahead-off one (nothing to read).
  const File w = File::open(path, OpenMode::write);
  EXPECT_TRUE(w.has_direct());
  EXPECT_EQ(w.cache_fd(), w.fd());
}

TEST(File, DirectCanBeTurnedOff) {
  TempDir dir(test::folder_root(Folder::disk).value_or("/tmp"));
  const std::string path = dir.file("nd.bin");
  test::write_file(path, test::random_bytes(100, 1));
  const File f = File::open(path, OpenMode::read, {.direct = false});
  EXPECT_FALSE(f.has_direct());
  EXPECT_EQ(f.direct_reason(), "direct I/O disabled by configuration");
  EXPECT_EQ(f.cache_fd(), f.fd());  // every read is buffered: the ordinary descriptor serves
}

TEST(File, ModesCreateAndTruncate) {
  TempDir dir("/tmp");
  const std::string path = dir.file("m.bin");
  {
    const File w = File::open(path, OpenMode::write);  // creates
    EXPECT_TRUE(w.is_open());
    EXPECT_TRUE(w.writable());
    EXPECT_FALSE(w.readable());
    EXPECT_EQ(w.mode(), OpenMode::write);
    EXPECT_EQ(w.path(), path);
    EXPECT_EQ(w.size(), 0U);
  }
  test::write_file(path, test::random_bytes(1000, 2));
  {
    const File r = File::open(path, OpenMode::read, {.truncate = true});  // no truncation for reads
    EXPECT_TRUE(r.readable());
    EXPECT_FALSE(r.writable());
    EXPECT_EQ(r.size(), 1000U);
  }
  {
    const File rw = File::open(path, OpenMode::read_write);
    EXPECT_TRUE(rw.readable());
    EXPECT_TRUE(rw.writable());
    EXPECT_EQ(rw.size(), 1000U);  // never truncated unless asked
  }
  {
    const File t = File::open(path, OpenMode::write, {.truncate = true});
    EXPECT_EQ(t.size(), 0U);
  }
}

TEST(File, SizeFollowsTheFile) {
  TempDir dir("/tmp");
  const std::string path = dir.file("s.bin");
  test::write_file(path, test::random_bytes(10, 3));
  const File f = File::open(path, OpenMode::read);
  EXPECT_EQ(f.size(), 10U);
  test::pwrite_file(path, test::random_bytes(5, 4), 100);
  EXPECT_EQ(f.size(), 105U);
}

// size_seen() is what open() or the last size() found, asked of nobody: a hint, which a grown
// file outruns until size() is asked again.
TEST(File, SizeSeenIsWhatOpenOrSizeFound) {
  TempDir dir("/tmp");
  const std::string path = dir.file("s.bin");
  test::write_file(path, test::random_bytes(10, 3));
  File f = File::open(path, OpenMode::read);
  EXPECT_EQ(f.size_seen(), 10U);
  test::pwrite_file(path, test::random_bytes(5, 4), 100);
  EXPECT_EQ(f.size_seen(), 10U);
  EXPECT_EQ(f.size(), 105U);
  EXPECT_EQ(f.size_seen(), 105U);
  const File copy = f;  // shared by every handle
  EXPECT_EQ(copy.size_seen(), 105U);
  f.close();
  EXPECT_EQ(f.size_seen(), 0U);
}

// Small reads take the size last seen without asking the kernel, yet a file that grew is read
// to its new end and one that shrank to its new end, on a filesystem with O_DIRECT (a
// cached_only read first) and on one without (a plain read).
TEST(File, SmallReadsFollowAFileThatGrowsOrShrinks) {
  for (const Folder folder : {Folder::disk, Folder::tmpfs}) {
    const auto root = test::folder_root(folder);
    if (!root) continue;
    TempDir dir(*root);
    const std::string path = dir.file("g.bin");
    auto data = test::random_bytes(10000, 5);
    test::write_file(path, data);
    const File f = File::open(path, OpenMode::read);
    std::vector<std::byte> buf(4096);
    const auto read_at = [&](std::uint64_t offset) { return read(f, buf.data(), buf.size(), offset).bytes; };
    const auto same_as_data = [&](std::uint64_t offset, std::size_t n) {
      return test::same_bytes(std::span(buf).first(n), std::span(data).subspan(offset, n));
    };
    EXPECT_EQ(read_at(0), 4096U);
    const auto more = test::random_bytes(5000, 6);
    test::pwrite_file(path, more, 10000);
    data.insert(data.end(), more.begin(), more.end());
    EXPECT_EQ(read_at(9000), 4096U) << "stopped at the old end";  // straddles it
    EXPECT_TRUE(same_as_data(9000, 4096));
    EXPECT_EQ(read_at(12000), 3000U);  // to the new end
    EXPECT_TRUE(same_as_data(12000, 3000));
    ASSERT_EQ(::truncate(path.c_str(), 6000), 0);
    EXPECT_EQ(read_at(4096), 1904U) << "read past a shrunk end";  // within the size last seen
    EXPECT_TRUE(same_as_data(4096, 1904));
    EXPECT_EQ(read_at(8192), 0U);
    EXPECT_EQ(f.size_seen(), 6000U);
  }
}

TEST(File, MoveAndClose) {
  TempDir dir("/tmp");
  const std::string path = dir.file("mv.bin");
  test::write_file(path, test::random_bytes(10, 3));
  File a = File::open(path, OpenMode::read);
  const int fd = a.fd();
  File b = std::move(a);
  EXPECT_FALSE(a.is_open());  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  EXPECT_TRUE(b.is_open());
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(b.path(), path);
  File c;
  EXPECT_FALSE(c.is_open());
  c = std::move(b);
  EXPECT_EQ(c.size(), 10U);
  c.close();
  c.close();  // twice is fine
  EXPECT_FALSE(c.is_open());
  const auto e = error_of([&] { (void)c.size(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EBADF);
}

TEST(File, FilesystemNames) {
  EXPECT_EQ(fs_type_name(TMPFS_MAGIC), "tmpfs");
  EXPECT_EQ(fs_type_name(EXT4_SUPER_MAGIC), "ext4");
  EXPECT_EQ(fs_type_name(XFS_SUPER_MAGIC), "xfs");
  EXPECT_EQ(fs_type_name(NFS_SUPER_MAGIC), "nfs");
  EXPECT_EQ(fs_type_name(0x1234), "0x1234");
  // statfs f_type is a signed long: a sign-extended magic still names its filesystem.
  EXPECT_EQ(fs_type_name(static_cast<long>(static_cast<std::int32_t>(0xff534d42))), "cifs");
}

}  // namespace
}  // namespace sluice
