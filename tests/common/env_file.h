#pragma once

// NAME=VALUE lines a fake rank wrote of its environment (tests/helpers/fake_rank), as a map.

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace shardscope::testing {

inline std::map<std::string, std::string> readEnvFile(const std::filesystem::path& path)
{
    std::map<std::string, std::string> values;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find('=');
        if (eq != std::string::npos)
            values[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return values;
}

} // namespace shardscope::testing
