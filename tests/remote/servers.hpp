// Servers the remote tests start on 127.0.0.1 and stop after: nginx (Debian nginx-light) serving
// a folder, and the scripted fault server (fault_server.py). Each is a child process; its
// destructor ends it, and the fault server also ends when this process dies (its stdin closes).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace sluice::test {

/// A child process, ended (SIGTERM, then waited for) on destruction.
class Child {
 public:
  Child() = default;
  /// Starts argv; with `pipe_stdio`, its stdin and stdout are pipes (stdin_fd(), stdout_fd()).
  Child(const std::vector<std::string>& argv, bool pipe_stdio);
  ~Child();
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] int stdout_fd() const noexcept { return out_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
};

/// nginx serving `root` on a free port of 127.0.0.1, with its configuration, pid, logs and
/// temporary files in `scratch`; /moved/X redirects (302) to /X. ok() is false (and why() says
/// why) when nginx is missing or did not come up. With `tls_dir` (holding cert.pem and key.pem,
/// as make_test_certificate() writes them) it serves https only.
class Nginx {
 public:
  Nginx(const std::string& root, const std::string& scratch, const std::string& tls_dir = "");
  [[nodiscard]] bool ok() const noexcept { return port_ > 0; }
  [[nodiscard]] const std::string& why() const noexcept { return why_; }
  [[nodiscard]] std::string url(const std::string& path) const;

 private:
  Child child_;
  int port_ = 0;
  std::string why_;
  bool tls_ = false;
};

/// A self-signed certificate for localhost and 127.0.0.1 (openssl), cert.pem and key.pem in
/// `dir`; false when openssl is missing or failed.
[[nodiscard]] bool make_test_certificate(const std::string& dir);

/// fault_server.py serving `file`: url("reset") is the object behind that fault.
class FaultServer {
 public:
  explicit FaultServer(const std::string& file);
  [[nodiscard]] bool ok() const noexcept { return port_ > 0; }
  [[nodiscard]] std::string url(const std::string& fault) const;
  /// Requests the server saw for `fault` so far.
  [[nodiscard]] int count(const std::string& fault) const;

 private:
  Child child_;
  int port_ = 0;
};

/// The S3 emulator (s3_server.js over @20minutes/s3rver, from the build tree's npm ci) with the
/// bucket sluice-test and the keys S3RVER/S3RVER; put() uploads with boto3 (s3_put.py). ok() is
/// false (and why() says why) when node, the emulator or boto3 is missing.
class S3Server {
 public:
  explicit S3Server(const std::string& scratch);
  [[nodiscard]] bool ok() const noexcept { return port_ > 0; }
  [[nodiscard]] const std::string& why() const noexcept { return why_; }
  [[nodiscard]] std::string endpoint() const;
  /// Uploads `file` as s3://sluice-test/KEY; false when the upload failed.
  [[nodiscard]] bool put(const std::string& key, const std::string& file) const;
  /// A presigned GET URL of s3://sluice-test/KEY valid for `seconds` (boto3); empty on failure.
  [[nodiscard]] std::string presign(const std::string& key, int seconds) const;

 private:
  Child child_;
  int port_ = 0;
  std::string why_;
};

/// Whether something accepts TCP connections on 127.0.0.1:port.
[[nodiscard]] bool port_open(int port);
/// A port of 127.0.0.1 that was free a moment ago.
[[nodiscard]] int free_port();

}  // namespace sluice::test
