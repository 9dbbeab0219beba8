#include "engine/checkpoint/hf_weights.h"

#include "engine/checkpoint/safetensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace shardscope::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shapeText(at::IntArrayRef shape)
{
    std::ostringstream out;
    out << "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        out << (i ? ", " : "") << shape[i];
    out << "]";
    return out.str();
}

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The shard files an index names, each checked to exist.
Result<std::vector<fs::path>> indexedShards(const fs::path& dir)
{
    const fs::path indexPath = dir / "model.safetensors.index.json";
    std::ifstream in(indexPath);
    if (!in)
        return makeError(dir.string()
                             + " has neither model.safetensors nor model.safetensors.index.json; "
                               "point model.pretrained at a folder written by save_pretrained",
                         ErrorKind::Io);
    const json index = json::parse(in, nullptr, false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
        return makeError(indexPath.string() + " is not a safetensors index (a JSON object with a \"weight_map\" object)",
                         ErrorKind::Syntax);
    std::set<std::string> names;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
        if (!file.is_string())
            return makeError(indexPath.string() + ": weight_map[\"" + tensor + "\"] is not a file name", ErrorKind::BadValue);
        names.insert(file.get<std::string>());
    }
    std::vector<fs::path> files;
    for (const auto& name : names) {
        if (!fs::exists(dir / name))
            return makeError(indexPath.string() + " names the shard " + name + ", which is missing from " + dir.string()
                                 + "; copy or download the whole folder again",
                             ErrorKind::Io);
        files.push_back(dir / name);
    }
    return files;
}

} // namespace

Result<std::map<std::string, at::Tensor>> readHfTensors(const std::string& dirText)
{
    const fs::path dir(dirText);
    std::vector<fs::path> files;
    if (fs::exists(dir / "model.safetensors")) {
        files.push_back(dir / "model.safetensors");
    } else {
        auto shards = indexedShards(dir);
        if (!shards)
            return shards.error();
        files = *shards;
    }
    std::map<std::string, at::Tensor> tensors;
    try {
        for (const auto& file : files)
            for (auto& [name, tensor] : readSafetensors(file.string()))
                tensors[name] = tensor;
    } catch (const std::exception& e) {
        return makeError(std::string("model.pretrained: ") + e.what(), ErrorKind::Io);
    }
    return tensors;
}

Result<HfWeights> loadHfWeights(const std::string& dir, const std::vector<ExpectedTensor>& expected,
                                const std::vector<std::string>& ignorableSuffixes)
{
    auto all = readHfTensors(dir);
    if (!all)
        return all.error();
    HfWeights out;
    for (const auto& want : expected) {
        auto it = all->find(want.name);
        if (it == all->end())
            return makeError("model.pretrained: " + dir + " has no tensor '" + want.name
                                 + "', which config.json's architecture needs; the folder is incomplete or belongs to "
                                   "another model (check config.json against the weights)",
                             ErrorKind::BadValue);
        if (it->second.sizes() != at::IntArrayRef(want.shape))
            return makeError("model.pretrained: " + dir + ": tensor '" + want.name + "' has shape "
                                 + shapeText(it->second.sizes()) + " but config.json's architecture gives "
                                 + shapeText(want.shape) + "; the weights and config.json disagree",
                             ErrorKind::BadValue);
        out.tensors[want.name] = it->second.to(at::kFloat);
        all->erase(it);
    }
    for (const auto& [name, tensor] : *all) {
        bool ignorable = false;
        for (const auto& suffix : ignorableSuffixes)
            ignorable = ignorable || endsWith(name, suffix);
        if (!ignorable)
            out.unused.push_back(name);
    }
    return out;
}

} // namespace shardscope::checkpoint
