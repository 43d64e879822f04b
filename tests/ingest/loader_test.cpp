// The Loader over test-double datasets: every sample of an epoch once across ranks, orders that
// depend only on (seed, epoch), resume (elastic too), the bytes as they landed in each target's
// memory, the WebDataset field layout, the memory budget, and the clear errors.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <algorithm>
#include <map>
#include <set>

#include "double_datasets.hpp"
#include "sluice/error.hpp"
#include "sluice/ingest.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

struct Step {
  std::uint64_t epoch;
  std::uint64_t step;
  std::vector<std::uint64_t> samples;
  std::vector<std::uint64_t> hashes;
  bool operator==(const Step&) const = default;
};

// Up to `limit` batches of the current epoch.
std::vector<Step> drain(Loader& l, std::uint64_t limit = UINT64_MAX) {
  std::vector<Step> out;
  while (out.size() < limit) {
    auto b = l.next();
    if (!b) break;
    Step s{b->epoch(), b->step(), {b->samples().begin(), b->samples().end()}, {}};
    for (std::size_t i = 0; i < s.samples.size(); ++i) s.hashes.push_back(b->xxh3(i));
    out.push_back(std::move(s));
  }
  return out;
}

std::uint64_t hash_of(const std::vector<std::byte>& v) { return XXH3_64bits(v.data(), v.size()); }

class IngestLoader : public ::testing::Test {
 protected:
  std::shared_ptr<test::FixedDataset> fixed(std::uint64_t n, std::uint64_t bytes, std::uint64_t stride,
                                            std::uint64_t head = 100, bool two = false) {
    return std::make_shared<test::FixedDataset>(dir_.file(fmt::format("fixed-{}.bin", files_++)), n, bytes, stride,
                                                head, two);
  }
  IngestOptions opts(std::uint64_t batch, LoadTarget target = LoadTarget::pageable_host) {
    IngestOptions o;
    o.batch_size = batch;
    o.seed = 11;
    o.target = target;
    if (target != LoadTarget::pageable_host) o.device = open_device("sim");
    o.memory_budget = 64 * MiB;
    return o;
  }
  test::TempDir dir_{"/var/tmp", "sluice-ingest-"};
  unsigned files_ = 0;
};

TEST_F(IngestLoader, EverySampleOnceAcrossOneTwoAndThreeRanks) {
  auto ds = fixed(1000, 300, 300);
  for (bool drop_last : {true, false}) {
    for (unsigned world : {1U, 2U, 3U}) {
      std::multiset<std::uint64_t> seen;
      std::uint64_t dropped = 0;
      for (unsigned rank = 0; rank < world; ++rank) {
        IngestOptions o = opts(7);
        o.world = world;
        o.rank = rank;
        o.drop_last = drop_last;
        Loader l(ds, o);
        for (const Step& s : drain(l)) {
          EXPECT_LE(s.samples.size(), 7U);
          seen.insert(s.samples.begin(), s.samples.end());
        }
        dropped = l.stats().dropped;
        EXPECT_EQ(l.state().consumed, drop_last ? 1000 - 1000 % (7 * world) : 1000U);
      }
      const std::uint64_t global = 7ULL * world;
      EXPECT_EQ(dropped, drop_last ? 1000 % global : 0U) << world;
      EXPECT_EQ(seen.size(), 1000 - dropped) << world;
      EXPECT_EQ(std::set<std::uint64_t>(seen.begin(), seen.end()).size(), seen.size()) << "a sample twice, world " << world;
      // The samples taken are the epoch order's first positions, whatever the world size.
      const SampleOrder order(1000, 11, 0, true);
      for (std::uint64_t p = 0; p < seen.size(); ++p) EXPECT_EQ(seen.count(order[p]), 1U) << p;
    }
  }
}

TEST_F(IngestLoader, OneSeedOneOrderAndEpochsDiffer) {
  auto ds = fixed(200, 64, 64);
  Loader a(ds, opts(8));
  Loader b(ds, opts(8));
  const auto ea = drain(a);
  EXPECT_EQ(ea, drain(b));
  EXPECT_EQ(ea.size(), a.steps_per_epoch());
  a.set_epoch(1);
  const auto e1 = drain(a);
  ASSERT_EQ(e1.size(), ea.size());
  EXPECT_EQ(e1.front().epoch, 1U);
  EXPECT_NE(e1.front().samples, ea.front().samples);
  IngestOptions other = opts(8);
  other.seed = 12;
  Loader c(ds, other);
  EXPECT_NE(drain(c).front().samples, ea.front().samples);
  // With shuffle off the order is the dataset's.
  IngestOptions plain = opts(8);
  plain.shuffle = false;
  Loader d(ds, plain);
  const auto first = drain(d, 1);
  EXPECT_EQ(first.front().samples, (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(IngestLoader, BytesLandInEveryTarget) {
  // Unaligned samples, neighbours overlapping (Megatron's shared token), two extents each.
  auto ds = fixed(300, 4098, 4096, 77, true);
  // The files were just written, so cache_policy auto reads them from the page cache on the
  // producer thread; bypass sends them O_DIRECT through the engine's async I/O thread.
  test::Shape bypass;
  bypass.cache_policy = "bypass";
  const auto direct = test::make_config("uring", bypass);
  for (LoadTarget t : {LoadTarget::device, LoadTarget::pinned_host, LoadTarget::pageable_host}) {
    for (bool shuffle : {true, false}) {
      IngestOptions o = opts(16, t);
      o.shuffle = shuffle;
      if (!shuffle) o.config = direct;
      Loader l(ds, o);
      std::uint64_t batches = 0;
      while (auto b = l.next()) {
        ASSERT_EQ(b->bytes(), b->samples().size() * 4098);
        ASSERT_TRUE(b->shape());
        EXPECT_EQ(b->shape()->shape, (std::vector<std::uint64_t>{b->samples().size(), 4098}));
        for (std::size_t i = 0; i < b->samples().size(); ++i) {
          ASSERT_EQ(b->xxh3(i), hash_of(ds->bytes_of(b->samples()[i]))) << to_string(t) << " sample " << b->samples()[i];
        }
        if (t != LoadTarget::device) {  // host memory the test can read itself
          const auto want = ds->bytes_of(b->samples()[0]);
          EXPECT_TRUE(test::same_bytes({static_cast<const std::byte*>(b->data()), 4098}, want));
        }
        ++batches;
      }
      EXPECT_EQ(batches, 300 / 16);
      const IngestStats s = l.stats();
      EXPECT_EQ(s.steps, batches);
      EXPECT_EQ(s.samples, batches * 16);
      EXPECT_EQ(s.bytes, batches * 16 * 4098);
      EXPECT_EQ(s.path, t == LoadTarget::device ? Path::bounce : Path::host);
      EXPECT_FALSE(s.reason.empty());
      if (o.config && ds->file(0).has_direct()) {
        EXPECT_NE(s.reason.find("O_DIRECT"), std::string::npos) << s.reason;
      }
      EXPECT_GE(s.wait_p99_seconds, s.wait_p50_seconds);
      EXPECT_LE(s.stall_fraction, 1.0);
    }
  }
}

TEST_F(IngestLoader, ResumeEqualsTheUninterruptedRun) {
  auto ds = fixed(500, 1000, 1000);
  Loader whole(ds, opts(10));
  const auto all = drain(whole);
  for (std::uint64_t n : {0U, 1U, 17U, 49U}) {
    Loader first(ds, opts(10));
    const auto head = drain(first, n);
    const LoaderState st = LoaderState::from_json(first.state().to_json());
    EXPECT_EQ(st.consumed, n * 10);
    Loader second(ds, opts(10));
    second.restore(st);
    auto rest = drain(second);
    std::vector<Step> joined = head;
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, all) << "resumed after " << n;
  }
}

TEST_F(IngestLoader, ResumeWithAnotherWorldSizeContinuesTheGlobalOrder) {
  auto ds = fixed(400, 50, 50);
  for (auto [before, after] : {std::pair{2U, 3U}, std::pair{3U, 1U}, std::pair{1U, 2U}}) {
    std::vector<std::uint64_t> seen;
    LoaderState st;
    for (unsigned r = 0; r < before; ++r) {
      IngestOptions o = opts(5);
      o.drop_last = false;
      o.world = before;
      o.rank = r;
      Loader l(ds, o);
      for (const Step& s : drain(l, 6)) seen.insert(seen.end(), s.samples.begin(), s.samples.end());
      if (r == 0) st = l.state();
      EXPECT_EQ(l.state().consumed, st.consumed) << "ranks disagree on the state";
    }
    EXPECT_EQ(st.consumed, 6U * 5 * before);
    for (unsigned r = 0; r < after; ++r) {
      IngestOptions o = opts(5);
      o.drop_last = false;
      o.world = after;
      o.rank = r;
      Loader l(ds, o);
      l.restore(st);
      for (const Step& s : drain(l)) seen.insert(seen.end(), s.samples.begin(), s.samples.end());
    }
    std::vector<std::uint64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted.size(), 400U) << before << "->" << after;
    for (std::uint64_t k = 0; k < 400; ++k) ASSERT_EQ(sorted[k], k) << "sample twice or skipped, " << before << "->" << after;
  }
}

TEST_F(IngestLoader, RefusesAForeignOrFinishedState) {
  auto a = fixed(100, 10, 10);
  auto b = fixed(101, 10, 10);
  Loader la(a, opts(4));
  (void)drain(la, 3);
  Loader lb(b, opts(4));
  const auto e = test::error_of([&] { lb.restore(la.state()); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("other data"), std::string::npos) << e->what();
  LoaderState past = la.state();
  past.consumed = 101;
  EXPECT_THROW(la.restore(past), Error);
  // A state at the end of its epoch resumes to an empty epoch.
  LoaderState end = la.state();
  end.consumed = 100;
  la.restore(end);
  EXPECT_FALSE(la.next());
}

TEST_F(IngestLoader, WebDatasetFieldsArePackedPerField) {
  std::vector<test::VarDataset::Sample> samples;
  for (std::uint64_t k = 0; k < 60; ++k) {
    test::VarDataset::Sample s = {{"jpg", 100 + k * 37}, {"cls", 1 + k % 3}};
    if (k % 4 == 0) s.push_back({"seg.png", 5000 + k});
    samples.push_back(s);
  }
  auto ds = std::make_shared<test::VarDataset>(dir_.path(), samples, 3);
  for (LoadTarget t : {LoadTarget::device, LoadTarget::pageable_host}) {
    Loader l(ds, opts(8, t));
    std::set<std::uint64_t> seen;
    while (auto b = l.next()) {
      EXPECT_FALSE(b->shape());
      std::uint64_t total = 0;
      for (const BatchField& f : b->fields()) {
        ASSERT_EQ(f.offsets.size(), b->samples().size() + 1);
        total += f.offsets.back();
      }
      EXPECT_EQ(total, b->bytes());
      for (std::size_t i = 0; i < b->samples().size(); ++i) {
        const std::uint64_t k = b->samples()[i];
        seen.insert(k);
        std::vector<std::byte> whole;
        for (std::size_t m = 0; m < ds->sample(k).size(); ++m) {
          const auto bytes = ds->member(k, m);
          whole.insert(whole.end(), bytes.begin(), bytes.end());
          // The member sits in its field's range for sample i.
          const auto f = std::find_if(b->fields().begin(), b->fields().end(),
                                      [&](const BatchField& x) { return x.name == ds->sample(k)[m].field; });
          ASSERT_NE(f, b->fields().end());
          EXPECT_EQ(f->offsets[i + 1] - f->offsets[i], ds->sample(k)[m].size);
          if (t == LoadTarget::pageable_host) {
            const auto* at = static_cast<const std::byte*>(b->data()) + f->offset + f->offsets[i];
            EXPECT_TRUE(test::same_bytes({at, bytes.size()}, bytes)) << "sample " << k << " field " << f->name;
          }
        }
        EXPECT_EQ(b->xxh3(i), hash_of(whole)) << "sample " << k;
      }
    }
    EXPECT_EQ(seen.size(), 56U);  // drop_last: 60 - 60 % 8
  }
}

TEST_F(IngestLoader, MemoryStaysWithinTheBudgetFromOneByteTo64MiB) {
  std::vector<test::VarDataset::Sample> samples;
  const std::vector<std::uint64_t> sizes = {1, 2, 511, 512, 4095, 4097, 1 * MiB + 3, 64 * MiB, 7, 3 * MiB};
  for (std::uint64_t s : sizes) samples.push_back({{"bin", s}});
  auto ds = std::make_shared<test::VarDataset>(dir_.path(), samples, 2);
  for (LoadTarget t : {LoadTarget::device, LoadTarget::pageable_host}) {
    IngestOptions o = opts(2, t);
    o.memory_budget = 200 * MiB;
    o.drop_last = false;
    Loader l(ds, o);
    EXPECT_LE(l.memory_reserved(), o.memory_budget);
    EXPECT_EQ(l.memory_in_use(), 0U);  // nothing read yet
    std::set<std::uint64_t> seen;
    while (auto b = l.next()) {
      // The batch held counts, and everything in use lies inside the reserved regions.
      EXPECT_GE(l.memory_in_use(), b->bytes());
      EXPECT_LE(l.memory_in_use(), l.memory_reserved());
      for (std::size_t i = 0; i < b->samples().size(); ++i) {
        const std::uint64_t k = b->samples()[i];
        seen.insert(k);
        EXPECT_EQ(b->xxh3(i), hash_of(ds->member(k, 0))) << "sample of " << sizes[k] << " bytes";
      }
    }
    EXPECT_EQ(seen.size(), sizes.size());
    EXPECT_GT(l.memory_high_water(), 64 * MiB);
    EXPECT_LE(l.memory_high_water(), o.memory_budget) << to_string(t);
    // Every batch dropped and the epoch read: all of it has come back.
    EXPECT_EQ(l.memory_in_use(), 0U) << to_string(t);
  }
  // A budget no batch with the 64 MiB sample fits: that batch is the error, named.
  IngestOptions small = opts(2);
  small.memory_budget = 16 * MiB;
  small.shuffle = false;
  small.drop_last = false;
  Loader l(ds, small);
  EXPECT_LE(l.memory_high_water(), small.memory_budget);
  const auto e = test::error_of([&] { while (l.next()) {} });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("step 3"), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("memory budget"), std::string::npos) << e->what();
}

TEST_F(IngestLoader, PrefetchShrinksToTheBudgetAndABatchTooLargeIsAnError) {
  auto ds = fixed(64, 1 * MiB, 1 * MiB);
  IngestOptions o = opts(4);
  o.prefetch = 8;
  o.memory_budget = 24 * MiB;
  Loader l(ds, o);
  EXPECT_LE(l.memory_high_water(), o.memory_budget);
  EXPECT_EQ(drain(l).size(), 16U);
  o.memory_budget = 6 * MiB;
  const auto e = test::error_of([&] { Loader tiny(ds, o); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("memory budget"), std::string::npos) << e->what();
}

TEST_F(IngestLoader, ABatchOutlivesItsLoader) {
  auto ds = fixed(40, 33, 33);
  std::optional<Batch> kept;
  {
    Loader l(ds, opts(4, LoadTarget::device));
    kept = l.next();
    (void)l.next();
  }
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->xxh3(0), hash_of(ds->bytes_of(kept->samples()[0])));
}

TEST_F(IngestLoader, AConsumerHoldingEveryBufferGetsAnErrorAtOnce) {
  auto ds = fixed(64, 1 * MiB, 1 * MiB);
  IngestOptions o = opts(4);
  o.memory_budget = 9 * MiB;  // one batch of 4 MiB and its staging: no room for a second
  Loader l(ds, o);
  auto held = l.next();
  ASSERT_TRUE(held);
  const auto e = test::error_of([&] { (void)l.next(); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("holds 1 batch "), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("drop a batch"), std::string::npos) << e->what();
  // Dropping it lets the same Loader go on, with the batch that was waiting.
  const std::uint64_t step = held->step();
  held.reset();
  auto b = l.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->step(), step + 1);
}

TEST_F(IngestLoader, AConsumerHoldingAllBuffersOfALargerBudgetGetsAnError) {
  auto ds = fixed(64, 64 * KiB, 64 * KiB);
  IngestOptions o = opts(2);
  o.prefetch = 2;  // three batch buffers: the consumer holds all three
  Loader l(ds, o);
  std::vector<Batch> held;
  for (int i = 0; i < 3; ++i) {
    auto b = l.next();
    ASSERT_TRUE(b);
    held.push_back(*b);
  }
  const auto e = test::error_of([&] { (void)l.next(); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("holds 3 batches"), std::string::npos) << e->what();
  held.erase(held.begin());
  EXPECT_TRUE(l.next());
}

TEST_F(IngestLoader, RefusesBadOptions) {
  auto ds = fixed(10, 10, 10);
  IngestOptions o = opts(0);
  EXPECT_THROW(Loader(ds, o), Error);
  o = opts(2);
  o.world = 2;
  o.rank = 2;
  EXPECT_THROW(Loader(ds, o), Error);
  o = opts(2, LoadTarget::device);
  o.device = nullptr;
  EXPECT_THROW(Loader(ds, o), Error);
}

}  // namespace
}  // namespace sluice
