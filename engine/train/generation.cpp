#include "engine/train/generation.h"

#include "engine/models/pretrained.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <limits>
#include <stdexcept>

namespace shardscope::train {

namespace {

std::vector<std::int32_t> encodePrompt(const text::Tokenizer* tokenizer, std::string_view prompt)
{
    if (tokenizer)
        return tokenizer->encode(prompt, /*addSpecialTokens=*/true);
    return {prompt.begin(), prompt.end()}; // bytes: char may be signed
}

std::int32_t nextToken(const at::Tensor& logits, const GenerationOptions& options, at::Generator& generator)
{
    if (options.temperature <= 0)
        return static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()); // the first maximum, as torch.argmax
    at::Tensor scaled = logits.to(at::kFloat) / options.temperature;
    if (options.topK > 0 && options.topK < scaled.size(0)) {
        // transformers' TopKLogitsWarper: everything below the k-th largest logit is -inf.
        const at::Tensor kth = std::get<0>(scaled.topk(options.topK)).index({-1});
        scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<float>::infinity());
    }
    const at::Tensor probabilities = scaled.softmax(0);
    return static_cast<std::int32_t>(at::multinomial(probabilities, 1, false, generator).item<std::int64_t>());
}

} // namespace

Generation generate(models::TrainableModel& model, const text::Tokenizer* tokenizer, std::string_view prompt,
                    const GenerationOptions& options)
{
    Generation out;
    out.promptIds = encodePrompt(tokenizer, prompt);
    if (tokenizer == nullptr)
        for (auto& id : out.promptIds)
            id &= 0xff;
    if (out.promptIds.empty())
        throw std::runtime_error("the prompt is empty and the tokenizer adds no token to start from: give some text");
    const std::optional<std::int32_t> eos = tokenizer ? tokenizer->eosId() : std::nullopt;
    torch::NoGradGuard noGrad;
    model.eval();
    const auto parameters = model.parameters();
    const c10::Device device = parameters.empty() ? c10::Device(c10::kCPU) : parameters.front().device();
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);

    std::vector<std::int64_t> context(out.promptIds.begin(), out.promptIds.end());
    for (std::int64_t i = 0; i < options.maxNewTokens; ++i) {
        const std::size_t start = options.contextLength > 0 && static_cast<std::int64_t>(context.size()) > options.contextLength
                                      ? context.size() - static_cast<std::size_t>(options.contextLength)
                                      : 0;
        const std::vector<std::int64_t> window(context.begin() + static_cast<std::ptrdiff_t>(start), context.end());
        const at::Tensor ids = torch::tensor(window, at::kLong).unsqueeze(0).to(device);
        const at::Tensor logits = model.forward(ids).index({0, -1}).to(at::kCPU);
        const std::int32_t token = nextToken(logits, options, generator);
        context.push_back(token);
        if (out.endedAtEos)
            continue; // runPastEos
        out.newIds.push_back(token);
        if (eos && token == *eos) {
            out.endedAtEos = true;
            if (!options.runPastEos)
                break;
        }
    }
    if (tokenizer)
        out.text = tokenizer->decode(out.newIds, /*skipSpecialTokens=*/true);
    else
        for (const std::int32_t byte : out.newIds)
            out.text.push_back(static_cast<char>(byte));
    return out;
}

std::string generateJson(const config::Recipe& recipe, const std::string& weightsDir, const std::string& tokenizerDir,
                         std::string_view prompt, GenerationOptions options)
{
    std::optional<text::Tokenizer> tokenizer;
    if (!tokenizerDir.empty()) {
        auto loaded = text::Tokenizer::load(tokenizerDir);
        if (!loaded)
            throw std::runtime_error(loaded.error().message);
        tokenizer.emplace(std::move(*loaded));
    }
    auto model = models::buildModel(recipe.model);
    models::loadPretrained(*model, recipe.model, weightsDir);
    options.contextLength = recipe.model.blockSize;
    const Generation generation = generate(*model, tokenizer ? &*tokenizer : nullptr, prompt, options);
    const nlohmann::json out = {{"prompt_ids", generation.promptIds},
                                {"ids", generation.newIds},
                                {"text", generation.text},
                                {"ended_at_eos", generation.endedAtEos}};
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace shardscope::train
