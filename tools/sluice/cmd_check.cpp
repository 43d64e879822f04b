// sluice check: what this machine offers (GPUs, cuFile, nvidia-fs, P2PDMA, IOMMU) and, for each
// PATH, its filesystem, disks, O_DIRECT support and the path Sluice would take; for a URL, its
// endpoint, region, addressing, credentials' source, TLS and one request's answer. Exit 0 when
// every PATH could be inspected (no GPU or no libcufile is a finding, not a failure), 1 when one
// could not or a URL's request failed (it is still reported), 2 for bad arguments.
#include <cstdio>
#include <memory>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/tools/check.hpp"

namespace sluice::cli {
namespace {

struct CheckArgs {
  std::vector<std::string> paths;
  bool json = false;
};

int run_check(const CheckArgs& a) {
  const check::Report r = check::inspect(a.paths);
  const std::string out = a.json ? check::to_json(r) : check::to_text(r);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (a.json) std::fputc('\n', stdout);
  int rc = 0;
  for (const auto& p : r.paths) {
    if (!p.error.empty()) {
      std::fprintf(stderr, "sluice check: %s\n", p.error.c_str());
      rc = exit_failure;
    }
  }
  for (const auto& x : r.remotes) {
    if (!x.error.empty()) {
      std::fprintf(stderr, "sluice check: %s: %s\n", x.url.c_str(), x.error.c_str());
      rc = exit_failure;
    }
  }
  return rc;
}

}  // namespace

Runner add_check_command(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  auto* c = app.add_subcommand(
      "check",
      "Show what this machine offers sluice: GPUs, cuFile, nvidia-fs, IOMMU, "
      "and for each PATH its filesystem, disks, O_DIRECT and the path sluice takes");
  c->add_option("PATH", a->paths,
                 "files, folders or block devices to inspect, or URLs (s3://, https://): where "
                 "their requests go, how they are signed, and one GET of the first byte");
  c->add_flag("--json", a->json, "print one JSON object (gpus, cufile, platform, paths, config)");
  return [a] { return run_check(*a); };
}

}  // namespace sluice::cli
