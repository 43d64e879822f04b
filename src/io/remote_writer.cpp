// RemoteWriter: an S3 multipart upload over libcurl's multi interface, driven on the calling
// thread (sluice/remote_writer.hpp).
//
// append() copies bytes into part buffers (in_flight + 1 of them); a full buffer becomes an
// UploadPart request at once, and the calling thread drives the transfers whenever it is inside
// append() or commit(). The first full part starts the upload (CreateMultipartUpload, alone);
// commit() sends the last part, waits for all of them and sends CompleteMultipartUpload with
// every part's ETag. An object that fits in one part goes as one PUT instead.
//
// Signing: Debian 12's libcurl (7.88) signs the query string raw (normalised only from 8.3.0),
// so every query here is written in SigV4's canonical form already: parameters sorted, values
// percent-encoded, and "uploads=" rather than "uploads". The body is not hashed
// (x-amz-content-sha256: UNSIGNED-PAYLOAD, as the reader's GETs); TLS protects it in transit.
//
// Retries share the reader's policy (remote_response.hpp: the causes, backoff_ms): 429, 5xx,
// resets, timeouts, and a CompleteMultipartUpload answered 200 with an error document (S3 may do
// that after a long wait). Anything else fails the write: every transfer is stopped, the upload
// aborted (DELETE ?uploadId=), and the Error thrown.
#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "io/remote_response.hpp"
#include "io/remote_target.hpp"
#include "sluice/error.hpp"
#include "sluice/remote_writer.hpp"

namespace sluice {
namespace remote {
void publish_stats(const std::string& endpoint, const RemoteStats& delta);

// One request of an upload: CreateMultipartUpload, an UploadPart, Complete, Abort, a PUT or a
// DELETE. The body (if any) is memory the writer owns until the request is done.
struct Request {
  const char* op = "";  // S3's name of the request, for errors ("UploadPart")
  std::string method;   // "POST", "PUT", "DELETE"
  std::string query;    // canonical (see the top of the file); empty for none
  std::string content_type;
  const char* body = nullptr;
  std::uint64_t body_size = 0, pos = 0;  // pos: the next byte libcurl reads (0 on each try)
  std::uint64_t offset = 0;              // the part's first byte in the object, for errors
  unsigned part = 0;                     // part number (1..10000), 0 for other requests
  std::size_t buffer = 0;                // the part buffer it sends
  bool done = false;
  // The current try and its answer.
  unsigned attempts = 0;
  std::chrono::steady_clock::time_point not_before{}, sent{};
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  long status = 0;
  std::string etag, response;
  char errbuf[CURL_ERROR_SIZE] = {};
};

// A request of `op` with its method, query and Content-Type, the rest as a fresh one.
Request make_request(const char* op, std::string method, std::string query = {},
                     std::string content_type = {}) {
  Request r;
  r.op = op;
  r.method = std::move(method);
  r.query = std::move(query);
  r.content_type = std::move(content_type);
  return r;
}

}  // namespace remote

namespace {

using Clock = std::chrono::steady_clock;
using remote::make_request;
using remote::Request;
constexpr std::size_t upload_max_response = 1 * MiB;  // Complete's answer and error documents

void init_curl_for_writes() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// The form S3 and SigV4 agree on: RFC 3986 unreserved characters as they are, the rest %XX.
std::string upload_encode_value(std::string_view v) {
  std::string out;
  for (const char c : v) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~';
    out += plain ? std::string(1, c) : fmt::format("%{:02X}", u);
  }
  return out;
}

std::string upload_xml_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The text of the first <name> element of an XML document ("" when there is none).
std::string upload_xml_text(std::string_view doc, std::string_view name) {
  const std::string open = fmt::format("<{}>", name), close = fmt::format("</{}>", name);
  const auto a = doc.find(open);
  if (a == std::string_view::npos) return {};
  const auto b = doc.find(close, a);
  return b == std::string_view::npos
             ? std::string()
             : std::string(doc.substr(a + open.size(), b - a - open.size()));
}

std::size_t upload_on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* r = static_cast<Request*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    r->etag.clear();
  } else if (const auto h = remote::parse_header_line(line)) {
    if (remote::header_is(h->name, "ETag")) r->etag = h->value;
  }
  return size * n;
}

std::size_t upload_on_response(char* data, std::size_t size, std::size_t n, void* user) {
  auto* r = static_cast<Request*>(user);
  const std::size_t bytes = size * n;
  r->response.append(data, std::min(bytes, upload_max_response -
                                               std::min(upload_max_response, r->response.size())));
  return bytes;
}

std::size_t upload_on_read(char* buf, std::size_t size, std::size_t n, void* user) {
  auto* r = static_cast<Request*>(user);
  const std::size_t take =
      static_cast<std::size_t>(std::min<std::uint64_t>(size * n, r->body_size - r->pos));
  std::memcpy(buf, r->body + r->pos, take);
  r->pos += take;
  return take;
}

// libcurl rewinds the body when it must send it again on the same try (a redirect, an auth
// round): a retry starts from 0 as well (start() resets pos), never from where a failed try
// stopped.
int upload_on_seek(void* user, curl_off_t offset, int origin) {
  auto* r = static_cast<Request*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<std::uint64_t>(offset) > r->body_size)
    return CURL_SEEKFUNC_CANTSEEK;
  r->pos = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

}  // namespace

struct RemoteWriter::State {
  std::string url, endpoint;
  remote::RemoteTarget target;
  RemoteOptions opt;
  std::uint64_t part_size = 0;
  CURLM* multi = nullptr;
  std::vector<CURL*> idle;
  std::mt19937_64 rng{std::random_device{}()};
  RemoteStats stats, delta;
  unsigned window = 0;  // AIMD, as the reader's: halved on 429/503, one more per part done
  std::function<bool()> cancel;

  std::vector<std::unique_ptr<char[]>> buffers;
  std::vector<std::size_t> free_buffers;
  std::size_t current = 0;   // the buffer append() fills
  std::uint64_t filled = 0;  // bytes in it
  bool have_current = false;
  std::uint64_t appended = 0, uploaded = 0;
  std::string upload_id;                        // set by CreateMultipartUpload
  std::vector<std::unique_ptr<Request>> parts;  // every part sent, by number - 1
  std::vector<Request*> waiting;                // parts to start (after their backoff)
  std::size_t active = 0;
  bool committed = false, failed = false, single_put = false;
  std::string abort_error;

  ~State() {
    for (CURL* e : idle) curl_easy_cleanup(e);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
  [[noreturn]] void fail(const Request& r, int err, std::string_view detail) const {
    ErrorContext ctx{.op = r.method, .path = url};
    if (r.part != 0) {
      ctx.offset = r.offset;
      ctx.size = r.body_size;
      ctx.has_range = true;
    }
    throw_os_error(err, std::move(ctx), detail);
  }
  std::string request_url(const Request& r) const {
    return r.query.empty() ? target.request_url : target.request_url + "?" + r.query;
  }
  void start(Request& r);
  void set_headers(Request& r, CURL* e);
  void finish(Request& r, CURLcode rc);
  void check_answer(Request& r);
  void retry(Request& r, const std::string& cause);
  void pump(bool block);
  void run_alone(Request& r);
  void release(Request& r);
  void stop_all() noexcept;
  void next_buffer();
  void send_part();
  void create_upload();
  void complete();
  void put_whole();
  void abort_upload() noexcept;
  void publish();
};

void RemoteWriter::State::start(Request& r) {
  CURL* e = idle.empty() ? curl_easy_init() : idle.back();
  if (!idle.empty()) idle.pop_back();
  if (e == nullptr) fail(r, ENOMEM, "curl_easy_init failed");
  curl_easy_reset(e);
  r.easy = e;
  r.pos = 0;
  r.status = 0;
  r.etag.clear();
  r.response.clear();
  r.errbuf[0] = '\0';
  const std::string u = request_url(r);
  curl_easy_setopt(e, CURLOPT_URL, u.c_str());
  if (!target.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, target.ca_bundle.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opt.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(opt.low_speed_bytes));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(opt.low_speed_seconds));
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r.errbuf);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, upload_on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, upload_on_response);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(e, CURLOPT_PRIVATE, &r);
  if (r.method == "PUT") {
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, upload_on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, &r);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, upload_on_seek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, &r);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body_size));
  } else if (r.method == "POST") {
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body != nullptr ? r.body : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body_size));
  } else {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  set_headers(r, e);
  r.sent = Clock::now();
  ++r.attempts;
  ++delta.requests;
}

// SigV4 as the reader signs (remote::sign_sigv4). The Content-Type is set here so that it is among
// the signed headers (libcurl would add its own form type to a POST otherwise).
void RemoteWriter::State::set_headers(Request& r, CURL* e) {
  curl_slist_free_all(r.headers);
  r.headers = nullptr;
  if (!r.content_type.empty()) {
    r.headers = curl_slist_append(r.headers, ("Content-Type: " + r.content_type).c_str());
  }
  if (target.sign) r.headers = remote::sign_sigv4(e, *target.sign, r.headers);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r.headers);
}

void RemoteWriter::State::retry(Request& r, const std::string& cause) {
  if (r.attempts >= opt.max_attempts) {
    fail(
        r, cause.starts_with("timeout") ? ETIMEDOUT : EIO,
        fmt::format("{} gave up after {} tries, the last failed with {}", r.op, r.attempts, cause));
  }
  ++delta.retries[cause];
  if (remote::is_throttle_cause(cause)) {
    window = std::max(1U, window / 2);
    delta.lowest_in_flight =
        delta.lowest_in_flight == 0 ? window : std::min(delta.lowest_in_flight, window);
  }
  curl_off_t retry_after = 0;
  if (r.easy == nullptr ||
      curl_easy_getinfo(r.easy, CURLINFO_RETRY_AFTER, &retry_after) != CURLE_OK)
    retry_after = 0;
  r.not_before =
      Clock::now() + std::chrono::milliseconds(remote::backoff_ms(
                         r.attempts, opt.backoff_base_ms, opt.backoff_cap_ms, retry_after, rng));
  waiting.push_back(&r);
}

// One try ended: the request is done, waits for another try, or fails the write.
void RemoteWriter::State::finish(Request& r, CURLcode rc) {
  long connects = 0;
  curl_easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_getinfo(r.easy, CURLINFO_NUM_CONNECTS, &connects);
  delta.connections += static_cast<std::uint64_t>(connects);
  delta.latency_us.record(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - r.sent).count()));
  if (rc != CURLE_OK) {
    const auto cause = remote::retry_cause_of_curl(rc);
    if (!cause) fail(r, EIO, fmt::format("{}: {}: {}", r.op, curl_easy_strerror(rc), r.errbuf));
    return retry(r, *cause);
  }
  check_answer(r);
}

// A complete answer: 2xx with what the request must return (an ETag for a part, an UploadId,
// no error document in Complete's 200), a retryable failure, or an Error.
void RemoteWriter::State::check_answer(Request& r) {
  const remote::S3Error s3 = remote::parse_s3_error(r.response);
  const bool ok = r.status >= 200 && r.status < 300;
  if (ok && r.response.find("<Error>") != std::string::npos) {
    // CompleteMultipartUpload may answer 200 and fail later in the body: retry what S3 says to.
    if (const auto cause = remote::retry_cause_of_status(s3.code == "SlowDown" ? 503 : 500, s3);
        cause && (s3.code == "InternalError" || s3.code == "SlowDown")) {
      return retry(r, *cause);
    }
    fail(r, EIO,
         fmt::format("{}: HTTP {} with an error: {}: {}", r.op, r.status, s3.code, s3.message));
  }
  if (ok) {
    if (r.part != 0 && r.etag.empty())
      fail(r, EPROTO, fmt::format("{} {}: the answer has no ETag", r.op, r.part));
    r.done = true;
    if (r.part != 0) {
      window = std::min(opt.in_flight, window + 1);
      uploaded += r.body_size;
      delta.bytes += r.body_size;
    }
    return;
  }
  if (const auto cause = remote::retry_cause_of_status(r.status, s3)) return retry(r, *cause);
  std::string what = fmt::format("{}: HTTP {}", r.op, r.status);
  if (!s3.code.empty()) what += fmt::format(" {}: {}", s3.code, s3.message);
  if (r.part != 0) what += fmt::format(" (part {})", r.part);
  fail(r, remote::errno_of_status(r.status), what);
}

// Starts the waiting requests whose backoff is over (within the window), runs the transfers,
// and handles those that ended. `block`: waits up to 100 ms for something to happen.
void RemoteWriter::State::pump(bool block) {
  if (cancel && cancel()) {
    throw_os_error(ECANCELED, {.op = "PUT", .path = url}, "the upload was cancelled (signal)");
  }
  const auto now = Clock::now();
  auto next_try = now + std::chrono::milliseconds(100);
  for (std::size_t i = 0; i < waiting.size() && active < window;) {
    Request& r = *waiting[i];
    if (r.not_before > now) {
      next_try = std::min(next_try, r.not_before);
      ++i;
      continue;
    }
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
    start(r);
    curl_multi_add_handle(multi, r.easy);
    ++active;
  }
  int running = 0;
  curl_multi_perform(multi, &running);
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    Request* r = nullptr;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &r);
    const CURLcode rc = m->data.result;
    curl_multi_remove_handle(multi, m->easy_handle);
    --active;
    finish(*r, rc);  // may throw: r->easy is still set, stop_all() returns it
    release(*r);
  }
  if (block && (active > 0 || !waiting.empty())) {
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_try - Clock::now());
    curl_multi_poll(multi, nullptr, 0,
                    static_cast<int>(std::clamp<long long>(wait.count(), 0, 100)), nullptr);
  }
}

void RemoteWriter::State::release(Request& r) {
  if (r.easy != nullptr) idle.push_back(r.easy);
  r.easy = nullptr;
  curl_slist_free_all(r.headers);
  r.headers = nullptr;
  if (r.done && r.part != 0) free_buffers.push_back(r.buffer);
}

// Every transfer out of the multi handle, nothing waiting: the state after a failure.
void RemoteWriter::State::stop_all() noexcept {
  for (auto& p : parts) {
    if (p->easy != nullptr) {
      curl_multi_remove_handle(multi, p->easy);
      release(*p);
    }
  }
  waiting.clear();
  active = 0;
}

// A request that runs alone (Create, Complete, a PUT, Abort): to its end, retries included.
void RemoteWriter::State::run_alone(Request& r) {
  struct Release {
    State& s;
    Request& r;
    ~Release() {
      // After a failure (the only way here with r.easy set) stop_all() resets the count.
      if (r.easy != nullptr) curl_multi_remove_handle(s.multi, r.easy);
      s.release(r);
    }
  } guard{*this, r};
  waiting.push_back(&r);
  while (!r.done) pump(true);
}

void RemoteWriter::State::next_buffer() {
  while (free_buffers.empty() && buffers.size() > opt.in_flight) pump(true);
  if (free_buffers.empty()) {
    buffers.push_back(std::make_unique<char[]>(static_cast<std::size_t>(part_size)));
    free_buffers.push_back(buffers.size() - 1);
  }
  current = free_buffers.back();
  free_buffers.pop_back();
  filled = 0;
  have_current = true;
}

void RemoteWriter::State::create_upload() {
  Request r = make_request("CreateMultipartUpload", "POST", "uploads=", "application/octet-stream");
  run_alone(r);
  upload_id = upload_xml_text(r.response, "UploadId");
  if (upload_id.empty()) fail(r, EPROTO, "CreateMultipartUpload: the answer has no UploadId");
}

void RemoteWriter::State::send_part() {
  if (upload_id.empty()) create_upload();
  const unsigned number = static_cast<unsigned>(parts.size()) + 1;
  if (number > s3_max_parts) {
    throw_usage_error(
        {.op = "PUT", .path = url},
        fmt::format("more than {} parts of {}: set a larger part size (SLUICE_REMOTE_PART_SIZE)",
                    s3_max_parts, format_size(part_size)));
  }
  auto r = std::make_unique<Request>();
  r->op = "UploadPart";
  r->method = "PUT";
  r->query = fmt::format("partNumber={}&uploadId={}", number, upload_encode_value(upload_id));
  r->body = buffers[current].get();
  r->body_size = filled;
  r->offset = appended - filled;
  r->part = number;
  r->buffer = current;
  waiting.push_back(r.get());
  parts.push_back(std::move(r));
  have_current = false;
  pump(false);
}

void RemoteWriter::State::complete() {
  while (std::any_of(parts.begin(), parts.end(), [](const auto& p) { return !p->done; }))
    pump(true);
  std::string xml = "<CompleteMultipartUpload>";
  for (const auto& p : parts)
    xml += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", p->part,
                       upload_xml_escape(p->etag));
  xml += "</CompleteMultipartUpload>";
  Request r = make_request("CompleteMultipartUpload", "POST",
                           "uploadId=" + upload_encode_value(upload_id), "application/xml");
  r.body = xml.data();
  r.body_size = xml.size();
  run_alone(r);
}

void RemoteWriter::State::put_whole() {
  Request r = make_request("PutObject", "PUT", "", "application/octet-stream");
  r.body = have_current ? buffers[current].get() : "";
  r.body_size = have_current ? filled : 0;
  run_alone(r);
  uploaded = r.body_size;
  delta.bytes += r.body_size;
  single_put = true;
}

// Best effort, bounded: a few tries, and what went wrong is kept, never thrown (abort runs on
// the way out of a failure, whose Error is the one the caller must see).
void RemoteWriter::State::abort_upload() noexcept {
  stop_all();
  if (upload_id.empty() || committed) return;
  try {
    cancel = nullptr;  // a cancelled write still aborts its upload
    Request r = make_request("AbortMultipartUpload", "DELETE",
                             "uploadId=" + upload_encode_value(upload_id));
    run_alone(r);
    abort_error.clear();
  } catch (const std::exception& e) {
    abort_error = e.what();
  }
  upload_id.clear();
}

void RemoteWriter::State::publish() {
  stats.merge(delta);
  remote::publish_stats(endpoint, delta);
  delta = RemoteStats{};
}

RemoteWriter::RemoteWriter(std::string url, RemoteOptions options,
                           std::optional<std::uint64_t> size_hint)
    : state_(std::make_unique<State>()) {
  options.validate();
  if (!url.starts_with("s3://")) {
    throw_usage_error({.op = "open", .path = url},
                      "only s3:// URLs are written (a multipart upload makes the write atomic); "
                      "plain http:// and https:// are read-only");
  }
  State& s = *state_;
  s.target = remote::resolve_remote(url);
  init_curl_for_writes();
  s.url = std::move(url);
  s.endpoint = s.target.endpoint;
  s.opt = options;
  s.window = options.in_flight;
  s.part_size = std::max(options.part_size, s3_min_part_size);
  if (size_hint) {
    const std::uint64_t need = (*size_hint + s3_max_parts - 1) / s3_max_parts;
    s.part_size = std::max(s.part_size, (need + MiB - 1) / MiB * MiB);
  }
  s.part_size = std::min(s.part_size, s3_max_part_size);
  s.multi = curl_multi_init();
  if (s.multi == nullptr) throw_os_error(ENOMEM, {.op = "open", .path = s.url}, "curl_multi_init");
  curl_multi_setopt(s.multi, CURLMOPT_MAXCONNECTS, static_cast<long>(options.in_flight));
}

RemoteWriter::~RemoteWriter() {
  if (state_) abort();
}
RemoteWriter::RemoteWriter(RemoteWriter&&) noexcept = default;
RemoteWriter& RemoteWriter::operator=(RemoteWriter&& other) noexcept {
  if (this != &other) {
    if (state_) abort();
    state_ = std::move(other.state_);
  }
  return *this;
}

void RemoteWriter::append(const void* data, std::uint64_t size) {
  State& s = *state_;
  if (s.committed || s.failed) {
    throw_usage_error({.op = "PUT", .path = s.url}, "append() after commit() or a failure");
  }
  try {
    const auto* in = static_cast<const char*>(data);
    while (size > 0) {
      // A full part goes only once a byte beyond it comes (or at commit): the last part may be
      // a full one, and an object of exactly one part is one PUT.
      if (s.have_current && s.filled == s.part_size) s.send_part();
      if (!s.have_current) s.next_buffer();
      const std::uint64_t take = std::min(size, s.part_size - s.filled);
      std::memcpy(s.buffers[s.current].get() + s.filled, in, static_cast<std::size_t>(take));
      s.filled += take;
      s.appended += take;
      in += take;
      size -= take;
    }
    if (s.have_current && s.filled == s.part_size && !s.parts.empty()) s.send_part();
    s.pump(false);
  } catch (...) {
    s.failed = true;
    abort();
    throw;
  }
}

bool RemoteWriter::drive(unsigned wait_ms) {
  State& s = *state_;
  if (s.committed || s.failed) return false;
  const auto until = Clock::now() + std::chrono::milliseconds(wait_ms);
  try {
    do {
      s.pump(true);
    } while ((s.active > 0 || !s.waiting.empty()) && Clock::now() < until);
  } catch (...) {
    s.failed = true;
    abort();
    throw;
  }
  return s.active > 0 || !s.waiting.empty();
}

TransferResult RemoteWriter::commit() {
  State& s = *state_;
  if (s.committed || s.failed)
    throw_usage_error({.op = "PUT", .path = s.url}, "commit() twice or after a failure");
  const auto t0 = Clock::now();
  try {
    if (s.parts.empty() && s.upload_id.empty()) {
      s.put_whole();
    } else {
      if (s.have_current && s.filled > 0) s.send_part();
      s.complete();
    }
    s.committed = true;
  } catch (...) {
    s.failed = true;
    abort();
    throw;
  }
  s.publish();
  TransferResult r;
  r.bytes = s.appended;
  r.path = Path::host;
  r.ios = s.stats.requests;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.reason = reason();
  return r;
}

void RemoteWriter::abort() noexcept {
  State& s = *state_;
  s.abort_upload();
  s.publish();
}

void RemoteWriter::set_cancel(std::function<bool()> stop) {
  state_->cancel = std::move(stop);
}
std::uint64_t RemoteWriter::bytes_appended() const noexcept {
  return state_->appended;
}
std::uint64_t RemoteWriter::bytes_uploaded() const noexcept {
  return state_->uploaded;
}
std::uint64_t RemoteWriter::part_size() const noexcept {
  return state_->part_size;
}
bool RemoteWriter::committed() const noexcept {
  return state_->committed;
}
const std::string& RemoteWriter::abort_error() const noexcept {
  return state_->abort_error;
}
const std::string& RemoteWriter::url() const noexcept {
  return state_->url;
}
const std::string& RemoteWriter::endpoint() const noexcept {
  return state_->endpoint;
}
const RemoteStats& RemoteWriter::stats() const noexcept {
  return state_->stats;
}

std::string RemoteWriter::reason() const {
  const State& s = *state_;
  const RemoteStats& d = s.stats;
  std::string out =
      s.single_put || s.parts.empty()
          ? fmt::format("remote: one PUT of {}", format_size(s.appended))
          : fmt::format("remote: multipart upload of {} part{} of {}, {} in flight", s.parts.size(),
                        s.parts.size() == 1 ? "" : "s", format_size(s.part_size),
                        std::min<std::uint64_t>(s.opt.in_flight, s.parts.size()));
  out += d.connections == 0 ? std::string(" over warm connections")
                            : fmt::format(" over {} new connection{}", d.connections,
                                          d.connections == 1 ? "" : "s");
  for (const auto& [cause, n] : d.retries) out += fmt::format(", {} retried after {}", n, cause);
  if (d.lowest_in_flight > 0)
    out += fmt::format(", in flight cut to {} while throttled", d.lowest_in_flight);
  return out;
}

void remote_delete(const std::string& url, const RemoteOptions& options) {
  RemoteWriter w(url, options);
  RemoteWriter::State& s = *w.state_;
  Request r = make_request("DeleteObject", "DELETE");
  s.run_alone(r);
  s.committed = true;  // nothing to abort
  s.publish();
}

std::string remote_join(const std::string& prefix, const std::string& name) {
  std::string p = prefix;
  while (p.ends_with('/')) p.pop_back();
  return p + "/" + name;
}

}  // namespace sluice
