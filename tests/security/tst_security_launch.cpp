// Security properties of launching, as tests that fail if one breaks:
//  - the rendezvous store listens on loopback unless the config (or --main_process_ip) names
//    another address: the socket the launcher binds and hands to rank 0 is read back with
//    getsockname, by the test and by the rank itself (tests/helpers/fake_rank), and a connection
//    to the machine's own non-loopback address is refused;
//  - no shell ever starts a process: arguments, environment values and a worker path full of
//    shell metacharacters reach the rank byte for byte and create nothing; no source file of the
//    product calls system(), popen(), an exec*l* function or "sh -c";
//  - run names from the user never escape the runs directory: traversal, absolute paths,
//    separators, control characters and symlinks planted in the runs directory are refused or
//    confined, and nothing appears outside the runs directory.

#include "engine/plan/run_plan.h"
#include "app/launcher/launcher.h"
#include "app/launcher/rendezvous.h"
#include "tests/common/fake_launch.h"
#include "tests/common/env_file.h"
#include "app/launcher/run_directory.h"
#include "engine/accelerate/accelerate_config.h"
#include "source_scan.h"

#include <QTemporaryDir>
#include <QtTest>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

using shardscope::testing::fakeLaunch;
using shardscope::testing::kFakeRank;

// Names that a shell would act on. Each would create a file called PWNED* if anything ran it
// through a shell (or expanded it).
const std::vector<std::string>& hostileArguments()
{
    static const std::vector<std::string> args = {"$(touch PWNED1)",
                                                  "`touch PWNED2`",
                                                  "; touch PWNED3",
                                                  "a && touch PWNED4",
                                                  "| touch PWNED5",
                                                  "> PWNED6",
                                                  "x\ntouch PWNED7",
                                                  "'single' \"double\" \\back",
                                                  "with space",
                                                  "*",
                                                  "$HOME ${PATH}",
                                                  "~",
                                                  "%s%n%x",
                                                  "--out",
                                                  "-",
                                                  "\t",
                                                  "\xc3\xa9\xff",
                                                  ""};
    return args;
}

using shardscope::testing::readEnvFile;

std::vector<std::string> readArgv(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::vector<std::string> args;
    std::string arg;
    while (std::getline(in, arg, '\0'))
        args.push_back(arg);
    return args;
}

std::string boundAddress(int fd)
{
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sin_family != AF_INET)
        return "?";
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
    return ip;
}

// The machine's first IPv4 address that is not loopback, if it has one.
std::optional<in_addr> externalAddress()
{
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return std::nullopt;
    std::optional<in_addr> found;
    for (ifaddrs* a = list; a && !found; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET)
            continue;
        const in_addr ip = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr;
        if ((ntohl(ip.s_addr) >> 24) != 127)
            found = ip;
    }
    freeifaddrs(list);
    return found;
}

bool canConnect(in_addr ip, int port)
{
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr = ip;
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    return ok;
}

std::set<std::string> entriesOf(const fs::path& dir)
{
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        names.insert(e.path().filename().string());
    return names;
}

// Files called PWNED<n> anywhere below `root` (what `touch PWNED<n>` run by a shell would create).
std::vector<std::string> pwnedFiles(const fs::path& root)
{
    static const std::regex pwned("PWNED[0-9]+");
    std::vector<std::string> found;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec)
            break;
        if (std::regex_match(it->path().filename().string(), pwned))
            found.push_back(it->path().string());
    }
    return found;
}

config::PlanResult planFrom(const std::string& yaml)
{
    auto cfg = config::parseAccelerateConfig(yaml, "security.yaml", config::FileFormat::Yaml);
    if (!cfg)
        qFatal("%s", cfg.error().message.c_str());
    config::PlanInputs inputs;
    inputs.config = config::applyOverrides(*cfg, {});
    return config::buildRunPlan(inputs);
}

} // namespace

class TestSecurityLaunch : public QObject {
    Q_OBJECT
private slots:
    // --- the rendezvous store ---

    void rendezvousDefaultsToLoopback()
    {
        QCOMPARE(LaunchOptions{}.masterAddr, std::string("127.0.0.1"));
        QCOMPARE(config::RunPlan{}.mainProcessIp, std::string("127.0.0.1"));
        auto r = planFrom("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\nnum_machines: 1\n");
        QVERIFY(r.ok());
        QCOMPARE(r.plan->mainProcessIp, std::string("127.0.0.1"));
    }

    void configNamesAnotherAddress()
    {
        // A job over several machines listens where the config says ...
        auto r = planFrom("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
                          "num_processes: 4\nnum_machines: 2\nmachine_rank: 0\nmain_process_ip: 10.11.12.13\n"
                          "main_process_port: 29500\n");
        QVERIFY2(r.ok(), r.problems.empty() ? "" : r.problems.front().message.c_str());
        QCOMPARE(r.plan->mainProcessIp, std::string("10.11.12.13"));
        // ... a run on this machine alone never opens the store to the network.
        r = planFrom("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
                     "num_processes: 2\nnum_machines: 1\nmain_process_ip: 10.11.12.13\n");
        QVERIFY(!r.ok());
        QVERIFY(std::any_of(r.problems.begin(), r.problems.end(),
                            [](const config::Diagnostic& d) { return d.keyPath == "main_process_ip"; }));
    }

    void listenOnBindsExactlyTheAddress_data()
    {
        QTest::addColumn<QString>("address");
        QTest::addColumn<QString>("bound");
        QTest::newRow("default") << QString::fromStdString(LaunchOptions{}.masterAddr) << "127.0.0.1";
        QTest::newRow("localhost") << "localhost"
                                   << "127.0.0.1";
        QTest::newRow("another loopback address") << "127.0.0.2"
                                                  << "127.0.0.2";
    }
    void listenOnBindsExactlyTheAddress()
    {
        QFETCH(QString, address);
        QFETCH(QString, bound);
        auto socket = listenOn(address.toStdString(), 0);
        QVERIFY2(socket.ok(), socket.ok() ? "" : socket.error().message.c_str());
        QCOMPARE(QString::fromStdString(boundAddress(socket->fd)), bound);
        QVERIFY(socket->port > 0);
        // Not reachable from the network: the machine's own external address is refused.
        if (auto external = externalAddress())
            QVERIFY2(!canConnect(*external, socket->port), "the rendezvous port answers on a non-loopback address");
        close(socket->fd);
    }

    void listenOnRefusesWhatIsNotAnAddress_data()
    {
        QTest::addColumn<QString>("address");
        QTest::newRow("empty") << "";
        QTest::newRow("host name") << "example.com";
        QTest::newRow("shell") << "127.0.0.1;touch PWNED";
        QTest::newRow("command substitution") << "$(hostname -I)";
        QTest::newRow("trailing junk") << "127.0.0.1 ";
    }
    void listenOnRefusesWhatIsNotAnAddress()
    {
        QFETCH(QString, address);
        auto socket = listenOn(address.toStdString(), 0);
        QVERIFY(!socket.ok());
        QVERIFY2(socket.error().message.find("is not an IPv4 address") != std::string::npos, socket.error().message.c_str());
    }

    void rankZeroInheritsTheBoundSocket_data()
    {
        QTest::addColumn<QString>("address"); // empty: the default
        QTest::addColumn<QString>("expected");
        QTest::newRow("default") << ""
                                 << "127.0.0.1";
        QTest::newRow("named") << "127.0.0.2"
                               << "127.0.0.2";
    }
    void rankZeroInheritsTheBoundSocket()
    {
        QFETCH(QString, address);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        auto options = fakeLaunch(2, {"--out", dir.path().toStdString()});
        if (!address.isEmpty())
            options.masterAddr = address.toStdString();
        auto outcome = runLaunch(options);
        QVERIFY2(outcome.ok(), outcome.ok() ? "" : outcome.error().message.c_str());
        QCOMPARE(outcome->exitCode, 0);
        const auto rank0 = readEnvFile(fs::path(dir.path().toStdString()) / "rank0.env");
        const std::string where = expected.toStdString() + ":" + std::to_string(outcome->masterPort);
        QCOMPARE(rank0.count("LISTEN_ADDR"), std::size_t(1));
        QCOMPARE(rank0.at("LISTEN_ADDR"), where); // what rank 0's TCPStore serves on
        QCOMPARE(rank0.at("MASTER_ADDR"), expected.toStdString());
        const auto rank1 = readEnvFile(fs::path(dir.path().toStdString()) / "rank1.env");
        QCOMPARE(rank1.count("LISTEN_ADDR"), std::size_t(0)); // only rank 0 gets the socket
        QCOMPARE(rank1.at("MASTER_ADDR"), expected.toStdString());
    }

    // --- no shell ---

    void argumentsAndEnvironmentReachRanksVerbatim()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const fs::path out = root / "out";
        const fs::path cwd = root / "cwd";
        fs::create_directories(out);
        fs::create_directories(cwd);
        std::vector<std::string> args = {"--out", out.string(), "--env", "SHARDSCOPE_TEST_HOSTILE"};
        for (const auto& a : hostileArguments())
            args.insert(args.end(), {"--arg", a});
        auto options = fakeLaunch(2, args);
        const std::string hostileEnv = "$(touch PWNED8); `touch PWNED9` | x > PWNED10";
        options.extraEnvironment = {"SHARDSCOPE_TEST_HOSTILE=" + hostileEnv};
        // Ranks run in the caller's working directory: a relative PWNED file would land here.
        const fs::path before = fs::current_path();
        fs::current_path(cwd);
        auto outcome = runLaunch(options);
        fs::current_path(before);
        QVERIFY2(outcome.ok(), outcome.ok() ? "" : outcome.error().message.c_str());
        QCOMPARE(outcome->exitCode, 0);

        std::vector<std::string> expected = {kFakeRank};
        expected.insert(expected.end(), args.begin(), args.end());
        for (int rank = 0; rank < 2; ++rank) {
            const auto got = readArgv(out / ("rank" + std::to_string(rank) + ".argv"));
            QCOMPARE(got.size(), expected.size());
            for (std::size_t i = 0; i < got.size(); ++i)
                QVERIFY2(got[i] == expected[i],
                         qPrintable(QString("argv[%1]: '%2' != '%3'")
                                        .arg(i)
                                        .arg(QString::fromStdString(got[i]), QString::fromStdString(expected[i]))));
            const auto env = readEnvFile(out / ("rank" + std::to_string(rank) + ".env"));
            QCOMPARE(env.at("SHARDSCOPE_TEST_HOSTILE"), hostileEnv);
        }
        const auto pwned = pwnedFiles(root);
        QVERIFY2(pwned.empty(), pwned.empty() ? "" : pwned.front().c_str());
        QVERIFY(!fs::exists("PWNED1") && !fs::exists("PWNED8"));
    }

    void workerPathWithMetacharactersIsExecutedAsIs()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const fs::path folder = root / "a b;$(touch PWNED11)`touch PWNED12`";
        fs::create_directories(folder);
        const fs::path worker = folder / "fake rank && touch PWNED13";
        fs::copy_file(kFakeRank, worker);
        fs::permissions(worker, fs::perms::owner_all);
        const fs::path out = root / "out";
        fs::create_directories(out);
        auto options = fakeLaunch(1, {"--out", out.string()});
        options.workerPath = worker.string();
        const fs::path before = fs::current_path();
        fs::current_path(root);
        auto outcome = runLaunch(options);
        fs::current_path(before);
        QVERIFY2(outcome.ok(), outcome.ok() ? "" : outcome.error().message.c_str());
        QCOMPARE(outcome->exitCode, 0);
        const auto argv = readArgv(out / "rank0.argv");
        QVERIFY(!argv.empty());
        QCOMPARE(argv.front(), worker.string());
        const auto pwned = pwnedFiles(root);
        QVERIFY2(pwned.empty(), pwned.empty() ? "" : pwned.front().c_str());
        QCOMPARE(entriesOf(root), (std::set<std::string>{folder.filename().string(), "out"}));
    }

    // The product never hands a command line to a shell: processes start from argument vectors
    // (fork + execve in the launcher, QProcess with setProgram/setArguments in the GUI).
    void noShellInTheSources()
    {
        // system/popen/wordexp hand a string to /bin/sh; Qt's startCommand splits a command line.
        const std::regex shellCall("\\b(system|popen|wordexp|execl|execlp|execle)\\s*\\(|\\bstartCommand\\s*\\(");
        const std::regex shellLiteral("\"(/bin/sh|/bin/bash|sh|bash)\"\\s*,\\s*\"-c\"");
        int scanned = 0;
        QStringList findings;
        for (const auto& file : security_test::sourcesUnder({"app", "engine", "storage", "profiler", "ui"})) {
            const std::string text = security_test::readAll(file);
            const std::string code = security_test::codeOnly(text);
            ++scanned;
            for (auto it = std::sregex_iterator(code.begin(), code.end(), shellCall); it != std::sregex_iterator(); ++it)
                findings << QString("%1:%2: %3")
                                .arg(QString::fromStdString(file.string()))
                                .arg(security_test::lineOf(code, std::size_t(it->position())))
                                .arg(QString::fromStdString(it->str()));
            // "sh", "-c" needs the literal text, which codeOnly hides: look in the raw text.
            for (auto it = std::sregex_iterator(text.begin(), text.end(), shellLiteral); it != std::sregex_iterator(); ++it)
                findings << QString("%1:%2: %3")
                                .arg(QString::fromStdString(file.string()))
                                .arg(security_test::lineOf(text, std::size_t(it->position())))
                                .arg(QString::fromStdString(it->str()));
        }
        QVERIFY(scanned > 50);
        QVERIFY2(findings.isEmpty(), qPrintable("a shell or a command-line call in the product:\n" + findings.join('\n')));
        // The one place that starts processes (the launcher's process primitive) does it with execve
        // and an argument vector.
        const std::string spawn = security_test::readAll(fs::path(security_test::sourceDir()) / "app/launcher/spawn.cpp");
        QVERIFY(spawn.find("execve(path.c_str(), argvC.data(), envC.data())") != std::string::npos);
    }

    // --- run names and paths ---

    void hostileRunNamesStayInside_data()
    {
        QTest::addColumn<QByteArray>("name");
        QTest::newRow("parent") << QByteArray("../x");
        QTest::newRow("deep parent") << QByteArray("../../../../etc/cron.d/evil");
        QTest::newRow("absolute") << QByteArray("/etc/passwd");
        QTest::newRow("absolute into runs") << QByteArray("/tmp");
        QTest::newRow("inner parent") << QByteArray("a/../../b");
        QTest::newRow("backslashes") << QByteArray("..\\..\\b");
        QTest::newRow("subfolder") << QByteArray("a/b");
        QTest::newRow("home") << QByteArray("~/x");
        QTest::newRow("shell") << QByteArray("$(touch PWNED14)");
        QTest::newRow("newline") << QByteArray("a\n../b");
        QTest::newRow("NUL byte") << QByteArray("a\0/../../b", 10);
        QTest::newRow("non-UTF-8") << QByteArray("\xff\xfe/..");
        QTest::newRow("dot dot slash") << QByteArray("../");
        QTest::newRow("too long") << QByteArray(4000, 'x');
    }
    void hostileRunNamesStayInside()
    {
        QFETCH(QByteArray, name);
        QTemporaryDir dir;
        const fs::path outer = dir.path().toStdString();
        const fs::path runs = outer / "runs";
        fs::create_directories(runs);
        const auto before = entriesOf(outer);
        auto created = createRunDirectory(runs.string(), name.toStdString());
        if (created.ok()) {
            const fs::path path = fs::canonical(created->path);
            QCOMPARE(path.parent_path(), fs::canonical(runs));
            QVERIFY(fs::is_directory(path / "logs"));
            QCOMPARE(created->id.find('/'), std::string::npos);
            QCOMPARE(entriesOf(runs).size(), std::size_t(1));
        } else {
            QVERIFY(!created.error().message.empty());
            QVERIFY(entriesOf(runs).empty());
        }
        QCOMPARE(entriesOf(outer), before); // nothing next to the runs folder
        const auto pwned = pwnedFiles(outer);
        QVERIFY(pwned.empty());
    }

    // A symlink planted in the runs folder (to a folder outside, or dangling) is never followed
    // to create a run directory elsewhere.
    void plantedSymlinksAreNotFollowed_data()
    {
        QTest::addColumn<bool>("dangling");
        QTest::newRow("to a folder outside") << false;
        QTest::newRow("dangling, to a path outside") << true;
    }
    void plantedSymlinksAreNotFollowed()
    {
        QFETCH(bool, dangling);
        QTemporaryDir dir;
        const fs::path outer = dir.path().toStdString();
        const fs::path runs = outer / "runs";
        const fs::path victim = outer / "victim";
        fs::create_directories(runs);
        if (!dangling)
            fs::create_directories(victim);
        fs::create_directory_symlink(victim, runs / "evil");
        auto created = createRunDirectory(runs.string(), "evil");
        QVERIFY(!created.ok());
        QVERIFY2(created.error().message.find(dangling ? "File exists" : "already exists") != std::string::npos,
                 created.error().message.c_str());
        QCOMPARE(fs::exists(victim), !dangling);
        if (!dangling)
            QVERIFY(fs::is_empty(victim)); // no logs/ created through the link
    }
};

QTEST_APPLESS_MAIN(TestSecurityLaunch)
#include "tst_security_launch.moc"
