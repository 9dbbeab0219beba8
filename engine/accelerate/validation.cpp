#include "engine/accelerate/validation.h"

#include "engine/accelerate/ascii_case.h"
#include "engine/accelerate/deepspeed_json.h"
#include "engine/accelerate/questionnaire.h"
#include "engine/accelerate/schema.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace shardscope::config {

namespace {

const std::vector<std::string> kMultiAccelerator = {"MULTI_GPU",  "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA",
                                                    "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU", "MULTI_NEURON"};

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

bool isDigits(const std::string& s)
{
    return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Text that YAML 1.1 reads as a string although the user meant a number in exponent form (1e8).
bool looksLikeExponent(const std::string& s)
{
    const auto e = s.find_first_of("eE");
    return e != std::string::npos && e > 0 && e + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[0]));
}

// A key under `section` written without the prefix accelerate launch adds (reference §4.2:
// fsdp_config.x becomes args.fsdp_x, dynamo_config.x becomes args.dynamo_x): the prefixed key.
std::string prefixedKey(std::string_view section, const std::string& key)
{
    std::string prefix;
    if (section == "fsdp_config" && key.rfind("fsdp", 0) != 0)
        prefix = "fsdp_";
    else if (section == "dynamo_config" && key.rfind("dynamo_", 0) != 0)
        prefix = "dynamo_";
    if (prefix.empty() || !findKeySpec(section, prefix + key))
        return {};
    return prefix + key;
}

bool kindAccepted(const KeySpec& spec, const Value& v)
{
    if (v.isNull())
        return true; // None means "not set" to Accelerate
    for (auto k : spec.types) {
        if (k == v.kind())
            return true;
        if (k == Value::Kind::Float && v.isInt())
            return true;
    }
    return false;
}

class Checker {
public:
    // `raw` is the file as written (its types and spellings are checked); `c` is what accelerate
    // launch makes of it (normalizeConfig), whose meaning is checked.
    Checker(const AccelerateConfig& raw, const AccelerateConfig& c, const ValidationOptions& o) : m_raw(raw), m_c(c), m_o(o) { }

    void error(std::string key, std::string msg) { m_out.push_back({Severity::Error, std::move(key), std::move(msg)}); }
    void warning(std::string key, std::string msg) { m_out.push_back({Severity::Warning, std::move(key), std::move(msg)}); }
    // Machine-dependent: a warning when validating a file, an error when launching.
    void machine(std::string key, std::string msg)
    {
        m_out.push_back({m_o.forLaunch ? Severity::Error : Severity::Warning, std::move(key), std::move(msg)});
    }

    const Value* nested(const char* s, const char* k) const { return m_c.nested(s, k); }
    std::string nstr(const char* s, const char* k) const
    {
        const Value* v = nested(s, k);
        return v && v->isString() ? v->asString() : std::string();
    }
    std::optional<std::int64_t> nint(const char* s, const char* k) const
    {
        const Value* v = nested(s, k);
        return v && v->isInt() ? std::optional<std::int64_t>(v->asInt()) : std::nullopt;
    }

    std::vector<Diagnostic> run();

private:
    void types();
    void topLevelTypes(const std::string& section);
    void nestedTypes(const std::string& section);
    void launchChecks();
    void fsdp();
    void deepspeed();
    void parallelism();
    bool readAsAccelerateReadsIt(const std::string& section, const std::string& key, const std::string& path, const KeySpec& spec,
                                 const Value& v);
    void fp8();
    void machineChecks();

    const AccelerateConfig& m_raw;
    const AccelerateConfig& m_c;
    const ValidationOptions& m_o;
    std::vector<Diagnostic> m_out;
};

void Checker::types()
{
    const std::string section = m_raw.kind() == ConfigKind::Cluster ? std::string(kClusterSection)
                                                                    : std::string(kSageMakerSection);
    topLevelTypes(section);
    nestedTypes(section);
}

// The file's own keys: each value's type, and the YAML 1.1 readings that surprise.
void Checker::topLevelTypes(const std::string& section)
{
    for (const auto& e : m_raw.given().asMap()) {
        if (!e.key.isString())
            continue;
        const std::string key = e.key.asString();
        const KeySpec* spec = findKeySpec(section, key);
        if (!spec)
            continue;
        const Value& v = e.value;
        if (spec->required && v.isNull() && key != "mixed_precision") {
            error(key, key
                           + " is null, but Accelerate needs a value (its writer drops nulls, so a saved copy would "
                             "not load); write for example `"
                           + key + ": " + (spec->allowed.empty() ? std::string("...") : spec->allowed.front()) + "`");
            continue;
        }
        if (key == "distributed_type" && v.isBool()) {
            error(key, "distributed_type is the boolean " + v.pyRepr()
                           + " because YAML 1.1 reads an unquoted NO as false; "
                             "no launcher matches it. Write `distributed_type: 'NO'` (quoted)");
            continue;
        }
        if (key == "mixed_precision" && v.isBool()) {
            error(key, "mixed_precision is the boolean " + v.pyRepr()
                           + " because YAML 1.1 reads an unquoted no as false "
                             "(accelerate launch crashes on it). Write `mixed_precision: 'no'` (quoted)");
            continue;
        }
        if (!kindAccepted(*spec, v)) {
            std::string fix;
            if (v.isString() && spec->types.front() == Value::Kind::Int)
                fix = pythonInt(v.asString()) ? "; remove the quotes: `" + key + ": " + v.asString() + "`"
                                              : "; write a whole number, e.g. `" + key + ": 2`";
            if (key == "gpu_ids" && v.isInt())
                fix = "; quote it: `gpu_ids: '" + std::to_string(v.asInt()) + "'` (accelerate launch calls .split(\",\") on it)";
            error(key, key + " must be " + describeKinds(spec->types) + ", not " + v.typeName() + " (" + v.pyRepr() + ")" + fix);
            continue;
        }
        if (key == "mixed_precision" && v.isString() && v.asString() != asciiLower(v.asString())
            && contains(spec->allowed, asciiLower(v.asString()))) {
            warning(key, "mixed_precision is '" + v.asString()
                             + "'; accelerate launch lower-cases it, and so does Shardscope: it runs as '"
                             + asciiLower(v.asString()) + "'. Write `mixed_precision: " + asciiLower(v.asString()) + "`");
            continue;
        }
        if (key == "main_process_port" && v.isInt() && (v.asInt() < 0 || v.asInt() > 65535)) {
            error(key, "main_process_port is " + std::to_string(v.asInt())
                           + ", which is not a TCP port; use 1 to 65535 (e.g. 29500), "
                             "or 0 to pick a free port on a single machine");
            continue;
        }
        if (v.isString() && !spec->allowed.empty() && !contains(spec->allowed, v.asString()))
            error(
                key, key + " is '" + v.asString() + "', which is not one of: " + [&] {
                    std::string s;
                    for (const auto& a : spec->allowed)
                        s += (s.empty() ? "" : ", ") + a;
                    return s;
                }());
    }
}

// Values accelerate launch hands to the runtime as text that reads them anyway (booleans with
// str_to_bool, mesh sizes with int()), and override_linear_precision's length: said here; true when
// the value needs no other check.
bool Checker::readAsAccelerateReadsIt(const std::string& s, const std::string& key, const std::string& path, const KeySpec& spec,
                                      const Value& v)
{
    // Accelerate's launcher hands section values to the runtime as text, which reads booleans
    // with str_to_bool and sizes with int(): accepted with a warning, read the same here.
    if (v.isString() && spec.types.front() == Value::Kind::Bool && accelerateBool(&v)) {
        const std::string meant = *accelerateBool(&v) ? "true" : "false";
        warning(path, path + " is the string '" + v.asString() + "'; Accelerate reads it as " + meant
                          + " (str_to_bool), and so does Shardscope. Write `" + key + ": " + meant + "`");
        return true;
    }
    // (cp_size and sp_size stay errors: accelerate launch compares them with 1 and fails on text.)
    if (v.isString() && s == "parallelism_config" && spec.types.front() == Value::Kind::Int && isDigits(v.asString())
        && key != "parallelism_config_cp_size" && key != "parallelism_config_sp_size") {
        warning(path, path + " is the string '" + v.asString() + "'; Accelerate reads the number (int()), and so does "
                          + "Shardscope. Write `" + key + ": " + v.asString() + "`");
        return true;
    }
    if (key == "override_linear_precision" && v.isList() && v.asList().size() != 3) {
        const std::string items = std::to_string(v.asList().size());
        if (v.asList().size() < 3)
            error(path, path + " has " + items
                            + " items; it takes three booleans (fprop, dgrad, wgrad: the forward, "
                              "input-gradient and weight-gradient matmuls), and accelerate launch fails on a "
                              "shorter list. Write `override_linear_precision: [false, false, false]`");
        else
            warning(path, path + " has " + items
                              + " items; accelerate launch uses the first three (fprop, dgrad, "
                                "wgrad) and drops the rest, and so does Shardscope. Keep three");
        return true;
    }
    return false;
}

// The keys of fsdp_config, deepspeed_config, ...: unprefixed names, unknown and removed keys, types.
void Checker::nestedTypes(const std::string& section)
{
    for (auto nestedSection : kNestedSections) {
        const Value* sec = m_raw.given().find(nestedSection);
        if (!sec || sec->isNull())
            continue;
        const std::string s(nestedSection);
        if (!sec->isMap()) {
            // The top-level check has said it already when the section is a key of the schema.
            if (!findKeySpec(section, s))
                error(s, s + " must be a mapping of keys, not " + sec->typeName());
            continue;
        }
        for (const auto& e : sec->asMap()) {
            std::string key = e.key.isString() ? e.key.asString() : e.key.pyRepr();
            std::string path = s + "." + key;
            const KeySpec* spec = e.key.isString() ? findKeySpec(s, key) : nullptr;
            if (!spec && e.key.isString()) {
                if (const std::string full = prefixedKey(s, key); !full.empty()) {
                    if (sec->find(full))
                        warning(path, path + " is " + s + "." + full + " without its prefix, and the file has " + full
                                          + " too; accelerate launch takes the later of the two. Delete one of them");
                    else
                        warning(path, path + " has no prefix: accelerate launch reads it as " + full
                                          + ", and so does Shardscope. "
                                            "Write `"
                                          + full + "` to say so");
                    key = full;
                    path = s + "." + key;
                    spec = findKeySpec(s, key);
                }
            }
            if (!spec && s == "parallelism_config" && findKeySpec(s, "parallelism_config_" + key)) {
                warning(path, path + " has no effect: accelerate launch reads only parallelism_config_" + key
                                  + " (with the prefix) and drops this key, and so does Shardscope. Write `parallelism_config_"
                                  + key + "`");
                continue;
            }
            if (!spec) {
                const std::string near = nearestKey(s, key);
                warning(path, path + " is not a key Accelerate knows; it is kept and passed on as is"
                                  + (near.empty() ? std::string() : "; did you mean `" + near + "`?"));
                continue;
            }
            if (!spec->removedIn.empty()) {
                warning(path, path + " was removed in Accelerate " + spec->removedIn + " and is ignored; " + spec->doc);
                continue;
            }
            const Value& v = e.value;
            if (key == "fsdp_reshard_after_forward" || key == "fsdp_sharding_strategy" || key == "fsdp_state_dict_type"
                || key == "fsdp_auto_wrap_policy" || key == "gradient_accumulation_steps" || key == "gradient_clipping")
                continue; // checked with their meaning below (names, digits, case, "auto")
            if (key == "zero_stage" && v.isString() && isDigits(v.asString())) {
                warning(path, path + " is the string '" + v.asString()
                                  + "'; Accelerate passes it on as text and DeepSpeed reads "
                                    "the number, and so does Shardscope (stage "
                                  + v.asString() + "). Write `zero_stage: " + v.asString() + "`");
                continue;
            }
            if (key == "dynamo_backend" && v.isString() && v.asString() != asciiUpper(v.asString())
                && contains(spec->allowed, asciiUpper(v.asString()))) {
                warning(path, path + " is '" + v.asString()
                                  + "'; accelerate launch upper-cases it, and so does Shardscope: it runs as "
                                  + asciiUpper(v.asString()) + ". Write `dynamo_backend: " + asciiUpper(v.asString()) + "`");
                continue;
            }
            if (readAsAccelerateReadsIt(s, key, path, *spec, v))
                continue;
            if (!kindAccepted(*spec, v)) {
                std::string fix;
                if (key == "override_linear_precision" && v.isString())
                    fix = "; write a list: `override_linear_precision: [false, false, false]` (a string breaks the "
                          "launcher's FP8 environment)";
                else if (v.isString() && spec->types.front() == Value::Kind::Int && looksLikeExponent(v.asString()))
                    fix = "; write a plain number (YAML 1.1 reads " + v.asString()
                          + " as text: write it out in digits, e.g. 1e8 as 100000000)";
                else if (v.isString() && spec->types.front() == Value::Kind::Int)
                    fix = pythonInt(v.asString()) ? "; write a plain number without quotes"
                                                  : "; write a whole number, e.g. `" + key + ": 2`";
                else if (v.isString() && spec->types.front() == Value::Kind::Float)
                    fix = pythonFloat(v.asString()) ? "; write a plain number without quotes"
                                                    : "; write a number, e.g. `" + key + ": 0.5`";
                error(path,
                      path + " must be " + describeKinds(spec->types) + ", not " + v.typeName() + " (" + v.pyRepr() + ")" + fix);
                continue;
            }
            if (v.isString() && !spec->allowed.empty() && !contains(spec->allowed, v.asString()))
                error(
                    path, path + " is '" + v.asString() + "', which is not one of: " + [&] {
                        std::string s2;
                        for (const auto& a : spec->allowed)
                            s2 += (s2.empty() ? "" : ", ") + a;
                        return s2;
                    }());
        }
    }
}

void Checker::launchChecks()
{
    if (m_c.kind() != ConfigKind::Cluster)
        return;
    const std::string type = m_c.distributedType();
    const auto nproc = m_c.intField("num_processes");
    const auto machines = m_c.intField("num_machines").value_or(1);
    if (nproc && *nproc == -1) {
        const std::string msg = "num_processes is not set (-1): You need to manually pass in `--num_processes` using this "
                                "config yaml; add `num_processes: N` or pass --num_processes N";
        m_o.forLaunch ? error("num_processes", msg) : warning("num_processes", msg);
    }
    if (nproc && *nproc != -1 && *nproc < 1)
        error("num_processes", "num_processes is " + std::to_string(*nproc)
                                   + "; a run needs at least 1 process (-1 means "
                                     "\"give --num_processes at launch\"): set num_processes: 1 or more");
    // Accelerate's simple launcher (MULTI_CPU, NO) runs one mpirun over a hostfile's machines;
    // Shardscope starts and watches its ranks itself, one launcher per machine.
    if (const std::string hostfile = nstr("mpirun_config", "mpirun_hostfile");
        !hostfile.empty() && (type == "MULTI_CPU" || type == "NO")) {
        const std::string msg = "mpirun_config.mpirun_hostfile is " + hostfile
                                + ": accelerate launch starts every rank through one mpirun over the hosts in that file, "
                                  "but Shardscope starts and watches its ranks itself, one launcher per machine, without "
                                  "mpirun. Run `shardscope launch --config_file FILE --machine_rank N` on each machine, "
                                  "submit the run to SLURM (--target slurm), or remove mpirun_config to run on this machine";
        m_o.forLaunch ? error("mpirun_config.mpirun_hostfile", msg) : warning("mpirun_config.mpirun_hostfile", msg);
    }
    const bool multiGpu = contains(kMultiAccelerator, type);
    if (multiGpu && nproc && *nproc >= 1 && *nproc < 2)
        error("num_processes", "num_processes is " + std::to_string(*nproc) + " with distributed_type " + type
                                   + ": You need to use at least 2 processes to use `--multi_gpu`; set num_processes: 2 or "
                                     "more, or distributed_type: 'NO'");
    const Value gpu = m_c.field("gpu_ids");
    if (gpu.isString() && gpu.asString() != "all") {
        int ids = 0;
        std::stringstream ss(gpu.asString());
        for (std::string id; std::getline(ss, id, ',');)
            ids += !id.empty();
        if (multiGpu && ids < 2 && machines <= 1)
            error("gpu_ids", "gpu_ids is '" + gpu.asString()
                                 + "': Less than two GPU ids were configured and tried to run on "
                                   "multiple GPUs. List at least two ids (gpu_ids: '0,1') or use distributed_type: 'NO'");
        if (nproc && *nproc > 0 && machines > 0 && *nproc / machines > ids && ids > 0
            && (multiGpu || type == "FSDP" || type == "DEEPSPEED" || type == "MEGATRON_LM"))
            error("num_processes", "num_processes is " + std::to_string(*nproc) + " (" + std::to_string(*nproc / machines)
                                       + " per machine) but gpu_ids lists only " + std::to_string(ids) + " GPU(s) ('"
                                       + gpu.asString() + "'); lower num_processes or list more ids");
    }
    if (const auto port = m_c.intField("main_process_port"); port && *port == 0 && machines > 1)
        error("main_process_port", "main_process_port is 0, which picks a free port on this machine only; with num_machines "
                                       + std::to_string(machines) + " every machine must know the port: give one, e.g. 29500");
    // Sections that only one distributed_type reads: elsewhere both launchers ignore them.
    for (auto [sectionKey, owner] :
         {std::pair{"fsdp_config", "FSDP"}, {"deepspeed_config", "DEEPSPEED"}, {"megatron_lm_config", "MEGATRON_LM"}}) {
        const Value* sec = m_c.given().find(sectionKey);
        if (sec && sec->isMap() && !sec->asMap().empty() && type != owner && !type.empty())
            warning(sectionKey, std::string(sectionKey) + " is set but distributed_type is " + type
                                    + ", so it is ignored (by accelerate "
                                      "launch as by Shardscope); set distributed_type: "
                                    + owner + " to use it, or delete the section");
    }
    if (machines > 1) {
        if (m_c.field("main_process_ip").isNull())
            error("main_process_ip", "num_machines is " + std::to_string(machines)
                                         + " but main_process_ip is not set; add the address of the rank-0 machine");
        if (m_c.field("main_process_port").isNull())
            error("main_process_port",
                  "num_machines is " + std::to_string(machines) + " but main_process_port is not set; add a port, e.g. 29500");
        if (const auto rank = m_c.intField("machine_rank"); rank && (*rank < 0 || *rank >= machines))
            error("machine_rank", "machine_rank is " + std::to_string(*rank) + " but there are " + std::to_string(machines)
                                      + " machines; use 0 to " + std::to_string(machines - 1));
        if (nproc && *nproc > 0 && *nproc % machines != 0)
            error("num_processes", "num_processes (" + std::to_string(*nproc)
                                       + ", the total over all machines) is not a "
                                         "multiple of num_machines ("
                                       + std::to_string(machines) + "); each machine runs num_processes / num_machines");
    }
    // (A dynamo_backend written in dynamo_config has had its check in nestedTypes: one error for one
    // bad value. This one is for the legacy top-level key, which accelerate launch moves there.)
    if (const Value* b = m_c.nested("dynamo_config", "dynamo_backend");
        b && b->isString() && !m_raw.nested("dynamo_config", "dynamo_backend")) {
        const std::string up = asciiUpper(b->asString());
        if (!contains(dynamoBackends(), up))
            error("dynamo_config.dynamo_backend", "dynamo_config.dynamo_backend '" + b->asString()
                                                      + "' is not a torch.compile backend Accelerate knows; use e.g. INDUCTOR");
    }
    // Scalars the launcher never reads from the file (reference §4.2): say so instead of failing.
    const Value rdzv = m_c.field("rdzv_backend");
    if (rdzv.isString() && rdzv.asString() != "static" && machines > 1)
        warning("rdzv_backend", "rdzv_backend '" + rdzv.asString()
                                    + "' is ignored by accelerate launch (its CLI default wins), and Shardscope's "
                                      "launchers meet through machine 0's launcher whatever it says; remove it, or pass "
                                      "--rdzv_backend to accelerate launch itself");
    if (type == "FSDP")
        fsdp();
    if (type == "DEEPSPEED")
        deepspeed();
    parallelism();
    fp8();
}

void Checker::fsdp()
{
    const auto version = nint("fsdp_config", "fsdp_version").value_or(1);
    if (version != 1 && version != 2)
        error("fsdp_config.fsdp_version", "fsdp_config.fsdp_version is " + std::to_string(version) + "; use 1 or 2");
    const Value* raf = nested("fsdp_config", "fsdp_reshard_after_forward");
    const Value* legacy = nested("fsdp_config", "fsdp_sharding_strategy");
    const auto& strategies = fsdpShardingStrategies();
    auto upper = [](const std::string& s) { return asciiUpper(s); };
    if (legacy && !legacy->isNull()) {
        const bool okName = legacy->isString()
                            && (contains(strategies, upper(legacy->asString()))
                                || (legacy->asString().size() == 1 && legacy->asString()[0] >= '1'
                                    && legacy->asString()[0] <= '5'));
        const bool okInt = legacy->isInt() && legacy->asInt() >= 1 && legacy->asInt() <= 5;
        if (!okName && !okInt)
            error("fsdp_config.fsdp_sharding_strategy",
                  "fsdp_config.fsdp_sharding_strategy is " + legacy->pyRepr()
                      + "; use FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 (or 1-5)");
    }
    if (version == 2) {
        if (raf && !raf->isBool() && !raf->isNull()) {
            const std::string s = raf->isString() ? raf->asString() : raf->pyRepr();
            error("fsdp_config.fsdp_reshard_after_forward",
                  "fsdp_config.fsdp_reshard_after_forward is " + raf->pyRepr() + " but FSDP2 needs true or false"
                      + (contains(strategies, upper(s))
                             ? " (a strategy name is FSDP1's; `shardscope config` or `accelerate to-fsdp2` maps "
                               "FULL_SHARD/HYBRID_SHARD to true, the others to false)"
                             : std::string()));
        }
        if (nstr("fsdp_config", "fsdp_state_dict_type") == "LOCAL_STATE_DICT")
            error("fsdp_config.fsdp_state_dict_type", "fsdp_config.fsdp_state_dict_type LOCAL_STATE_DICT is FSDP1-only; use "
                                                      "SHARDED_STATE_DICT or FULL_STATE_DICT with fsdp_version: 2");
        if (const Value* fp = nested("fsdp_config", "fsdp_forward_prefetch"); fp && fp->truthy())
            error("fsdp_config.fsdp_forward_prefetch", "fsdp_config.fsdp_forward_prefetch: true is not implemented for FSDP2 "
                                                       "(Accelerate raises); set it to false or use fsdp_version: 1");
        for (const char* k : {"fsdp_backward_prefetch", "fsdp_use_orig_params", "fsdp_sync_module_states"})
            if (const Value* v = nested("fsdp_config", k); v && !v->isNull())
                warning(std::string("fsdp_config.") + k,
                        std::string("fsdp_config.") + k + " is an FSDP1 option; FSDP2 ignores it");
    } else {
        if (raf && raf->isString() && contains(strategies, upper(raf->asString())) && (!legacy || legacy->isNull()))
            warning("fsdp_config.fsdp_reshard_after_forward",
                    "fsdp_config.fsdp_reshard_after_forward holds the FSDP1 strategy " + raf->asString()
                        + ". Accelerate's launcher never passes it on and launches FULL_SHARD (its known bug); Shardscope "
                          "honours "
                        + raf->asString() + ". To get it under Accelerate too, add fsdp_sharding_strategy: " + raf->asString());
        if (raf && !raf->isNull() && !raf->isBool() && !(raf->isString() && contains(strategies, upper(raf->asString()))))
            error("fsdp_config.fsdp_reshard_after_forward",
                  "fsdp_config.fsdp_reshard_after_forward is " + raf->pyRepr()
                      + "; with FSDP1 use a strategy name (FULL_SHARD, SHARD_GRAD_OP, ...)");
        const Value* eff = nested("fsdp_config", "fsdp_cpu_ram_efficient_loading");
        const Value* sync = nested("fsdp_config", "fsdp_sync_module_states");
        // Only what the file says is checked: absent keys take the launch CLI defaults (both true).
        if (eff && eff->truthy() && sync && !sync->truthy())
            error("fsdp_config.fsdp_sync_module_states",
                  "When using `--fsdp_cpu_ram_efficient_loading` set `--fsdp_sync_module_states` to `True`: "
                  "fsdp_config.fsdp_cpu_ram_efficient_loading is true but fsdp_sync_module_states is "
                      + sync->pyRepr()
                      + "; set fsdp_sync_module_states: true (only rank 0 loads the weights, the others need them broadcast)");
    }
    const std::string sd = nstr("fsdp_config", "fsdp_state_dict_type");
    if (const Value* v = nested("fsdp_config", "fsdp_state_dict_type"); v && !v->isNull() && !v->isString())
        error("fsdp_config.fsdp_state_dict_type", "fsdp_config.fsdp_state_dict_type must be a name, not " + v->typeName());
    else if (!sd.empty() && !contains({"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT", "1", "2", "3"}, upper(sd)))
        error("fsdp_config.fsdp_state_dict_type", "fsdp_config.fsdp_state_dict_type '" + sd
                                                      + "' is not FULL_STATE_DICT, "
                                                        "LOCAL_STATE_DICT or SHARDED_STATE_DICT");
    const std::string wrap = nstr("fsdp_config", "fsdp_auto_wrap_policy");
    if (!wrap.empty() && !contains({"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"}, upper(wrap)))
        error("fsdp_config.fsdp_auto_wrap_policy",
              "fsdp_config.fsdp_auto_wrap_policy '" + wrap
                  + "' is not "
                    "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP (Accelerate raises)");
    if (upper(wrap) == "SIZE_BASED_WRAP")
        if (const Value* mn = nested("fsdp_config", "fsdp_min_num_params"); mn && mn->isInt() && mn->asInt() <= 0)
            error("fsdp_config.fsdp_min_num_params", "fsdp_config.fsdp_auto_wrap_policy is SIZE_BASED_WRAP but "
                                                     "fsdp_min_num_params is "
                                                         + mn->pyRepr() + ", which disables the policy; use e.g. 100000000");
    if (const Value* off = nested("fsdp_config", "fsdp_offload_params"); off && off->truthy()) {
        std::string strat = raf && raf->isString() ? upper(raf->asString())
                                                   : (legacy && legacy->isString() ? upper(legacy->asString()) : "");
        if (strat == "NO_SHARD")
            warning("fsdp_config.fsdp_offload_params",
                    "fsdp_offload_params with NO_SHARD offloads full replicas; use FULL_SHARD to save memory");
    }
}

void Checker::deepspeed()
{
    const Value* stageV = nested("deepspeed_config", "zero_stage");
    const auto stage = stageV && stageV->isInt()                                      ? stageV->asInt()
                       : stageV && stageV->isString() && isDigits(stageV->asString()) ? std::stoll(stageV->asString())
                                                                                      : 2;
    if (stage < 0 || stage > 3)
        error("deepspeed_config.zero_stage", "deepspeed_config.zero_stage is " + std::to_string(stage) + "; use 0, 1, 2 or 3");
    const std::string paramDev = nstr("deepspeed_config", "offload_param_device");
    if (!paramDev.empty() && paramDev != "none" && stage != 3)
        error("deepspeed_config.offload_param_device",
              "deepspeed_config.offload_param_device is '" + paramDev
                  + "' but parameters are offloaded only with ZeRO stage 3 (zero_stage is " + std::to_string(stage)
                  + "); set offload_param_device: none or zero_stage: 3");
    const std::string optDev = nstr("deepspeed_config", "offload_optimizer_device");
    if (!optDev.empty() && optDev != "none" && stage == 0)
        error("deepspeed_config.offload_optimizer_device",
              "deepspeed_config.offload_optimizer_device is '" + optDev
                  + "' but ZeRO stage 0 has no partitioned optimizer to offload; use zero_stage 1-3");
    if (const Value* z3 = nested("deepspeed_config", "zero3_save_16bit_model"); z3 && z3->truthy() && stage != 3)
        warning("deepspeed_config.zero3_save_16bit_model",
                "deepspeed_config.zero3_save_16bit_model only matters with zero_stage: 3");
    if (const Value* z3 = nested("deepspeed_config", "zero3_init_flag");
        z3 && z3->truthy() && stage != 3 && nstr("deepspeed_config", "deepspeed_config_file").empty())
        warning("deepspeed_config.zero3_init_flag", "deepspeed_config.zero3_init_flag is true but zero_stage is "
                                                        + std::to_string(stage) + "; Accelerate turns it off with a warning");
    const std::string file = nstr("deepspeed_config", "deepspeed_config_file");
    if (!file.empty() && file != "none") {
        for (const auto& key : deepSpeedConflictKeys())
            if (const Value* v = nested("deepspeed_config", key.c_str()); v)
                error("deepspeed_config." + key,
                      "deepspeed_config." + key + " is set together with deepspeed_config_file '" + file
                          + "'. Accelerate refuses this (\"When using `deepspeed_config_file`, the following accelerate "
                            "config variables will be ignored\" ... raises ValueError): put it in the JSON file, or pass it "
                            "on the command line to fill an \"auto\" value, and delete it here");
        if (!m_c.field("mixed_precision").isNull())
            error("mixed_precision", "mixed_precision is set in the config file together with deepspeed_config_file '" + file
                                         + "'; Accelerate raises a ValueError. Set fp16/bf16 in the JSON file and delete "
                                           "mixed_precision here, or pass --mixed_precision at launch");
        std::filesystem::path p(file);
        if (p.is_relative() && !m_o.baseDir.empty())
            p = std::filesystem::path(m_o.baseDir) / p;
        std::error_code ec;
        if (!std::filesystem::exists(p, ec)) {
            machine("deepspeed_config.deepspeed_config_file",
                    "deepspeed_config.deepspeed_config_file '" + file
                        + "' does not exist (relative paths are resolved from the launch directory)");
        } else if (auto ds = loadDeepSpeedJson(p.string()); !ds) {
            error("deepspeed_config.deepspeed_config_file", ds.error().message);
        } else if (!ds->contains("zero_optimization")) {
            error("deepspeed_config.deepspeed_config_file",
                  p.string()
                      + ": has no zero_optimization section, which "
                        "Accelerate requires; add \"zero_optimization\": {\"stage\": 2}");
        }
    }
}

void Checker::parallelism()
{
    const Value* pc = m_c.given().find("parallelism_config");
    if (!pc || !pc->isMap() || pc->asMap().empty())
        return;
    const std::string type = m_c.distributedType();
    const auto version = nint("fsdp_config", "fsdp_version").value_or(1);
    // accelerate launch passes the section on for the multi-device, FSDP and DeepSpeed launchers
    // (Accelerate's "--use_parallelism_config needs --use_fsdp" check runs before the file is read).
    if (type != "FSDP" && type != "DEEPSPEED" && !contains(kMultiAccelerator, type)) {
        warning("parallelism_config", "parallelism_config is set but distributed_type is '" + type
                                          + "', whose launcher does not pass it on: it is ignored, by Shardscope as by "
                                            "accelerate launch. Remove it, or use MULTI_GPU, FSDP (fsdp_version 2) or DEEPSPEED");
        return;
    }
    if (type == "FSDP" && version != 2)
        error("parallelism_config", "parallelism_config needs FSDP2 (Accelerate's runtime refuses it with FSDP1); set "
                                    "fsdp_config.fsdp_version: 2");
    // A digit string is read as its number, as the runtime's int() reads it (nestedTypes warns).
    auto size = [&](const char* k) {
        const Value* v = nested("parallelism_config", k);
        if (v && v->isString() && isDigits(v->asString()) && v->asString().size() < 10)
            return static_cast<std::int64_t>(std::stoll(v->asString()));
        return nint("parallelism_config", k).value_or(1);
    };
    const auto rep = size("parallelism_config_dp_replicate_size"), shard = size("parallelism_config_dp_shard_size");
    const auto tp = size("parallelism_config_tp_size"), cp = size("parallelism_config_cp_size"),
               sp = size("parallelism_config_sp_size");
    for (auto [k, v] :
         {std::pair{"dp_replicate_size", rep}, {"dp_shard_size", shard}, {"tp_size", tp}, {"cp_size", cp}, {"sp_size", sp}})
        if (v < 1)
            error(std::string("parallelism_config.parallelism_config_") + k, std::string("parallelism_config.parallelism_config_")
                                                                                 + k + " is " + std::to_string(v)
                                                                                 + "; sizes must be at least 1");
    if (cp > 1 && sp > 1)
        error("parallelism_config.parallelism_config_cp_size",
              "parallelism_config.parallelism_config_cp_size (" + std::to_string(cp)
                  + ", context parallelism) and parallelism_config_sp_size (" + std::to_string(sp)
                  + ", sequence parallelism) cannot be combined; set one of them to 1");
    if ((tp > 1 || cp > 1) && rep > 1 && shard == 1)
        error("parallelism_config.parallelism_config_dp_shard_size",
              "tp/cp > 1 with dp_replicate_size " + std::to_string(rep)
                  + " needs dp_shard_size > 1 (Accelerate rejects "
                    "pure replication with tp/cp); raise dp_shard_size or set dp_replicate_size: 1");
    // Accelerate's _validate_accelerator: FSDP shards over the mesh's dp_shard_cp dimension.
    if (type == "FSDP" && tp > 1 && shard == 1 && cp == 1 && rep == 1)
        error("parallelism_config.parallelism_config_dp_shard_size",
              "FSDP is enabled but parallelism_config has no dimension for FSDP to shard across (dp_shard_size and "
              "cp_size are 1; Accelerate's runtime refuses this); raise dp_shard_size (num_processes = dp_shard_size x "
              "tp_size), or for tensor parallelism alone use distributed_type MULTI_GPU");
    const auto product = rep * shard * tp * cp * (type == "DEEPSPEED" ? 1 : sp);
    const auto nproc = m_c.intField("num_processes");
    if (nproc && *nproc > 0 && product != 1 && product != *nproc && type != "DEEPSPEED")
        error("parallelism_config", "parallelism_config: the sizes multiply to " + std::to_string(product) + " (replicate "
                                        + std::to_string(rep) + " x shard " + std::to_string(shard) + " x tp "
                                        + std::to_string(tp) + " x cp " + std::to_string(cp) + ") but num_processes is "
                                        + std::to_string(*nproc) + "; make the product equal num_processes");
}

void Checker::fp8()
{
    const std::string mp = m_c.mixedPrecision();
    const Value* fp8 = m_c.given().find("fp8_config");
    const bool hasFp8Config = fp8 && fp8->isMap() && !fp8->asMap().empty();
    if (hasFp8Config && mp != "fp8")
        warning("fp8_config", "fp8_config is set but mixed_precision is '" + mp + "'; it is ignored unless mixed_precision: fp8");
    if (mp != "fp8")
        return;
    const bool onCpu = m_c.boolField("use_cpu") || m_c.distributedType() == "MULTI_CPU";
    if (onCpu || (m_o.machine && m_o.machine->gpuCount == 0))
        warning("mixed_precision", "mixed_precision fp8 on the CPU runs emulated (torch._scaled_mm without fp8 hardware): "
                                   "the numbers of an fp8 run without its speed (slower than bf16); for tests and comparisons");
    if (!onCpu && m_o.machine && m_o.machine->gpuCount > 0 && !m_o.machine->fp8Capable) {
        const std::string device = m_o.machine->gpuNames.empty() ? "this machine's GPU" : m_o.machine->gpuNames.front();
        error("mixed_precision", "mixed_precision is fp8 but " + device
                                     + " is below compute capability 8.9, where fp8 matmuls begin (Ada, Hopper: L4, L40, "
                                       "RTX 4090, H100, H200); use bf16 on this GPU, or use_cpu: true to run fp8 emulated");
    }
    const std::string backend = nstr("fp8_config", "backend");
    if (!backend.empty() && backend != "AO" && backend != "TE" && backend != "MSAMP") {
        // (type errors are reported by types(); this catches lower case, which Accelerate rejects)
    }
    if (backend == "MSAMP" && m_c.distributedType() == "DEEPSPEED" && nint("deepspeed_config", "zero_stage").value_or(2) == 3)
        error("fp8_config.backend",
              "fp8_config.backend MSAMP does not support DeepSpeed ZeRO-3; use TE or AO, or zero_stage <= 2");
    if (backend == "AO" && m_c.distributedType() == "FSDP" && nint("fsdp_config", "fsdp_version").value_or(1) == 2) {
        if (const Value* eff = nested("fsdp_config", "fsdp_cpu_ram_efficient_loading"); eff && eff->truthy())
            error("fsdp_config.fsdp_cpu_ram_efficient_loading", "fsdp_cpu_ram_efficient_loading cannot be combined with "
                                                                "torchao FP8 (fp8_config.backend AO) under FSDP2; turn one off");
    }
    for (auto [questionnaire, runtime] : {std::pair{"amax_history_length", "amax_history_len"},
                                          {"amax_compute_algorithm", "amax_compute_algo"},
                                          {"optimization_level", "opt_level"}})
        if (nested("fp8_config", questionnaire) && !nested("fp8_config", runtime))
            warning(std::string("fp8_config.") + questionnaire,
                    std::string("fp8_config.") + questionnaire
                        + " is the spelling `accelerate config` writes, but Accelerate's runtime reads " + runtime
                        + " (its known bug), so the value has no effect and the default is used, here as in "
                          "Accelerate. Rename the key to "
                        + runtime + " for the value to take effect");
}

void Checker::machineChecks()
{
    if (!m_o.machine || m_c.kind() != ConfigKind::Cluster)
        return;
    const std::string type = m_c.distributedType();
    const bool wantsGpu = type == "MULTI_GPU" || type == "FSDP" || type == "DEEPSPEED" || type == "MEGATRON_LM"
                          || (type == "NO" && !m_c.boolField("use_cpu"));
    const int gpus = m_o.machine->gpuCount;
    // Shardscope's engine shards and splits tensors on the CPU too (Gloo): MULTI_GPU, FSDP and
    // DeepSpeed configs that ask for the CPU (use_cpu: true) are a way to try a setup out; only a
    // warning then.
    const bool shardingOnCpu = (type == "MULTI_GPU" || type == "FSDP" || type == "DEEPSPEED") && m_c.boolField("use_cpu");
    if (wantsGpu && gpus == 0 && type != "NO" && shardingOnCpu)
        m_out.push_back({Severity::Warning, "use_cpu",
                         "distributed_type " + type + " with use_cpu: true runs on Shardscope's CPU engine (Gloo); "
                             + (type == "MULTI_GPU" ? std::string("Accelerate runs it on CPU ranks too (as MULTI_CPU, with "
                                                                  "the file's parallelism_config)")
                                                    : std::string("Accelerate itself would need GPUs for it"))});
    else if (wantsGpu && gpus == 0 && type != "NO")
        machine("distributed_type", "distributed_type " + type
                                        + " needs GPUs but this machine has none; use MULTI_CPU "
                                          "(or run where GPUs are), or set use_cpu: true to try it on Shardscope's CPU engine");
    const auto nproc = m_c.intField("num_processes").value_or(1);
    const auto machines = std::max<std::int64_t>(1, m_c.intField("num_machines").value_or(1));
    if (wantsGpu && gpus > 0 && type != "NO" && nproc / machines > gpus)
        machine("num_processes", "num_processes is " + std::to_string(nproc) + " (" + std::to_string(nproc / machines)
                                     + " per machine) but this machine has " + std::to_string(gpus) + " GPU(s)");
    if (m_c.mixedPrecision() == "bf16" && gpus > 0 && !m_o.machine->bf16Capable && !m_c.boolField("use_cpu"))
        machine("mixed_precision",
                "mixed_precision is bf16 but this GPU does not support bfloat16 (compute capability 8.0+); use fp16");
}

std::vector<Diagnostic> Checker::run()
{
    types();
    launchChecks();
    machineChecks();
    return std::move(m_out);
}

} // namespace

AccelerateConfig applyOverrides(const AccelerateConfig& config, const LaunchOverrides& o)
{
    AccelerateConfig merged = config;
    if (o.numProcesses)
        merged.setField("num_processes", Value(*o.numProcesses));
    if (o.numMachines)
        merged.setField("num_machines", Value(*o.numMachines));
    if (o.machineRank)
        merged.setField("machine_rank", Value(*o.machineRank));
    if (o.mainProcessIp)
        merged.setField("main_process_ip", Value(*o.mainProcessIp));
    if (o.mainProcessPort)
        merged.setField("main_process_port", Value(*o.mainProcessPort));
    if (o.mixedPrecision)
        merged.setField("mixed_precision", Value(*o.mixedPrecision));
    if (o.gpuIds)
        merged.setField("gpu_ids", Value(*o.gpuIds));
    if (o.cpu)
        merged.setField("use_cpu", Value(true));
    if (o.debug)
        merged.setField("debug", Value(true));
    if (o.dynamoBackend) {
        Value dyn = merged.field("dynamo_config");
        if (!dyn.isMap())
            dyn = Value::emptyMap();
        std::string up = *o.dynamoBackend;
        std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
        dyn.set("dynamo_backend", Value(up));
        merged.setField("dynamo_config", dyn);
    }
    return normalizeConfig(merged);
}

std::vector<Diagnostic> validateConfig(const AccelerateConfig& config, const ValidationOptions& options)
{
    const AccelerateConfig normalized = normalizeConfig(config);
    return Checker(config, normalized, options).run();
}

AccelerateConfig normalizeConfig(const AccelerateConfig& config)
{
    AccelerateConfig out = config;
    if (const Value mp = out.field("mixed_precision"); mp.isString() && mp.asString() != asciiLower(mp.asString()))
        out.setField("mixed_precision", Value(asciiLower(mp.asString())));
    for (const char* sectionKey : {"fsdp_config", "dynamo_config", "deepspeed_config"}) {
        Value section = out.field(sectionKey);
        if (!section.isMap())
            continue;
        bool changed = false;
        Value::Map renamed;
        for (const auto& e : section.asMap()) {
            Value::Entry entry = e;
            if (e.key.isString()) {
                const std::string key = e.key.asString();
                if (const std::string full = prefixedKey(sectionKey, key); !full.empty() && !findKeySpec(sectionKey, key)) {
                    entry.key = Value(full);
                    changed = true;
                }
                // The launcher copies keys in file order, so a later duplicate wins.
                const std::string name = entry.key.asString();
                if (std::erase_if(renamed, [&](const Value::Entry& r) { return r.key.isString() && r.key.asString() == name; })
                    > 0)
                    changed = true;
                if (entry.key.asString() == "dynamo_backend" && e.value.isString()
                    && e.value.asString() != asciiUpper(e.value.asString())) {
                    entry.value = Value(asciiUpper(e.value.asString()));
                    changed = true;
                }
                if (entry.key.asString() == "zero_stage" && e.value.isString() && isDigits(e.value.asString())) {
                    entry.value = Value(static_cast<std::int64_t>(std::stoll(e.value.asString())));
                    changed = true;
                }
                entry.value.line = e.value.line;
                entry.value.column = e.value.column;
            }
            renamed.push_back(std::move(entry));
        }
        if (changed) {
            Value replaced(std::move(renamed));
            replaced.line = section.line;
            replaced.column = section.column;
            out.setField(sectionKey, std::move(replaced));
        }
    }
    return out;
}

std::optional<ConfigFix> fixFor(const Diagnostic& d, const AccelerateConfig& config, const MachineInfo& machine)
{
    // The diagnostic launchChecks gives a GPU distribution on a machine without GPUs.
    if (d.keyPath != "distributed_type" || d.severity != Severity::Error || machine.gpuCount > 0 || config.boolField("use_cpu"))
        return std::nullopt;
    const std::string type = config.distributedType();
    // The engine shards on CPU ranks (Gloo) under use_cpu; plain data parallelism is MULTI_CPU.
    if (type == "FSDP" || type == "DEEPSPEED")
        return ConfigFix{"run on CPU ranks: set use_cpu: true", {{"use_cpu", Value(true)}}};
    if (type == "MULTI_GPU")
        return ConfigFix{"run on CPU ranks: set distributed_type: MULTI_CPU and use_cpu: true",
                         {{"distributed_type", Value("MULTI_CPU")}, {"use_cpu", Value(true)}}};
    return std::nullopt;
}

bool hasErrors(const std::vector<Diagnostic>& diagnostics)
{
    return std::any_of(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

std::string formatDiagnostic(const AccelerateConfig& config, const Diagnostic& d)
{
    // Point at the key in the file when the loader recorded where it was.
    std::string where = config.source();
    const auto dot = d.keyPath.find('.');
    const Value* v = config.given().find(d.keyPath.substr(0, dot));
    if (v && dot != std::string::npos && v->isMap())
        v = v->find(d.keyPath.substr(dot + 1));
    if (v && v->line > 0)
        where += ":" + std::to_string(v->line) + ":" + std::to_string(v->column);
    return (where.empty() ? std::string() : where + ": ") + (d.severity == Severity::Error ? "error: " : "warning: ") + d.message;
}

} // namespace shardscope::config
