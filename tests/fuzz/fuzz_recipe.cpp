// Fuzz target: the recipe loader (engine/recipe/recipe.h). Invariants: a rejection names the file
// (file:line:column) in a message; an accepted recipe saves to YAML that loads again and saves to
// the same bytes; the memory estimate's model shape of any accepted recipe is computed without a
// crash, an overflow or a hang (the Configure page and `estimate-memory --recipe` do it).

#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/recipe.h"
#include "tests/fuzz/fuzz_check.h"

using namespace shardscope::config;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text = shardscope::fuzz::text(data, size);
    auto recipe = parseRecipe(text, "fuzz.yaml");
    if (!recipe) {
        const std::string& m = recipe.error().message;
        FUZZ_CHECK(!m.empty(), "a rejection without a message");
        FUZZ_CHECK(m.find("fuzz.yaml") != std::string::npos, "the message does not name the file: " + m);
        return 0;
    }
    const std::string saved = recipeToYaml(*recipe);
    auto back = parseRecipe(saved, "saved.yaml");
    FUZZ_CHECK(back.ok(), "the saved recipe does not load: " + back.error().message + "\n--- saved ---\n" + saved);
    const std::string again = recipeToYaml(*back);
    FUZZ_CHECK(again == saved, "saving does not round-trip\n--- first ---\n" + saved + "\n--- second ---\n" + again);

    const ModelShape shape = modelShapeOf(*recipe);
    FUZZ_CHECK(shape.parameters >= 0, "a negative parameter count");
    for (auto precision : {PrecisionMode::No, PrecisionMode::Bf16, PrecisionMode::Bf16Pure}) {
        ModelStateLayout sharding;
        sharding.zeroStage = 3;
        sharding.shardRanks = 8;
        const MemoryEstimate estimate = estimateMemory(shape, precision, sharding);
        FUZZ_CHECK(estimate.deviceTotal() >= 0, "a negative memory estimate");
    }
    return 0;
}
