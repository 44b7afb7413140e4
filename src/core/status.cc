#include "stoker/status.h"

namespace stoker {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

}  // namespace stoker
