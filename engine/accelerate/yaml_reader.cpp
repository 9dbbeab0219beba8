// The YAML reader: yaml-cpp for structure, PyYAML's resolution for every plain scalar.
// See Note [PyYAML compatibility] in yaml_io.cpp.

#include "engine/accelerate/yaml_io.h"
#include "engine/accelerate/yaml_detail.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

namespace shardscope::config {

using namespace detail;

namespace {

// ---- yaml-cpp node -> Value --------------------------------------------------------------------

class Converter {
public:
    explicit Converter(std::string source) : m_source(std::move(source)) { }

    Result<Value> convert(const YAML::Node& node, int depth)
    {
        const int line = node.Mark().line + 1;
        const int column = node.Mark().column + 1;
        if (depth > kMaxDepth)
            return errorAt(ErrorKind::Syntax, m_source, line, column,
                           "nesting deeper than " + std::to_string(kMaxDepth) + " levels (or a recursive alias)",
                           "a config file is never this deep");
        Result<Value> r = convertInner(node, depth);
        if (r) {
            r->line = line;
            r->column = column;
        }
        return r;
    }

private:
    Result<Value> scalar(const YAML::Node& node)
    {
        const std::string& tag = node.Tag();
        const std::string& text = node.Scalar();
        auto fail = [&](ErrorKind kind, const std::string& what, const std::string& fix) {
            return errorAt(kind, m_source, node.Mark().line + 1, node.Mark().column + 1, what, fix);
        };
        auto asTagged = [&](PlainTag t) -> Result<Value> {
            switch (t) {
            case PlainTag::Null:
                return Value();
            case PlainTag::Bool: {
                std::string lower = text;
                std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
                if (isOneOf(lower, {"yes", "true", "on"}))
                    return Value(true);
                if (isOneOf(lower, {"no", "false", "off"}))
                    return Value(false);
                return fail(ErrorKind::BadValue, "'" + text + "' is not a boolean", "write true or false");
            }
            case PlainTag::Int: {
                std::int64_t v = 0;
                if (!constructInt(text, v))
                    return fail(ErrorKind::BadValue,
                                "the integer '" + text + "' cannot be read (out of the 64-bit range or malformed)",
                                "quote it to keep it as text");
                return Value(v);
            }
            case PlainTag::Float: {
                double v = 0;
                if (!constructFloat(text, v))
                    return fail(ErrorKind::BadValue, "the number '" + text + "' cannot be read as a float",
                                "quote it to keep it as text");
                return Value(v);
            }
            case PlainTag::Timestamp:
            case PlainTag::Str:
            case PlainTag::Merge: // the mapping handles the merge key itself
                return Value(text);
            case PlainTag::ValueTag:
                return fail(ErrorKind::Syntax,
                            "could not determine a constructor for the tag 'tag:yaml.org,2002:value' (a bare '=')",
                            "quote it: '='");
            }
            return Value(text);
        };
        if (tag == "?" || tag.empty())
            return asTagged(resolvePlainScalar(text));
        if (tag == "!" || tag == "tag:yaml.org,2002:str")
            return Value(text);
        if (tag == "tag:yaml.org,2002:int")
            return asTagged(PlainTag::Int);
        if (tag == "tag:yaml.org,2002:float")
            return asTagged(PlainTag::Float);
        if (tag == "tag:yaml.org,2002:bool")
            return asTagged(PlainTag::Bool);
        if (tag == "tag:yaml.org,2002:null")
            return Value();
        return fail(ErrorKind::Syntax, "could not determine a constructor for the tag '" + tag + "'",
                    "remove the tag, `yaml.safe_load` accepts only the standard ones");
    }

    Result<Value> convertInner(const YAML::Node& node, int depth)
    {
        switch (node.Type()) {
        case YAML::NodeType::Undefined:
        case YAML::NodeType::Null:
            return Value();
        case YAML::NodeType::Scalar:
            return scalar(node);
        case YAML::NodeType::Sequence: {
            Value::List list;
            for (const auto& item : node) {
                auto v = convert(item, depth + 1);
                if (!v)
                    return v.error();
                list.push_back(std::move(*v));
            }
            return Value(std::move(list));
        }
        case YAML::NodeType::Map: {
            Value out = Value::emptyMap();
            Value::Map merged;
            for (const auto& kv : node) {
                const YAML::Node& keyNode = kv.first;
                auto fail = [&](const std::string& what, const std::string& fix) {
                    return errorAt(ErrorKind::Syntax, m_source, keyNode.Mark().line + 1, keyNode.Mark().column + 1, what, fix);
                };
                if (keyNode.IsSequence() || keyNode.IsMap())
                    return fail("found unhashable key (a list or mapping used as a key)", "use a plain name");
                if (keyNode.IsScalar() && keyNode.Tag() == "?" && keyNode.Scalar() == "<<") {
                    auto mv = convert(kv.second, depth + 1);
                    if (!mv)
                        return mv.error();
                    // PyYAML's flatten_mapping: a mapping, or a list of mappings (earlier wins).
                    std::vector<const Value*> sources;
                    if (mv->isMap())
                        sources.push_back(&*mv);
                    else if (mv->isList()) {
                        for (const auto& s : mv->asList()) {
                            if (!s.isMap())
                                return fail("expected a mapping for merging, but found " + s.typeName(),
                                            "merge a mapping (<<: *anchor)");
                            sources.push_back(&s);
                        }
                    } else {
                        return fail("expected a mapping or list of mappings for merging, but found " + mv->typeName(),
                                    "merge a mapping (<<: *anchor)");
                    }
                    for (const Value* s : sources)
                        for (const auto& e : s->asMap())
                            if (std::none_of(merged.begin(), merged.end(), [&](const Value::Entry& m) { return m.key == e.key; }))
                                merged.push_back(e);
                    continue;
                }
                auto k = convert(keyNode, depth + 1);
                if (!k)
                    return k.error();
                auto v = convert(kv.second, depth + 1);
                if (!v)
                    return v.error();
                auto& map = out.asMap();
                auto it = std::find_if(map.begin(), map.end(), [&](const Value::Entry& e) { return e.key == *k; });
                if (it != map.end())
                    it->value = std::move(*v); // duplicate key: the last one wins, silently, as in PyYAML
                else
                    map.push_back(Value::Entry{std::move(*k), std::move(*v)});
            }
            if (!merged.empty()) {
                Value::Map result;
                for (auto& m : merged)
                    if (std::none_of(out.asMap().begin(), out.asMap().end(),
                                     [&](const Value::Entry& e) { return e.key == m.key; }))
                        result.push_back(m);
                for (auto& e : out.asMap())
                    result.push_back(e);
                return Value(std::move(result));
            }
            return out;
        }
        }
        return Value();
    }

    std::string m_source;
};

// Counts documents without building them. yaml-cpp 0.7's LoadAll never ends on some malformed
// streams (a stray `,` after a closed flow mapping yields endless empty documents), so the
// stream is walked with a bound first, and only the first document is then built.
class DocumentCounter : public YAML::EventHandler {
public:
    std::vector<YAML::Mark> starts;
    void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
    void OnDocumentEnd() override { }
    void OnNull(const YAML::Mark&, YAML::anchor_t) override { }
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override { }
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { }
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { }
    void OnSequenceEnd() override { }
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { }
    void OnMapEnd() override { }
};

} // namespace

Result<Value> parseYaml(const std::string& text, const std::string& source)
{
    if (auto ok = checkReadable(text, source); !ok)
        return ok.error();
    if (auto ok = checkNesting(text, source); !ok)
        return ok.error();
    YAML::Node root;
    try {
        std::istringstream stream(text);
        YAML::Parser parser(stream);
        DocumentCounter counter;
        int documents = 0;
        while (documents < 2 && parser.HandleNextDocument(counter))
            ++documents;
        if (documents == 0)
            return Value();
        if (documents > 1) {
            const YAML::Mark m = counter.starts.size() > 1 ? counter.starts[1] : YAML::Mark();
            return errorAt(ErrorKind::Syntax, source, m.line + 1, m.column + 1,
                           "expected a single document in the stream, but found another document",
                           "remove what follows the first document (a second `---` section or stray characters)");
        }
        root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
        // A tab in a line's indentation is what most often breaks a hand-edited file; yaml-cpp
        // reports what follows from it, PyYAML names the tab. Name it too.
        std::istringstream lines(text);
        int number = 0;
        for (std::string line; std::getline(lines, line);) {
            ++number;
            const auto first = line.find_first_not_of(" \t");
            const auto tab = line.find('\t');
            if (number <= e.mark.line + 1 && first != std::string::npos && tab < first && line[first] != '#')
                return errorAt(ErrorKind::Syntax, source, number, static_cast<int>(tab) + 1,
                               "YAML syntax error: this line is indented with a tab (found character '\\t' that cannot "
                               "start any token)",
                               "YAML indents with spaces only: replace the tab with spaces");
        }
        return errorAt(ErrorKind::Syntax, source, e.mark.line + 1, e.mark.column + 1, "YAML syntax error: " + e.msg,
                       "fix the indentation, quoting or brackets at this place");
    } catch (const YAML::Exception& e) {
        return errorAt(ErrorKind::Syntax, source, e.mark.line + 1, e.mark.column + 1, "YAML error: " + e.msg);
    } catch (const std::exception& e) {
        return makeError(source + ": YAML error: " + e.what(), ErrorKind::Syntax);
    }
    try {
        return Converter(source).convert(root, 0);
    } catch (const std::exception& e) {
        return makeError(source + ": YAML error: " + e.what(), ErrorKind::Syntax);
    }
}

} // namespace shardscope::config
