// formats/parquet/plugin_loader.cc — see plugin_loader.h.
#include "formats/parquet/plugin_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

namespace stoker {
namespace {

constexpr std::string_view kPluginPrefix = "libstoker_parquet_arrow";

std::string Getenv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// All-digit text as a number; -1 otherwise.
long Digits(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  long n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

// Where plugins are looked for, in order (see the header).
std::vector<std::filesystem::path> PluginDirs() {
  const std::string forced = Getenv("STOKER_PARQUET_PLUGIN_DIR");
  if (!forced.empty()) return {forced};
  std::vector<std::filesystem::path> dirs;
  auto add = [&dirs](const std::filesystem::path& file) {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::weakly_canonical(file, ec).parent_path();
    for (const auto& d : {dir, dir.parent_path()}) {
      if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
    }
  };
  Dl_info info{};  // the shared object holding this code: the Python module, or the executable
  if (dladdr(reinterpret_cast<void*>(&ParquetPluginMajors), &info) && info.dli_fname && info.dli_fname[0] == '/') {
    add(info.dli_fname);
  }
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) add(std::string(exe, static_cast<size_t>(n)));
  return dirs;
}

// major -> plugin file; the first directory holding a major wins.
std::map<int, std::string> FindPlugins() {
  std::map<int, std::string> plugins;
  for (const auto& dir : PluginDirs()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with(kPluginPrefix) || !name.ends_with(".so")) continue;
      const long major = Digits(std::string_view(name).substr(kPluginPrefix.size(),
                                                              name.size() - kPluginPrefix.size() - 3));
      if (major > 0) plugins.emplace(static_cast<int>(major), entry.path().string());
    }
  }
  return plugins;
}

// "pyarrow 25 or 26 (pip install 'pyarrow>=25,<27')": the versions that work,
// and a pip requirement for the newest run of consecutive majors.
std::string WorkingVersions(const std::map<int, std::string>& plugins) {
  std::string list;
  size_t k = 0;
  for (const auto& [major, path] : plugins) {
    if (k > 0) list += k + 1 == plugins.size() ? " or " : ", ";
    list += std::to_string(major);
    ++k;
  }
  int hi = plugins.rbegin()->first, lo = hi;
  while (plugins.count(lo - 1)) --lo;
  return "pyarrow " + list + " (pip install 'pyarrow>=" + std::to_string(lo) + ",<" + std::to_string(hi + 1) + "')";
}

Result<const ParquetEngine*> EngineOf(void* plugin, const std::string& path) {
  using Factory = const ParquetEngine* (*)(int);
  auto factory = reinterpret_cast<Factory>(dlsym(plugin, "stoker_parquet_engine"));
  if (!factory) return FailedPrecondition(path + " is not a stoker Parquet plugin (no stoker_parquet_engine)");
  const ParquetEngine* engine = factory(kParquetEngineAbi);
  if (!engine) return FailedPrecondition(path + " belongs to another stoker build (engine ABI mismatch); reinstall stoker");
  return engine;
}

std::string DlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// The plugin for the pyarrow whose libraries are in `arrow_dir`.
Result<const ParquetEngine*> LoadFor(const std::string& arrow_dir, const std::map<int, std::string>& plugins) {
  long soversion = -1;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(arrow_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("libarrow.so.")) soversion = std::max(soversion, Digits(name.substr(12)));
  }
  if (soversion < 0) {
    return FailedPrecondition("pyarrow's library directory " + arrow_dir +
                              " (STOKER_PYARROW_DIR) holds no libarrow.so.<version>; Parquet sources need " +
                              WorkingVersions(plugins));
  }
  const int major = static_cast<int>(soversion / 100);
  auto plugin = plugins.find(major);
  if (plugin == plugins.end()) {
    return FailedPrecondition("reading Parquet needs " + WorkingVersions(plugins) + "; the pyarrow installed is " +
                              std::to_string(major) + " (" + arrow_dir + ")");
  }
  // The same files `import pyarrow` loaded (then these calls only add a
  // reference), so the plugin's libarrow.so.<N> is that one.
  for (const char* lib : {"libarrow.so.", "libparquet.so."}) {
    const std::string path = arrow_dir + "/" + lib + std::to_string(soversion);
    if (!dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      return FailedPrecondition("cannot load pyarrow's " + path + ": " + DlError());
    }
  }
  void* handle = dlopen(plugin->second.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return FailedPrecondition("cannot load the Parquet plugin " + plugin->second + ": " + DlError());
  return EngineOf(handle, plugin->second);
}

// No pyarrow named: the newest plugin whose pyarrow its RPATH finds.
Result<const ParquetEngine*> LoadAny(const std::map<int, std::string>& plugins) {
  std::string errors;
  for (auto it = plugins.rbegin(); it != plugins.rend(); ++it) {
    if (void* handle = dlopen(it->second.c_str(), RTLD_NOW | RTLD_LOCAL)) return EngineOf(handle, it->second);
    errors += "; " + DlError();
  }
  return FailedPrecondition("Parquet sources need " + WorkingVersions(plugins) +
                            ", or pip install 'stoker[parquet]'; none was found beside stoker" + errors);
}

}  // namespace

std::vector<int> ParquetPluginMajors() {
  std::vector<int> majors;
  for (const auto& [major, path] : FindPlugins()) majors.push_back(major);
  return majors;
}

Result<const ParquetEngine*> LoadParquetEngine() {
  static std::mutex mu;
  static const ParquetEngine* loaded = nullptr;  // plugins stay loaded for the process
  std::lock_guard lock(mu);
  if (loaded) return loaded;
  const std::map<int, std::string> plugins = FindPlugins();
  if (plugins.empty()) {
    return FailedPrecondition("this stoker was built without Parquet support (no pyarrow where it was built, and "
                              "no libstoker_parquet_arrow<major>.so beside it); install a stoker wheel, or "
                              "pip install pyarrow and rebuild stoker");
  }
  const std::string arrow_dir = Getenv("STOKER_PYARROW_DIR");
  Result<const ParquetEngine*> engine = arrow_dir.empty() ? LoadAny(plugins) : LoadFor(arrow_dir, plugins);
  if (engine.ok()) loaded = *engine;
  return engine;
}

}  // namespace stoker
