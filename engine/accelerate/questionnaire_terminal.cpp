#include "engine/accelerate/questionnaire_terminal.h"

#include <istream>
#include <ostream>
#include <set>
#include <string>

namespace shardscope::config {

Result<AccelerateConfig> runTerminalQuestionnaire(std::istream& in, std::ostream& out, const Hardware& hardware)
{
    QuestionnaireSession session(hardware);
    std::set<std::string> preamblesShown;
    while (const Question* q = session.current()) {
        if (!q->preamble.empty() && preamblesShown.insert(q->id).second)
            out << q->preamble << "\n";
        const std::string prompt = session.promptFor(*q);
        if (q->kind == QuestionKind::Choice) {
            const auto choices = session.choicesFor(*q);
            out << "\n" << prompt << "\nPlease input a choice index (starting from 0), and press enter\n";
            for (std::size_t i = 0; i < choices.size(); ++i)
                out << (static_cast<int>(i) == q->defaultChoice ? " \xE2\x9E\x94 " : "    ") << "[" << i << "] "
                    << choices[i].label << "\n";
        } else {
            out << prompt;
        }
        out.flush();
        std::string line;
        if (!std::getline(in, line))
            return makeError("the input ended before the questionnaire was complete (at \"" + prompt
                             + "\"); answer every question, or press Enter to take the default");
        const auto outcome = session.answerLine(line);
        if (!outcome.accepted) {
            if (!outcome.message.empty())
                out << outcome.message << "\n";
            continue;
        }
        if (q->kind == QuestionKind::Choice) {
            // Echo the chosen label, as Accelerate's menu does.
            const Value chosen = session.answers().get(q->id);
            for (const auto& c : session.choicesFor(*q))
                if (c.value == chosen) {
                    out << c.label << "\n";
                    break;
                }
        }
    }
    if (session.abortError())
        return makeError(*session.abortError());
    for (const auto& note : session.closingNotes())
        out << note << "\n";
    return session.result();
}

} // namespace shardscope::config
