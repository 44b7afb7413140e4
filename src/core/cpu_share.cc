// core/cpu_share.cc — the CPUs this process may use; see cpu_share.h.
#include "core/cpu_share.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace stoker {

namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

std::optional<long long> ParseInt(const std::string& text) {
  const std::string t = Trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out.push_back(static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// One cgroup hierarchy as this process sees it: where it is mounted, which
// of its paths the mount shows as "/", and the process's cgroup in it.
struct Hierarchy {
  std::string mount_point;  // under the inputs' root: "/sys/fs/cgroup"
  std::string mount_root;   // the hierarchy path the mount shows at its top: "/" or a container's cgroup
  std::string cgroup;       // the process's path in the hierarchy, from /proc/self/cgroup
  bool v1 = false;          // a v1 hierarchy (cpu.cfs_* files), else v2 (cpu.max)
};

// The directories from the process's cgroup up to the mount point, innermost first.
std::vector<std::string> CgroupDirs(const std::string& root, const Hierarchy& h) {
  std::string rel;
  const std::string& r = h.mount_root;
  if (r == "/" || h.cgroup == r) {
    rel = r == "/" ? h.cgroup : "";
  } else if (h.cgroup.compare(0, r.size() + 1, r + "/") == 0) {
    rel = h.cgroup.substr(r.size());
  }  // else the cgroup lies outside what the mount shows: only its top is seen
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  std::string base = root;
  while (!base.empty() && base.back() == '/') base.pop_back();
  base += h.mount_point;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::vector<std::string> dirs;
  while (true) {
    dirs.push_back(base + rel);
    if (rel.empty()) break;
    rel.erase(rel.rfind('/'));
  }
  return dirs;
}

struct MountEntry {
  std::string root, mount_point, fstype;
  std::vector<std::string> super_options;
};

std::vector<MountEntry> ReadMountinfo(const std::string& root) {
  std::vector<MountEntry> out;
  const std::optional<std::string> text = ReadSmallFile(root + "/proc/self/mountinfo");
  if (!text) return out;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::vector<std::string> fields;
    std::string w;
    while (f >> w) fields.push_back(w);
    const auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    MountEntry m;
    m.root = Unescape(fields[3]);
    m.mount_point = Unescape(fields[4]);
    m.fstype = *(dash + 1);
    m.super_options = Split(*(dash + 3), ',');
    out.push_back(std::move(m));
  }
  return out;
}

bool Has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The hierarchy holding `controller` ("cpu", "cpuset"): its v1 line when one
// names it, else the v2 line. nullopt: the process is in no cgroup we can see.
std::optional<Hierarchy> FindHierarchy(const std::string& proc_cgroup,
                                       const std::vector<MountEntry>& mounts, const std::string& controller,
                                       const std::string& v1_default) {
  std::optional<std::string> v1_path, v2_path;
  std::istringstream lines(proc_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-ID:controller-list:cgroup-path"; the path may hold ':'.
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const std::string path = Trim(line.substr(b + 1));
    if (id == "0" && controllers.empty()) {
      v2_path = path;
    } else if (Has(Split(controllers, ','), controller)) {
      v1_path = path;
    }
  }
  Hierarchy h;
  if (v1_path) {
    h.cgroup = *v1_path;
    h.v1 = true;
    h.mount_point = v1_default;
    h.mount_root = "/";
    for (const MountEntry& m : mounts)
      if (m.fstype == "cgroup" && Has(m.super_options, controller)) {
        h.mount_point = m.mount_point;
        h.mount_root = m.root;
        break;
      }
  } else if (v2_path) {
    h.cgroup = *v2_path;
    h.mount_point = "/sys/fs/cgroup";
    h.mount_root = "/";
    for (const MountEntry& m : mounts)
      if (m.fstype == "cgroup2") {
        h.mount_point = m.mount_point;
        h.mount_root = m.root;
        break;
      }
  } else {
    return std::nullopt;
  }
  return h;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::optional<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  const std::string t = Trim(text);
  if (t.empty()) return cpus;
  for (const std::string& part : Split(t, ',')) {
    const size_t dash = part.find('-');
    const std::optional<long long> lo = ParseInt(part.substr(0, dash));
    const std::optional<long long> hi = dash == std::string::npos ? lo : ParseInt(part.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > 1 << 20) return std::nullopt;
    for (long long c = *lo; c <= *hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

std::string CpuShare::ToString() const {
  std::string s = std::to_string(cores) + (cores == 1 ? " core: " : " cores: ") + "affinity " +
                  std::to_string(affinity);
  if (offered > 0 && offered != affinity) s += " of " + std::to_string(offered);
  s += quota > 0 ? ", quota " + Num(quota) : ", no quota";
  s += ", " + std::to_string(local_ranks) + (local_ranks == 1 ? " local rank" : " local ranks");
  if (!ranks_from.empty()) s += " (" + ranks_from + ")";
  if (pinned && local_ranks > 1) s += ", mask pinned to this rank: not divided";
  if (!missing.empty()) s += "; " + missing;
  return s;
}

CpuShare ComputeCpuShare(const CpuShareInputs& in) {
  CpuShare share;
  std::string root = in.root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root == "/") root.clear();  // paths below start with '/'
  const std::set<int> mask(in.affinity.begin(), in.affinity.end());
  share.affinity = static_cast<int>(mask.size());
  std::vector<std::string> missing;

  const std::optional<std::string> proc_cgroup = ReadSmallFile(root + "/proc/self/cgroup");
  const std::vector<MountEntry> mounts = ReadMountinfo(root);
  std::optional<Hierarchy> cpu, cpuset;
  if (proc_cgroup) {
    cpu = FindHierarchy(*proc_cgroup, mounts, "cpu", "/sys/fs/cgroup/cpu,cpuacct");
    cpuset = FindHierarchy(*proc_cgroup, mounts, "cpuset", "/sys/fs/cgroup/cpuset");
  } else {
    missing.push_back("no /proc/self/cgroup");
  }

  // The quota: the smallest along the path (cpu.h's rule 2).
  if (cpu) {
    for (const std::string& dir : CgroupDirs(root, *cpu)) {
      const std::string shown = dir.substr(root.size());
      double q = 0;
      if (!cpu->v1) {
        // "max 100000" (none) or "150000 100000": quota and period in µs.
        const std::optional<std::string> max = ReadSmallFile(dir + "/cpu.max");
        if (!max) continue;  // the root cgroup, or the cpu controller not enabled here
        std::istringstream f(*max);
        std::string quota_text, period_text = "100000";
        f >> quota_text >> period_text;
        if (quota_text == "max") continue;
        const std::optional<long long> quota = ParseInt(quota_text), period = ParseInt(period_text);
        if (!quota || !period || *quota <= 0 || *period <= 0) {
          missing.push_back("unreadable " + shown + "/cpu.max");
          continue;
        }
        q = static_cast<double>(*quota) / static_cast<double>(*period);
      } else {
        // cpu.cfs_quota_us: -1 (none) or µs per cpu.cfs_period_us.
        const std::optional<std::string> qt = ReadSmallFile(dir + "/cpu.cfs_quota_us");
        if (!qt) continue;
        const std::optional<long long> quota = ParseInt(*qt);
        if (quota && *quota < 0) continue;
        const std::optional<std::string> pt = ReadSmallFile(dir + "/cpu.cfs_period_us");
        long long period = 0;
        if (pt) period = ParseInt(*pt).value_or(0);
        if (!quota || *quota == 0 || period <= 0) {
          missing.push_back("unreadable " + shown + "/cpu.cfs_quota_us");
          continue;
        }
        q = static_cast<double>(*quota) / static_cast<double>(period);
      }
      if (q > 0 && (share.quota == 0 || q < share.quota)) {
        share.quota = q;
        share.quota_cgroup = dir.substr(root.size());
      }
    }
  }

  // What the cgroup (or machine) offers: to tell a pinned rank from shared ones.
  std::optional<std::vector<int>> offered;
  if (cpuset) {
    for (const std::string& dir : CgroupDirs(root, *cpuset)) {
      for (const char* name : {"/cpuset.cpus.effective", "/cpuset.effective_cpus", "/cpuset.cpus"}) {
        if (std::optional<std::string> text = ReadSmallFile(dir + name)) {
          offered = ParseCpuList(*text);
          if (offered && offered->empty()) offered.reset();  // an unset cpuset: its parent's
          if (offered) break;
        }
      }
      if (offered) break;
    }
  }
  if (!offered) {
    if (std::optional<std::string> online = ReadSmallFile(root + "/sys/devices/system/cpu/online")) {
      offered = ParseCpuList(*online);
    }
  }
  if (offered && !offered->empty()) {
    const std::set<int> all(offered->begin(), offered->end());
    share.offered = static_cast<int>(all.size());
    share.pinned = mask.size() < all.size() && std::includes(all.begin(), all.end(), mask.begin(), mask.end());
  }

  // The node's ranks (rule 3).
  for (const char* name : {"STOKER_LOCAL_RANKS", "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    const std::optional<std::string> v = in.getenv ? in.getenv(name) : std::nullopt;
    if (!v || Trim(*v).empty()) continue;
    const std::optional<long long> n = ParseInt(*v);
    if (!n || *n < 1) {
      missing.push_back(std::string(name) + "='" + *v + "' is not a count");
      continue;
    }
    share.local_ranks = static_cast<int>(std::min<long long>(*n, 1 << 20));
    share.ranks_from = name;
    break;
  }

  const double ranks = share.local_ranks;
  double cores = share.pinned ? share.affinity : share.affinity / ranks;
  if (share.quota > 0) cores = std::min(cores, share.quota / ranks);
  share.cores = std::max(1, static_cast<int>(std::floor(cores + 1e-9)));
  for (size_t i = 0; i < missing.size(); ++i) share.missing += (i ? ", " : "") + missing[i];
  return share;
}

CpuShare CurrentCpuShare() {
  CpuShareInputs in;
  // A mask as large as the kernel's CPU count: grow the set until it fits.
  for (size_t cpus = 1024; cpus <= (size_t{1} << 20) && in.affinity.empty(); cpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      for (size_t c = 0; c < cpus; ++c)
        if (CPU_ISSET_S(c, bytes, set)) in.affinity.push_back(static_cast<int>(c));
      CPU_FREE(set);
      break;
    }
    CPU_FREE(set);
  }
  if (in.affinity.empty()) {  // no mask to read: every CPU
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c)
      in.affinity.push_back(static_cast<int>(c));
  }
  in.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  return ComputeCpuShare(in);
}

}  // namespace stoker
