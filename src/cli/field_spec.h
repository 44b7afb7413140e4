// cli/field_spec.h — the command line's words for loader fields and sources,
// shared by `stoker bench` and `stoker doctor`.
//
// Field spec grammar, FIELD:KIND[:ARGS]:
//   jpg:image:224                 center crop 224x224, uint8 CHW
//   jpg:image:1024:longest        longer side 1024, padded; modes: none, stretch,
//                                 center_crop, longest, random_resized_crop
//   jpg:image:256x192:stretch:float:norm:flip:hwc    size HxW and flags
//   features.npz:npz   x.npy:npy   cls:scalar:int64   txt:bytes:4KB
#pragma once

#include <string>
#include <vector>

#include "stoker/loader.h"

namespace stoker::cli {

Result<FieldSpec> ParseFieldSpec(const std::string& text);

// Expands `sources` into options->sources, parses `fields` into
// options->fields (none given: inferred from the first sample, printed to
// stderr as "inferred: -f ...") and resolves `key_rule` ("auto": the first shard decides,
// as `stoker index` would).
Status ConfigureLoader(const std::vector<std::string>& sources, const std::vector<std::string>& fields,
                       const std::string& key_rule, LoaderOptions* options);

}  // namespace stoker::cli
