// Every SQL statement is parameterised, checked two ways:
//  - at the SQLite boundary: this test is linked with --wrap for sqlite3_prepare_v2/_v3 and
//    sqlite3_exec (the only entry points storage/ uses), so it sees the text of every statement
//    the store and the writer prepare. Hostile values (quotes, `'); DROP TABLE runs; --`, LIKE
//    wildcards, a NUL byte, invalid UTF-8), each carrying a marker, go through every API that
//    takes user text; none of them may ever appear in SQL text, all of them must read back byte
//    for byte, and the schema must be the same afterwards;
//  - in the sources: no storage/*.cpp calls sqlite3_* preparation directly (only sqlite_db.cpp),
//    and the argument of every prepare/exec/queryInt call is built from string literals and
//    named constants only (a short, reviewed list of other names, each with its reason).

#include "source_scan.h"
#include "storage/run_store.h"
#include "storage/run_writer.h"
#include "tests/common/sqlite_schema.h"

#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include <mutex>
#include <set>
#include <regex>
#include <sstream>

using namespace shardscope::storage;
namespace fs = std::filesystem;

namespace {

std::mutex g_sqlMutex;
std::vector<std::string> g_sql; // every statement text prepared or executed, in order

void recordSql(const char* sql, int bytes)
{
    std::lock_guard lock(g_sqlMutex);
    g_sql.emplace_back(sql, bytes < 0 ? std::strlen(sql) : std::size_t(bytes));
}

std::vector<std::string> recordedSql()
{
    std::lock_guard lock(g_sqlMutex);
    return g_sql;
}

} // namespace

// Note [SQL wrapping]: the linker redirects storage's calls to these (-Wl,--wrap=...), and
// __real_* reaches SQLite itself; see tests/security/CMakeLists.txt.
extern "C" {
int __real_sqlite3_prepare_v2(sqlite3* db, const char* sql, int bytes, sqlite3_stmt** stmt, const char** tail);
int __real_sqlite3_prepare_v3(sqlite3* db, const char* sql, int bytes, unsigned int flags, sqlite3_stmt** stmt,
                              const char** tail);
int __real_sqlite3_exec(sqlite3* db, const char* sql, int (*callback)(void*, int, char**, char**), void* arg, char** error);

int __wrap_sqlite3_prepare_v2(sqlite3* db, const char* sql, int bytes, sqlite3_stmt** stmt, const char** tail)
{
    recordSql(sql, bytes);
    return __real_sqlite3_prepare_v2(db, sql, bytes, stmt, tail);
}
int __wrap_sqlite3_prepare_v3(sqlite3* db, const char* sql, int bytes, unsigned int flags, sqlite3_stmt** stmt, const char** tail)
{
    recordSql(sql, bytes);
    return __real_sqlite3_prepare_v3(db, sql, bytes, flags, stmt, tail);
}
int __wrap_sqlite3_exec(sqlite3* db, const char* sql, int (*callback)(void*, int, char**, char**), void* arg, char** error)
{
    recordSql(sql, -1);
    return __real_sqlite3_exec(db, sql, callback, arg, error);
}
}

namespace {

const std::string kMarker = "Mk7Qz"; // in every hostile value, never in our SQL

std::vector<std::string> hostileValues()
{
    return {kMarker + "x'); DROP TABLE runs; --",
            kMarker + "' OR '1'='1",
            kMarker + "\"; DELETE FROM metrics; --",
            "Robert'); DROP TABLE run_tags;-- " + kMarker,
            kMarker + "%_\\[]*?^$",
            std::string("nul\0byte'", 9) + kMarker,
            kMarker + "\xff\xfe' \xc3\xa9 ` $(x) ?1 :name @v",
            kMarker + "'; ATTACH DATABASE '/tmp/evil.sqlite' AS evil; --"};
}

using shardscope::testing::schemaOf;

std::int64_t count(const Database& db, const char* sql)
{
    auto value = db.queryInt(sql);
    if (!value)
        qFatal("%s", value.error().message.c_str());
    return *value;
}

#define SS_VERIFY_OK(expr)                                                                                                       \
    do {                                                                                                                         \
        const auto& ss_result_ = (expr);                                                                                         \
        QVERIFY2(ss_result_.ok(), ss_result_.ok() ? "" : ss_result_.error().message.c_str());                                    \
    } while (false)

} // namespace

class TestSecuritySql : public QObject {
    Q_OBJECT
private slots:
    void hostileTextIsStoredVerbatimAndNeverReachesSql()
    {
        QTemporaryDir dir;
        const fs::path db = fs::path(dir.path().toStdString()) / "history.sqlite";
        auto opened = RunStore::open(db);
        SS_VERIFY_OK(opened);
        RunStore& store = *opened;
        const auto schemaBefore = schemaOf(store.database());
        QVERIFY(schemaBefore.size() > 5);
        const std::size_t sqlBefore = recordedSql().size();
        QVERIFY2(sqlBefore > 0, "the --wrap of SQLite's prepare/exec is not in effect");

        const auto values = hostileValues();
        std::vector<std::int64_t> ids;
        for (std::size_t i = 0; i < values.size(); ++i) {
            const std::string& h = values[i];
            NewRun run;
            run.name = h;
            run.configText = h;
            run.recipeText = h;
            run.runDir = (store.runsRoot() / ("run" + std::to_string(i))).string() + h;
            run.distributedType = h;
            run.mixedPrecision = h;
            run.tags = {h, h + "#2"};
            run.notes = h;
            auto id = store.createRun(run);
            SS_VERIFY_OK(id);
            ids.push_back(*id);
            SS_VERIFY_OK(store.markRunning(*id));
            SS_VERIFY_OK(store.recordRank(*id, RankInfo{0, 1234, h, h, h, 0, 0}));
            SS_VERIFY_OK(store.setTags(*id, {h, h + "#3"}));
            SS_VERIFY_OK(store.setNotes(*id, h + "#notes"));

            auto writer = RunWriter::open(db, *id);
            SS_VERIFY_OK(writer);
            (*writer)->addRank(RankInfo{1, 99, h, h, h, 1, 0});
            (*writer)->addMetrics(0, 0, 1.0, {{h, 1.5}, {"loss", 2.0}});
            (*writer)->addMetrics(0, 1, 2.0, {{h, 2.5}, {"loss", 1.0}});
            (*writer)->addEval(EvalRecord{0, 1, 2.0, h, 0.5});
            (*writer)->addTrace(TraceRecord{0, 2.0, h, h, 1, 1, 1, 1, 0.5});
            (*writer)->addCheckpoint(CheckpointRecord{0, 1, 2.0, h, h, 10});
            RunEnd end;
            end.status = RunStatus::Failed;
            end.exitCode = 1;
            end.rootCauseRank = 0;
            end.error = h;
            end.rankExitCodes = {{0, 1}};
            SS_VERIFY_OK((*writer)->finish(end));
        }

        // Everything reads back byte for byte.
        for (std::size_t i = 0; i < values.size(); ++i) {
            const std::string& h = values[i];
            const std::int64_t id = ids[i];
            auto details = store.run(id);
            SS_VERIFY_OK(details);
            QVERIFY(details->summary.name == h);
            QVERIFY(details->configText == h);
            QVERIFY(details->recipeText == h);
            QVERIFY(details->notes == h + "#notes");
            QVERIFY(details->error == h);
            QVERIFY(details->summary.distributedType == h);
            QVERIFY(details->summary.mixedPrecision == h);
            QVERIFY(details->summary.runDir.size() > h.size()
                    && details->summary.runDir.compare(details->summary.runDir.size() - h.size(), h.size(), h) == 0);
            QVERIFY((details->summary.tags == std::vector<std::string>{h, h + "#3"})
                    || (details->summary.tags == std::vector<std::string>{h + "#3", h}));
            QCOMPARE(details->ranks.size(), std::size_t(2));
            for (const auto& rank : details->ranks)
                QVERIFY(rank.info.host == h && rank.info.device == h && rank.info.torchVersion == h);
            QCOMPARE(details->checkpoints.size(), std::size_t(1));
            QVERIFY(details->checkpoints[0].path == h && details->checkpoints[0].kind == h);
            QCOMPARE(details->traces.size(), std::size_t(1));
            QVERIFY(details->traces[0].path == h && details->traces[0].source == h);

            auto keys = store.metricKeys(id);
            SS_VERIFY_OK(keys);
            QVERIFY(std::find(keys->begin(), keys->end(), h) != keys->end());
            auto ranks = store.metricRanks(id, h);
            SS_VERIFY_OK(ranks);
            QCOMPARE(ranks->size(), std::size_t(1));
            auto series = store.series(id, 0, h);
            SS_VERIFY_OK(series);
            QCOMPARE(series->size(), std::size_t(2));
            QCOMPARE(series->back().value, 2.5);
            SS_VERIFY_OK(store.downsampledSeries(id, 0, h, 10));
            auto evals = store.evals(id);
            SS_VERIFY_OK(evals);
            QVERIFY(evals->size() == 1 && evals->front().name == h);
            auto since = store.metricsSince(id, 0);
            SS_VERIFY_OK(since);
            QCOMPARE(since->size(), std::size_t(4));
            SS_VERIFY_OK(store.runStats(id));

            // Filters: a hostile value is a value to match, not SQL and not a LIKE pattern.
            RunFilter filter;
            filter.text = h;
            filter.tag = h;
            filter.distributedType = h;
            filter.mixedPrecision = h;
            auto found = store.listRuns(filter);
            SS_VERIFY_OK(found);
            QCOMPARE(found->size(), std::size_t(1));
            QCOMPARE(found->front().id, id);
            auto resolved = store.resolveRun(h);
            SS_VERIFY_OK(resolved);
            QCOMPARE(*resolved, id);

            std::ostringstream csv, json;
            SS_VERIFY_OK(store.exportCsv(id, csv));
            SS_VERIFY_OK(store.exportJson(id, json));
        }
        // A LIKE wildcard in the search text matches itself only.
        RunFilter wildcard;
        wildcard.text = "%";
        auto all = store.listRuns(wildcard);
        SS_VERIFY_OK(all);
        QCOMPARE(all->size(), std::size_t(1)); // the one value with a '%' in it
        SS_VERIFY_OK(store.compareRuns(ids));
        SS_VERIFY_OK(store.deleteRun(ids.back(), false));

        // The schema is intact and every other run is still there.
        QCOMPARE(schemaOf(store.database()), schemaBefore);
        auto integrity = store.database().prepare("PRAGMA integrity_check");
        SS_VERIFY_OK(integrity);
        QVERIFY(*integrity->step());
        QCOMPARE(integrity->text(0), std::string("ok"));
        QCOMPARE(count(store.database(), "SELECT count(*) FROM runs"), std::int64_t(values.size() - 1));
        QCOMPARE(count(store.database(), "SELECT count(*) FROM run_tags"), std::int64_t(2 * (values.size() - 1)));
        QCOMPARE(count(store.database(), "SELECT count(*) FROM pragma_database_list WHERE name = 'evil'"),
                 std::int64_t(0)); // nothing was ATTACHed
        QVERIFY(!fs::exists("/tmp/evil.sqlite"));

        // No statement text ever carried a value.
        const auto sql = recordedSql();
        QVERIFY2(sql.size() > sqlBefore + 50, qPrintable(QString::number(sql.size() - sqlBefore)));
        QStringList leaked;
        for (const auto& statement : sql)
            if (statement.find(kMarker) != std::string::npos)
                leaked << QString::fromStdString(statement);
        QVERIFY2(leaked.isEmpty(), qPrintable("user text in SQL:\n" + leaked.join('\n')));
        // The wrap saw the writer's statements too (its own thread and connection).
        QVERIFY(std::any_of(sql.begin(), sql.end(), [](const std::string& s) { return s.rfind("INSERT INTO metrics", 0) == 0; }));
    }

    void sqlIsBuiltFromConstantsOnly()
    {
        namespace st = security_test;
        // Names allowed in a SQL argument besides literals and kConstants, each reviewed:
        const std::set<std::string> reviewed = {
            "std",       "string",        "string_view", // glue: std::string("SELECT ") + kColumns + ...
            "sql", // a local assembled from literals only (checked below)
            "item", // RunWriter's table of statements: literals and multiRowInsert(n)
            "to_string", "targetVersion", // PRAGMA user_version=<our own schema version>: PRAGMA takes no parameters
        };
        const std::regex call("(\\.|->)\\s*(prepare|preparePersistent|exec|queryInt)\\s*\\(");
        const std::regex direct("\\bsqlite3_(prepare\\w*|exec)\\s*\\(");
        const std::regex sqlAssign("\\bsql\\s*(\\+?=)([^;]*);");
        QStringList findings;
        std::set<std::string> constants; // kNames used in SQL
        int calls = 0;
        for (const auto& file : st::sourcesUnder({"storage"})) {
            if (file.extension() != ".cpp" || file.parent_path().filename() == "bench")
                continue;
            const std::string code = st::codeOnly(st::readAll(file));
            const std::string where = file.filename().string();
            if (where != "sqlite_db.cpp") {
                for (auto it = std::sregex_iterator(code.begin(), code.end(), direct); it != std::sregex_iterator(); ++it)
                    findings << QString("%1:%2: calls SQLite directly: %3")
                                    .arg(QString::fromStdString(where))
                                    .arg(st::lineOf(code, std::size_t(it->position())))
                                    .arg(QString::fromStdString(it->str()));
            }
            for (auto it = std::sregex_iterator(code.begin(), code.end(), call); it != std::sregex_iterator(); ++it) {
                const std::size_t open = std::size_t(it->position() + it->length() - 1);
                const std::string argument = st::callArgument(code, open);
                if (where == "sqlite_db.cpp" && (argument == "sql" || argument.find("immediate") != std::string::npos))
                    continue; // the wrappers themselves, and BEGIN [IMMEDIATE]
                ++calls;
                for (const auto& name : st::identifiers(argument)) {
                    const bool constant = name.size() > 1 && name[0] == 'k' && std::isupper(static_cast<unsigned char>(name[1]));
                    if (constant)
                        constants.insert(name);
                    if (!constant && !reviewed.count(name))
                        findings << QString("%1:%2: SQL built with '%3': %4")
                                        .arg(QString::fromStdString(where))
                                        .arg(st::lineOf(code, open))
                                        .arg(QString::fromStdString(name), QString::fromStdString(argument));
                }
            }
            // Every assignment to a local `sql`: literals and constants, plus the condition of a
            // ?: choosing between literals.
            for (auto it = std::sregex_iterator(code.begin(), code.end(), sqlAssign); it != std::sregex_iterator(); ++it) {
                std::string rhs = (*it)[2].str();
                if (const auto q = rhs.find('?'); q != std::string::npos && rhs.find(':', q) != std::string::npos)
                    rhs = rhs.substr(q + 1);
                for (const auto& name : st::identifiers(rhs)) {
                    const bool constant = name.size() > 1 && name[0] == 'k' && std::isupper(static_cast<unsigned char>(name[1]));
                    if (constant)
                        constants.insert(name);
                    if (!constant && name != "std" && name != "string")
                        findings << QString("%1:%2: sql assembled with '%3'")
                                        .arg(QString::fromStdString(where))
                                        .arg(st::lineOf(code, std::size_t(it->position())))
                                        .arg(QString::fromStdString(name));
                }
            }
        }
        // Every kConstant used above is a string literal.
        std::string allCode;
        for (const auto& file : st::sourcesUnder({"storage"}))
            allCode += st::codeOnly(st::readAll(file));
        for (const auto& name : constants) {
            const std::regex literal("\\b" + name + "\\s*=\\s*\"\"(\\s*\"\")*\\s*;");
            if (!std::regex_search(allCode, literal))
                findings << QString("%1 is not defined as a string literal").arg(QString::fromStdString(name));
        }
        QVERIFY2(constants.size() >= 2, qPrintable(QString::number(constants.size())));
        QVERIFY2(calls >= 40, qPrintable(QString::number(calls))); // the scan does see the calls
        QVERIFY2(findings.isEmpty(), qPrintable(findings.join('\n')));
    }
};

QTEST_APPLESS_MAIN(TestSecuritySql)
#include "tst_security_sql.moc"
