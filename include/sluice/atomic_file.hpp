// A file that appears under its final name complete or not at all. It is written under a
// temporary name in the same folder (".<name>.sluice-tmp-<pid>-<random>"), and commit() makes it
// durable and moves it over the final name: fdatasync of the file, rename(2) over the final name
// (atomic on POSIX filesystems: a reader sees the old file or the new one), fsync of the folder
// (so the rename itself survives a power cut). Until commit() has returned, the previous file
// under the final name is untouched; an AtomicFile destroyed without commit() removes its
// temporary. A process killed mid-write leaves its temporary behind: its name says whose it was,
// and remove_stale_temporaries() (which the next AtomicFile for the same final name calls) takes
// it away once that process is gone. docs/save.md gives the sequence and what it promises.
#pragma once

#include <cstdint>
#include <string>

#include "sluice/export.hpp"
#include "sluice/file.hpp"

namespace sluice {

/// The temporary of a final name is ".<name>" + this + "<pid>-<16 hex digits>", beside it.
inline constexpr const char* atomic_temporary_marker = ".sluice-tmp-";

/// A file written under a temporary name and moved over its final name on commit(). Move-only.
class SLUICE_API AtomicFile {
 public:
  /// Removes stale temporaries of `final_path` (remove_stale_temporaries), then creates a fresh
  /// temporary beside it (O_EXCL) and opens it for writing with `options` (create/truncate are
  /// implied). The temporary takes the permission bits of an existing file under the final name,
  /// else options.permissions less the umask. Throws an Error naming the path on failure.
  static AtomicFile create(std::string final_path, const OpenOptions& options = {});

  AtomicFile() = default;
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Without commit(): closes and removes the temporary; the final name is left as it was.
  ~AtomicFile();

  /// The open temporary, for sluice::write and the other transfers.
  [[nodiscard]] const File& file() const noexcept { return file_; }
  [[nodiscard]] const std::string& final_path() const noexcept { return final_path_; }
  [[nodiscard]] const std::string& temporary_path() const noexcept { return temp_path_; }

  /// Reserves `bytes` for the file (fallocate), so a filesystem short of space says so (ENOSPC)
  /// before any byte is written. A filesystem without fallocate is left to report it on write.
  void reserve(std::uint64_t bytes);

  /// Makes the file durable and moves it over the final name: fdatasync, rename, fsync of the
  /// folder. `durable` false skips both syncs (the rename stays atomic for readers, but a power
  /// cut may lose the new file, or leave it with missing data). On an error before the rename
  /// the temporary is removed and the final name untouched; an error syncing the folder after
  /// the rename is reported (the new file is in place, its name possibly not yet durable).
  void commit(bool durable = true);
  /// Closes and removes the temporary now (what the destructor does).
  void discard() noexcept;

 private:
  std::string final_path_;
  std::string temp_path_;  ///< empty once committed or discarded
  File file_;
  int lock_fd_ = -1;       ///< holds flock(LOCK_EX) on the temporary while it is ours
};

/// Removes the temporaries of `final_path` whose writer is gone: a name that carries the
/// temporary marker for this final name, whose lock (flock, held by a live writer for the life
/// of its temporary) can be taken, and whose process id is not a live process here. Returns how
/// many were removed. Temporaries of live writers, and names that are not temporaries of this
/// final name, are never touched.
SLUICE_API std::size_t remove_stale_temporaries(const std::string& final_path);

/// Removes `path` if it exists and makes the removal durable (fsync of its folder): the first step
/// of a sharded save, which takes a checkpoint's index away before replacing its shards. Returns
/// whether there was a file to remove; throws an Error naming the path on failure.
SLUICE_API bool remove_durably(const std::string& path);

}  // namespace sluice
