#include "storage/config_diff.h"

#include <map>
#include <optional>

namespace shardscope::storage {

namespace {

std::string_view trim(std::string_view text)
{
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
        text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
        text.remove_suffix(1);
    return text;
}

// Drops a comment: '#' at the start or after a blank, outside quotes.
std::string_view stripComment(std::string_view line)
{
    char quote = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quote) {
            if (c == quote)
                quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
            return line.substr(0, i);
        }
    }
    return line;
}

// The position of the ':' that ends a mapping key (followed by a blank or the end), or npos.
std::size_t keyColon(std::string_view content)
{
    char quote = 0;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const char c = content[i];
        if (quote) {
            if (c == quote)
                quote = 0;
        } else if ((c == '\'' || c == '"') && i == 0) {
            quote = c;
        } else if (c == '{' || c == '[') {
            return std::string_view::npos; // a flow collection, not a key
        } else if (c == ':' && (i + 1 == content.size() || content[i + 1] == ' ')) {
            return i;
        }
    }
    return std::string_view::npos;
}

std::string unquote(std::string_view value)
{
    if (value.size() >= 2 && ((value.front() == '"' && value.back() == '"') || (value.front() == '\'' && value.back() == '\'')))
        return std::string(value.substr(1, value.size() - 2));
    return std::string(value);
}

struct Frame {
    int indent;
    std::string path;
    bool isKey = false; // opened by "key:" (its sequence items may sit at the same indent)
    bool hasChildren = false;
    int nextItem = 0;
};

std::string join(const std::string& parent, std::string_view key)
{
    return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

} // namespace

std::vector<std::pair<std::string, std::string>> flattenYaml(std::string_view text)
{
    std::vector<std::pair<std::string, std::string>> out;
    std::vector<std::string_view> lines;
    for (std::size_t start = 0; start <= text.size();) {
        const auto end = text.find('\n', start);
        lines.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos)
            break;
        start = end + 1;
    }

    std::vector<Frame> stack{{-1, "", false, false, 0}};
    auto popFrame = [&] {
        if (stack.back().isKey && !stack.back().hasChildren)
            out.emplace_back(stack.back().path, "");
        stack.pop_back();
    };

    for (std::size_t n = 0; n < lines.size(); ++n) {
        const std::string_view raw = lines[n];
        const std::string_view content = trim(stripComment(raw));
        if (content.empty() || content == "---" || content == "...")
            continue;
        const int indent = int(raw.find_first_not_of(" \t"));
        const bool isItem = content.front() == '-' && (content.size() == 1 || content[1] == ' ');
        while (stack.size() > 1 && stack.back().indent >= indent) {
            if (isItem && stack.back().indent == indent && stack.back().isKey)
                break;
            popFrame();
        }

        std::string parent = stack.back().path;
        std::string_view rest = content;
        int keyIndent = indent;
        stack.back().hasChildren = true;
        if (isItem) {
            const std::string itemPath = parent + "[" + std::to_string(stack.back().nextItem++) + "]";
            rest = trim(content.substr(1));
            stack.push_back({indent, itemPath, false, true, 0});
            if (rest.empty())
                continue;
            parent = itemPath;
            keyIndent = indent + int(content.size() - rest.size()); // the column of the item's key
            if (keyColon(rest) == std::string_view::npos) {
                out.emplace_back(itemPath, unquote(rest));
                continue;
            }
        }

        const auto colon = keyColon(rest);
        if (colon == std::string_view::npos)
            continue; // a continuation of a plain multi-line scalar: not worth a key of its own
        const std::string path = join(parent, unquote(trim(rest.substr(0, colon))));
        const std::string_view value = trim(rest.substr(colon + 1));
        if (value.empty()) {
            stack.push_back({keyIndent, path, true, false, 0});
        } else if (value.front() == '|' || value.front() == '>') {
            // A block scalar: the more-indented lines that follow are its text.
            std::string block;
            while (n + 1 < lines.size()) {
                const std::string_view next = lines[n + 1];
                const auto nextIndent = next.find_first_not_of(" \t");
                if (nextIndent != std::string_view::npos && int(nextIndent) <= keyIndent)
                    break;
                if (!block.empty())
                    block += '\n';
                block += trim(next);
                ++n;
            }
            out.emplace_back(path, block);
        } else {
            out.emplace_back(path, unquote(value));
        }
    }
    while (stack.size() > 1)
        popFrame();
    return out;
}

std::vector<ConfigDifference> diffYaml(const std::vector<std::string_view>& documents, const std::string& file)
{
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::optional<std::string>>> values;
    for (std::size_t d = 0; d < documents.size(); ++d) {
        for (auto& [path, value] : flattenYaml(documents[d])) {
            auto [it, inserted] = values.try_emplace(path, documents.size());
            if (inserted)
                order.push_back(path);
            it->second[d] = std::move(value);
        }
    }
    std::vector<ConfigDifference> differences;
    for (const auto& path : order) {
        const auto& row = values[path];
        bool same = true;
        for (const auto& value : row)
            same = same && value == row.front();
        if (!same)
            differences.push_back({file, path, row});
    }
    return differences;
}

std::string ranAsYaml(const RunSummary& run)
{
    std::string yaml;
    if (!run.mixedPrecision.empty())
        yaml += "mixed_precision: " + run.mixedPrecision + "\n";
    if (!run.distributedType.empty())
        yaml += "distributed_type: " + run.distributedType + "\n";
    return yaml + "processes: " + std::to_string(run.worldSize) + "\n";
}

} // namespace shardscope::storage
