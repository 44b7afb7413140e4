// codecs/libjpeg_decompressor.cc — libjpeg errors as Status (see header).
// Thread-safety: see header.
#include "codecs/libjpeg_decompressor.h"

#include <cstring>
#include <string>

namespace stoker {
namespace {

[[noreturn]] void JumpOut(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrorMgr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}
void OnJpegError(j_common_ptr c) { JumpOut(c); }
void OnJpegMessage(j_common_ptr c, int level) {
  if (level < 0) JumpOut(c);  // warning; levels >= 0 are trace messages
}
// TJFLAG_LIMITSCANS on this path: a progressive JPEG with >500 scans is a
// decompression bomb, not an image.
void OnJpegProgress(j_common_ptr c) {
  if (c->is_decompressor && reinterpret_cast<j_decompress_ptr>(c)->input_scan_number > 500) {
    FailWith(c, "Progressive JPEG image has more than 500 scans");
  }
}

void CreateStep(j_decompress_ptr c, void*) { jpeg_create_decompress(c); }

}  // namespace

[[noreturn]] void FailWith(j_common_ptr c, const char* what) {
  auto* e = reinterpret_cast<JpegErrorMgr*>(c->err);
  std::snprintf(e->message, sizeof(e->message), "%s", what);
  std::longjmp(e->jump, 1);
}

bool Guarded(LibJpeg* lj, void (*step)(j_decompress_ptr, void*), void* arg) {
  if (setjmp(lj->err.jump) != 0) return false;
  step(&lj->cinfo, arg);
  return true;
}

LibJpeg::LibJpeg() {
  std::memset(&cinfo, 0, sizeof(cinfo));
  std::memset(&progress, 0, sizeof(progress));
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = OnJpegError;
  err.pub.emit_message = OnJpegMessage;
  err.message[0] = '\0';
  ok = Guarded(this, CreateStep, nullptr);
  progress.progress_monitor = OnJpegProgress;
  if (ok) cinfo.progress = &progress;  // after create: it clears the struct
}

void ReadHeaderStep(j_decompress_ptr c, void* arg) {
  const auto* a = static_cast<const HeaderArgs*>(arg);
  jpeg_mem_src(c, a->data, static_cast<unsigned long>(a->size));
  jpeg_read_header(c, TRUE);
}

Status LibjpegError(const LibJpeg& lj, const char* what) {
  return DataLoss(std::string("JPEG ") + what + ": " + lj.err.message);
}

}  // namespace stoker
