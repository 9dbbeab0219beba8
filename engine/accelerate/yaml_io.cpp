#include "engine/accelerate/yaml_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

// Note [PyYAML compatibility]
// Accelerate reads its files with PyYAML (YAML 1.1) and writes them with `yaml.safe_dump`.
// yaml-cpp is a YAML 1.2 parser, so it is used for structure only: every plain scalar is resolved
// here with PyYAML's own implicit resolvers (`NO` is false, `1e8` a string, `010` is 8,
// `1_000` is 1000), quoted scalars stay strings, duplicate keys keep the last value, `<<` merges.
// Before parsing, the text is checked like PyYAML's reader does (valid UTF-8, no control
// characters), so what PyYAML rejects is rejected here with a line and column.
// The writer is a port of the parts of PyYAML's emitter that safe_dump of a dict reaches:
// style choice (analyze_scalar/choose_scalar_style), plain, single- and double-quoted writers
// with their line folding at width 80, block mappings and indentless block sequences, `[]`/`{}`
// for empty collections, and the representers' spelling of null, bools, ints and floats.
// Known gaps, none of which occurs in configs: timestamps load as strings, !!binary/!!set/
// !!omap tags are rejected, integers beyond 64 bits are rejected, aliases are expanded.
//
// The parts: yaml_text.cpp (UTF-8, the reader's checks), yaml_resolver.cpp (plain scalars),
// yaml_reader.cpp (parseYaml), yaml_emitter.cpp (dumpYaml), json_io.cpp (parseJson, dumpJson);
// this file reads and writes the files.

namespace shardscope::config {

Result<std::string> readTextFile(const std::string& path, const UserFileKind& kind) { return readUserFile(path, kind); }

Result<void> writeTextFile(const std::string& path, const std::string& text)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
        return makeError(path + ": cannot open the file for writing (" + std::string(std::strerror(errno))
                             + "); check that its folder exists and is writable",
                         ErrorKind::Io);
    out << text;
    out.close();
    if (!out)
        return makeError(path + ": writing failed; check the free disk space", ErrorKind::Io);
    return {};
}

} // namespace shardscope::config
