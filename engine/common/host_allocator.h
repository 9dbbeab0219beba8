#pragma once

// How a rank's process hands host memory back and forth with the kernel.

namespace shardscope {

// Note [keeping freed host memory]: glibc's malloc serves a block above its mmap threshold
// (128 KiB at first, adjusted up to 32 MiB as such blocks are freed) with a fresh mmap and
// returns it with munmap on free, and it trims the heap's top once 128 KiB of it is free. A
// training step allocates and frees the same activation and gradient tensors (megabytes each)
// every step, so with those defaults each step pays the kernel's page faults again: measured on a
// 2-core VM, a [4, 128, 1408] fp32 tensor took 1.6 ms to allocate and fill fresh against 0.3 ms
// reused, about 4 % of a LoRA step of the 20M Llama (docs/BENCHMARKS.md). So a rank raises both
// thresholds (blocks up to 256 MiB come from the heap and stay there for the next step; the heap is
// trimmed once 1 GiB of its top is free): its resident memory stays near its peak, which is what
// a training process holds anyway. A user's own MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_
// (glibc's environment tunables) win, and another allocator (LD_PRELOAD of jemalloc, tcmalloc)
// is not touched. Returns whether the thresholds were set.
bool keepFreedHostMemoryForReuse();

} // namespace shardscope
