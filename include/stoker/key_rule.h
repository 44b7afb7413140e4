// stoker/key_rule.h — how tar members group into samples (see
// src/formats/sample_index.h for the rules; implemented there).
#pragma once

#include <string_view>

#include "stoker/status.h"

namespace stoker {

enum class KeyRule { kWebDataset, kUnderscoreSuffix };
Result<KeyRule> ParseKeyRule(std::string_view name);  // "webdataset" | "underscore"
const char* KeyRuleName(KeyRule rule);

}  // namespace stoker
