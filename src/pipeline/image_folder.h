// pipeline/image_folder.h — a directory tree of class sub-directories
// (torchvision's ImageFolder layout) as a dataset the loader reads like
// shards: each image file is a one-sample "shard" whose sample spans the
// whole file, so the planner, readers and decoders are the ones tar shards
// use (reads are whole files; no index file is written).
//
// Order and labels follow torchvision.datasets.ImageFolder exactly:
// classes = sorted names of root's sub-directories (symlinks followed),
// label = position in that list; per class, sorted(os.walk(class_dir,
// followlinks=True)) then sorted file names; a file belongs when its name
// ends (case-insensitively) with one of IMG_EXTENSIONS. A class with no
// image is an error, as in torchvision. Of IMG_EXTENSIONS stoker decodes
// .jpg .jpeg .png .webp; a .ppm/.pgm/.bmp/.tif/.tiff file is an error
// naming it (rather than a silently smaller dataset).
// Each sample's members: "image" and its lower-cased extension ("jpg",
// "png", ...) are the file's bytes; "cls" is the label as text (an inline
// member: no bytes in the file), so fields={"image": ..., "cls": scalar()}.
// Each sample's key is its path relative to the root, the basename cut at
// its first dot ("cat/000001" for cat/000001.jpg), the key `stoker pack`
// gives the file too.
// Thread-safety: free functions.
#pragma once

#include <string>
#include <vector>

#include "formats/sample_index.h"
#include "stoker/status.h"

namespace stoker {

// True when `sources` is a single existing directory.
bool IsImageFolderSource(const std::vector<std::string>& sources);

struct ImageFolderListing {
  std::vector<std::string> classes;  // sorted; label = index
  std::vector<std::string> files;    // in ImageFolder's sample order
  std::vector<int> labels;
};

Result<ImageFolderListing> ListImageFolder(const std::string& root);

// The listing as the loader's shards and one-sample indexes (stats each file
// for its size). Any number of files: the loader's shard-file cache keeps a
// bounded number of them open (pipeline/shard_files.h).
Status ImageFolderShards(const std::string& root, std::vector<std::string>* shards,
                         std::vector<ShardIndex>* indexes);

}  // namespace stoker
