#pragma once

// The terminal front end of the questionnaire: prompts on `out`, one answer per line from `in`.
// Menus are shown as Accelerate shows them in its line mode (the Colab one): the prompt, the
// choices with the default marked, then an index is read (anything that is not an integer picks
// the default). No raw-terminal tricks, so a script can feed the answers on stdin.

#include "engine/common/result.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/questionnaire.h"

#include <iosfwd>

namespace shardscope::config {

Result<AccelerateConfig> runTerminalQuestionnaire(std::istream& in, std::ostream& out, const Hardware& hardware = {});

} // namespace shardscope::config
