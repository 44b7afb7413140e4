#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stoker {

namespace {
std::string Errno() { return std::strerror(errno); }
}  // namespace

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

Result<File> File::OpenRead(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return IoError(path + ": open: " + Errno());
  }
  return File(fd, path);
}

Result<File> File::OpenWrite(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(path + ": open for writing: " + Errno());
  return File(fd, path);
}

Result<size_t> File::PReadSome(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path_ + ": read at offset " + std::to_string(offset + done) + ": " + Errno());
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

Status File::PRead(uint64_t offset, std::span<uint8_t> out) const {
  STOKER_ASSIGN_OR_RETURN(size_t got, PReadSome(offset, out));
  if (got != out.size()) {
    return DataLoss(path_ + ": file ends at offset " + std::to_string(offset + got) + ", expected " +
                    std::to_string(out.size()) + " bytes at offset " + std::to_string(offset));
  }
  return Status::Ok();
}

Status File::Write(std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path_ + ": write: " + Errno());
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status File::Close() {
  if (fd_ < 0) return Status::Ok();
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return IoError(path_ + ": close: " + Errno());
  return Status::Ok();
}

Result<uint64_t> File::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return IoError(path_ + ": stat: " + Errno());
  return static_cast<uint64_t>(st.st_size);
}

Result<std::string> ReadWholeFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(path));
  STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  std::string out(size, '\0');
  STOKER_RETURN_IF_ERROR(f.PRead(0, {reinterpret_cast<uint8_t*>(out.data()), out.size()}));
  return out;
}

Status WriteWholeFile(const std::string& path, std::span<const uint8_t> data) {
  // Write to a temporary name, then rename: a reader never sees half a file.
  std::string tmp = path + ".tmp";
  STOKER_ASSIGN_OR_RETURN(File f, File::OpenWrite(tmp));
  STOKER_RETURN_IF_ERROR(f.Write(data));
  STOKER_RETURN_IF_ERROR(f.Close());
  if (::rename(tmp.c_str(), path.c_str()) != 0) return IoError(path + ": rename: " + Errno());
  return Status::Ok();
}

}  // namespace stoker
