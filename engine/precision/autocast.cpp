#include "engine/precision/autocast.h"

#include <ATen/autocast_mode.h>

namespace shardscope::precision {

AutocastGuard::AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled)
    : m_device(device), m_previousEnabled(at::autocast::is_autocast_enabled(device)),
      m_previousDtype(at::autocast::get_autocast_dtype(device)), m_previousCacheEnabled(at::autocast::is_autocast_cache_enabled())
{
    at::autocast::set_autocast_enabled(device, enabled);
    at::autocast::set_autocast_dtype(device, dtype);
    at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard()
{
    if (at::autocast::decrement_nesting() == 0)
        at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(m_device, m_previousEnabled);
    at::autocast::set_autocast_dtype(m_device, m_previousDtype);
    at::autocast::set_autocast_cache_enabled(m_previousCacheEnabled);
}

} // namespace shardscope::precision
