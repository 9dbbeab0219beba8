#include "engine/checkpoint/safetensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace shardscope::checkpoint {

namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtypeNames()
{
    static const std::vector<std::pair<std::string, at::ScalarType>> kNames = {
        {"F32", at::kFloat}, {"F64", at::kDouble}, {"F16", at::kHalf}, {"BF16", at::kBFloat16},
        {"I64", at::kLong},  {"I32", at::kInt},    {"U8", at::kByte}};
    return kNames;
}

std::string dtypeName(at::ScalarType type)
{
    for (const auto& [name, t] : dtypeNames())
        if (t == type)
            return name;
    throw std::runtime_error(std::string("safetensors: unsupported dtype ") + c10::toString(type));
}

} // namespace

void writeSafetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata)
{
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty())
        header["__metadata__"] = metadata;
    std::vector<at::Tensor> contiguous;
    std::int64_t offset = 0;
    for (const auto& [name, tensor] : tensors) {
        auto t = tensor.detach().to(at::kCPU).contiguous();
        const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
        header[name] = {
            {"dtype", dtypeName(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
        contiguous.push_back(t);
    }
    std::string text = header.dump();
    // The data must start 8-byte aligned; pad the header with spaces as the reference writer does.
    while ((8 + text.size()) % 8 != 0)
        text.push_back(' ');
    errno = 0;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
        throw std::runtime_error("cannot write " + path);
    const std::uint64_t length = text.size();
    unsigned char lengthBytes[8];
    for (int i = 0; i < 8; ++i)
        lengthBytes[i] = static_cast<unsigned char>(length >> (8 * i));
    out.write(reinterpret_cast<const char*>(lengthBytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : contiguous)
        out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
    out.close(); // flushes: a full disk often shows only here
    if (!out)
        throw std::runtime_error("writing " + path + " failed: " + (errno ? std::strerror(errno) : "write failed")
                                 + " (disk full?)");
}

std::map<std::string, at::Tensor> readSafetensors(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot read " + path);
    unsigned char lengthBytes[8];
    if (!in.read(reinterpret_cast<char*>(lengthBytes), 8))
        throw std::runtime_error(path + " is not a safetensors file (shorter than 8 bytes)");
    std::uint64_t length = 0;
    for (int i = 0; i < 8; ++i)
        length |= static_cast<std::uint64_t>(lengthBytes[i]) << (8 * i);
    if (length > (1u << 28))
        throw std::runtime_error(path + ": safetensors header of " + std::to_string(length) + " bytes is implausible");
    std::string text(length, '\0');
    in.read(text.data(), static_cast<std::streamsize>(length));
    auto header = nlohmann::json::parse(text, nullptr, false);
    if (header.is_discarded() || !header.is_object())
        throw std::runtime_error(path + ": the safetensors header is not a JSON object");
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

    std::map<std::string, at::Tensor> tensors;
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__")
            continue;
        at::ScalarType type = at::kFloat;
        bool known = false;
        for (const auto& [n, t] : dtypeNames())
            if (info.value("dtype", "") == n) {
                type = t;
                known = true;
            }
        if (!known)
            throw std::runtime_error(path + ": tensor '" + name + "' has unsupported dtype " + info.value("dtype", "?"));
        const auto shape = info.at("shape").get<std::vector<std::int64_t>>();
        const auto range = info.at("data_offsets").get<std::vector<std::int64_t>>();
        auto t = at::empty(shape, at::TensorOptions().dtype(type));
        const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
        if (range.size() != 2 || range[0] < 0 || range[1] - range[0] != bytes)
            throw std::runtime_error(path + ": tensor '" + name + "' has a byte range that does not fit its shape");
        if (range[1] > static_cast<std::int64_t>(data.size()))
            throw std::runtime_error(path + " is truncated: tensor '" + name + "' ends at data byte " + std::to_string(range[1])
                                     + " but the file holds " + std::to_string(data.size())
                                     + "; copy or download the file again");
        std::memcpy(t.data_ptr(), data.data() + range[0], static_cast<std::size_t>(bytes));
        tensors.emplace(name, t);
    }
    return tensors;
}

} // namespace shardscope::checkpoint
