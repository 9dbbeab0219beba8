// Fuzz target: the DeepSpeed JSON loader (engine/accelerate/deepspeed_json.h), reading the input as
// the deepspeed_config_file of a DEEPSPEED config, then resolving its "auto" values as a launch
// does. Invariants: a rejection is a message naming the file; an accepted file is a JSON object
// that dumps and parses back to an equal value; resolution either succeeds with an object or
// fails with a message; the memory estimate's reading of the file does not crash.

#include "engine/accelerate/deepspeed_json.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/accelerate/yaml_io.h"
#include "tests/fuzz/fuzz_check.h"

#include <sys/mman.h>
#include <unistd.h>

using namespace shardscope::config;

namespace {

// The loader takes a path: the input goes to an in-memory file, rewritten for each input.
const std::string& inputPath()
{
    static const std::string path = [] {
        const int fd = memfd_create("deepspeed.json", 0);
        if (fd < 0)
            shardscope::fuzz::fail("memfd_create", "", __FILE__, __LINE__);
        return "/proc/self/fd/" + std::to_string(fd);
    }();
    return path;
}

void writeInput(const std::string& text)
{
    const int fd = std::stoi(inputPath().substr(std::string("/proc/self/fd/").size()));
    FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    FUZZ_CHECK(pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()), "pwrite");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text = shardscope::fuzz::text(data, size);
    writeInput(text);
    const std::string& path = inputPath();
    auto json = loadDeepSpeedJson(path);
    if (!json) {
        const std::string& m = json.error().message;
        FUZZ_CHECK(!m.empty(), "a rejection without a message");
        FUZZ_CHECK(m.find(path) != std::string::npos, "the message does not name the file: " + m);
        return 0;
    }
    FUZZ_CHECK(json->isMap(), "an accepted DeepSpeed config that is not an object");
    const std::string dumped = dumpJson(*json);
    auto again = parseJson(dumped, "dumped.json");
    FUZZ_CHECK(again.ok(), "the dumped JSON does not parse: " + again.error().message + "\n" + dumped);
    FUZZ_CHECK(*again == *json, "dump + parse changes the value\n" + dumped);

    Value given = Value::emptyMap();
    given.set("compute_environment", Value("LOCAL_MACHINE"));
    given.set("distributed_type", Value("DEEPSPEED"));
    given.set("num_processes", Value(2));
    Value ds = Value::emptyMap();
    ds.set("deepspeed_config_file", Value(path));
    given.set("deepspeed_config", ds);
    const AccelerateConfig config(ConfigKind::Cluster, given, "fuzz-accelerate.yaml");
    DeepSpeedContext context;
    context.numProcesses = 2;
    context.microBatchPerGpu = 4;
    context.gradientAccumulationSteps = 2;
    context.hiddenSize = 64;
    context.learningRate = 1e-3;
    context.weightDecay = 0.01;
    context.warmupSteps = 10;
    context.totalSteps = 100;
    context.mixedPrecision = "bf16";
    auto resolved = resolveDeepSpeedConfig(config, context);
    if (resolved)
        FUZZ_CHECK(resolved->isMap(), "a resolved DeepSpeed config that is not an object");
    else
        FUZZ_CHECK(!resolved.error().message.empty(), "a resolution failure without a message");
    auto setup = memorySetupFromConfig(config);
    if (!setup)
        FUZZ_CHECK(!setup.error().message.empty(), "a memory setup failure without a message");
    return 0;
}
