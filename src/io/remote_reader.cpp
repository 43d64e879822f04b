// RemoteReader: ranged GETs over libcurl's multi interface, driven on the calling thread.
//
// A read is cut into parts of part_size; up to in_flight of them are transfers of one multi
// handle, whose connection cache (CURLMOPT_MAXCONNECTS = in_flight) outlives the read, so the
// next read reuses warm connections. The first read of an object sends one part alone and learns
// the size and the ETag from its Content-Range (no HEAD); the other parts then go out together,
// each with If-Match.
//
// Each body byte is checked before it is stored: the response must be a 206 whose Content-Range
// starts at the part's next missing byte and ends within it (or at the object's end), with the
// pinned ETag. Anything else stops the transfer (the write callback refuses the bytes) and
// becomes an Error; nothing is ever written at the wrong place. A transfer that fails in a way
// another try can help (429, 5xx, reset, stall, short body) is sent again after a backoff with
// full jitter, from its last good byte, until max_attempts.
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "io/remote_response.hpp"
#include "io/remote_target.hpp"
#include "sluice/error.hpp"
#include "sluice/remote.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace remote {
void publish_stats(const std::string& endpoint, const RemoteStats& delta);
}  // namespace remote

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t max_error_body = 64 * KiB;
constexpr long curl_buffer_size = 512 * 1024;  // fewer, larger write callbacks (reference §7)

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

// In a named namespace: RemoteReader::State holds a pointer to one (internal all the same).
namespace remote {

// One part of a read: a byte range of the object and where it goes in the caller's buffer.
struct Part {
  char* dst = nullptr;
  std::uint64_t offset = 0;  // object offset of the part's first byte
  std::uint64_t size = 0;    // bytes wanted (cut at the object's end once it is known)
  std::uint64_t got = 0;     // bytes received and checked: a retry resumes here
  unsigned attempts = 0;
  Clock::time_point not_before{};
  // The current attempt.
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  Clock::time_point sent{};
  bool checked = false;  // the response's headers were checked at its first body byte
  std::string content_range, etag, body;
  std::string fault;  // set by a callback: the response is wrong, no retry
  char errbuf[CURL_ERROR_SIZE] = {};
};

struct WriteContext {
  RemoteReader::State* state;
  Part* part;
};

}  // namespace remote

namespace {
using remote::Part;
using remote::WriteContext;
}  // namespace

struct RemoteReader::State {
  std::string url, endpoint;  // the URL as given; the stats' key
  remote::RemoteTarget target;
  RemoteOptions opt;
  CURLM* multi = nullptr;
  std::vector<CURL*> idle;  // easy handles between transfers
  std::optional<std::uint64_t> size;
  std::string etag;          // pinned by the first response (empty: the server sent none)
  RemoteStats stats, delta;  // all of this reader's requests; those not yet published
  std::mt19937_64 rng{std::random_device{}()};
  const Part* lead = nullptr;  // the part run() may start before the size is known
  // Requests in flight now: halved by a throttling answer (429, 503), one more per part done, up
  // to opt.in_flight (AIMD, so a throttled server sees fewer requests until it recovers).
  unsigned window = 0;

  ~State() {
    for (CURL* e : idle) curl_easy_cleanup(e);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
  [[noreturn]] void fail(const Part& p, int err, std::string_view detail) const {
    throw_os_error(
        err, {.op = "GET", .path = url, .offset = p.offset, .size = p.size, .has_range = true},
        detail);
  }
  void check_response(Part& p, CURL* easy);
  void start(Part& p);
  void set_headers(Part& p, CURL* e);
  void finish(Part& p, CURLcode rc, std::vector<Part*>& waiting);
  void retry(Part& p, const std::string& cause, std::vector<Part*>& waiting);
  void run(std::vector<Part>& parts);
  void launch(std::vector<Part*>& waiting, std::size_t& active,
              std::vector<std::unique_ptr<WriteContext>>& contexts, Clock::time_point& next_try);
  void publish();
};

namespace {

// Headers of each response, redirects' included: a status line starts a new response.
std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* p = static_cast<Part*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    p->content_range.clear();
    p->etag.clear();
  } else if (const auto h = remote::parse_header_line(line)) {
    if (remote::header_is(h->name, "Content-Range")) p->content_range = h->value;
    if (remote::header_is(h->name, "ETag")) p->etag = h->value;
  }
  return size * n;
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* ctx = static_cast<WriteContext*>(user);
  Part& p = *ctx->part;
  const std::size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(p.easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 206) {
    if (status == 200) {
      p.fault = "the server ignored Range and sent the whole object (200, not 206): refused";
      return 0;
    }
    // An error document, kept (bounded) for its S3 code and message.
    p.body.append(data, std::min(bytes, max_error_body - std::min(max_error_body, p.body.size())));
    return bytes;
  }
  if (!p.checked) {
    ctx->state->check_response(p, p.easy);
    if (!p.fault.empty()) return 0;
  }
  if (bytes > p.size - p.got) {
    p.fault = fmt::format("the server sent more than the {} bytes of the range", p.size);
    return 0;
  }
  std::memcpy(p.dst + p.got, data, bytes);
  p.got += bytes;
  return bytes;
}

}  // namespace

// The first body byte of a 206: its Content-Range must begin at the part's next missing byte and
// end inside the part, or at the object's end; the first response of the object pins its size
// and ETag, which every later one must repeat.
void RemoteReader::State::check_response(Part& p, CURL* /*easy*/) {
  p.checked = true;
  const auto cr = remote::parse_content_range(p.content_range);
  const std::uint64_t want_first = p.offset + p.got, want_last = p.offset + p.size - 1;
  if (!cr || !cr->satisfied) {
    p.fault = fmt::format("206 with a Content-Range of '{}'", p.content_range);
    return;
  }
  if (!cr->total) {
    p.fault = fmt::format("Content-Range '{}' does not give the object's size", p.content_range);
    return;
  }
  if (!size) {
    size = *cr->total;
    etag = p.etag;
  } else if (*cr->total != *size || p.etag != etag) {
    p.fault = fmt::format("the object changed during the read (size {} -> {}, ETag {} -> {})",
                          *size, *cr->total, etag, p.etag);
    return;
  }
  const bool cut_at_end = cr->last < want_last && cr->last + 1 == *size;
  if (cr->first != want_first || (cr->last != want_last && !cut_at_end)) {
    p.fault = fmt::format("asked bytes {}-{}, the server sent Content-Range '{}'", want_first,
                          want_last, p.content_range);
    return;
  }
  p.size = cr->last + 1 - p.offset;
}

void RemoteReader::State::start(Part& p) {
  CURL* e = idle.empty() ? curl_easy_init() : idle.back();
  if (!idle.empty()) idle.pop_back();
  if (e == nullptr) fail(p, ENOMEM, "curl_easy_init failed");
  curl_easy_reset(e);
  p.easy = e;
  p.checked = false;
  p.content_range.clear();
  p.etag.clear();
  p.body.clear();
  p.errbuf[0] = '\0';
  const std::string range = fmt::format("{}-{}", p.offset + p.got, p.offset + p.size - 1);
  curl_easy_setopt(e, CURLOPT_URL, target.request_url.c_str());
  if (!target.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, target.ca_bundle.c_str());
  curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // copied by libcurl
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 8L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opt.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(opt.low_speed_bytes));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(opt.low_speed_seconds));
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, curl_buffer_size);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, p.errbuf);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &p);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_PRIVATE, &p);
  set_headers(p, e);
  p.sent = Clock::now();
  ++p.attempts;
  ++delta.requests;
}

// If-Match once the ETag is pinned; SigV4 for S3 with credentials (remote::sign_sigv4).
void RemoteReader::State::set_headers(Part& p, CURL* e) {
  curl_slist_free_all(p.headers);
  p.headers = nullptr;
  if (!etag.empty()) p.headers = curl_slist_append(p.headers, ("If-Match: " + etag).c_str());
  if (target.sign) p.headers = remote::sign_sigv4(e, *target.sign, p.headers);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, p.headers);
}

void RemoteReader::State::retry(Part& p, const std::string& cause, std::vector<Part*>& waiting) {
  if (p.attempts >= opt.max_attempts) {
    fail(p, cause.starts_with("timeout") ? ETIMEDOUT : EIO,
         fmt::format("gave up after {} tries, the last failed with {} ({} of {} bytes received)",
                     p.attempts, cause, p.got, p.size));
  }
  ++delta.retries[cause];
  if (remote::is_throttle_cause(cause)) {
    window = std::max(1U, window / 2);
    delta.lowest_in_flight =
        delta.lowest_in_flight == 0 ? window : std::min(delta.lowest_in_flight, window);
  }
  curl_off_t retry_after = 0;
  if (p.easy == nullptr ||
      curl_easy_getinfo(p.easy, CURLINFO_RETRY_AFTER, &retry_after) != CURLE_OK) {
    retry_after = 0;
  }
  const std::uint64_t wait_ms =
      remote::backoff_ms(p.attempts, opt.backoff_base_ms, opt.backoff_cap_ms, retry_after, rng);
  p.not_before = Clock::now() + std::chrono::milliseconds(wait_ms);
  waiting.push_back(&p);
}

// One transfer ended: the part is complete, goes back to wait for another try, or fails the read.
void RemoteReader::State::finish(Part& p, CURLcode rc, std::vector<Part*>& waiting) {
  long status = 0, connects = 0;
  curl_easy_getinfo(p.easy, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_getinfo(p.easy, CURLINFO_NUM_CONNECTS, &connects);
  delta.connections += static_cast<std::uint64_t>(connects);
  delta.latency_us.record(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - p.sent).count()));
  if (!p.fault.empty()) fail(p, EPROTO, p.fault);
  if (rc != CURLE_OK) {
    const auto cause = remote::retry_cause_of_curl(rc);
    if (!cause) {
      const bool unknown_ca = rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE;
      fail(p, EIO, fmt::format("{}: {}{}", curl_easy_strerror(rc), p.errbuf,
                               unknown_ca ? " (TLS: set AWS_CA_BUNDLE to the CA that signed the "
                                            "endpoint's certificate; sluice check URL shows the "
                                            "bundle used)"
                                          : ""));
    }
    return retry(p, *cause, waiting);
  }
  if (status == 206) {
    if (p.got == p.size) {
      window = std::min(opt.in_flight, window + 1);
      return;
    }
    return retry(p, "short body", waiting);
  }
  const remote::S3Error s3 = remote::parse_s3_error(p.body);
  if (status == 416) {
    // Asked from past the end: the end of the object, when the server says where it is.
    const auto cr = remote::parse_content_range(p.content_range);
    if (cr && !cr->satisfied && p.got == 0 && p.offset >= *cr->total &&
        (!size || *size == *cr->total)) {
      size = *cr->total;
      p.size = 0;
      return;
    }
  }
  if (const auto cause = remote::retry_cause_of_status(status, s3))
    return retry(p, *cause, waiting);
  std::string what = fmt::format("HTTP {}", status);
  if (!s3.code.empty()) what += fmt::format(" {}: {}", s3.code, s3.message);
  if (status == 412) what += " (the object changed during the read: its ETag no longer matches)";
  if (status == 200) what += " to a ranged GET with no body";
  fail(p, remote::errno_of_status(status), what);
}

// Starts the waiting parts whose backoff is over, up to in_flight transfers. Until a response
// has said the object's size, only the first part may go (it learns the size and pins the ETag,
// so the others carry If-Match); they start as soon as its headers are checked, and are cut at
// the object's end (those wholly past it are done with no request).
void RemoteReader::State::launch(std::vector<Part*>& waiting, std::size_t& active,
                                 std::vector<std::unique_ptr<WriteContext>>& contexts,
                                 Clock::time_point& next_try) {
  const auto now = Clock::now();
  for (std::size_t i = waiting.size(); i-- > 0 && active < window;) {
    Part& p = *waiting[i];
    if (!size && &p != lead) continue;
    if (p.not_before > now) {
      next_try = std::min(next_try, p.not_before);
      continue;
    }
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
    if (size) p.size = p.offset >= *size ? 0 : std::min(p.size, *size - p.offset);
    if (p.size == p.got) continue;  // past the end: nothing to ask for
    start(p);
    contexts.push_back(std::make_unique<WriteContext>(WriteContext{this, &p}));
    curl_easy_setopt(p.easy, CURLOPT_WRITEDATA, contexts.back().get());
    curl_multi_add_handle(multi, p.easy);
    ++active;
  }
}

// Runs every part to completion: in_flight transfers at most, retries after their backoff.
void RemoteReader::State::run(std::vector<Part>& parts) {
  std::vector<Part*> waiting;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) waiting.push_back(&*it);  // first last
  lead = parts.empty() ? nullptr : &parts.front();
  std::vector<std::unique_ptr<WriteContext>> contexts;
  std::size_t active = 0;
  // On an error, transfers still running are taken out of the multi handle before the parts go.
  struct Cleanup {
    State& s;
    std::vector<Part>& parts;
    ~Cleanup() {
      for (Part& p : parts) {
        if (p.easy != nullptr) {
          curl_multi_remove_handle(s.multi, p.easy);
          s.idle.push_back(p.easy);
          p.easy = nullptr;
        }
        curl_slist_free_all(p.headers);
        p.headers = nullptr;
      }
    }
  } cleanup{*this, parts};
  while (active > 0 || !waiting.empty()) {
    auto next_try = Clock::now() + std::chrono::milliseconds(100);
    launch(waiting, active, contexts, next_try);
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      Part* p = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
      const CURLcode rc = m->data.result;
      curl_multi_remove_handle(multi, m->easy_handle);
      --active;
      finish(*p, rc, waiting);  // may throw: p.easy is still set, Cleanup returns it
      idle.push_back(p->easy);
      p->easy = nullptr;
    }
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_try - Clock::now());
    if (active > 0 || !waiting.empty()) {
      curl_multi_poll(multi, nullptr, 0,
                      static_cast<int>(std::clamp<long long>(wait.count(), 0, 100)), nullptr);
    }
  }
}

void RemoteReader::State::publish() {
  stats.merge(delta);
  remote::publish_stats(endpoint, delta);
  delta = RemoteStats{};
}

namespace {

std::vector<Part> cut_parts(char* dst, std::uint64_t from, std::uint64_t to, std::uint64_t base,
                            std::uint64_t part_size) {
  std::vector<Part> parts;
  for (std::uint64_t o = from; o < to; o += part_size) {
    Part& p = parts.emplace_back();
    p.offset = o;
    p.size = std::min(part_size, to - o);
    p.dst = dst + (o - base);
  }
  return parts;
}

// "remote: 32 ranged GETs of 8 MiB, 16 in flight over 16 new connections, 3 retried after 503
// SlowDown": parts are the requests less their retries.
std::string describe(const RemoteStats& d, std::uint64_t part_size, unsigned in_flight) {
  const std::uint64_t parts = d.requests - d.retry_count();
  std::string s =
      fmt::format("remote: {} ranged GET{} of {}, {} in flight", parts, parts == 1 ? "" : "s",
                  format_size(part_size), std::min<std::uint64_t>(in_flight, parts));
  s += d.connections == 0
           ? std::string(" over warm connections")
           : fmt::format(" over {} new connection{}", d.connections, d.connections == 1 ? "" : "s");
  for (const auto& [cause, n] : d.retries) s += fmt::format(", {} retried after {}", n, cause);
  if (d.lowest_in_flight > 0)
    s += fmt::format(", in flight cut to {} while throttled", d.lowest_in_flight);
  return s;
}

}  // namespace

RemoteReader::RemoteReader(std::string url, RemoteOptions options)
    : state_(std::make_unique<State>()) {
  options.validate();
  state_->target = remote::resolve_remote(url);
  init_curl_once();
  // Errors, stats and summaries show the URL without its query: a presigned URL's signature is a
  // credential. The requests use target.request_url, query and all.
  state_->url = url.substr(0, url.find('?'));
  if (state_->url.size() < url.size()) state_->url += "?...";
  state_->endpoint = state_->target.endpoint;
  state_->opt = options;
  state_->window = options.in_flight;
  state_->multi = curl_multi_init();
  if (state_->multi == nullptr)
    throw_os_error(ENOMEM, {.op = "open", .path = state_->url}, "curl_multi_init");
  curl_multi_setopt(state_->multi, CURLMOPT_MAXCONNECTS, static_cast<long>(options.in_flight));
}

RemoteReader::~RemoteReader() = default;
RemoteReader::RemoteReader(RemoteReader&&) noexcept = default;
RemoteReader& RemoteReader::operator=(RemoteReader&&) noexcept = default;

TransferResult RemoteReader::read(void* dst, std::uint64_t size, std::uint64_t offset) {
  State& s = *state_;
  const auto t0 = Clock::now();
  struct Publish {
    State& s;
    ~Publish() { s.publish(); }
  } publish{s};
  auto* out = static_cast<char*>(dst);
  std::uint64_t end = offset + size;
  if (s.size) end = std::min(end, std::max(*s.size, offset));
  std::vector<Part> parts = cut_parts(out, offset, end, offset, s.opt.part_size);
  s.run(parts);
  if (s.size) end = std::min(end, std::max(*s.size, offset));
  TransferResult r;
  r.bytes = end - offset;
  r.path = Path::host;
  r.ios = s.delta.requests;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.reason = describe(s.delta, s.opt.part_size, s.opt.in_flight);
  s.delta.bytes = r.bytes;
  return r;
}

std::optional<std::uint64_t> RemoteReader::size() const noexcept {
  return state_->size;
}
const std::string& RemoteReader::url() const noexcept {
  return state_->url;
}
const std::string& RemoteReader::endpoint() const noexcept {
  return state_->endpoint;
}
const RemoteOptions& RemoteReader::options() const noexcept {
  return state_->opt;
}
const RemoteStats& RemoteReader::stats() const noexcept {
  return state_->stats;
}
std::string RemoteReader::reason() const {
  return describe(state_->stats, state_->opt.part_size, state_->opt.in_flight);
}

}  // namespace sluice
