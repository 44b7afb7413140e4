// codecs/libjpeg_decompressor.h — one reusable libjpeg decompressor (the
// libjpeg API of libjpeg-turbo) whose errors come back as Status, not exit().
//
// libjpeg reports a fatal error through error_exit and a warning through
// emit_message(-1); both longjmp back to Guarded(), the one setjmp. Only PODs
// live in Guarded's frame and in the step it runs, so the longjmp skips no
// destructor: every libjpeg call goes through a plain `step` function.
// A warning is an error here, as TJFLAG_STOPONWARNING is on the TurboJPEG
// path: a truncated or corrupt stream is a DataLoss, not a gray patch. A
// progressive JPEG with more than 500 scans fails (TJFLAG_LIMITSCANS): a
// decompression bomb, not an image.
// Thread-safety: a LibJpeg belongs to one thread (its JpegDecoder's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>  // jpeglib.h needs FILE first
#include <csetjmp>

#include <jpeglib.h>

#include "stoker/status.h"

namespace stoker {

struct JpegErrorMgr {
  jpeg_error_mgr pub;  // first member: libjpeg hands back a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

// One libjpeg decompressor, created once per JpegDecoder and reused for every
// image (jpeg_abort_decompress returns it to the start state). `ok` is false
// when jpeg_create_decompress failed; callers then use the TurboJPEG path.
struct LibJpeg {
  jpeg_decompress_struct cinfo;
  JpegErrorMgr err;
  jpeg_progress_mgr progress;
  bool ok = false;

  LibJpeg();
  ~LibJpeg() {
    if (ok) jpeg_destroy_decompress(&cinfo);
  }
  LibJpeg(const LibJpeg&) = delete;
  LibJpeg& operator=(const LibJpeg&) = delete;
};

// Runs step(&lj->cinfo, arg) under the setjmp. Returns false with
// err.message set when libjpeg failed or warned.
bool Guarded(LibJpeg* lj, void (*step)(j_decompress_ptr, void*), void* arg);

// Fails the current guarded step with `what` as the message (for conditions
// libjpeg itself does not report, e.g. a suspended read).
[[noreturn]] void FailWith(j_common_ptr c, const char* what);

// A step: points the decompressor at an in-memory JPEG and reads its header.
struct HeaderArgs {
  const uint8_t* data;
  size_t size;
};
void ReadHeaderStep(j_decompress_ptr c, void* arg);

// Returns the decompressor to its start state on every exit path.
struct AbortOnExit {
  jpeg_decompress_struct* cinfo;
  ~AbortOnExit() { jpeg_abort_decompress(cinfo); }
};

// DataLoss "JPEG <what>: <libjpeg's message>".
Status LibjpegError(const LibJpeg& lj, const char* what);

}  // namespace stoker
