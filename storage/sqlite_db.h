#pragma once

// A thin RAII layer over the SQLite C API: one Database per connection (and per thread, see
// Note [One connection per thread] in run_store.h), prepared Statements with typed binds, and an
// immediate Transaction that rolls back unless committed. Every statement that carries a value
// from outside binds it as a parameter; SQL text is only ever built from constants.

#include "engine/common/result.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace shardscope::storage {

class Statement {
public:
    Statement() = default;
    Statement(sqlite3* db, sqlite3_stmt* stmt) : m_db(db), m_stmt(stmt) { }
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&& other) noexcept;
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    ~Statement();

    // Parameters are 1-based, as in SQLite. A NaN double is bound as NULL (SQLite would do so
    // anyway); readers turn NULL back into NaN.
    Statement& bind(int index, std::int64_t value);
    Statement& bind(int index, int value) { return bind(index, std::int64_t{value}); }
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view value);
    Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
    Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
    Statement& bindNull(int index);
    // A measured value: NaN as the text 'NaN' (SQLite stores a bound NaN as NULL, which reads as
    // "no value": a diverged loss must stay a NaN); real() reads it back as NaN.
    Statement& bindMeasured(int index, double value);
    template <typename T>
    Statement& bind(int index, const std::optional<T>& value)
    {
        return value ? bind(index, *value) : bindNull(index);
    }

    // step(): true while a row is available, false when done; errors come back as an Error.
    Result<bool> step();
    // Runs a statement that returns no rows (or ignores them) and resets it.
    Result<void> run();
    void reset();

    bool isNull(int column) const;
    std::int64_t int64(int column) const;
    double real(int column) const; // NULL reads as NaN
    std::string text(int column) const;
    std::optional<std::int64_t> optionalInt64(int column) const;
    std::optional<std::string> optionalText(int column) const;

    explicit operator bool() const { return m_stmt != nullptr; }

private:
    sqlite3* m_db = nullptr;
    sqlite3_stmt* m_stmt = nullptr;
};

// Immutable: read-only without locks or the -shm file (SQLite's immutable=1), for a file in a
// folder that cannot be written; nothing may be writing it then.
enum class OpenMode { ReadWriteCreate, ReadWrite, ReadOnly, Immutable };

// Test hook: every statement prepared from now on first sleeps this long, in whichever thread
// prepares it (a store on a slow disk or under a long write lock, for the workbench's tests that
// the window never waits for the history). 0: off.
void setQueryDelayForTesting(std::chrono::milliseconds delay);

class Database {
public:
    Database() = default;
    Database(Database&& other) noexcept;
    Database& operator=(Database&& other) noexcept;
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;
    ~Database();

    static Result<Database> open(const std::string& path, OpenMode mode, std::chrono::milliseconds busyTimeout);

    Result<void> exec(std::string_view sql);
    Result<Statement> prepare(std::string_view sql) const;
    // For statements prepared once and reused for the life of the connection.
    Result<Statement> preparePersistent(std::string_view sql) const;
    Result<std::int64_t> queryInt(std::string_view sql) const;
    std::int64_t lastInsertId() const;
    int changes() const;

    const std::string& path() const { return m_path; }
    sqlite3* handle() const { return m_db; }
    explicit operator bool() const { return m_db != nullptr; }

    // The last error of this connection, prefixed with the database path, for messages.
    std::string errorText(std::string_view what) const;

private:
    sqlite3* m_db = nullptr;
    std::string m_path;
};

// BEGIN IMMEDIATE takes the write lock up front, so a writer waits (busy timeout) at the start of
// a transaction instead of failing half-way with SQLITE_BUSY on its first write.
class Transaction {
public:
    static Result<Transaction> begin(Database& db, bool immediate = true);
    Transaction(Transaction&& other) noexcept : m_db(other.m_db) { other.m_db = nullptr; }
    Transaction& operator=(Transaction&&) = delete;
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    ~Transaction();

    Result<void> commit();

private:
    explicit Transaction(Database* db) : m_db(db) { }
    Database* m_db = nullptr;
};

} // namespace shardscope::storage
