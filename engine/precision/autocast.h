#pragma once

// An RAII autocast region, the C++ counterpart of Python's `torch.autocast` context manager
// (libtorch has none): enables autocast for one device type with one dtype, and on exit restores
// what was there before. Nesting-safe: the weight-cast cache is cleared only when the outermost
// region ends, as Python does, since weights change between steps.

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace shardscope::precision {

class AutocastGuard {
public:
    // enabled=false: a region where autocast is off (e.g. the loss in fp32 inside an autocast forward).
    AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled = true);
    ~AutocastGuard();
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

private:
    c10::DeviceType m_device;
    bool m_previousEnabled;
    c10::ScalarType m_previousDtype;
    bool m_previousCacheEnabled;
};

} // namespace shardscope::precision
