// The remote tests' servers (servers.hpp).
#include "servers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "support/test_util.hpp"

namespace sluice::test {

Child::Child(const std::vector<std::string>& argv, bool pipe_stdio) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (pipe_stdio && (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    if (pipe_stdio) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  if (pipe_stdio) {
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1];
    out_ = out[0];
  }
}

Child::Child(Child&& o) noexcept : pid_(o.pid_), in_(o.in_), out_(o.out_) {
  o.pid_ = -1;
  o.in_ = o.out_ = -1;
}

Child& Child::operator=(Child&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(in_, o.in_);
  std::swap(out_, o.out_);
  return *this;
}

Child::~Child() {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

bool port_open(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

Nginx::Nginx(const std::string& root, const std::string& scratch, const std::string& tls_dir)
    : tls_(!tls_dir.empty()) {
  if (!have_program("nginx")) {
    why_ = "nginx (Debian nginx-light)";
    return;
  }
  const int port = free_port();
  // master_process off: one process, as this user (root included), so it reads the test's
  // mkdtemp folders; every path it writes is under `scratch`.
  std::ofstream(scratch + "/nginx.conf") << fmt::format(R"(daemon off;
master_process off;
pid {0}/nginx.pid;
error_log {0}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {0}; proxy_temp_path {0}; fastcgi_temp_path {0};
  uwsgi_temp_path {0}; scgi_temp_path {0};
  server {{
    listen 127.0.0.1:{1}{3};
    root {2};{4}
    location /moved/ {{ rewrite ^/moved/(.*)$ /$1 redirect; }}
  }}
}}
)",
                                                        scratch, port, root, tls_ ? " ssl" : "",
                                                        tls_ ? fmt::format(R"(
    ssl_certificate {0}/cert.pem;
    ssl_certificate_key {0}/key.pem;)",
                                                                           tls_dir)
                                                             : std::string());
  std::string nginx = "nginx";
  for (const char* p : {"/usr/sbin/nginx", "/sbin/nginx"}) {
    if (::access(p, X_OK) == 0) nginx = p;
  }
  child_ = Child(
      {nginx, "-c", scratch + "/nginx.conf", "-p", scratch, "-e", scratch + "/error.log"}, false);
  for (int i = 0; i < 200 && !port_open(port); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  if (port_open(port)) {
    port_ = port;
  } else {
    why_ = "nginx did not start (see " + scratch + "/error.log)";
  }
}

std::string Nginx::url(const std::string& path) const {
  return fmt::format("{}://127.0.0.1:{}/{}", tls_ ? "https" : "http", port_, path);
}

bool make_test_certificate(const std::string& dir) {
  if (!have_program("openssl")) return false;
  const std::string cmd = fmt::format(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout '{0}/key.pem' "
      "-out '{0}/cert.pem' >'{0}/openssl.log' 2>&1",
      dir);
  return std::system(cmd.c_str()) == 0;  // NOLINT(cert-env33-c): a fixed command, test only
}

namespace {

// The port a server prints as its first line (0 when it printed none and exited).
int read_port(int fd) {
  char buf[32] = {};
  std::size_t n = 0;
  while (n + 1 < sizeof buf) {
    const ssize_t r = ::read(fd, buf + n, 1);
    if (r <= 0 || buf[n] == '\n') break;
    ++n;
  }
  return std::atoi(buf);
}

}  // namespace

FaultServer::FaultServer(const std::string& file)
    : child_({"/usr/bin/python3", SLUICE_FAULT_SERVER, file}, true),
      port_(read_port(child_.stdout_fd())) {}

S3Server::S3Server(const std::string& scratch) {
  const std::string modules = SLUICE_S3RVER_MODULES;
  if (!have_program("node")) {
    why_ = "node (Debian nodejs)";
  } else if (::access((modules + "/@20minutes/s3rver/package.json").c_str(), R_OK) != 0) {
    why_ = "@20minutes/s3rver (npm ci into " + modules + " failed at build time)";
  } else if (shell("/usr/bin/python3 -c 'import boto3' 2>/dev/null") != 0) {
    why_ = "boto3 (Debian python3-boto3)";
  } else {
    child_ = Child({"node", SLUICE_S3_SERVER, modules, scratch}, true);
    port_ = read_port(child_.stdout_fd());
    if (port_ <= 0) why_ = "the S3 emulator did not start";
  }
}

std::string S3Server::endpoint() const {
  return fmt::format("http://127.0.0.1:{}", port_);
}

bool S3Server::put(const std::string& key, const std::string& file) const {
  return shell(fmt::format("/usr/bin/python3 {} {} sluice-test {} {}", SLUICE_S3_PUT, endpoint(),
                           shell_quote(key), shell_quote(file))) == 0;
}

std::string FaultServer::url(const std::string& fault) const {
  return fmt::format("http://127.0.0.1:{}/{}/obj", port_, fault);
}

int FaultServer::count(const std::string& fault) const {
  // Asked with Python's urllib, not with the reader under test.
  const std::string cmd = fmt::format(
      "/usr/bin/python3 -c \"import urllib.request as u; "
      "print(u.urlopen('http://127.0.0.1:{}/count/{}').read().decode())\"",
      port_, fault);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[32] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  ::pclose(p);
  return got ? std::atoi(buf) : -1;
}

std::string S3Server::presign(const std::string& key, int seconds) const {
  const std::string cmd = fmt::format("/usr/bin/python3 {} {} sluice-test {} --presign {}",
                                      SLUICE_S3_PUT, endpoint(), shell_quote(key), seconds);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string url;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) url += buf;
  ::pclose(p);
  while (!url.empty() && (url.back() == '\n' || url.back() == '\r')) url.pop_back();
  return url;
}

}  // namespace sluice::test
