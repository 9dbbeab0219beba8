#pragma once

// An Accelerate config written inline in a test, parsed as a file would be (a test that cannot
// parse its own config stops at once).

#include "engine/accelerate/accelerate_config.h"

#include <QtGlobal>

#include <string>

namespace shardscope::testing {

inline config::AccelerateConfig parseConfig(const std::string& yaml, const std::string& source = "c.yaml")
{
    auto parsed = config::parseAccelerateConfig(yaml, source, config::FileFormat::Yaml);
    if (!parsed)
        qFatal("the test's config does not parse: %s", parsed.error().message.c_str());
    return *parsed;
}

} // namespace shardscope::testing
