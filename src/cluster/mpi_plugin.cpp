// make_mpi_communicator() of a libsluice_tools built with MPI: the communicator is in the plugin
// libsluice_mpi.so beside this library (sluice/internal/mpi_plugin.hpp says why), loaded on
// first use and never unloaded (MPI cannot be initialised twice in a process anyway).
#include <dlfcn.h>

#include <cerrno>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/internal/mpi_plugin.hpp"
#include "sluice/tools/mpi.hpp"

namespace sluice {
namespace {

// The folder of the object this code is in (libsluice_tools.so, or the program a static copy is
// linked into), where the build and the install both put the plugin.
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&make_mpi_communicator), &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  const std::string self = info.dli_fname;
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? std::string{} : self.substr(0, slash);
}

MpiPluginEntry load_plugin() {
  const std::string folder = own_folder();
  const std::string path = folder.empty() ? mpi_plugin_file : folder + "/" + mpi_plugin_file;
  // RTLD_GLOBAL: Open MPI's own components (dlopen'd by libmpi) expect its symbols global.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw_os_error(ELIBACC, {.op = "dlopen", .path = path},
                   fmt::format("cannot load Sluice's MPI plugin: {} (is the MPI library this sluice "
                               "was built with installed? Debian: apt-get install openmpi-bin)",
                               why != nullptr ? why : "unknown reason"));
  }
  void* entry = dlsym(handle, mpi_plugin_entry);
  if (entry == nullptr) {
    throw_os_error(ELIBBAD, {.op = "dlsym", .path = path},
                   fmt::format("{} has no {}: a plugin of another Sluice build?", path,
                               mpi_plugin_entry));
  }
  return reinterpret_cast<MpiPluginEntry>(entry);
}

}  // namespace

bool have_mpi() noexcept { return true; }

std::unique_ptr<Communicator> make_mpi_communicator() {
  static std::once_flag once;
  static MpiPluginEntry entry = nullptr;
  std::call_once(once, [] { entry = load_plugin(); });  // a throw leaves it to the next call
  return std::unique_ptr<Communicator>(entry());
}

}  // namespace sluice
