// `sluice load` as a user runs it: --checksum against an independent XXH3 of the file's bytes
// (safetensors built here, .npy written by NumPy itself when python3-numpy is installed), with
// offsets, sizes, dtypes and shapes from what the test wrote or NumPy's own account, never from
// the parser under test; --json's schema, rank splitting, and exit codes 2 (bad arguments) and
// 1 (bad files).
#include <gtest/gtest.h>

#include <xxhash.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "sluice/config.hpp"
#include "sluice/formats.hpp"
#include "sluice/units.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"
#include "tensor_files.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

using test::pattern;
using test::shell_quote;

using test::CliRun;

// Where a tensor lies and what it is, from a source other than the parser under test: the
// tensors this test wrote, or NumPy's own account of the arrays it saved.
struct Expected {
  std::string file;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::string dtype;
  std::vector<std::uint64_t> shape;
};
using Truth = std::map<std::string, Expected>;

// A safetensors file that safetensors_file() wrote: its data is the file's tail, the tensors
// back to back in the order given.
void add_safetensors_truth(Truth& truth, const std::string& path, const std::vector<test::StTensor>& ts) {
  std::uint64_t total = 0;
  for (const auto& t : ts) total += t.data.size();
  std::uint64_t at = test::file_size(path) - total;
  for (const auto& t : ts) {
    truth[t.name] = {path, at, t.data.size(), t.dtype, t.shape};
    at += t.data.size();
  }
}

class LoadCli : public ::testing::Test {
 protected:
  CliRun sluice(const std::string& args) { return test::run_captured(SLUICE_CLI_PATH, "load " + args, dir_.path()); }
  std::string put(const std::string& name, const std::vector<std::byte>& bytes) {
    const std::string p = dir_.file(name);
    test::write_file(p, bytes);
    return p;
  }
  // Runs --json --checksum on `files` and checks every tensor it reports against `truth`: its
  // size, dtype and shape, and its hash against XXH3 of those bytes of the file.
  std::size_t check_checksums(const std::vector<std::string>& files, const std::string& extra, const Truth& truth) {
    std::string args;
    for (const auto& f : files) args += shell_quote(f) + " ";
    const CliRun r = sluice(args + "--json --checksum " + extra);
    EXPECT_EQ(r.rc, 0) << r.err;
    if (r.rc != 0) return 0;
    const auto j = nlohmann::json::parse(r.out);
    std::uint64_t bytes = 0;
    for (const auto& t : j.at("tensors")) {
      const std::string name = t.at("name");
      const auto it = truth.find(name);
      if (it == truth.end()) {
        ADD_FAILURE() << "sluice load reported a tensor '" << name << "' that was never written";
        continue;
      }
      const Expected& want = it->second;
      const auto data = test::pread_file(want.file, want.offset, want.bytes);
      EXPECT_EQ(data.size(), want.bytes) << name;
      EXPECT_EQ(t.at("xxh3").get<std::string>(), fmt::format("{:016x}", XXH3_64bits(data.data(), data.size())))
          << name << " in " << want.file;
      EXPECT_EQ(t.at("bytes").get<std::uint64_t>(), want.bytes) << name;
      EXPECT_EQ(t.at("dtype").get<std::string>(), want.dtype) << name;
      EXPECT_EQ(t.at("shape").get<std::vector<std::uint64_t>>(), want.shape) << name;
      bytes += want.bytes;
    }
    const auto& s = j.at("summary");
    EXPECT_EQ(s.at("bytes").get<std::uint64_t>(), bytes);
    for (const char* k : {"seconds", "gib_per_s", "path", "reason"}) EXPECT_TRUE(s.contains(k)) << k;
    return j.at("tensors").size();
  }

  test::TempDir dir_{"/var/tmp", "sluice-load-cli-"};
  test::CleanSluiceEnv clean_env_;
};

TEST_F(LoadCli, SafetensorsChecksumsMatchTheFile) {
  std::vector<test::StTensor> ts;
  unsigned seed = 1;
  for (const test::StDtype& d : test::st_dtypes) {
    for (std::uint64_t n : {0ull, 8ull, 24ull, 1000ull}) {
      ts.push_back({fmt::format("{}.{}", d.name, n), d.name, {n / 8, 8}, pattern(n * d.bits / 8, seed++)});
    }
  }
  ts.push_back({"scalar", "F32", {}, pattern(4, 99)});
  ts.push_back({"big", "BF16", {3, 70001}, pattern(3 * 70001 * 2, 98)});
  const auto f = put("model.safetensors", test::safetensors_file(ts, {{"format", "pt"}}));
  Truth truth;
  add_safetensors_truth(truth, f, ts);
  EXPECT_EQ(check_checksums({f}, "--device sim", truth), ts.size());
  EXPECT_EQ(check_checksums({f}, "--memory host --max-read 4K --host-load read", truth), ts.size());
  EXPECT_EQ(check_checksums({f}, "--path host --host-load mapped", truth), ts.size());
  // --host-load reaches the loader: the summary names the path (auto: mapped_load_test).
  for (const char* h : {"read", "mapped"}) {
    const CliRun r = sluice(shell_quote(f) + " --memory host --json --host-load " + h);
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto s = nlohmann::json::parse(r.out).at("summary");
    EXPECT_EQ(s.at("path"), std::string(h) == "read" ? "host" : "mapped") << s;
  }
  EXPECT_NE(sluice(shell_quote(f) + " --memory host --host-load copy").rc, 0);
  // --device host: pageable host memory, the same decision (python's device="cpu").
  const CliRun dh = sluice(shell_quote(f) + " --device host --host-load mapped --json");
  ASSERT_EQ(dh.rc, 0) << dh.err;
  EXPECT_EQ(nlohmann::json::parse(dh.out).at("summary").at("path"), "mapped");
  EXPECT_EQ(sluice(shell_quote(f) + " --device host --memory pinned").rc, 2);
  EXPECT_EQ(check_checksums({f}, "--memory pinned --device sim --alignment 4096", truth), ts.size());
  EXPECT_EQ(check_checksums({f}, "--device sim --path posix", truth), ts.size());

  // Rank split: the two halves together are the whole.
  const CliRun r0 = sluice(shell_quote(f) + " --device sim --json --rank 0 --world 2");
  const CliRun r1 = sluice(shell_quote(f) + " --device sim --json --rank 1 --world 2");
  ASSERT_EQ(r0.rc, 0) << r0.err;
  ASSERT_EQ(r1.rc, 0) << r1.err;
  const auto j0 = nlohmann::json::parse(r0.out);
  const auto j1 = nlohmann::json::parse(r1.out);
  EXPECT_EQ(j0["tensors"].size() + j1["tensors"].size(), ts.size());
  EXPECT_GT(j0["tensors"].size(), 0u);
  EXPECT_GT(j1["tensors"].size(), 0u);

  // The text form: a line per tensor and the summary with the path.
  const CliRun t = sluice(shell_quote(f) + " --device sim --checksum --tensors big,scalar");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("big  BF16  [3, 70001]  420006  "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("loaded 2 tensors"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("path: bounce"), std::string::npos) << t.out;
}

// --cache-policy reaches the loader, and the summary says how much of the checkpoint the page
// cache served: here the first of two 4 MiB tensors (each its own read) is cached, the second not.
TEST_F(LoadCli, CachePolicyAndHowMuchTheCacheServed) {
  const std::vector<test::StTensor> ts = {{"a", "F32", {MiB}, pattern(4 * MiB, 1)},
                                          {"b", "F32", {MiB}, pattern(4 * MiB, 2)}};
  const auto f = put("model.safetensors", test::safetensors_file(ts));
  const std::uint64_t b_at = test::file_size(f) - 4 * MiB;
  if (!test::drop_cache(f)) GTEST_SKIP() << "the page cache of " << f << " cannot be dropped per file";
  // a (and b's first page), pinned (test::pin_resident) so the summary below is exact.
  const test::PinnedRange pin = test::pin_resident(f, 0, b_at);
  auto summary = [&](const std::string& extra) {
    // --host-load read: half cached, auto would map (mapped_load_test); this is about reads.
    const CliRun r = sluice(shell_quote(f) + " --memory host --host-load read --max-read 4M --json " + extra);
    EXPECT_EQ(r.rc, 0) << r.err;
    return nlohmann::json::parse(r.out).at("summary");
  };
  const auto bypass = summary("--cache-policy bypass");
  EXPECT_EQ(bypass.at("reason").get<std::string>().find("page cache"), std::string::npos) << bypass;
  // (b's first page holds a's last bytes, so it is cached too: b reads "1%" or "0%", mixed.)
  const auto mixed = summary("--cache-policy auto");
  const std::string why = mixed.at("reason");
  EXPECT_TRUE(why.starts_with("page cache held 50% of the bytes: 4.00 MiB read buffered, 4.00 MiB as: page cache held "))
      << why;
  EXPECT_NE(why.find("O_DIRECT"), std::string::npos) << why;
  Truth truth;
  add_safetensors_truth(truth, f, ts);
  EXPECT_EQ(check_checksums({f}, "--memory host --host-load read --max-read 4M --cache-policy auto", truth), ts.size());
  EXPECT_EQ(check_checksums({f}, "--device sim --cache-policy use", truth), ts.size());
}

TEST_F(LoadCli, HandBuiltNpyChecksums) {
  struct Descr {
    const char* descr;
    std::uint64_t item;
  };
  std::vector<std::string> files;
  Truth truth;
  int i = 0;
  for (int v : {1, 2, 3}) {
    for (const Descr d : {Descr{"<f4", 4}, Descr{"|u1", 1}, Descr{">i8", 8}, Descr{"<c16", 16}}) {
      const std::string name = fmt::format("a{}", i);
      const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': (7, 3), }}", d.descr,
                                           i % 2 ? "True" : "False");
      files.push_back(put(name + ".npy", test::npy_file(v, dict, pattern(21 * d.item, static_cast<unsigned>(i)))));
      truth[name] = {files.back(), test::file_size(files.back()) - 21 * d.item, 21 * d.item, d.descr, {7, 3}};
      ++i;
    }
  }
  EXPECT_EQ(check_checksums(files, "--device sim", truth), files.size());
}

// Arrays NumPy saved (np.save and write_array in every format version), described by NumPy
// itself: descr (dtype_to_descr, what the header holds), shape and nbytes, with the data at the
// file's tail.
TEST_F(LoadCli, NumpyWrittenFiles) {
  std::string python;
  for (const char* p : {"/usr/bin/python3", "python3"}) {
    if (test::shell(fmt::format("{} -c 'import numpy' >/dev/null 2>&1", p)) == 0) {
      python = p;
      break;
    }
  }
  if (python.empty()) SLUICE_SKIP_OR_FAIL("python3 with numpy not found (apt-get install python3-numpy)");
  const std::string out = dir_.file("np");
  std::filesystem::create_directories(out);
  const std::string script = dir_.file("gen.py");
  const std::string gen = R"PY(
import json, os, sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(7)
dtypes = ['bool', 'int8', 'uint8', 'int16', '>u2', 'int32', 'uint32', '>i4', 'int64', 'uint64',
          'float16', 'float32', '>f4', 'float64', 'complex64', 'complex128', 'longdouble',
          'S5', 'U3', 'V7', 'datetime64[ns]', 'timedelta64[s]']
shapes = [(), (0,), (1,), (13,), (3, 5), (2, 3, 4), (0, 6), (257, 3), (1, 1, 1, 1)]
manifest = {}
def saved(name, b):
    path = f'{out}/{name}.npy'
    manifest[name] = {'descr': np.lib.format.dtype_to_descr(b.dtype), 'shape': list(b.shape),
                      'nbytes': int(b.nbytes), 'offset': os.path.getsize(path) - int(b.nbytes)}
n = 0
for dt in dtypes:
    for shape in shapes:
        count = int(np.prod(shape)) if shape else 1
        raw = rng.integers(0, 256, size=count * np.dtype(dt).itemsize, dtype=np.uint8)
        a = raw.view(dt).reshape(shape) if count else np.zeros(shape, dtype=dt)
        for order in ('C', 'F'):
            b = np.asfortranarray(a) if order == 'F' else np.ascontiguousarray(a)
            np.save(f'{out}/s{n}.npy', b)
            saved(f's{n}', b)
            n += 1
            for version in ((1, 0), (2, 0), (3, 0)):
                with open(f'{out}/v{n}.npy', 'wb') as f:
                    np.lib.format.write_array(f, b, version=version)
                saved(f'v{n}', b)
                n += 1
big = rng.standard_normal((1000, 1000)).astype(np.float32)
np.save(f'{out}/big.npy', big)
saved('big', big)
with open(sys.argv[2], 'w') as f:
    json.dump(manifest, f)
)PY";
  test::write_file(script, std::as_bytes(std::span(gen.data(), gen.size())));
  const std::string manifest = dir_.file("manifest.json");
  ASSERT_EQ(test::shell(fmt::format("{} {} {} {}", python, shell_quote(script), shell_quote(out), shell_quote(manifest))), 0);
  Truth truth;
  const auto described = nlohmann::json::parse(test::read_text(manifest));
  for (auto it = described.begin(); it != described.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& m = it.value();
    truth[name] = {fmt::format("{}/{}.npy", out, name), m.at("offset").get<std::uint64_t>(),
                   m.at("nbytes").get<std::uint64_t>(), m.at("descr").get<std::string>(),
                   m.at("shape").get<std::vector<std::uint64_t>>()};
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(out)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 700u);
  ASSERT_EQ(files.size(), truth.size());
  // Several runs of a bounded number of files (one command line each).
  for (std::size_t i = 0; i < files.size(); i += 200) {
    std::vector<std::string> part(files.begin() + static_cast<std::ptrdiff_t>(i),
                                  files.begin() + static_cast<std::ptrdiff_t>(std::min(files.size(), i + 200)));
    EXPECT_EQ(check_checksums(part, i % 400 == 0 ? "--device sim" : "--memory host", truth), part.size());
  }
  // NumPy's object arrays are refused with the reason.
  ASSERT_EQ(test::shell(fmt::format("{} -c \"import numpy as np; np.save('{}/obj.npy', np.array([1, 'a', None], dtype=object))\"",
                                    python, out)), 0);
  const CliRun r = sluice(shell_quote(out + "/obj.npy"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("object array"), std::string::npos) << r.err;
}

// --memory means what it means for sluice bench: device, pinned, pageable, with the aliases gpu
// and host (load's first spelling of pageable); the summary names where the tensors went.
TEST_F(LoadCli, MemorySpellingsAreBenchs) {
  const auto f = put("m.safetensors", test::safetensors_file({{"a", "F32", {4}, pattern(16)}}));
  const std::pair<const char*, const char*> cases[] = {
      {"--memory pageable", "pageable host memory"},
      {"--memory host", "pageable host memory"},
      {"--memory pinned --device sim", "pinned_host memory of "},
      {"--memory pinned-host --device sim", "pinned_host memory of "},
      {"--memory gpu --device sim", "device memory of "},
      {"--memory device --device sim", "device memory of "},
      {"--device sim", "device memory of "},
      {"--path host", "pageable host memory"},
  };
  for (const auto& [flags, where] : cases) {
    const CliRun r = sluice(shell_quote(f) + " --json " + flags);
    ASSERT_EQ(r.rc, 0) << flags << ": " << r.err;
    const std::string memory = nlohmann::json::parse(r.out)["summary"]["memory"];
    EXPECT_EQ(memory.rfind(where, 0), 0U) << flags << ": " << memory;
  }
  const CliRun bad = sluice(shell_quote(f) + " --memory nowhere");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--memory: unknown memory 'nowhere' (expected device, pinned or pageable"), std::string::npos)
      << bad.err;
}

TEST_F(LoadCli, ExitCodesAndMessages) {
  const auto f = put("m.safetensors", test::safetensors_file({{"a", "F32", {4}, pattern(16)}, {"b", "U8", {3}, pattern(3)}}));
  const std::string q = shell_quote(f);
  for (const std::string& bad : {q + " --rank 1", q + " --rank 2 --world 2", q + " --path sideways",
                                 q + " --memory nowhere", q + " --memory device --path host",
                                 q + " --tensors a,nope", q + " --alignment 3",
                                 q + " --device tpu:0", std::string("")}) {
    const CliRun r = sluice(bad);
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.err;
    EXPECT_FALSE(r.err.empty()) << bad;
  }
  auto broken = test::safetensors_file({{"a", "F32", {4}, pattern(16)}});
  broken.resize(broken.size() - 3);
  const CliRun r = sluice(shell_quote(put("broken.safetensors", broken)));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("broken.safetensors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'a'.data_offsets"), std::string::npos) << r.err;
  const CliRun missing = sluice(shell_quote(dir_.file("missing.safetensors")));
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("missing.safetensors"), std::string::npos) << missing.err;
  const CliRun list = sluice(q + " --list");
  EXPECT_EQ(list.rc, 0) << list.err;
  EXPECT_NE(list.out.find("a\tF32\t[4]\t16\t"), std::string::npos) << list.out;
}

}  // namespace
}  // namespace sluice
