#pragma once

// What a script run needs besides the launcher: the Python environment whose `accelerate launch`
// runs the user's script (found, then asked whether it has accelerate and torch) and the run
// directory's description of the run (script.yaml, command.sh). Qt-free and torch-free.

#include "engine/common/result.h"
#include "engine/plan/script_plan.h"

#include <string>
#include <vector>

namespace shardscope {

// The interpreter of a script run: `given` (a path, or a name looked up on PATH), else the active
// virtual environment's ($VIRTUAL_ENV/bin/python), else python3 on PATH when it has accelerate,
// else Shardscope's own environment (ownEnvironmentPython) when that has it, else python3.
Result<std::string> resolvePython(const std::string& given);
// The Python of the environment scripts/setup.sh made beside Shardscope's resources (.venv), or
// empty when there is none.
std::string ownEnvironmentPython();

struct PythonEnvironment {
    std::string python;
    std::string accelerateVersion;
    std::string torchVersion;
    bool hasReporter = false; // the shardscope package (python/) imports there
};

// Asks `python` for its accelerate and torch; an error says what is missing and how to fix it.
Result<PythonEnvironment> probePythonEnvironment(const std::string& python);

// script.yaml: the script, its arguments, the environment and the exact command, as YAML (the
// history keeps it where an engine run keeps its recipe, so compare shows it).
std::string scriptDescriptionYaml(const config::ScriptPlan& plan, const std::string& script,
                                  const std::vector<std::string>& scriptArgs, const PythonEnvironment& python);

// command.sh: the command as a shell script a user can rerun by hand.
std::string commandScript(const config::ScriptPlan& plan, const std::string& workingDirectory);

} // namespace shardscope
