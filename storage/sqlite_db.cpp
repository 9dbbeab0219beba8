#include "storage/sqlite_db.h"

#include <sqlite3.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>
#include <utility>

namespace shardscope::storage {

namespace {

// Note [Write failures]: SQLite reports a full disk as SQLITE_FULL and a write the kernel refused
// (ENOSPC part-way, EFBIG past a file-size limit, EIO) as SQLITE_IOERR_*; either way the
// transaction is rolled back and the file stays consistent, so the message only has to say what
// the user can do. The system errno (when SQLite kept one) tells which of these it was.
std::string failureHint(sqlite3* db, int rc, const std::string& path)
{
    std::string hint;
    const int err = db ? sqlite3_system_errno(db) : 0;
    switch (rc & 0xff) {
    case SQLITE_FULL:
    case SQLITE_IOERR: {
        std::string folder = std::filesystem::path(path).parent_path().string();
        if (folder.empty())
            folder = ".";
        if (err != 0)
            hint += std::string(" (") + std::strerror(err) + ")";
        hint += "; the disk holding " + folder
                + " may be full, or a file-size limit was reached: free space there (or set SHARDSCOPE_HOME to a "
                  "folder on another disk) and try again";
        break;
    }
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        hint += "; another process holds the database lock for longer than the busy timeout";
        break;
    case SQLITE_READONLY:
        hint += "; the file or its folder is not writable by this user";
        break;
    default:
        break;
    }
    return hint;
}

} // namespace

Statement::Statement(Statement&& other) noexcept
    : m_db(std::exchange(other.m_db, nullptr)), m_stmt(std::exchange(other.m_stmt, nullptr))
{
}

Statement& Statement::operator=(Statement&& other) noexcept
{
    if (this != &other) {
        sqlite3_finalize(m_stmt);
        m_db = std::exchange(other.m_db, nullptr);
        m_stmt = std::exchange(other.m_stmt, nullptr);
    }
    return *this;
}

Statement::~Statement() { sqlite3_finalize(m_stmt); }

Statement& Statement::bind(int index, std::int64_t value)
{
    sqlite3_bind_int64(m_stmt, index, value);
    return *this;
}

Statement& Statement::bind(int index, double value)
{
    if (std::isnan(value))
        sqlite3_bind_null(m_stmt, index);
    else
        sqlite3_bind_double(m_stmt, index, value);
    return *this;
}

Statement& Statement::bind(int index, std::string_view value)
{
    sqlite3_bind_text64(m_stmt, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    return *this;
}

Statement& Statement::bindMeasured(int index, double value)
{
    if (std::isnan(value))
        return bind(index, std::string_view("NaN"));
    sqlite3_bind_double(m_stmt, index, value);
    return *this;
}

Statement& Statement::bindNull(int index)
{
    sqlite3_bind_null(m_stmt, index);
    return *this;
}

Result<bool> Statement::step()
{
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW)
        return true;
    if (rc == SQLITE_DONE)
        return false;
    const std::string path = sqlite3_db_filename(m_db, "main");
    std::string message = "SQLite error in " + path + ": " + sqlite3_errmsg(m_db) + " (while running: " + sqlite3_sql(m_stmt)
                          + ")" + failureHint(m_db, rc, path);
    sqlite3_reset(m_stmt);
    return makeError(std::move(message));
}

Result<void> Statement::run()
{
    auto rc = step();
    sqlite3_reset(m_stmt);
    if (!rc)
        return rc.error();
    return {};
}

void Statement::reset()
{
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
}

bool Statement::isNull(int column) const { return sqlite3_column_type(m_stmt, column) == SQLITE_NULL; }

std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(m_stmt, column); }

double Statement::real(int column) const
{
    const int type = sqlite3_column_type(m_stmt, column);
    if (type == SQLITE_NULL || type == SQLITE_TEXT) // NULL: none; text: 'NaN' (bindMeasured)
        return std::numeric_limits<double>::quiet_NaN();
    return sqlite3_column_double(m_stmt, column);
}

std::string Statement::text(int column) const
{
    const auto* bytes = sqlite3_column_text(m_stmt, column);
    if (!bytes)
        return {};
    return std::string(reinterpret_cast<const char*>(bytes), std::size_t(sqlite3_column_bytes(m_stmt, column)));
}

std::optional<std::int64_t> Statement::optionalInt64(int column) const
{
    if (isNull(column))
        return std::nullopt;
    return int64(column);
}

std::optional<std::string> Statement::optionalText(int column) const
{
    if (isNull(column))
        return std::nullopt;
    return text(column);
}

Database::Database(Database&& other) noexcept : m_db(std::exchange(other.m_db, nullptr)), m_path(std::move(other.m_path)) { }

Database& Database::operator=(Database&& other) noexcept
{
    if (this != &other) {
        sqlite3_close_v2(m_db);
        m_db = std::exchange(other.m_db, nullptr);
        m_path = std::move(other.m_path);
    }
    return *this;
}

Database::~Database()
{
    // close_v2 defers the close until every statement of this connection is finalized, so the
    // order in which a RunStore's members die does not matter.
    sqlite3_close_v2(m_db);
}

Result<Database> Database::open(const std::string& path, OpenMode mode, std::chrono::milliseconds busyTimeout)
{
    // SQLite's memory statistics take a global mutex on every allocation, a tenth of the
    // writer's time; nothing of ours reads them. Only possible before SQLite initialises; if
    // someone else initialised it first, the call fails harmlessly.
    static const bool configured = [] {
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
        return true;
    }();
    (void)configured;
    int flags = SQLITE_OPEN_NOMUTEX; // one connection per thread: no need for SQLite's mutexes
    switch (mode) {
    case OpenMode::ReadWriteCreate:
        flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        break;
    case OpenMode::ReadWrite:
        flags |= SQLITE_OPEN_READWRITE;
        break;
    case OpenMode::ReadOnly:
        flags |= SQLITE_OPEN_READONLY;
        break;
    case OpenMode::Immutable:
        flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
        break;
    }
    std::string name = path;
    if (mode == OpenMode::Immutable) {
        name = "file:";
        for (char c : std::filesystem::absolute(path).string()) {
            if (c == '%' || c == '?' || c == '#') {
                char hex[4];
                std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
                name += hex;
            } else {
                name += c;
            }
        }
        name += "?immutable=1";
    }
    sqlite3* handle = nullptr;
    const int rc = sqlite3_open_v2(name.c_str(), &handle, flags, nullptr);
    Database db;
    db.m_db = handle;
    db.m_path = path;
    if (rc != SQLITE_OK) {
        std::string message = "cannot open the run history " + path + ": "
                              + (handle ? sqlite3_errmsg(handle) : sqlite3_errstr(rc));
        if (mode != OpenMode::ReadWriteCreate)
            message += " (does the file exist and is it readable?)";
        else
            message += " (check that its folder exists and is writable, or set SHARDSCOPE_HOME)";
        return makeError(std::move(message));
    }
    sqlite3_extended_result_codes(handle, 1);
    sqlite3_busy_timeout(handle, int(busyTimeout.count()));
    return db;
}

std::string Database::errorText(std::string_view what) const
{
    return std::string("SQLite error in ") + m_path + " while " + std::string(what) + ": "
           + (m_db ? sqlite3_errmsg(m_db) : "not open");
}

Result<void> Database::exec(std::string_view sql)
{
    const std::string text(sql);
    char* message = nullptr;
    const int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &message);
    if (rc != SQLITE_OK) {
        std::string error = "SQLite error in " + m_path + ": " + (message ? message : sqlite3_errstr(rc))
                            + failureHint(m_db, rc, m_path);
        sqlite3_free(message);
        return makeError(std::move(error));
    }
    return {};
}

namespace {
std::atomic<std::int64_t> g_queryDelayMs{0};

void delayForTesting()
{
    if (const auto ms = g_queryDelayMs.load(std::memory_order_relaxed); ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}
} // namespace

void setQueryDelayForTesting(std::chrono::milliseconds delay) { g_queryDelayMs.store(delay.count(), std::memory_order_relaxed); }

Result<Statement> Database::prepare(std::string_view sql) const
{
    delayForTesting();
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(m_db, sql.data(), int(sql.size()), &stmt, nullptr) != SQLITE_OK)
        return makeError(errorText("preparing \"" + std::string(sql) + "\""));
    return Statement(m_db, stmt);
}

Result<Statement> Database::preparePersistent(std::string_view sql) const
{
    delayForTesting();
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(m_db, sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK)
        return makeError(errorText("preparing \"" + std::string(sql) + "\""));
    return Statement(m_db, stmt);
}

Result<std::int64_t> Database::queryInt(std::string_view sql) const
{
    auto stmt = prepare(sql);
    if (!stmt)
        return stmt.error();
    auto row = stmt->step();
    if (!row)
        return row.error();
    return *row ? stmt->int64(0) : 0;
}

std::int64_t Database::lastInsertId() const { return sqlite3_last_insert_rowid(m_db); }

int Database::changes() const { return sqlite3_changes(m_db); }

Result<Transaction> Transaction::begin(Database& db, bool immediate)
{
    if (auto rc = db.exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN"); !rc)
        return rc.error();
    return Transaction(&db);
}

Transaction::~Transaction()
{
    if (m_db)
        (void)m_db->exec("ROLLBACK");
}

Result<void> Transaction::commit()
{
    Database* db = std::exchange(m_db, nullptr);
    if (auto rc = db->exec("COMMIT"); !rc) {
        (void)db->exec("ROLLBACK");
        return rc.error();
    }
    return {};
}

} // namespace shardscope::storage
