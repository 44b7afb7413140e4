// tests/fuzz/tar_fuzz.cc — the tar header walk (ustar, GNU long names, pax,
// base-256 sizes) and the grouping of members into samples, on any bytes; and
// the stream reader (TarStream, stream mode's) against the walk: the same
// members, each member's bytes as the file holds them.
#include <cstdint>
#include <cstring>

#include "formats/sample_index.h"
#include "formats/tar.h"
#include "io/reader.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stoker::fuzz::MemFile mem(data, size);
  stoker::Result<stoker::File> file = stoker::File::OpenRead(mem.path());
  if (!file.ok()) return 0;
  stoker::Result<std::vector<stoker::TarMember>> members = stoker::ScanTar(*file, size);
  if (!members.ok()) return 0;
  for (const stoker::TarMember& m : *members) {
    if (m.data_offset + m.size > size || m.header_offset > m.data_offset) __builtin_trap();  // a member past the file
  }
  for (stoker::KeyRule rule : {stoker::KeyRule::kWebDataset, stoker::KeyRule::kUnderscoreSuffix}) {
    (void)stoker::GroupSamples(*members, rule, "fuzz.tar");
  }
  stoker::Result<std::unique_ptr<stoker::RandomAccessReader>> reader = stoker::OpenReader(mem.path());
  if (!reader.ok()) return 0;
  stoker::TarStream stream(**reader, size, /*small_start=*/true);
  for (const stoker::TarMember& want : *members) {
    stoker::Result<std::optional<stoker::TarMember>> got = stream.Next();
    if (!got.ok() || !*got || (*got)->name != want.name || (*got)->data_offset != want.data_offset ||
        (*got)->size != want.size) {
      __builtin_trap();  // the stream and the walk disagree on an archive the walk read whole
    }
    std::vector<uint8_t> bytes;
    if (!stream.Append(want.data_offset, want.data_offset + want.size, &bytes).ok() || bytes.size() != want.size ||
        (want.size > 0 && std::memcmp(bytes.data(), data + want.data_offset, want.size) != 0)) {
      __builtin_trap();  // a member's bytes are not the file's
    }
  }
  stoker::Result<std::optional<stoker::TarMember>> end = stream.Next();
  if (!end.ok() || *end) __builtin_trap();  // the walk's end is the stream's
  return 0;
}
