#pragma once

// The recipe: what to train (model, data, optimizer, schedule, steps, batch size, intervals,
// seed), in a YAML file of its own so one Accelerate config serves many recipes, as one
// `accelerate config` serves many scripts. Torch-free: the launcher, the GUI and the worker all
// read it.

#include "engine/common/result.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::text {
class Tokenizer;
}

namespace shardscope::config {

// model.lora: low-rank adapters with PEFT's LoraConfig meanings and defaults. The base weights are
// frozen; each targeted projection W gains lora_A [r, in] and lora_B [out, r], and computes
// W x + lora_B(lora_A(dropout(x))) * alpha / r. Hugging Face decoders (llama, mistral, qwen2) only.
struct LoraRecipe {
    bool enabled = false; // the recipe has a lora section
    std::int64_t r = 8;
    double alpha = 8; // PEFT's lora_alpha
    double dropout = 0.0; // PEFT's lora_dropout
    // Module names matched as PEFT matches them (the name, or its last dotted parts); "all-linear"
    // takes every projection; empty: PEFT's default for the family, [q_proj, v_proj].
    std::vector<std::string> targetModules;
    std::string bias = "none"; // none, all (every bias trains), lora_only (the adapted layers' biases)
};

struct ModelRecipe {
    // "gpt" or "mlp" (the engine's own), or a Hugging Face decoder family: "llama", "mistral",
    // "qwen2", "gpt2", or "auto" (the family of model.pretrained's config.json; the default when
    // a recipe names `pretrained` without a type).
    std::string type = "gpt";
    // gpt: a byte-level decoder (pre-norm blocks, causal self-attention, tied head)
    std::int64_t vocabSize = 256;
    std::int64_t nLayer = 2;
    std::int64_t nEmbd = 64;
    std::int64_t nHead = 4;
    std::int64_t blockSize = 64; // sequence length, tokens
    double dropout = 0.0; // gpt: on the blocks' residual branches (GPT-2's resid_pdrop)
    // The gpt2 family's attn_pdrop and embd_pdrop, from its config.json (config::withArchitecture);
    // not recipe keys (the engine's own gpt has neither).
    double attentionDropout = 0.0;
    double embeddingDropout = 0.0;
    // mlp: input_dim -> hidden_dim (x depth, ReLU) -> output_dim
    std::int64_t inputDim = 32;
    std::int64_t hiddenDim = 64;
    std::int64_t depth = 2;
    std::int64_t outputDim = 1;
    // gpt: start from a folder holding config.json and safetensors in GPT-2's layout. A Hugging
    // Face family: the model folder (config.json + model.safetensors or its sharded index) whose
    // config.json gives the architecture and whose weights start the run.
    std::string pretrained;
    // A Hugging Face family without `pretrained`: the config.json keys the recipe's model section
    // writes (hidden_size, num_key_value_heads, rope_scaling, ...), in order, each value as YAML
    // text. config::resolveArchitecture reads them as transformers reads config.json.
    std::vector<std::pair<std::string, std::string>> architecture;
    // The dtype the weights are loaded in (from_pretrained's torch_dtype): the initial values are
    // rounded to it. Mixed precision (fp16, bf16) then trains an fp32 copy; bf16-pure and "no" keep
    // them as they are (Accelerate's rule: no upcast without mixed precision).
    std::string loadDtype = "float32"; // float32, bfloat16, float16
    // Parameters that do not train (requires_grad false): those whose name starts with one of
    // these, e.g. [wpe, h.0.attn]. Sharded runs need fsdp_use_orig_params (or DeepSpeed).
    std::vector<std::string> frozen;
    LoraRecipe lora;
};

struct DataRecipe {
    // "text" (byte-level language modelling: each byte an id), "tokens" (token ids: token files,
    // or text / JSON Lines corpora tokenized with data.tokenizer), or "synthetic_regression".
    std::string type = "text";
    // text: the text file; empty: the demo text shipped in resources/data. tokens: the same as
    // paths.front() when data.path names one file.
    std::string path;
    // tokens: what data.path names (one path or a list), joined in this order: token files
    // (memory-mapped) and corpora (.jsonl/.ndjson/.json, .txt/.text/.md) tokenized when the run
    // starts. The stream is cut into model.block_size sequences as transformers' group_texts cuts
    // it (the remainder dropped), the labels shifted left with -100 at the end.
    std::vector<std::string> paths;
    std::string tokenizer; // tokens: a folder with tokenizer.json; empty: model.pretrained
    std::string field = "text"; // tokens: the JSON Lines field with the text
    std::string tokenDtype; // tokens: "uint16" or "uint32" for bare token files (nanoGPT's .bin)
    std::int64_t numSamples = 4096; // synthetic_regression: samples in the dataset
    double noise = 0.01; // synthetic_regression: std of the label noise
    bool shuffle = true;
    bool dropLast = true;
    bool evenBatches = true; // Accelerate's even_batches: pad the last batch by wrapping around
    double evalFraction = 0.1;
};

struct OptimizerRecipe {
    std::string type = "adamw"; // "adamw" or "sgd"
    double lr = 3e-3;
    double weightDecay = 0.0;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double momentum = 0.0; // sgd
    // Parameters whose name contains one of these go to a second group with weight_decay 0 (the
    // usual [bias, ln_] / LayerNorm exclusion of Hugging Face's examples).
    std::vector<std::string> noWeightDecay;
};

struct ScheduleRecipe {
    std::string type = "constant"; // "constant", "linear" or "cosine"
    std::int64_t warmupSteps = 0;
};

struct DdpRecipe { // Accelerate's DistributedDataParallelKwargs
    double bucketCapMb = 25.0;
    double firstBucketCapMb = 1.0;
    // false: no bucketing overlap, one all-reduce of every gradient after backward (a baseline).
    bool overlap = true;
};

struct LossScalerRecipe { // fp16 only; torch.amp.GradScaler's parameters and defaults
    double initScale = 65536.0;
    double growthFactor = 2.0;
    double backoffFactor = 0.5;
    std::int64_t growthInterval = 2000;
};

struct ExportRecipe { // save_model at the end of training (run directory's export/)
    bool enabled = true;
    std::string dtype = "float32"; // float32, bfloat16, float16
    double maxShardMb = 10000; // Accelerate's max_shard_size default, "10GB"
    // A LoRA run saves its adapter in PEFT's format in export/adapter/; with merge_lora the
    // adapter is also merged into the base weights and the whole model saved in export/ (PEFT's
    // merge_and_unload, then save_pretrained).
    bool mergeLora = false;
};

struct Recipe {
    std::string name = "recipe";
    std::uint64_t seed = 1234;
    ModelRecipe model;
    DataRecipe data;
    OptimizerRecipe optimizer;
    ScheduleRecipe schedule;
    DdpRecipe ddp;
    LossScalerRecipe lossScaler;
    ExportRecipe exportModel;
    std::int64_t perDeviceBatchSize = 16;
    std::int64_t gradientAccumulationSteps = 1;
    std::int64_t maxSteps = 100; // optimizer steps
    double maxGradNorm = 0.0; // 0: no clipping
    // A non-finite loss or gradient norm outside fp16 (where the scaler skips the step) ends the
    // run with an error when true; otherwise it is flagged in the event stream and training goes on.
    bool stopOnNonfinite = false;
    std::int64_t logEvery = 1;
    std::int64_t evalEvery = 0; // 0: no evaluation
    // At each eval, rank 0's model continues each prompt (greedy) by up to evalSampleTokens tokens:
    // the Run page's samples.
    std::vector<std::string> evalPrompts;
    std::int64_t evalSampleTokens = 32;
    std::int64_t checkpointEvery = 0;
    std::int64_t checkpointKeep = 0; // newest checkpoints kept (0: all)
    std::int64_t profileStartStep = -1; // -1: no profiling window
    std::int64_t profileSteps = 0;
};

// Parses a recipe from YAML text; `source` names the file in messages (file:line:column).
// Unknown keys are errors naming the nearest valid key; values are range-checked.
Result<Recipe> parseRecipe(const std::string& yamlText, const std::string& source);

// Shardscope's bundled resources/ folder (example recipes and scripts, the demo data):
// $SHARDSCOPE_RESOURCES, else the one beside the binaries or in the source tree they were built from.
std::string resourcesFolder();
// The demo text shipped in resources/data.
std::string defaultTextPath();

// What can be checked of a recipe before any rank starts, beyond its own keys: the byte-level
// GPT's text (data.path, or the demo text) exists, is long enough for two blocks, and has no byte
// the model's vocab_size cannot embed. Ranks check the same when they read the text.
// data.type tokens: the tokenizer (data.tokenizer, else model.pretrained when it has a
// tokenizer.json) has no id the model cannot embed; token files open, are whole and have no id at or
// above vocab_size; corpora can be read (ranks tokenize them and check the rest).
Result<void> checkRecipeInputs(const Recipe& recipe);
// The tokenizer folder of data.type tokens: data.tokenizer, else model.pretrained if it holds a
// tokenizer.json, else empty.
std::string tokenizerFolder(const Recipe& recipe);
// That tokenizer, loaded and checked to have no id the model's vocab_size cannot embed; null when
// the recipe names none.
Result<std::shared_ptr<const text::Tokenizer>> loadDataTokenizer(const Recipe& recipe);
Result<void> checkTextFitsVocabulary(const std::string& bytes, const Recipe& recipe, const std::string& path);
// parseRecipe of a file, with its relative paths resolved against the file's folder
// (resolveRecipePaths).
Result<Recipe> loadRecipe(const std::string& path);
// Makes model.pretrained, data.path(s) and data.tokenizer absolute, relative ones taken as `folder`'s.
void resolveRecipePaths(Recipe& recipe, const std::string& folder);
// The recipe text with model.pretrained set to `dir` (the recipe editor's folder picker): the
// value replaced where the model section has one, else the key added to it (or a model section
// added), every other line (comments included) kept as written. An inline model section
// (`model: {...}`) is an error: it cannot be edited by line.
Result<std::string> withPretrainedFolder(const std::string& yamlText, const std::string& dir);
// The recipe text with data.type tokens, and data.path `paths` and data.tokenizer set when not empty,
// as withPretrainedFolder edits it (the recipe editor's data pickers).
Result<std::string> withTokenData(const std::string& yamlText, const std::vector<std::string>& paths,
                                  const std::string& tokenizer);
// The recipe text with `keyPath` (section.key) set to `value`, quoted when YAML would read it
// otherwise, as withPretrainedFolder edits it (the recipe form).
Result<std::string> withRecipeValue(const std::string& yamlText, const std::string& keyPath, const std::string& value);
std::string recipeToYaml(const Recipe& recipe);

// What a checkpoint's model must be for a run to resume it: the model section's typed fields,
// one "key=value" line each in a fixed order (where the weights first came from, `pretrained`,
// left out), so that it depends on no writer's key order.
std::string modelFingerprint(const ModelRecipe& model);

} // namespace shardscope::config
