// formats/msgpack_check.h — checks that a msgpack member (stoker.msgpack) is
// what msgpack.unpackb(data) (msgpack-python 1.x defaults, as webdataset
// calls it) will parse, so a bad member is an error naming it on the decode
// threads, not an exception in the training loop.
//
// Accepted: exactly one value with no bytes after it; str in valid UTF-8
// (raw=False); map keys str or bin (strict_map_key=True); ext -1 (a
// Timestamp) 4, 8 or 12 bytes with nanoseconds < 10^9; 0xc1 is never valid.
// Nesting deeper than kMsgpackMaxDepth is refused (msgpack's C unpacker
// stops at 1024). Iterative: a stack of open containers, no recursion.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <span>

#include "stoker/status.h"

namespace stoker {

inline constexpr int kMsgpackMaxDepth = 1000;

// Ok, or DataLoss naming the byte offset (within the member) where it fails.
Status CheckMsgpack(std::span<const uint8_t> data);

}  // namespace stoker
