// shardscope-worker: the engine's executable, one process per rank, started only by the launcher.
//
// Exit codes: 0 success, 2 bad command line or environment, 3 a self-check found wrong results,
// 4 a run-ending error inside the rank (rendezvous, backend, torch), 5 a peer rank went away
// (its connection closed: the cause is that rank's own error).

#include "engine/train/mfu.h"
#include "engine/common/dist_env.h"
#include "engine/common/host_allocator.h"
#include "engine/common/run_layout.h"
#include "engine/recipe/recipe.h"
#include "engine/plan/run_plan.h"
#include "engine/dist/collective_check.h"
#include "engine/dist/flight_recorder.h"
#include "engine/train/event_sink.h"
#include "engine/train/generation.h"
#include "engine/train/heartbeat.h"
#include "engine/train/rank_errors.h"
#include "engine/train/runner.h"

#include <CLI/CLI.hpp>

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>

namespace {

enum ExitCode { kOk = 0, kUsage = 2, kCheckFailed = 3, kRankError = 4, kPeerLost = shardscope::train::kPeerLostExitCode };

struct CheckCollectivesArgs {
    std::string backend = "gloo";
    std::int64_t numel = 1024;
    int corruptRank = -1;
    int failRank = -1;
    int failCode = 1;
};

int checkCollectives(const CheckCollectivesArgs& args)
{
    using namespace shardscope;
    auto env = DistEnv::fromEnvironment();
    if (!env) {
        std::cerr << "shardscope-worker: " << env.error().message << "\n";
        return kUsage;
    }
    const std::string who = "rank " + std::to_string(env->rank) + "/" + std::to_string(env->worldSize);
    if (env->rank == args.failRank) {
        // Fault injection for the launcher's tests: fail before the rendezvous, so the other
        // ranks wait in it until the launcher stops them.
        std::cerr << who << ": failing on purpose with exit code " << args.failCode << " (--fail-rank)\n";
        return args.failCode;
    }
    const auto backend = dist::parseBackendName(args.backend); // the command line admits only known names
    dist::CollectiveCheckOptions options;
    options.backend = *backend;
    options.numel = args.numel;
    options.corruptRank = args.corruptRank;
    const auto report = dist::runCollectiveChecks(*env, options);
    // One write per report: ranks share the terminal, and lines written in pieces interleave.
    std::string text;
    for (const auto& failure : report.failures)
        text += who + ": WRONG " + failure + "\n";
    if (!report.failures.empty()) {
        text += who + ": " + std::to_string(report.failures.size()) + " of " + std::to_string(report.checksRun)
                + " collective checks failed on " + report.device + " (" + args.backend + ")\n";
        std::fputs(text.c_str(), stderr);
        return kCheckFailed;
    }
    text = who + ": " + std::to_string(report.checksRun) + " collective checks passed on " + report.device + " (" + args.backend
           + ")\n";
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return kOk;
}

// `train --plan FILE`: the run plan the launcher wrote (engine/plan/run_plan.h) is this rank's
// whole description of the run; its rank and the rendezvous come from the environment.
int train(const std::string& planPath)
{
    using namespace shardscope;
    // First of all (under SLURM a time limit's SIGUSR1 may come early, and kills a rank without
    // a handler): SIGINT from the launcher (Ctrl-C, Stop, another rank's failure): finish the step, agree
    // with the other ranks, report "cancelled". SIGTERM and SIGUSR1 (a time limit's warning, a
    // preemption, a laptop closing; under SLURM they reach the ranks and the launcher alike): the
    // same, with a checkpoint saved first. A second SIGINT is not caught (the launcher escalates to
    // SIGKILL); SIGTERM and SIGUSR1 stay caught, as they come from SLURM, srun and the launcher
    // alike (the launcher, or SLURM after KillWait, sends SIGKILL when the checkpoint takes too long).
    struct sigaction stop { };
    stop.sa_handler = [](int) { train::requestStop(); };
    stop.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &stop, nullptr);
    struct sigaction save { };
    save.sa_handler = [](int) { train::requestCheckpointAndStop(); };
    sigaction(SIGTERM, &save, nullptr);
    sigaction(SIGUSR1, &save, nullptr);
    // The launcher starts ranks with them blocked (app/launcher): one that came meanwhile is caught now.
    sigset_t caught;
    sigemptyset(&caught);
    sigaddset(&caught, SIGTERM);
    sigaddset(&caught, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &caught, nullptr);
    keepFreedHostMemoryForReuse(); // Note [keeping freed host memory]
    auto env = DistEnv::fromEnvironment();
    if (!env) {
        std::cerr << "shardscope-worker: " << env.error().message << "\n";
        return kUsage;
    }
    auto plan = config::loadPlan(planPath);
    if (!plan) {
        std::cerr << "shardscope-worker: " << plan.error().message << "\n";
        return kUsage;
    }
    if (env->worldSize != plan->numProcesses) {
        std::cerr << "shardscope-worker: the environment says WORLD_SIZE " << env->worldSize << " but " << planPath << " plans "
                  << plan->numProcesses << " ranks; start ranks with shardscope launch\n";
        return kUsage;
    }
    train::EventSink events(env->rank);
    train::installTerminateHandler(events);
    // Beats from its own thread while this one trains, evaluates, checkpoints or waits.
    // It also answers requests for this rank's flight record (runs/<id>/flight/).
    train::Heartbeat heartbeat(events, env->rank,
                               plan->runDir.empty() ? std::filesystem::path() : RunLayout(plan->runDir).flightDir());
    if (plan->faults.skipCollectiveRank == env->rank)
        dist::injectSkippedCollective(plan->faults.skipCollectiveSeq); // fault injection
    try {
        train::runTraining(*env, *plan, events);
    } catch (const std::exception& e) {
        const auto error = train::describeError(e);
        events.emit(protocol::ErrorEvent{error.kind, error.message});
        std::cerr << "shardscope-worker: error: " << error.message << std::endl;
        return error.kind == train::kPeerLostKind ? kPeerLost : kRankError;
    }
    return kOk;
}

int printMachinePeaks(const std::string& file)
{
    auto peaks = shardscope::train::cpuMachinePeaks(file);
    if (!peaks) {
        std::cerr << "shardscope-worker: error: " << peaks.error().message << "\n";
        return kUsage;
    }
    std::cout << peaks->machine << (peaks->measuredNow ? ": measured now" : ": measured " + peaks->measuredAt) << ", kept in "
              << file << "\n";
    for (const auto& [dtype, flops] : peaks->flops)
        std::cout << "  " << dtype << ": " << flops / 1e12 << " TFLOP/s on " << peaks->cores << " cores\n";
    return kOk;
}

} // namespace

int main(int argc, char** argv)
{
    // On a hang the launcher has gdb read this rank's stacks; where Yama restricts ptrace to
    // descendants (ptrace_scope 1), that needs the launcher, gdb's parent, named as a tracer.
    prctl(PR_SET_PTRACER, static_cast<unsigned long>(getppid()), 0, 0, 0);
    CLI::App app{"shardscope-worker: one rank of a Shardscope run (started by `shardscope launch`)"};
    app.require_subcommand(1);

    CheckCollectivesArgs check;
    auto* checkCmd = app.add_subcommand("check-collectives",
                                        "Run all-reduce, all-gather, reduce-scatter and broadcast and verify every result");
    checkCmd->add_option("--backend", check.backend, "c10d backend: gloo (CPU) or nccl (CUDA)")
        ->check(CLI::IsMember({"gloo", "nccl"}))
        ->capture_default_str();
    checkCmd->add_option("--numel", check.numel, "Elements per rank in each collective")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
        ->capture_default_str();
    checkCmd->add_option("--corrupt-rank", check.corruptRank, "Fault injection: this rank perturbs its inputs");
    checkCmd->add_option("--fail-rank", check.failRank, "Fault injection: this rank exits at once with --fail-code");
    checkCmd->add_option("--fail-code", check.failCode, "Exit code for --fail-rank")->capture_default_str();

    std::string planPath;
    auto* trainCmd = app.add_subcommand("train", "Train this rank's part of a run plan, emitting events");
    trainCmd->add_option("--plan", planPath, "The run's plan.json, written by shardscope launch")->required();

    std::string logitsRecipe, logitsWeights, logitsInput, logitsOut;
    auto* logitsCmd = app.add_subcommand("logits",
                                         "Run a GPT loaded from a Hugging Face GPT-2 folder on some text; write its logits");
    logitsCmd->add_option("--recipe", logitsRecipe, "Recipe whose model section describes the GPT")->required();
    logitsCmd->add_option("--weights", logitsWeights, "Folder with config.json and safetensors (GPT-2 layout)")->required();
    logitsCmd->add_option("--input", logitsInput, "Text file; its first block_size bytes are the input")->required();
    logitsCmd->add_option("--out", logitsOut, "Output safetensors file")->required();

    std::string generateRecipe, generateWeights, generateTokenizer, prompt;
    shardscope::train::GenerationOptions generation;
    auto* generateCmd = app.add_subcommand("generate", "Continue a prompt with a trained model (a run's export); print "
                                                       "JSON: prompt_ids, ids, text, ended_at_eos");
    generateCmd->add_option("--recipe", generateRecipe, "The run's recipe (its model section)")->required();
    generateCmd->add_option("--weights", generateWeights, "Hugging Face folder with the weights (the run's export/)")->required();
    generateCmd->add_option("--tokenizer", generateTokenizer, "Folder with tokenizer.json (default: the model reads bytes)");
    generateCmd->add_option("--prompt", prompt, "The text to continue")->required();
    generateCmd->add_option("--max_new_tokens", generation.maxNewTokens, "Tokens to generate at most")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}))
        ->capture_default_str();
    generateCmd->add_option("--temperature", generation.temperature, "0: greedy; above: sampled")
        ->check(CLI::Range(0.0, 100.0))
        ->capture_default_str();
    generateCmd->add_option("--top_k", generation.topK, "Sampling: only the k most likely tokens (0: all)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30))
        ->capture_default_str();
    generateCmd->add_option("--seed", generation.seed, "Sampling: the seed")->capture_default_str();

    std::string peaksFile;
    auto* peaksCmd = app.add_subcommand("machine-peaks",
                                        "Print this machine's CPU matmul peaks (what MFU is against), measuring them on every "
                                        "core first where FILE has none; run it on an idle machine");
    peaksCmd->add_option("--file", peaksFile, "The machine peaks file ($SHARDSCOPE_HOME/machine-peaks.json)")->required();

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? kOk : kUsage;
    }

    try {
        if (checkCmd->parsed())
            return checkCollectives(check);
        if (trainCmd->parsed())
            return train(planPath);
        if (peaksCmd->parsed())
            return printMachinePeaks(peaksFile);
        if (generateCmd->parsed()) {
            auto recipe = shardscope::config::loadRecipe(generateRecipe);
            if (!recipe) {
                std::cerr << "shardscope-worker: " << recipe.error().message << "\n";
                return kUsage;
            }
            std::cout << shardscope::train::generateJson(*recipe, generateWeights, generateTokenizer, prompt, generation)
                      << std::endl;
            return kOk;
        }
        if (logitsCmd->parsed()) {
            auto recipe = shardscope::config::loadRecipe(logitsRecipe);
            if (!recipe) {
                std::cerr << "shardscope-worker: " << recipe.error().message << "\n";
                return kUsage;
            }
            shardscope::train::writeLogits(*recipe, logitsWeights, logitsInput, logitsOut);
            return kOk;
        }
    } catch (const std::exception& e) {
        // Note [Run-ending errors]: exceptions end a rank; they are caught here once, reported,
        // and turned into a distinct exit code the launcher propagates.
        const auto error = shardscope::train::describeError(e);
        std::cerr << "shardscope-worker: error: " << error.message << std::endl;
        return error.kind == shardscope::train::kPeerLostKind ? kPeerLost : kRankError;
    }
    return kUsage;
}
