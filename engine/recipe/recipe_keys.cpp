#include "engine/recipe/recipe_keys.h"

#include <utility>

namespace shardscope::config {

const std::vector<RecipeKeyDoc>& recipeKeyReference()
{
    static const std::vector<RecipeKeyDoc> keys = {
        {"name", "text", "recipe", "The recipe's name: the run names start with it (`<name>-<date>-<time>`)."},
        {"seed", "integer >= 0", "1234",
         "Seeds the initial weights, the data order and dropout; the same seed gives the same run."},

        {"model", "mapping", "", "What is trained: one of the engine's own models or a Hugging Face decoder."},
        {"model.type", "gpt | mlp | llama | mistral | qwen2 | gpt2 | auto", "gpt",
         "gpt: a byte-level decoder (pre-norm blocks, causal self-attention, tied head); mlp: a small MLP for "
         "synthetic regression; llama, mistral, qwen2, gpt2: the Hugging Face families, with the keys of their "
         "config.json (docs/MODELS.md); auto: the family model.pretrained's config.json names (the default when "
         "the section names pretrained without a type)."},
        {"model.block_size", "integer >= 1", "64", "Sequence length in tokens (bytes for gpt on text)."},
        {"model.pretrained", "path", "",
         "A Hugging Face model folder (config.json and model.safetensors, or a sharded index) whose architecture "
         "and weights start the run. Relative paths are the recipe file's."},
        {"model.vocab_size", "integer >= 2", "256", "gpt: the vocabulary (256: bytes)."},
        {"model.n_layer", "integer >= 1", "2", "gpt: transformer blocks."},
        {"model.n_embd", "integer >= 1", "64", "gpt: width; divisible by n_head."},
        {"model.n_head", "integer >= 1", "4", "gpt: attention heads."},
        {"model.dropout", "number in [0, 0.99]", "0.0", "gpt: dropout on the blocks' residual branches (GPT-2's resid_pdrop)."},
        {"model.input_dim", "integer >= 1", "32", "mlp: inputs."},
        {"model.hidden_dim", "integer >= 1", "64", "mlp: hidden width."},
        {"model.depth", "integer >= 0", "2", "mlp: hidden layers (ReLU)."},
        {"model.output_dim", "integer >= 1", "1", "mlp: outputs."},
        {"model.<config.json key>", "as in config.json", "",
         "A Hugging Face family without pretrained: the config.json keys of the family (hidden_size, "
         "num_hidden_layers, num_key_value_heads, rope_scaling, ...), read as transformers reads config.json. "
         "docs/MODELS.md lists them; a key the engine does not implement is refused before launch."},
        {"model.frozen", "list of names", "[]",
         "Parameters that do not train: those whose name starts with one of these (e.g. [wpe, h.0.attn])."},
        {"model.load_dtype", "float32 | bfloat16 | float16", "float32",
         "The dtype the weights are loaded in (from_pretrained's torch_dtype)."},
        {"model.lora", "mapping", "",
         "Low-rank adapters with PEFT's LoraConfig meanings (Hugging Face families). `lora:` alone takes PEFT's defaults."},
        {"model.lora.r", "integer >= 1", "8", "The adapters' rank."},
        {"model.lora.alpha", "number > 0", "8.0", "PEFT's lora_alpha: the update is scaled by alpha / r."},
        {"model.lora.dropout", "number in [0, 0.99]", "0.0", "PEFT's lora_dropout, on the adapters' input."},
        {"model.lora.target_modules", "list of names, or [all-linear]", "[q_proj, v_proj]",
         "The projections that get adapters, matched as PEFT matches them; all-linear: every projection."},
        {"model.lora.bias", "none | all | lora_only", "none", "Which biases train with the adapters (PEFT's bias)."},

        {"data", "mapping", "", "What the model reads."},
        {"data.type", "text | tokens | synthetic_regression", "text",
         "text: a text file, each byte a token; tokens: token files, or text / JSON Lines corpora tokenized with "
         "data.tokenizer; synthetic_regression: generated data for mlp."},
        {"data.path", "path, or a list of paths", "",
         "text: the file (empty: the demo text in resources/data); tokens: the files, joined in this order. "
         "Relative paths are the recipe file's."},
        {"data.tokenizer", "path", "", "tokens: a folder with tokenizer.json (empty: model.pretrained's)."},
        {"data.field", "text", "text", "tokens: the JSON Lines field holding the text."},
        {"data.token_dtype", "uint16 | uint32", "", "tokens: the id width of bare token files (nanoGPT's .bin)."},
        {"data.num_samples", "integer >= 1", "4096", "synthetic_regression: samples in the dataset."},
        {"data.noise", "number >= 0", "0.01", "synthetic_regression: the labels' noise (standard deviation)."},
        {"data.shuffle", "true | false", "true", "Shuffle the samples each epoch (seeded)."},
        {"data.drop_last", "true | false", "true", "Drop the last incomplete batch."},
        {"data.even_batches", "true | false", "true", "Accelerate's even_batches: pad the last batch by wrapping around."},
        {"data.eval_fraction", "number in [0, 0.9]", "0.1", "The share of the samples held out for evaluation."},

        {"optimizer", "mapping", "", "How the weights are updated."},
        {"optimizer.type", "adamw | sgd", "adamw", "torch.optim.AdamW or SGD."},
        {"optimizer.lr", "number in [0, 1000]", "0.003", "The peak learning rate (the schedule scales it)."},
        {"optimizer.weight_decay", "number >= 0", "0.0", "Decoupled weight decay (AdamW), L2 (SGD)."},
        {"optimizer.beta1", "number in [0, 1]", "0.9", "AdamW's beta1."},
        {"optimizer.beta2", "number in [0, 1]", "0.999", "AdamW's beta2."},
        {"optimizer.eps", "number >= 0", "1e-08", "AdamW's eps."},
        {"optimizer.momentum", "number in [0, 1]", "0.0", "SGD's momentum."},
        {"optimizer.no_weight_decay", "list of names", "[]",
         "Parameters whose name contains one of these get weight_decay 0 (e.g. [bias, ln_])."},

        {"schedule", "mapping", "", "The learning rate over the steps."},
        {"schedule.type", "constant | linear | cosine", "constant",
         "After the warm-up: constant, or decaying to 0 at max_steps linearly or as a cosine (transformers' schedules)."},
        {"schedule.warmup_steps", "integer >= 0", "0", "Steps of linear warm-up from 0; at most max_steps."},

        {"ddp", "mapping", "", "Accelerate's DistributedDataParallelKwargs (data-parallel runs)."},
        {"ddp.bucket_cap_mb", "number > 0", "25.0", "Gradient bucket size for the overlapped all-reduce."},
        {"ddp.first_bucket_cap_mb", "number > 0", "1.0", "The first bucket's size (it starts the overlap)."},
        {"ddp.overlap", "true | false", "true",
         "false: one all-reduce of every gradient after backward, no overlap (a baseline to compare with)."},

        {"loss_scaler", "mapping", "", "fp16's loss scaling: torch.amp.GradScaler's parameters and defaults."},
        {"loss_scaler.init_scale", "number > 0", "65536.0", "The first scale."},
        {"loss_scaler.growth_factor", "number >= 1", "2.0", "The scale grows by this after growth_interval good steps."},
        {"loss_scaler.backoff_factor", "number in (0, 1]", "0.5",
         "The scale shrinks by this on an overflow (the step is skipped)."},
        {"loss_scaler.growth_interval", "integer >= 1", "2000", "Good steps before the scale grows."},

        {"training", "mapping", "", "The loop."},
        {"training.per_device_batch_size", "integer >= 1", "16", "Samples per rank per micro-step."},
        {"training.gradient_accumulation_steps", "integer >= 1", "1",
         "Micro-steps per optimizer step (DeepSpeed's config, when it sets one, wins)."},
        {"training.max_steps", "integer >= 1", "100", "Optimizer steps; `shardscope launch --max_steps` overrides it."},
        {"training.max_grad_norm", "number >= 0", "0.0", "Clip the global gradient norm to this; 0: no clipping."},
        {"training.stop_on_nonfinite", "true | false", "false",
         "A non-finite loss or gradient norm outside fp16's skipped steps ends the run with an error; false: "
         "flagged in the events, training goes on."},
        {"training.log_every", "integer >= 1", "1", "Steps between metric events."},
        {"training.eval_every", "integer >= 0", "0", "Steps between evaluations on the held-out share; 0: none."},
        {"training.eval_prompts", "list of text", "[]",
         "At each eval the model continues each prompt (greedy, as transformers' generate): the Run page's Samples."},
        {"training.eval_sample_tokens", "integer 1..4096", "32", "New tokens at most per eval prompt."},
        {"training.checkpoint_every", "integer >= 0", "0",
         "Steps between checkpoints (Accelerate's save_state layout); 0: none."},
        {"training.checkpoint_keep", "integer >= 0", "0", "The newest checkpoints kept; 0: all."},

        {"export", "mapping", "", "save_model at the end of training, into the run directory's export/."},
        {"export.enabled", "true | false", "true", "Save the trained model in Hugging Face's safetensors layout."},
        {"export.dtype", "float32 | bfloat16 | float16", "float32", "The saved weights' dtype."},
        {"export.max_shard_mb", "number > 0", "10000.0", "Shard size (Accelerate's max_shard_size, 10GB)."},
        {"export.merge_lora", "true | false", "false",
         "A LoRA run also merges the adapter into the base weights and saves the whole model (PEFT's merge_and_unload)."},

        {"profile", "mapping", "", "A profiling window: spans of these steps go to the run's traces/ for the Trace page."},
        {"profile.start_step", "integer >= 0", "", "The first step traced (with steps)."},
        {"profile.steps", "integer >= 1", "", "How many steps are traced (with start_step)."},
    };
    return keys;
}

const RecipeKeyDoc* findRecipeKey(const std::string& path)
{
    for (const auto& key : recipeKeyReference())
        if (key.path == path)
            return &key;
    return nullptr;
}

namespace {

// A line's indentation and key ("  max_steps: 5" -> {2, "max_steps"}); key empty: none.
std::pair<std::size_t, std::string> keyOfLine(const std::string& line)
{
    const auto indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || line[indent] == '#' || line[indent] == '-')
        return {0, {}};
    const auto colon = line.find(':', indent);
    if (colon == std::string::npos)
        return {0, {}};
    const std::string key = line.substr(indent, colon - indent);
    if (key.find_first_of(" {}[]\"'") != std::string::npos)
        return {0, {}};
    return {indent, key};
}

} // namespace

std::string recipeKeyPathAt(const std::string& yamlText, int line)
{
    std::vector<std::string> lines;
    for (std::size_t at = 0; at <= yamlText.size();) {
        const auto end = yamlText.find('\n', at);
        lines.push_back(yamlText.substr(at, end == std::string::npos ? std::string::npos : end - at));
        if (end == std::string::npos)
            break;
        at = end + 1;
    }
    if (line < 0 || line >= static_cast<int>(lines.size()))
        return {};
    auto [indent, key] = keyOfLine(lines[static_cast<std::size_t>(line)]);
    if (key.empty())
        return {};
    std::string path = key;
    // Each parent: the nearest line above with a key indented less.
    for (int i = line - 1; i >= 0 && indent > 0; --i) {
        const auto [parentIndent, parent] = keyOfLine(lines[static_cast<std::size_t>(i)]);
        if (!parent.empty() && parentIndent < indent) {
            path = parent + "." + path;
            indent = parentIndent;
        }
    }
    return path;
}

std::string recipeKeysMarkdown()
{
    std::string md = "# Recipe keys\n\n"
                     "<!-- Generated from engine/recipe/recipe_keys.cpp (tst_recipe_keys checks that it is current;\n"
                     "     SHARDSCOPE_UPDATE_DOCS=1 build/dev/tests/engine/tst_recipe_keys rewrites it). -->\n\n"
                     "A recipe is a YAML file of its own: what to train, while the Accelerate config says how it is\n"
                     "distributed. Every key below is optional; an unknown key is an error that names the nearest\n"
                     "known one. The bundled examples are in `resources/recipes/`.\n\n";
    std::string section;
    for (const auto& key : recipeKeyReference()) {
        const std::string top = key.path.substr(0, key.path.find('.'));
        if (key.path.find('.') == std::string::npos && key.type == "mapping") {
            md += "\n## " + key.path + "\n\n" + key.doc + "\n\n| key | type | default | meaning |\n|---|---|---|---|\n";
            section = top;
            continue;
        }
        if (section.empty() && key.path.find('.') == std::string::npos && md.find("## top level") == std::string::npos)
            md += "## top level\n\n| key | type | default | meaning |\n|---|---|---|---|\n";
        auto cell = [](std::string text) {
            for (std::size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2))
                text.replace(at, 1, "\\|");
            return text;
        };
        md += "| `" + key.path + "` | " + cell(key.type) + " | " + (key.defaultValue.empty() ? "" : "`" + key.defaultValue + "`")
              + " | " + cell(key.doc) + " |\n";
    }
    return md;
}

} // namespace shardscope::config
