#pragma once

// A history database's schema as text (one "type name: sql" line per object, by name), for
// tests that compare it before and after something.

#include "storage/sqlite_db.h"

#include <QtGlobal>

#include <string>

namespace shardscope::testing {

inline std::string schemaOf(const storage::Database& db)
{
    auto stmt = db.prepare("SELECT type || ' ' || name || ': ' || sql FROM sqlite_master "
                           "WHERE name NOT LIKE 'sqlite_%' ORDER BY name");
    if (!stmt)
        qFatal("%s", stmt.error().message.c_str());
    std::string out;
    while (true) {
        auto row = stmt->step();
        if (!row || !*row)
            break;
        out += stmt->text(0) + "\n";
    }
    return out;
}

} // namespace shardscope::testing
