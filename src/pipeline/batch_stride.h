// pipeline/batch_stride.h — one worker's share of a rank's batches.
//
// Workers that build a rank's batches elsewhere (Ray actors,
// python/stoker/ray_workers.py) split them round-robin in cycles of `stride`
// batches: a worker makes the rank's batches b whose place in the cycle,
// b % stride, is in [offset, offset + share), in order. Worker j of N equal
// workers has stride N, offset j, share 1; unequal ones (the trainer's own
// CPUs beside its Ray workers) take shares in proportion to their CPUs.
// A worker's plan is the rank's plan restricted to those batches, which is
// again spans of the epoch's global order (planner.h): one slice per chosen
// batch, adjacent slices merged, so it costs O(batches) and the run, the
// reader and the decoders see an ordinary plan. A sample's bytes depend only
// on the sample and the epoch (its augmentation seed is MixSeed(seed, epoch,
// global sample)), so a worker's batches equal the rank's batches it makes,
// byte for byte. Only a rank's last batch may be short or empty (planner.h,
// ShareOfRank), so a worker's batches are full but for its last, as the run
// assumes.
// Thread-safety: a free function on values.
#pragma once

#include "pipeline/planner.h"

namespace stoker {

// `plan` (a rank's shard plan, fresh or elastic) restricted to its batches b
// with offset <= b % stride < offset + share; info.batches and
// info.rank_samples count what is left, the rest of info is the rank's.
// stride 1, offset 0, share 1: the plan as it is; share 0: no batch. Refused:
// stride < 1, share < 0, offset + share > stride, token runs (strided plans).
Result<EpochPlan> StrideBatches(EpochPlan plan, int batch_size, int stride, int offset, int share = 1);

// Checks stride, offset and share as StrideBatches does, with a message that names the options.
Status CheckBatchShare(int stride, int offset, int share);

}  // namespace stoker
