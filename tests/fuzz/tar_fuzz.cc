// tests/fuzz/tar_fuzz.cc — the tar header walk (ustar, GNU long names, pax,
// base-256 sizes) and the grouping of members into samples, on any bytes.
#include <cstdint>

#include "formats/sample_index.h"
#include "formats/tar.h"
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
  return 0;
}
