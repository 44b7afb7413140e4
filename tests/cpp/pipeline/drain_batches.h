// tests/cpp/pipeline/drain_batches.h — a device loader's epoch as bytes, for
// the tests that compare it with the host loader's (device_loader_test,
// gpu_decode_loader_test).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stoker/loader.h"

namespace stoker::test_data {

// Every array of every batch, as bytes, in delivery order; each batch is
// released right after it is read (the consumer frees slots as fast as it can,
// which is when a slot reused too early would show).
inline std::vector<std::string> Drain(Loader& l) {
  std::vector<std::string> out;
  while (true) {
    auto batch = l.Next();
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok() || !*batch) break;
    EXPECT_TRUE((*batch)->NeededOn(0).ok());
    std::string bytes;
    for (const ArrayView& a : (*batch)->arrays()) bytes.append(reinterpret_cast<const char*>(a.data), a.nbytes);
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace stoker::test_data
