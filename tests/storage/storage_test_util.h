#pragma once

// Small helpers shared by the storage suites: raw SQL checks that do not go through the code
// under test, and Result unwrapping with the error message in the failure.

#include "storage/sqlite_db.h"

#include <QtTest>

#include <string>

#define SS_VERIFY_OK(expr)                                                                                                       \
    do {                                                                                                                         \
        const auto& ss_result_ = (expr);                                                                                         \
        QVERIFY2(ss_result_.ok(), ss_result_.ok() ? "" : ss_result_.error().message.c_str());                                    \
    } while (false)

namespace storage_test {

using shardscope::storage::Database;
using shardscope::storage::OpenMode;

inline Database rawOpen(const std::string& path)
{
    auto db = Database::open(path, OpenMode::ReadWrite, std::chrono::milliseconds(5000));
    if (!db)
        qFatal("%s", db.error().message.c_str());
    return std::move(*db);
}

inline std::string queryText(const Database& db, const std::string& sql)
{
    auto stmt = db.prepare(sql);
    if (!stmt)
        qFatal("%s", stmt.error().message.c_str());
    auto row = stmt->step();
    if (!row)
        qFatal("%s", row.error().message.c_str());
    return *row ? stmt->text(0) : std::string();
}

inline std::int64_t queryInt(const Database& db, const std::string& sql)
{
    auto value = db.queryInt(sql);
    if (!value)
        qFatal("%s", value.error().message.c_str());
    return *value;
}

} // namespace storage_test
