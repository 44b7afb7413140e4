#include "cli/field_spec.h"

#include <cstdio>
#include <sstream>

#include "cli/common.h"
#include "cli/infer_fields.h"
#include "formats/parquet_file.h"
#include "formats/tar.h"
#include "pipeline/image_folder.h"

namespace stoker::cli {

Result<FieldSpec> ParseFieldSpec(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ':');) parts.push_back(part);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--field '" + text + "': " + why +
                           " (e.g. jpg:image:224, jpg:image:1024:longest, features.npz:npz, cls:scalar:int64)");
  };
  if (parts.size() < 2 || parts[0].empty()) return bad("expected FIELD:KIND");
  const std::string& field = parts[0];
  const std::string& kind = parts[1];
  if (kind == "npz" || kind == "npy") {
    if (parts.size() != 2) return bad("takes no arguments");
    return kind == "npz" ? NpzField(field) : NpyField(field);
  }
  if (kind == "scalar") {
    if (parts.size() > 3) return bad("expected FIELD:scalar[:DTYPE]");
    STOKER_ASSIGN_OR_RETURN(DType dtype, ParseDTypeName(parts.size() == 3 ? parts[2] : "int64"));
    return ScalarField(field, dtype);
  }
  if (kind == "bytes") {
    if (parts.size() != 3) return bad("expected FIELD:bytes:MAX_BYTES");
    STOKER_ASSIGN_OR_RETURN(uint64_t max_bytes, ParseByteSize(parts[2]));
    return BytesField(field, max_bytes);
  }
  if (kind == "text" || kind == "json") {
    if (parts.size() > 3) return bad("expected FIELD:" + kind + "[:MAX_BYTES]");
    STOKER_ASSIGN_OR_RETURN(uint64_t max_bytes,
                            ParseByteSize(parts.size() == 3 ? parts[2] : kind == "text" ? "4096" : "65536"));
    return kind == "text" ? TextField(field, max_bytes) : JsonField(field, max_bytes);
  }
  if (kind != "image") return bad("unknown kind '" + kind + "': use image, npz, npy, scalar, bytes, text, json");
  if (parts.size() < 3) return bad("expected FIELD:image:SIZE");
  ImageSpec spec;
  char x = 0;
  int h = 0, w = 0;
  const int n = std::sscanf(parts[2].c_str(), "%d%c%d", &h, &x, &w);
  if (n == 1) {
    w = h;
  } else if (n != 3 || (x != 'x' && x != 'X')) {
    return bad("size '" + parts[2] + "' is not N or HxW");
  }
  spec.height = h, spec.width = w;
  for (size_t i = 3; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p == "float") {
      spec.pixel = PixelType::kFloat32;
    } else if (p == "norm") {
      spec.pixel = PixelType::kFloat32, spec.normalize = true;
    } else if (p == "flip") {
      spec.random_hflip = true;
    } else if (p == "hwc") {
      spec.chw = false;
    } else {
      auto mode = ParseResizeMode(p);
      if (!mode.ok()) return bad("'" + p + "' is neither a resize mode nor float, norm, flip, hwc");
      spec.mode = *mode;
    }
  }
  STOKER_RETURN_IF_ERROR(spec.Validate().WithContext("--field '" + text + "'"));
  return ImageField(field, spec);
}

Status ConfigureLoader(const std::vector<std::string>& sources, const std::vector<std::string>& fields,
                       const std::string& key_rule, LoaderOptions* options) {
  if (IsImageFolderSource(sources)) {  // a tree of class sub-directories: ImageFolder's fields
    options->sources = sources;
    options->key_rule = KeyRule::kWebDataset;
    std::vector<std::string> specs = fields;
    if (specs.empty()) {
      specs = {"image:image:224", "cls:scalar"};
      std::fprintf(stderr, "inferred: %s (an image folder)\n", FieldFlags(specs).c_str());
    }
    for (const std::string& f : specs) {
      STOKER_ASSIGN_OR_RETURN(FieldSpec spec, ParseFieldSpec(f));
      options->fields.push_back(std::move(spec));
    }
    return Status::Ok();
  }
  STOKER_ASSIGN_OR_RETURN(options->sources, ExpandSources(sources));
  const bool parquet = IsParquetPath(options->sources.front());
  if (parquet) {
    // A row is one sample: no key rule to choose.
  } else if (key_rule == "auto") {
    STOKER_ASSIGN_OR_RETURN(std::vector<TarMember> members, ScanTar(options->sources.front()));
    STOKER_RETURN_IF_ERROR(GroupWithRule(members, "auto", options->sources.front(), &options->key_rule).status());
  } else {
    STOKER_ASSIGN_OR_RETURN(options->key_rule, ParseKeyRule(key_rule));
  }
  std::vector<std::string> specs = fields;
  if (specs.empty()) {  // no -f: infer from the first sample, and say so
    STOKER_ASSIGN_OR_RETURN(specs, parquet ? InferParquetFields(options->sources.front())
                                           : InferFields(options->sources.front(), options->key_rule));
    if (specs.empty()) {
      return InvalidArgument(options->sources.front() + ": no field could be inferred from the " +
                             (parquet ? "columns" : "first sample") + "; pass -f");
    }
    std::fprintf(stderr, "inferred: %s\n", FieldFlags(specs).c_str());
  }
  for (const std::string& f : specs) {
    STOKER_ASSIGN_OR_RETURN(FieldSpec spec, ParseFieldSpec(f));
    options->fields.push_back(std::move(spec));
  }
  return Status::Ok();
}

}  // namespace stoker::cli
