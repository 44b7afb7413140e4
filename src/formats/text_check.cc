// formats/text_check.cc — UTF-8 and JSON checks (see header).
// Thread-safety: pure functions.
#include "formats/text_check.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <string>

namespace stoker {

Status CheckUtf8(std::span<const uint8_t> t) {
  const size_t n = t.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = t[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      if ((t[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (t[i + k] & 0x3F);
    }
    if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (!ok) return DataLoss("text is not valid UTF-8 at byte " + std::to_string(i));
    i += len;
  }
  return Status::Ok();
}

Status CheckJson(std::span<const uint8_t> text) {
  // nlohmann skips a UTF-8 byte-order mark before the value; the loader's
  // bytes.decode("utf-8") keeps it as U+FEFF and json.loads then refuses the
  // text ("Unexpected UTF-8 BOM"), so it is refused here.
  if (text.size() >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF) {
    return DataLoss("not valid JSON: a UTF-8 byte-order mark before the value (Python's json.loads refuses it)");
  }
  // nlohmann's lexer takes a NUL byte for the end of the input (for C
  // strings), so "3\0garbage" would pass; json.loads refuses it ("Extra
  // data"). No JSON text holds a NUL byte: inside a string it is a control
  // character, which must be escaped.
  if (const void* nul = std::memchr(text.data(), 0, text.size())) {
    return DataLoss("not valid JSON: a NUL byte at offset " +
                    std::to_string(static_cast<const uint8_t*>(nul) - text.data()));
  }
  if (nlohmann::json::accept(text.begin(), text.end())) return Status::Ok();  // no tree built
  try {
    (void)nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("not valid JSON: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace stoker
