#include "app/launcher/script_run.h"

#include "app/launcher/launcher.h"
#include "app/launcher/program.h"
#include "engine/recipe/recipe.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <sstream>

namespace shardscope {

namespace {

bool isExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// A YAML double-quoted scalar (every string of script.yaml: paths and arguments may hold anything).
std::string yamlQuoted(const std::string& text)
{
    std::string out = "\"";
    for (unsigned char ch : text) {
        if (ch == '"' || ch == '\\')
            out += '\\', out += static_cast<char>(ch);
        else if (ch == '\n')
            out += "\\n";
        else if (ch == '\t')
            out += "\\t";
        else if (ch < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", ch);
            out += escaped;
        } else
            out += static_cast<char>(ch);
    }
    return out + "\"";
}

std::string lastLine(const std::string& text)
{
    std::string trimmed = text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' '))
        trimmed.pop_back();
    const auto newline = trimmed.rfind('\n');
    return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

} // namespace

Result<std::string> resolvePython(const std::string& given)
{
    if (!given.empty()) {
        const std::string path = given.find('/') == std::string::npos ? findOnPath(given).value_or("") : given;
        if (path.empty() || !isExecutable(path))
            return makeError("--python " + given + " is not an executable" + (path.empty() ? " on PATH" : "")
                             + "; give the path of the environment's interpreter (--python, or the Python field beside the "
                               "script), e.g. ~/venvs/train/bin/python");
        return path;
    }
    if (const char* venv = std::getenv("VIRTUAL_ENV"); venv && *venv) {
        const std::string python = std::string(venv) + "/bin/python";
        if (isExecutable(python))
            return python;
    }
    // No environment active (the workbench started from a desktop or ./scripts/run.sh): python3,
    // unless it lacks accelerate and Shardscope's own environment (where setup.sh installed it,
    // beside the resources) has it.
    const std::string python3 = findOnPath("python3").value_or("");
    const std::string own = ownEnvironmentPython();
    const auto hasAccelerate = [](const std::string& python) {
        const auto ran = runProgram(python, {"-c", "import accelerate"}, std::chrono::seconds(60));
        return ran && !ran->timedOut && ran->status == 0;
    };
    if (!python3.empty() && (own.empty() || hasAccelerate(python3)))
        return python3;
    if (!own.empty() && hasAccelerate(own))
        return own;
    if (python3.empty())
        return makeError("no Python to run the script: no virtual environment is active and python3 is not on PATH; "
                         "choose the environment's Python (--python PATH, or the Python field beside the script)");
    return python3;
}

std::string ownEnvironmentPython()
{
    // Lexically: the venv's python is a link to the system's, and run by that path it would not
    // be the venv's.
    const auto python = (std::filesystem::path(config::resourcesFolder()) / ".." / ".venv" / "bin" / "python").lexically_normal();
    return isExecutable(python.string()) ? python.string() : std::string();
}

Result<PythonEnvironment> probePythonEnvironment(const std::string& python)
{
    // One line of versions; the reporter is optional (a script without it still runs).
    static const char* kProbe = "import accelerate, torch\n"
                                "try:\n    import shardscope\n    reporter = 1\nexcept ImportError:\n    reporter = 0\n"
                                "print('SHARDSCOPE-PROBE', accelerate.__version__, torch.__version__, reporter)\n";
    auto ran = runProgram(python, {"-c", kProbe}, std::chrono::seconds(120));
    if (!ran)
        return makeError("cannot run " + python + ": " + ran.error().message);
    if (ran->timedOut)
        return makeError(python + " did not answer within 120 s when asked for its accelerate and torch");
    const auto at = ran->output.rfind("SHARDSCOPE-PROBE ");
    if (ran->status != 0 || at == std::string::npos)
        return makeError("the Python " + python + " cannot run `accelerate launch`: " + lastLine(ran->output)
                         + "; install them into that environment (" + python
                         + " -m pip install accelerate torch) or choose another Python (--python PATH, or the Python "
                           "field beside the script)");
    std::istringstream fields(ran->output.substr(at + 17));
    PythonEnvironment env;
    env.python = python;
    int reporter = 0;
    fields >> env.accelerateVersion >> env.torchVersion >> reporter;
    env.hasReporter = reporter == 1;
    return env;
}

std::string scriptDescriptionYaml(const config::ScriptPlan& plan, const std::string& script,
                                  const std::vector<std::string>& scriptArgs, const PythonEnvironment& python)
{
    std::ostringstream out;
    out << "script:\n  path: " << yamlQuoted(script) << "\n  args:";
    if (scriptArgs.empty())
        out << " []";
    for (const auto& arg : scriptArgs)
        out << "\n    - " << yamlQuoted(arg);
    out << "\n  python: " << yamlQuoted(python.python) << "\n  accelerate: " << yamlQuoted(python.accelerateVersion)
        << "\n  torch: " << yamlQuoted(python.torchVersion) << "\n  distributed_type: " << yamlQuoted(plan.distributedType)
        << "\n  num_processes: " << plan.numProcesses << "\n  mixed_precision: " << yamlQuoted(plan.mixedPrecision)
        << "\n  command: " << yamlQuoted(plan.commandLine()) << "\n";
    return out.str();
}

std::string commandScript(const config::ScriptPlan& plan, const std::string& workingDirectory)
{
    return "#!/bin/sh\n# The command Shardscope ran for this script run (from " + workingDirectory
           + "). Shardscope's own variables (SHARDSCOPE_EVENT_PIPES, SHARDSCOPE_HEARTBEAT_MS) are left out.\ncd "
           + config::shellQuote(workingDirectory) + " && exec " + std::string(plan.environment.empty() ? "" : "env ")
           + plan.commandLine() + "\n";
}

} // namespace shardscope
