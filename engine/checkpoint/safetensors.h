#pragma once

// safetensors files: an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw bytes. Trivial to write from C++ and read by the
// `safetensors` package, Hugging Face's loaders and our own tests.

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::checkpoint {

// Writes `tensors` (in the given order) to `path`; throws std::runtime_error on I/O failure.
void writeSafetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor of a file written by any safetensors writer (F32, F64, F16, BF16, I64, I32, U8).
std::map<std::string, at::Tensor> readSafetensors(const std::string& path);

} // namespace shardscope::checkpoint
