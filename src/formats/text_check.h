// formats/text_check.h — checks that a text member is what its field says:
// UTF-8 (stoker.text) or one JSON value (stoker.json), so a bad caption is
// an error naming its member here, not a UnicodeDecodeError in the loop.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "stoker/status.h"

namespace stoker {

// Ok, or DataLoss naming the byte offset (within the member) of the first
// invalid sequence (overlong forms, surrogates and > U+10FFFF are invalid,
// as in Python's strict utf-8 codec).
Status CheckUtf8(std::span<const uint8_t> text);

// Ok when `text` is exactly one JSON value (whitespace around it allowed),
// in valid UTF-8, with no byte-order mark or NUL byte (Python's json.loads
// refuses both), no lone surrogate in a \u escape and no number beyond a
// double's range (RFC 8259 leaves both to the parser; nlohmann refuses them);
// else DataLoss with the parser's message.
Status CheckJson(std::span<const uint8_t> text);

}  // namespace stoker
