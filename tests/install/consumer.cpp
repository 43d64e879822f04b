// A program written against the installed headers only, as README.md shows it.
#include <sluice/device.hpp>
#include <sluice/transfer.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto file = sluice::File::open(argv[1], sluice::OpenMode::read);
  auto gpu = sluice::open_device("sim");
  sluice::DeviceBuffer buf(gpu, file.size());
  sluice::TransferOptions opts;
  opts.device = gpu;
  auto r = sluice::read(file, buf.data(), file.size(), 0, opts);
  std::printf("%llu bytes via %s\n", static_cast<unsigned long long>(r.bytes),
              std::string(sluice::to_string(r.path)).c_str());
  return r.bytes == file.size() ? 0 : 1;
}
