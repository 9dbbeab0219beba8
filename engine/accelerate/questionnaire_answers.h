#pragma once

// What the questionnaire's answers so far mean (the machine type after the DeepSpeed / FSDP /
// Megatron-LM answers, CPU only, TPU, ...): the conditions of the tree (questionnaire_tree.cpp)
// and of the session that writes the config (questionnaire.cpp). Internal to engine/accelerate.

#include "engine/accelerate/questionnaire.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

namespace shardscope::config::answers {

inline const std::vector<std::string> kMultiTypes = {"MULTI_CPU", "MULTI_XPU",  "MULTI_HPU",  "MULTI_GPU",   "MULTI_NPU",
                                                     "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_NEURON"};

inline bool in(const std::string& v, std::initializer_list<const char*> set)
{
    return std::any_of(set.begin(), set.end(), [&](const char* s) { return v == s; });
}

inline std::string machine(const Answers& a) { return a.str("distributed_type"); }
inline bool isMulti(const std::string& t) { return std::find(kMultiTypes.begin(), kMultiTypes.end(), t) != kMultiTypes.end(); }
inline bool useCpu(const Answers& a) { return machine(a) == "MULTI_CPU" || (machine(a) == "NO" && a.yes("use_cpu")); }
inline bool useMps(const Answers& a, const Hardware& hw) { return !useCpu(a) && hw.mpsAvailable; }

// distributed_type after the DeepSpeed / FSDP / Megatron-LM answers.
inline std::string effectiveType(const Answers& a)
{
    if (a.yes("use_deepspeed"))
        return "DEEPSPEED";
    if (a.yes("use_fsdp"))
        return "FSDP";
    if (a.yes("use_megatron_lm"))
        return "MEGATRON_LM";
    return machine(a);
}

inline bool local(const Answers& a) { return a.str("compute_environment") == "LOCAL_MACHINE"; }
inline bool ds(const Answers& a) { return local(a) && effectiveType(a) == "DEEPSPEED"; }
inline bool dsBuilt(const Answers& a) { return ds(a) && !a.yes("use_deepspeed_config_file"); }
inline bool fsdp(const Answers& a) { return local(a) && effectiveType(a) == "FSDP"; }
inline bool fsdp1(const Answers& a) { return fsdp(a) && a.integer("fsdp_version", 0) == 1; }
inline bool fsdp2(const Answers& a) { return fsdp(a) && a.integer("fsdp_version", 0) == 2; }
inline bool megatron(const Answers& a) { return local(a) && effectiveType(a) == "MEGATRON_LM"; }
inline bool tpu(const Answers& a) { return local(a) && machine(a) == "XLA"; }
inline bool tpuCluster(const Answers& a) { return tpu(a) && a.yes("tpu_use_cluster"); }
inline bool fp8(const Answers& a) { return a.str("mixed_precision") == "fp8"; }
inline std::string fp8Backend(const Answers& a) { return a.str("fp8_backend"); }

} // namespace shardscope::config::answers
