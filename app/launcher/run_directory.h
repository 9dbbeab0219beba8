#pragma once

// A run's directory, runs/<id>/ (its files: engine/common/run_layout.h). Ids come from
// user-chosen names, so they are checked to stay inside the runs directory.

#include "engine/common/result.h"
#include "engine/common/run_layout.h"

#include <string>

namespace shardscope {

struct RunDirectory {
    std::string id;
    std::string path; // <runs dir>/<id>
    RunLayout layout() const { return RunLayout(path); }
    std::string logs() const { return layout().logsDir().string(); }
    std::string eventsFile() const { return layout().eventsFile().string(); }
};

// A run id from a name: letters, digits, '-', '_' and '.' kept, anything else replaced by '-'; an
// empty name or one made only of dots is an error.
Result<std::string> sanitizeRunId(const std::string& name);

// Creates <runsDir>/<id> with logs/ inside. An existing directory is an error (a second launch
// of the same run must never mix its files with the first's), naming it and the fix.
Result<RunDirectory> createRunDirectory(const std::string& runsDir, const std::string& id);

// "<name>-YYYYmmdd-HHMMSS" in local time.
std::string timestampedRunId(const std::string& name);

} // namespace shardscope
