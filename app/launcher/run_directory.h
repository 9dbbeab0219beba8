#pragma once

// A run's directory, runs/<id>/: config.yaml, recipe.yaml, events.jsonl, logs/rank<N>.log, and
// later traces/, checkpoints/, export/. Ids come from user-chosen names, so they are checked to
// stay inside the runs directory.

#include "engine/common/result.h"

#include <string>

namespace shardscope {

struct RunDirectory {
    std::string id;
    std::string path; // <runs dir>/<id>
    std::string logs() const { return path + "/logs"; }
    std::string eventsFile() const { return path + "/events.jsonl"; }
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
