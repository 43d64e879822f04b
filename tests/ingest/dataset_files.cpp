#include "ingest/dataset_files.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "support/test_util.hpp"

namespace sluice::test {
namespace {

void put_le(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

template <typename T>
void put_raw(std::vector<std::byte>& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// Python's tarfile, given the archive path, the flavor and a manifest of "NAME\tFILE" lines.
constexpr const char* tar_script = R"PY(
import io, sys, tarfile
fmt = {"pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT, "ustar": tarfile.USTAR_FORMAT}[sys.argv[2]]
with tarfile.open(sys.argv[1], "w", format=fmt) as t:
    for line in open(sys.argv[3], encoding="utf-8"):
        name, src = line.rstrip("\n").split("\t")
        info = tarfile.TarInfo(name.rstrip("/"))
        info.mtime = 1700000000
        if name.endswith("/"):
            info.type = tarfile.DIRTYPE
            t.addfile(info)
        else:
            data = open(src, "rb").read()
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
)PY";

}  // namespace

std::size_t megatron_token_bytes(std::uint8_t dtype_code) {
  switch (dtype_code) {
    case 1: case 2: return 1;
    case 3: case 8: return 2;
    case 4: case 7: return 4;
    case 5: case 6: return 8;
    default: throw std::invalid_argument("megatron dtype code");
  }
}

std::vector<std::byte> megatron_token(std::uint8_t dtype_code, std::int64_t value) {
  std::vector<std::byte> out;
  switch (dtype_code) {
    case 6: put_raw(out, static_cast<double>(value)); break;
    case 7: put_raw(out, static_cast<float>(value)); break;
    default: put_le(out, static_cast<std::uint64_t>(value), static_cast<int>(megatron_token_bytes(dtype_code)));
  }
  return out;
}

std::vector<std::byte> megatron_idx_bytes(std::uint64_t version, std::uint8_t dtype_code,
                                          const std::vector<std::int32_t>& lengths,
                                          const std::vector<std::int64_t>& pointers,
                                          const std::vector<std::int64_t>& documents) {
  std::vector<std::byte> out;
  for (char c : std::string_view("MMIDIDX\0\0", 9)) out.push_back(static_cast<std::byte>(c));
  put_le(out, version, 8);
  out.push_back(static_cast<std::byte>(dtype_code));
  put_le(out, lengths.size(), 8);
  put_le(out, documents.size(), 8);
  for (auto v : lengths) put_le(out, static_cast<std::uint32_t>(v), 4);
  for (auto v : pointers) put_le(out, static_cast<std::uint64_t>(v), 8);
  for (auto v : documents) put_le(out, static_cast<std::uint64_t>(v), 8);
  return out;
}

MegatronWritten write_megatron(const std::string& prefix, std::uint8_t dtype_code,
                               const std::vector<std::vector<std::int64_t>>& sequences, std::size_t gap) {
  MegatronWritten w;
  std::vector<std::int32_t> lengths;
  std::vector<std::int64_t> pointers;
  std::vector<std::int64_t> documents{0};
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    if (i > 0) w.bin.insert(w.bin.end(), gap, std::byte{0xEE});
    pointers.push_back(static_cast<std::int64_t>(w.bin.size()));
    lengths.push_back(static_cast<std::int32_t>(sequences[i].size()));
    for (const std::int64_t v : sequences[i]) {
      const auto t = megatron_token(dtype_code, v);
      w.bin.insert(w.bin.end(), t.begin(), t.end());
      w.stream.insert(w.stream.end(), t.begin(), t.end());
    }
    documents.push_back(static_cast<std::int64_t>(i + 1));
  }
  w.idx = megatron_idx_bytes(1, dtype_code, lengths, pointers, documents);
  write_file(prefix + ".bin", w.bin);
  write_file(prefix + ".idx", w.idx);
  return w;
}

void write_npy_shard(const std::string& path, const std::string& descr, const std::vector<std::uint64_t>& shape,
                     const std::vector<std::byte>& data, bool fortran_order) {
  std::string dims;
  for (const auto d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma, (3, 4) drops the last
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': ({}), }}", descr,
                                 fortran_order ? "True" : "False", dims);
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  std::vector<std::byte> out;
  for (char c : std::string_view("\x93NUMPY\x01\x00", 8)) out.push_back(static_cast<std::byte>(c));
  put_le(out, dict.size(), 2);
  for (char c : dict) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  write_file(path, out);
}

bool have_python_tarfile() { return shell("/usr/bin/python3 -c 'import tarfile' >/dev/null 2>&1") == 0; }

void write_tar(const std::string& path, const std::vector<TarEntry>& entries, TarFlavor flavor) {
  namespace fs = std::filesystem;
  const fs::path parts = path + ".parts";
  fs::create_directories(parts);
  std::string manifest;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string part = (parts / std::to_string(i)).string();
    write_file(part, entries[i].contents);
    manifest += entries[i].name + "\t" + part + "\n";
  }
  const std::string manifest_path = (parts / "manifest").string();
  const std::string script_path = (parts / "write_tar.py").string();
  write_file(manifest_path, std::as_bytes(std::span(manifest.data(), manifest.size())));
  write_file(script_path, std::as_bytes(std::span(tar_script, std::strlen(tar_script))));
  const char* name = flavor == TarFlavor::pax ? "pax" : flavor == TarFlavor::gnu ? "gnu" : "ustar";
  const int rc = shell(fmt::format("/usr/bin/python3 {} {} {} {}", shell_quote(script_path), shell_quote(path), name,
                                   shell_quote(manifest_path)));
  fs::remove_all(parts);
  if (rc != 0) throw std::runtime_error("python3 tarfile failed to write " + path);
}

std::vector<TarEntry> wds_entries(const std::vector<WdsSample>& samples) {
  std::vector<TarEntry> entries;
  for (const auto& s : samples) {
    for (const auto& [field, bytes] : s.fields) entries.push_back({s.key + "." + field, bytes});
  }
  return entries;
}

void write_wds_shard(const std::string& path, const std::vector<WdsSample>& samples, TarFlavor flavor) {
  write_tar(path, wds_entries(samples), flavor);
}

std::vector<std::byte> wds_sample_bytes(const WdsSample& sample) {
  std::vector<std::byte> out;
  for (const auto& f : sample.fields) out.insert(out.end(), f.second.begin(), f.second.end());
  return out;
}

void fix_tar_checksum(std::vector<std::byte>& archive, std::size_t offset) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < 512; ++i) {
    sum += i >= 148 && i < 156 ? ' ' : static_cast<std::uint8_t>(archive.at(offset + i));
  }
  const std::string field = fmt::format("{:06o}", sum) + std::string(1, '\0') + " ";
  for (std::size_t i = 0; i < 8; ++i) archive[offset + 148 + i] = static_cast<std::byte>(field[i]);
}

}  // namespace sluice::test
