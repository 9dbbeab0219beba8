// `shardscope data prepare`: tokenize a corpus into a token file on every core (engine/text's
// prepareTokenFile), with a progress line and the corpus statistics at the end.

#include "app/cli/commands.h"
#include "engine/text/data_prepare.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <iostream>
#include <memory>

namespace shardscope::cli {

namespace {

int runPrepare(const text::PrepareOptions& options)
{
    const bool terminal = ::isatty(STDERR_FILENO) != 0;
    auto stats = text::prepareTokenFile(options, [terminal](const text::PrepareProgress& progress) {
        // On a terminal one line rewritten in place; in a log one line per report.
        std::cerr << (terminal ? "\r\033[K" : "") << "prepare: " << text::formatProgress(progress) << (terminal ? "" : "\n")
                  << std::flush;
    });
    if (terminal)
        std::cerr << "\r\033[K";
    if (!stats) {
        std::cerr << "shardscope data prepare: error: " << stats.error().message << "\n"
                  << "  (nothing was written to " << options.output << ")\n";
        return 1;
    }
    std::cout << text::formatStats(*stats, options.output);
    return 0;
}

} // namespace

void addDataCommand(CLI::App& app, CommandContext& context)
{
    auto* data = app.add_subcommand("data", "Prepare training data: tokenize text and JSON Lines corpora");
    data->require_subcommand(1);
    auto options = std::make_shared<text::PrepareOptions>();
    auto* prepare = data->add_subcommand(
        "prepare", "Tokenize text / JSON Lines files into a token file (ids, EOS after each document) on all cores");
    prepare->add_option("--tokenizer", options->tokenizer, "Folder with tokenizer.json (and tokenizer_config.json)")->required();
    prepare->add_option("--input", options->inputs, "Corpus files: .jsonl (one JSON object a line) or text (one document a file)")
        ->required();
    prepare->add_option("--output", options->output, "The token file to write (with OUTPUT.json and OUTPUT.idx beside it)")
        ->required();
    prepare->add_option("--field", options->field, "JSON Lines: the field with the text")->capture_default_str();
    prepare->add_option("--threads", options->threads, "Tokenizing threads (0: every core)")
        ->transform(numberIn({0, true, 1024, true}))
        ->capture_default_str();
    prepare->add_flag("--force", options->overwrite, "Replace OUTPUT if it exists");
    prepare->callback([options, &context] { context.exitCode = runPrepare(*options); });
}

} // namespace shardscope::cli
