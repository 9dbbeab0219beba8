// What the command line refuses before it does anything (#43 point 10): an output file that
// exists is never overwritten without being asked (`runs export -o`, `--dump-params`), and a
// number an option takes is a finite number, refused with a message a person can read (CLI11's
// own check let NaN through and printed a 309-digit bound).

#include "tests/common/files.h"
#include "tests/common/recipe_run.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

namespace testing = shardscope::testing;

namespace {

testing::CliRun runCli(const QTemporaryDir& home, const QStringList& args) { return testing::runShardscope(home.path(), args); }

} // namespace

class TestCliChecks : public QObject {
    Q_OBJECT
private slots:
    void numbersAreFiniteAndSaidPlainly_data()
    {
        QTest::addColumn<QString>("option");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("says");
        QTest::newRow("NaN threshold") << "--straggler_threshold"
                                       << "nan"
                                       << "'nan' is not a number; give one above 0 to 1000000";
        QTest::newRow("negative threshold") << "--straggler_threshold"
                                            << "-1"
                                            << "'-1' is out of range; give a number above 0 to 1000000";
        QTest::newRow("infinite timeout") << "--heartbeat_timeout"
                                          << "inf"
                                          << "'inf' is not a number; give one from 0 to 2592000 (seconds; 2592000 is 30 days)";
        QTest::newRow("huge timeout") << "--heartbeat_timeout"
                                      << "1e308"
                                      << "'1e308' is out of range; give a number from 0 to 2592000";
        QTest::newRow("huge rendezvous") << "--rendezvous_timeout"
                                         << "1e300"
                                         << "'1e300' is out of range; give a number above 0 to 2592000";
        QTest::newRow("negative steps") << "--max_steps"
                                        << "-2"
                                        << "'-2' is out of range; give a whole number above 0 to 1000000000000";
        // CLI11 saturated it to INT64_MAX and the run trained "forever".
        QTest::newRow("steps past int64") << "--max_steps"
                                          << "99999999999999999999999"
                                          << "is out of range; give a whole number above 0 to 1000000000000";
        QTest::newRow("fractional steps") << "--max_steps"
                                          << "2.5"
                                          << "'2.5' is not a whole number; give one above 0 to 1000000000000";
        QTest::newRow("words for ranks") << "--num_processes"
                                         << "abc"
                                         << "'abc' is not a whole number; give one from 1 to 1024";
        QTest::newRow("port") << "--main_process_port"
                              << "70000"
                              << "'70000' is out of range; give a whole number from 0 to 65535";
        QTest::newRow("negative window") << "--straggler_window"
                                         << "-1"
                                         << "'-1' is out of range; give a whole number from 0 to 1000000";
        QTest::newRow("NaN rendezvous") << "--rendezvous_timeout"
                                        << "nan"
                                        << "'nan' is not a number; give one above 0 to 2592000";
    }
    void numbersAreFiniteAndSaidPlainly()
    {
        QFETCH(QString, option);
        QFETCH(QString, value);
        QFETCH(QString, says);
        QTemporaryDir home;
        testing::writeFile(home.filePath(QStringLiteral("r.yaml")),
                           "name: r\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n");
        const auto ran = runCli(home, {"launch", "--recipe", home.filePath(QStringLiteral("r.yaml")), option, value});
        QVERIFY2(ran.exitCode != 0, qPrintable(ran.output));
        QVERIFY2(ran.output.contains(says), qPrintable(ran.output));
        QVERIFY2(ran.output.size() < 400, qPrintable(ran.output)); // no 309-digit bound
        QVERIFY(!QDir(home.filePath(QStringLiteral("runs"))).exists()); // nothing started
    }

    // The other commands' numbers: each was taken as it came (a negative --limit listed every
    // run, --layers -1 made an estimate) or refused as "Could not convert".
    void otherCommandsNumbersAreChecked_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("says");
        QTest::newRow("runs list --limit") << QStringList{"runs", "list", "--limit", "-3"}
                                           << "--limit: '-3' is out of range; give a whole number from 1 to 1000000000";
        QTest::newRow("runs list --limit abc") << QStringList{"runs", "list", "--limit", "abc"} << "'abc' is not a whole number";
        QTest::newRow("diagnose --timeout") << QStringList{"runs", "diagnose", "1", "--timeout", "nan"}
                                            << "--timeout: 'nan' is not a number; give one above 0 to 3600 (seconds)";
        QTest::newRow("estimate --layers") << QStringList{"estimate-memory", "--params", "7B", "--layers", "-1"}
                                           << "--layers: '-1' is out of range; give a whole number from 1 to 1000000000";
        QTest::newRow("estimate --seq") << QStringList{"estimate-memory", "--params", "7B", "--seq", "1e20"}
                                        << "--seq: '1e20' is out of range";
        QTest::newRow("data --threads") << QStringList{"data", "prepare",  "--tokenizer", "t",         "--input",
                                                       "i",    "--output", "o",           "--threads", "-4"}
                                        << "--threads: '-4' is out of range; give a whole number from 0 to 1024";
    }
    void otherCommandsNumbersAreChecked()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, says);
        QTemporaryDir home;
        const auto ran = runCli(home, args);
        QCOMPARE(ran.exitCode, 2);
        QVERIFY2(ran.output.contains(says), qPrintable(ran.output));
    }

    // A whole number CLI11 would not convert ("Could not convert: 1e3") is taken as written.
    void wholeNumbersInExponentFormAreTaken()
    {
        QTemporaryDir home;
        const auto ran = runCli(home, {"estimate-memory", "--params", "7B", "--layers", "32", "--hidden", "4096", "--heads", "32",
                                       "--seq", "2e3", "--batch", "1", "--vocab", "32000"});
        QVERIFY2(ran.exitCode == 0, qPrintable(ran.output));
        QVERIFY2(ran.output.contains("Memory per rank"), qPrintable(ran.output));
    }

    void existingFilesAreNotOverwritten()
    {
        QTemporaryDir home;
        // A run to export: imported from a folder of events (no engine needed).
        const QString dir = home.filePath(QStringLiteral("one"));
        QVERIFY(QDir().mkpath(dir + "/events"));
        testing::writeFile(dir + "/events/rank0.jsonl",
                           "{\"v\":1,\"type\":\"step\",\"rank\":0,\"time\":1,\"step\":1,\"loss\":0.5}\n"
                           "{\"v\":1,\"type\":\"done\",\"rank\":0,\"time\":2,\"status\":\"completed\",\"steps\":1,\"wall\":1}\n");
        QCOMPARE(runCli(home, {"runs", "import", dir}).exitCode, 0);
        const QString mine = home.filePath(QStringLiteral("mine.csv"));
        testing::writeFile(mine, "the user's own file\n");
        const auto refused = runCli(home, {"runs", "export", "one", "-o", mine});
        QVERIFY2(refused.exitCode != 0 && refused.output.contains(QStringLiteral("exists; give another -o, or --yes")),
                 qPrintable(refused.output));
        QCOMPARE(testing::readFile(mine), QByteArray("the user's own file\n"));
        QCOMPARE(runCli(home, {"runs", "export", "one", "-o", mine, "--yes"}).exitCode, 0);
        QVERIFY(testing::readFile(mine).contains("loss"));

        // --dump-params: a new file or nothing.
        testing::writeFile(home.filePath(QStringLiteral("r.yaml")),
                           "name: r\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n");
        const auto dump = runCli(home,
                                 {"launch", "--recipe", home.filePath(QStringLiteral("r.yaml")), "--", "--dump-params", mine});
        QVERIFY2(dump.exitCode != 0 && dump.output.contains(QStringLiteral("exists; --dump-params writes a new file")),
                 qPrintable(dump.output));
        QVERIFY(testing::readFile(mine).contains("loss")); // untouched
    }

    // #57 item 2: a run name with a newline, a slash, a space and a quote is a run id on every
    // target: on SLURM the batch script holds it as the local launch would name the run, and no
    // line of it runs what followed the newline; `..` is no run name.
    void clusterRunNamesAreRunIds()
    {
        QTemporaryDir home;
        const QString profiles = home.filePath(QStringLiteral("clusters.ini"));
        testing::writeFile(profiles, "[default]\nshared_folder = " + home.filePath(QStringLiteral("shared")).toUtf8() + "\n");
        const QString recipe = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-mlp.yaml");
        const auto shown = runCli(home, {"launch", "--target", "slurm", "--dry_run", "--cluster_profiles", profiles, "--recipe",
                                         recipe, "--run_name", "../evil\ntouch /tmp/owned \"it's\""});
        QVERIFY2(shown.exitCode == 0, qPrintable(shown.output));
        QVERIFY2(shown.output.contains(QStringLiteral("#SBATCH --job-name=..-evil-touch--tmp-owned--it-s-\n")),
                 qPrintable(shown.output));
        QVERIFY2(!shown.output.contains(QStringLiteral("\ntouch")), qPrintable(shown.output));
        QVERIFY(shown.output.contains(home.filePath(QStringLiteral("shared/runs/..-evil-touch--tmp-owned--it-s-"))));
        const auto dots = runCli(home, {"launch", "--target", "slurm", "--dry_run", "--cluster_profiles", profiles, "--recipe",
                                        recipe, "--run_name", ".."});
        QCOMPARE(dots.exitCode, 2);
        QVERIFY2(dots.output.contains(QStringLiteral("run name '..' cannot be used as a run id")), qPrintable(dots.output));
        QVERIFY(!QFileInfo::exists(home.filePath(QStringLiteral("shared/runs")))
                || QDir(home.filePath(QStringLiteral("shared/runs"))).isEmpty());
    }

    // #57 item 12: `launch --help` says what launch runs and that it takes accelerate launch's
    // flags and command line; the test-only fault-injection flags are not offered to users.
    void launchHelpSaysWhatItTakes()
    {
        QTemporaryDir home;
        const auto help = runCli(home, {"launch", "--help"});
        QCOMPARE(help.exitCode, 0);
        QVERIFY2(help.output.startsWith(QStringLiteral("Run a recipe on Shardscope's engine, or your own Accelerate script"))
                     && help.output.contains(QStringLiteral("Takes `accelerate launch`'s flags and command line too")),
                 qPrintable(help.output));
        QVERIFY2(!help.output.contains(QStringLiteral("Start N local ranks")), qPrintable(help.output));
        QVERIFY2(!help.output.contains(QStringLiteral("--inject-nonfinite-grad"))
                     && !help.output.contains(QStringLiteral("--fill-disk-at-step")),
                 qPrintable(help.output));
        QVERIFY2(help.output.contains(QStringLiteral("fault-injection flags for Shardscope's own tests")),
                 qPrintable(help.output));
    }
    // #56: a cluster run's nodes run its request.json (data, not argument strings in the batch
    // script): the dry run shows the script naming the file and what the file holds; a launcher
    // given the file refuses options that would say otherwise, and a file that is no request.
    void requestFileIsShownAndChecked()
    {
        QTemporaryDir home;
        const QString profiles = home.filePath(QStringLiteral("clusters.ini"));
        testing::writeFile(profiles, "[default]\nshared_folder = " + home.filePath(QStringLiteral("shared")).toUtf8() + "\n");
        const QString recipe = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-mlp.yaml");
        const auto shown = runCli(home,
                                  {"launch", "--target", "slurm", "--dry_run", "--cluster_profiles", profiles, "--recipe", recipe,
                                   "--run_name", "r", "--max_steps", "3", "--heartbeat_timeout", "50", "--", "--threads", "1"});
        QVERIFY2(shown.exitCode == 0, qPrintable(shown.output));
        const QString file = home.filePath(QStringLiteral("shared/runs/r/request.json"));
        QVERIFY2(shown.output.contains(QStringLiteral("--request ") + file), qPrintable(shown.output));
        QVERIFY2(!shown.output.contains(QStringLiteral("--max_steps")), qPrintable(shown.output)); // not as arguments
        for (const char* held : {"\"max_steps\": 3", "\"heartbeat_timeout\": 50.0", "\"num_machines\": 1"})
            QVERIFY2(shown.output.contains(QString::fromUtf8(held)), held);

        // (A launcher given the file runs it: tst_launch_config::aNodeRunsTheRequestFile, with the engine.)
        const QString request = home.filePath(QStringLiteral("request.json"));
        testing::writeFile(request, "{\"format\": \"shardscope-launch-request\", \"version\": 1, \"recipe\": \"" + recipe.toUtf8()
                                        + "\", \"num_processes\": 2}");
        const auto mixed = runCli(home, {"launch", "--request", request, "--recipe", recipe, "--mixed_precision", "bf16"});
        QCOMPARE(mixed.exitCode, 2);
        QVERIFY2(mixed.output.contains(QStringLiteral("--recipe, --mixed_precision cannot go with it")),
                 qPrintable(mixed.output));
        testing::writeFile(request, "{\"format\": \"shardscope-launch-request\", \"version\": 1, \"recipe\": 3}");
        const auto wrong = runCli(home, {"launch", "--request", request});
        QCOMPARE(wrong.exitCode, 2);
        QVERIFY2(wrong.output.contains(request + QStringLiteral(": \"recipe\" is 3, not a string")), qPrintable(wrong.output));
    }
    // #57 item 4: the profiles file as a FIFO, a link to /dev/zero, a 50 MB file or a line of 900 KB:
    // `launch --target slurm`, `clusters` and `runs follow --all` each end at once with an error
    // that says what the file is, and echo no more of it than a line's start.
    void profilesFileThatIsNoFile_data()
    {
        QTest::addColumn<QString>("how");
        QTest::addColumn<QString>("says");
        QTest::newRow("a FIFO") << "fifo"
                                << "clusters.ini is not a regular file (a FIFO)";
        QTest::newRow("a link to /dev/zero") << "zero"
                                             << "clusters.ini is not a regular file (a device)";
        QTest::newRow("50 MB") << "large"
                               << "clusters.ini is larger than 1.00 MiB";
        QTest::newRow("a line of 900 KB") << "line"
                                          << "...' (921600 characters) is not key = value";
    }
    void profilesFileThatIsNoFile()
    {
        QFETCH(QString, how);
        QFETCH(QString, says);
        QTemporaryDir home;
        const QString profiles = home.filePath(QStringLiteral("clusters.ini"));
        if (how == "fifo")
            QVERIFY(::mkfifo(QFile::encodeName(profiles).constData(), 0600) == 0);
        else if (how == "zero")
            QVERIFY(QFile::link(QStringLiteral("/dev/zero"), profiles));
        else
            testing::writeFile(profiles, "[default]\n" + QByteArray(how == "large" ? 50 << 20 : 900 << 10, 'x') + "\n");
        const QString recipe = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-mlp.yaml");
        for (const QStringList& command : {QStringList{"launch", "--target", "slurm", "--recipe", recipe},
                                           QStringList{"clusters"}, QStringList{"runs", "follow", "--all"}}) {
            QElapsedTimer clock;
            clock.start();
            const auto ran = testing::runShardscope(home.path(), command, 20000);
            QVERIFY2(clock.elapsed() < 15000, qPrintable(command.join(' ')));
            QVERIFY2(ran.exitCode != 0 && ran.exitCode != -1, qPrintable(command.join(' ') + ": " + ran.output.left(500)));
            QVERIFY2(ran.output.contains(says), qPrintable(command.join(' ') + ": " + ran.output.left(500)));
            QVERIFY2(ran.output.size() < 4000, qPrintable(command.join(' ') + ": " + ran.output.left(500)));
        }
    }
};

QTEST_GUILESS_MAIN(TestCliChecks)
#include "tst_cli_checks.moc"
