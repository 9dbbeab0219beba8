#pragma once

// `accelerate config` as data: the question tree (same prompts, order, defaults, branching and
// answer parsing as Accelerate 1.15, reference §3), walked by a front-end-neutral session. The
// terminal front end (questionnaire_terminal.h) and the GUI wizard drive the same session; neither
// knows the tree. Menu answers are stored as values, never as indices.

#include "engine/common/result.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/value.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

// What the machine offers; it changes labels and which questions appear (Accelerate probes it).
struct Hardware {
    std::string acceleratorLabel = "GPU(s)"; // "NPU(s)", "XPU(s)", ... in the GPU-id question
    bool mpsAvailable = false; // Apple MPS hides the DeepSpeed, GPU-id and NUMA questions
};

enum class QuestionKind { YesNo, Choice, Int, Float, Text };

struct Choice {
    std::string label; // as Accelerate's menu prints it
    Value value; // what is stored
};

class Answers {
public:
    bool has(const std::string& id) const { return m_values.count(id) > 0; }
    // The latest answer, or null.
    Value get(const std::string& id) const;
    bool yes(const std::string& id) const { return get(id).truthy(); }
    std::string str(const std::string& id) const;
    std::int64_t integer(const std::string& id, std::int64_t fallback) const;
    // Every answer to a repeated question, in order (TPU startup commands).
    const std::vector<Value>& all(const std::string& id) const;
    void record(const std::string& id, Value v);
    const std::vector<std::string>& order() const { return m_order; }

private:
    std::map<std::string, std::vector<Value>> m_values;
    std::vector<std::string> m_order;
};

struct Question {
    using Predicate = std::function<bool(const Answers&, const Hardware&)>;
    std::string id;
    QuestionKind kind = QuestionKind::Text;
    std::string prompt; // exact text; "{W}" and "{D}" are filled by promptFor()
    Value defaultValue; // null: no default (an empty answer is taken as is, or re-asked)
    std::vector<Choice> choices;
    std::function<std::vector<Choice>(const Answers&)> dynamicChoices; // e.g. machine ranks
    int defaultChoice = 0;
    std::string errorMessage; // printed before asking again; empty: re-ask silently
    Predicate when; // asked only if true (null: always)
    std::string configKey; // "num_machines", "fsdp_config.fsdp_version"; empty: derived/not stored
    std::string loopBackTo; // after a yes, ask again from this question id
    std::string preamble; // printed once before the first time the question is asked
    std::function<Value(const Value&)> transform; // applied to the parsed answer (expanduser, split)
    std::function<std::string(const Answers&)> abortIf; // non-empty: Accelerate raises this error
};

// The whole tree, in asking order.
const std::vector<Question>& questionTree();
const Question* findQuestion(const std::string& id);
// The word Accelerate puts for "{W}" in the num_processes question under this distributed type
// ("processes", "GPU(s)", ...).
std::string processWord(const std::string& distributedType);

class QuestionnaireSession {
public:
    explicit QuestionnaireSession(Hardware hardware = {});

    const Question* current() const; // nullptr when finished or aborted
    std::string currentPrompt() const;
    std::vector<Choice> currentChoices() const;

    struct LineOutcome {
        bool accepted = false;
        std::string message; // to print before re-asking (may be empty: silent)
    };
    // One line of terminal input, parsed exactly as Accelerate parses it.
    LineOutcome answerLine(const std::string& line);
    // A typed answer (GUI). Choice questions take a choice's value.
    Result<void> answer(const Value& value);

    bool finished() const { return current() == nullptr; }
    const std::optional<std::string>& abortError() const { return m_abort; }
    const Answers& answers() const { return m_answers; }
    // Lines Accelerate prints at the end (the TF32 note).
    std::vector<std::string> closingNotes() const;
    // The config Accelerate would write for these answers.
    Result<AccelerateConfig> result() const;

    std::string promptFor(const Question& q) const;
    std::vector<Choice> choicesFor(const Question& q) const;

private:
    void advanceFrom(std::size_t index);
    void accept(const Question& q, Value value);

    Hardware m_hardware;
    Answers m_answers;
    std::size_t m_position = 0;
    std::optional<std::string> m_abort;
};

// The choice whose label or stored value equals `text` (case-insensitive, surrounding blanks
// ignored): how a typed menu answer is read, in the terminal and in the wizard.
std::optional<std::size_t> matchChoice(const std::vector<Choice>& choices, const std::string& text);

// Accelerate's converters, shared by the terminal and tests. pythonStrip is str.strip().
std::string pythonStrip(const std::string& text);
std::optional<std::int64_t> pythonInt(const std::string& text);
std::optional<double> pythonFloat(const std::string& text);

} // namespace shardscope::config
