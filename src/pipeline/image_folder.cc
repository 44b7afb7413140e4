// pipeline/image_folder.cc — ImageFolder trees as one-sample shards (see header).
// Thread-safety: free functions.
#include "pipeline/image_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>

namespace stoker {
namespace {

bool IsDir(const std::string& path) {  // follows symlinks, as os.scandir's is_dir() and followlinks=True
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// torchvision's IMG_EXTENSIONS; the first four are the ones stoker decodes.
constexpr const char* kImageExtensions[] = {".jpg", ".jpeg", ".png", ".webp", ".ppm", ".bmp", ".pgm", ".tif", ".tiff"};
constexpr int kDecodable = 4;

// Index into kImageExtensions, or -1.
int ExtensionOf(const std::string& name) {
  const std::string lower = Lower(name);
  for (int i = 0; i < static_cast<int>(std::size(kImageExtensions)); ++i) {
    if (lower.ends_with(kImageExtensions[i])) return i;
  }
  return -1;
}

// Entries of `dir` (no "." / ".."), split into sub-directories and files.
Status ReadDir(const std::string& dir, std::vector<std::string>* dirs, std::vector<std::string>* files) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return NotFound("cannot open directory '" + dir + "'");
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    (IsDir(dir + "/" + name) ? dirs : files)->push_back(name);
  }
  ::closedir(d);
  return Status::Ok();
}

// os.walk(top, followlinks=True): every directory under top (top first), as
// the path strings os.walk yields; the caller sorts them.
Status Walk(const std::string& top, std::vector<std::string>* out, int depth = 0) {
  if (depth > 64) return InvalidArgument("directory tree under '" + top + "' is deeper than 64 (a symlink loop?)");
  out->push_back(top);
  std::vector<std::string> dirs, files;
  STOKER_RETURN_IF_ERROR(ReadDir(top, &dirs, &files));
  for (const std::string& d : dirs) STOKER_RETURN_IF_ERROR(Walk(top + "/" + d, out, depth + 1));
  return Status::Ok();
}

bool IsShardName(const std::string& name) {
  const std::string lower = Lower(name);
  for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd"}) {
    if (lower.ends_with(ext)) return true;
  }
  return false;
}

// A folder given as the source that holds no class sub-directories: say
// what it looks like instead and what to pass. A folder of tar shards (as
// img2dataset writes, with .parquet and _stats.json beside them) wants its
// shards named; loose images want the ImageFolder layout or `stoker pack`.
Status NotAnImageFolder(const std::string& root, std::vector<std::string> files) {
  std::sort(files.begin(), files.end());
  std::vector<std::string> shards;
  size_t images = 0;
  for (const std::string& name : files) {
    if (IsShardName(name)) shards.push_back(name);
    if (ExtensionOf(name) >= 0) ++images;
  }
  if (!shards.empty()) {
    return InvalidArgument("'" + root + "' is a folder of " + std::to_string(shards.size()) + " tar shards ('" +
                           shards.front() + "' ... '" + shards.back() +
                           "'), not an image folder: pass the shards themselves, e.g. '" + root + "/*" +
                           shards.front().substr(shards.front().find('.')) + "'");
  }
  if (images > 0) {
    return InvalidArgument("'" + root + "' holds " + std::to_string(images) +
                           " images but no class sub-directories: an image folder is ROOT/CLASS/IMAGE "
                           "(torchvision's ImageFolder); put the images in class folders, or turn the loose "
                           "files into tar shards with `stoker pack " + root + " OUT/name`");
  }
  return NotFound("image folder '" + root + "' has no class sub-directories (ROOT/CLASS/IMAGE, torchvision's "
                  "ImageFolder layout)");
}

}  // namespace

bool IsImageFolderSource(const std::vector<std::string>& sources) {
  return sources.size() == 1 && IsDir(sources[0]);
}

Result<ImageFolderListing> ListImageFolder(const std::string& root_in) {
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  ImageFolderListing out;
  std::vector<std::string> files;
  STOKER_RETURN_IF_ERROR(ReadDir(root, &out.classes, &files));
  std::sort(out.classes.begin(), out.classes.end());
  if (out.classes.empty()) return NotAnImageFolder(root, files);
  for (size_t label = 0; label < out.classes.size(); ++label) {
    std::vector<std::string> walked;
    STOKER_RETURN_IF_ERROR(Walk(root + "/" + out.classes[label], &walked));
    std::sort(walked.begin(), walked.end());  // sorted(os.walk(...)): by the root path string
    size_t found = 0;
    for (const std::string& dir : walked) {
      std::vector<std::string> subdirs, names;
      STOKER_RETURN_IF_ERROR(ReadDir(dir, &subdirs, &names));
      std::sort(names.begin(), names.end());
      for (const std::string& name : names) {
        const int ext = ExtensionOf(name);
        if (ext < 0) continue;
        const std::string path = dir + "/" + name;
        if (ext >= kDecodable) {
          return InvalidArgument(path + ": " + kImageExtensions[ext] +
                                 " images are not decoded by stoker (JPEG, PNG, WebP are); convert them or "
                                 "leave them out of the tree");
        }
        out.files.push_back(path);
        out.labels.push_back(static_cast<int>(label));
        ++found;
      }
    }
    if (found == 0) {
      return NotFound("image folder '" + root + "': class '" + out.classes[label] +
                      "' has no image file (.jpg .jpeg .png .webp)");
    }
  }
  return out;
}

Status ImageFolderShards(const std::string& root, std::vector<std::string>* shards,
                         std::vector<ShardIndex>* indexes) {
  STOKER_ASSIGN_OR_RETURN(ImageFolderListing listing, ListImageFolder(root));
  std::string prefix = root;
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  prefix += "/";
  shards->clear();
  indexes->clear();
  for (size_t i = 0; i < listing.files.size(); ++i) {
    const std::string& path = listing.files[i];
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return NotFound("image '" + path + "' vanished while listing");
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const std::string rel = path.substr(prefix.size());
    const size_t dot = rel.rfind('.');
    const std::string ext = Lower(rel.substr(dot + 1));
    // The key: the path relative to the root with its basename cut at the
    // first dot, as webdataset cuts a tar member's name, so the folder and
    // the shards `stoker pack` makes of it give the same keys
    // (pipeline/sample_keys.h). A hidden name (".x.jpg") keeps its own dot.
    const size_t base = rel.rfind('/') + 1;
    size_t stem_end = rel.find('.', base + 1);
    if (stem_end == std::string::npos || stem_end > dot) stem_end = dot;
    ShardIndex index;
    index.shard_path = path;
    index.shard_size = size;
    SampleEntry e;
    e.key = rel.substr(0, stem_end);
    e.begin = 0;
    e.end = size;
    e.members.push_back(MemberRef{"image", rel, 0, size});
    e.members.push_back(MemberRef{ext, rel, 0, size});
    MemberRef cls{"cls", rel + " (label)", 0, 0};
    cls.inline_data = std::to_string(listing.labels[i]);
    e.members.push_back(std::move(cls));
    index.samples.push_back(std::move(e));
    shards->push_back(path);
    indexes->push_back(std::move(index));
  }
  return Status::Ok();
}

}  // namespace stoker
