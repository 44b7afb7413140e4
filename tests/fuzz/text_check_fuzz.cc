// tests/fuzz/text_check_fuzz.cc — the text and JSON field checks
// (formats/text_check.h) on any bytes, each against a reference written here
// independently of it:
//  - CheckUtf8 against a validator of the Unicode standard's table of
//    well-formed byte sequences (Table 3-7): the same verdict, and an error
//    names the byte where the first ill-formed sequence starts (as Python's
//    strict codec reports it);
//  - CheckJson against an RFC 8259 validator (an explicit stack, no
//    recursion): the same verdict. Where RFC 8259 leaves a choice, the
//    reference takes the one that keeps Python's bytes.decode("utf-8") and
//    json.loads (what the loader runs on the checked bytes) from failing: no
//    byte-order mark (json.loads refuses "\ufeff" before a value) and no NUL
//    byte; and, where nlohmann is stricter than Python, it takes nlohmann's
//    limits, as the safe side: no lone surrogate in a \u escape (a string that
//    is not Unicode) and no number beyond a double's range (RFC 8259 §6 lets a
//    parser limit it; Python reads 1e999 as inf).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "formats/text_check.h"

namespace {

constexpr size_t kValid = SIZE_MAX;

// Length of the well-formed sequence at t[i], or 0 (Table 3-7).
size_t SequenceAt(std::span<const uint8_t> t, size_t i) {
  const size_t n = t.size();
  const uint8_t c = t[i];
  auto in = [&](size_t k, uint8_t lo, uint8_t hi) { return i + k < n && t[i + k] >= lo && t[i + k] <= hi; };
  if (c <= 0x7F) return 1;
  if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

// Offset of the first ill-formed sequence, or kValid.
size_t FirstInvalid(std::span<const uint8_t> t) {
  for (size_t i = 0; i < t.size();) {
    const size_t len = SequenceAt(t, i);
    if (len == 0) return i;
    i += len;
  }
  return kValid;
}

class JsonReference {
 public:
  explicit JsonReference(std::span<const uint8_t> t) : t_(t) {}

  bool Valid() {
    std::vector<uint8_t> stack;  // ']' or '}' per open container
    Ws();
  value:
    if (!More()) return false;
    switch (t_[i_]) {
      case '{':
        ++i_;
        Ws();
        if (Is('}')) {
          ++i_;
          goto after;
        }
        stack.push_back('}');
        if (!Key()) return false;
        goto value;
      case '[':
        ++i_;
        Ws();
        if (Is(']')) {
          ++i_;
          goto after;
        }
        stack.push_back(']');
        goto value;
      case '"':
        if (!String()) return false;
        goto after;
      case 't':
        if (!Literal("true")) return false;
        goto after;
      case 'f':
        if (!Literal("false")) return false;
        goto after;
      case 'n':
        if (!Literal("null")) return false;
        goto after;
      default:
        if (!Number()) return false;
        goto after;
    }
  after:
    Ws();
    if (stack.empty()) return i_ == t_.size();
    if (Is(',')) {
      ++i_;
      Ws();
      if (stack.back() == '}' && !Key()) return false;
      goto value;
    }
    if (Is(stack.back())) {
      ++i_;
      stack.pop_back();
      goto after;
    }
    return false;
  }

 private:
  bool More() const { return i_ < t_.size(); }
  bool Is(uint8_t c) const { return More() && t_[i_] == c; }
  bool Digit() const { return More() && t_[i_] >= '0' && t_[i_] <= '9'; }
  void Ws() {
    while (More() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  // A member's name and its colon, whitespace after: the value comes next.
  bool Key() {
    if (!Is('"') || !String()) return false;
    Ws();
    if (!Is(':')) return false;
    ++i_;
    Ws();
    return true;
  }
  bool Literal(const char* word) {
    for (; *word; ++word, ++i_) {
      if (!Is(static_cast<uint8_t>(*word))) return false;
    }
    return true;
  }
  // RFC 8259's number, and within a double's range (§6 lets a parser limit
  // it; nlohmann refuses a number that overflows to infinity, Python would
  // read it as inf).
  bool Number() {
    const size_t begin = i_;
    if (!NumberSyntax()) return false;
    const std::string digits(reinterpret_cast<const char*>(t_.data()) + begin, i_ - begin);
    return std::isfinite(std::strtod(digits.c_str(), nullptr));
  }
  bool NumberSyntax() {
    if (Is('-')) ++i_;
    if (Is('0')) {
      ++i_;
    } else if (Digit()) {
      while (Digit()) ++i_;
    } else {
      return false;
    }
    if (Is('.')) {
      ++i_;
      if (!Digit()) return false;
      while (Digit()) ++i_;
    }
    if (Is('e') || Is('E')) {
      ++i_;
      if (Is('+') || Is('-')) ++i_;
      if (!Digit()) return false;
      while (Digit()) ++i_;
    }
    return true;
  }
  // Four hex digits after "\u", as a code unit; -1 when not hex.
  long Hex4() {
    long v = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      if (!More()) return -1;
      const uint8_t c = t_[i_];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  }
  bool String() {
    ++i_;  // the opening quote
    while (More()) {
      const uint8_t c = t_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++i_;
        if (!More()) return false;
        const uint8_t e = t_[i_];
        if (e == 'u') {
          ++i_;
          const long unit = Hex4();
          if (unit < 0) return false;
          if (unit >= 0xDC00 && unit <= 0xDFFF) return false;  // a low surrogate first
          if (unit >= 0xD800 && unit <= 0xDBFF) {  // a high one: a low one must follow
            if (!Is('\\')) return false;
            ++i_;
            if (!Is('u')) return false;
            ++i_;
            const long low = Hex4();
            if (low < 0xDC00 || low > 0xDFFF) return false;
          }
          continue;
        }
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') return false;
        ++i_;
        continue;
      }
      const size_t len = SequenceAt(t_, i_);
      if (len == 0) return false;
      i_ += len;
    }
    return false;  // unterminated
  }

  std::span<const uint8_t> t_;
  size_t i_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> text(data, size);
  const size_t bad = FirstInvalid(text);
  const stoker::Status utf8 = stoker::CheckUtf8(text);
  if (utf8.ok() != (bad == kValid)) {
    fprintf(stderr, "CheckUtf8: %s; the reference: %s at %zu\n", utf8.ToString().c_str(),
            bad == kValid ? "valid" : "invalid", bad);
    __builtin_trap();
  }
  if (!utf8.ok()) {
    const std::string want = "at byte " + std::to_string(bad);
    const std::string& got = utf8.message();
    if (got.size() < want.size() || got.compare(got.size() - want.size(), want.size(), want) != 0) {
      fprintf(stderr, "CheckUtf8 says \"%s\", the reference: first invalid byte %zu\n", got.c_str(), bad);
      __builtin_trap();
    }
  }
  const bool json_ref = JsonReference(text).Valid();
  const stoker::Status json = stoker::CheckJson(text);
  if (json.ok() != json_ref) {
    fprintf(stderr, "CheckJson: %s; the RFC 8259 reference: %s\n", json.ToString().c_str(),
            json_ref ? "valid" : "invalid");
    __builtin_trap();
  }
  if (json.ok() && !utf8.ok()) __builtin_trap();  // a JSON text is UTF-8
  return 0;
}
