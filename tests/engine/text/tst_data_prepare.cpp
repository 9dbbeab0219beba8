// `shardscope data prepare` (engine/text/data_prepare.h) and token files: the ids written are
// tokenizers' ids of every document followed by EOS (tests/tools/tokenizer_reference.py), the same
// on one thread and on several; every bad input is refused with its file and line, and nothing is
// left under the output's name; the three token-file layouts read back (ours, llm.c's, bare).

#include "engine/text/corpus.h"
#include "engine/text/data_prepare.h"
#include "engine/text/token_file.h"
#include "tests/common/files.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cstdint>
#include <fstream>

namespace text = shardscope::text;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kTools = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/");

using shardscope::testing::writeFile;

std::vector<std::int64_t> readAll(const text::TokenFile& file)
{
    std::vector<std::int64_t> ids(static_cast<std::size_t>(file.size()));
    file.read(0, file.size(), ids.data());
    return ids;
}

} // namespace

class TstDataPrepare : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_ref; // the reference's folder: corpus.jsonl and one folder per tokenizer

    text::PrepareOptions options(const QString& input, const QString& output, const QString& kind = "llama3")
    {
        text::PrepareOptions o;
        o.tokenizer = (m_ref + "/" + kind).toStdString();
        o.inputs = {input.toStdString()};
        o.output = output.toStdString();
        return o;
    }

    // Nothing of a failed preparation under the output's name.
    static bool nothingAt(const QString& output)
    {
        for (const char* suffix : {"", ".json", ".idx", ".partial", ".json.partial", ".idx.partial"})
            if (QFile::exists(output + suffix))
                return false;
        return true;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        m_ref = m_dir.path() + "/ref";
        QProcess python;
        python.start(kPython, {kTools + "tokenizer_reference.py", "--out", m_ref, "--kinds", "llama3,llama2"});
        QVERIFY2(python.waitForFinished(300000) && python.exitCode() == 0,
                 qPrintable("tokenizer_reference.py failed: " + python.readAllStandardError().right(3000)));
    }

    void idsAreTheReferencesJoinedWithEos_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<int>("threads");
        QTest::newRow("llama3, 1 thread") << "llama3" << 1;
        QTest::newRow("llama3, 3 threads") << "llama3" << 3;
        QTest::newRow("llama2, 2 threads") << "llama2" << 2;
    }
    void idsAreTheReferencesJoinedWithEos()
    {
        QFETCH(QString, kind);
        QFETCH(int, threads);
        QFile expectedFile(m_ref + "/" + kind + "/expected.json");
        QVERIFY(expectedFile.open(QIODevice::ReadOnly));
        const QJsonObject expected = QJsonDocument::fromJson(expectedFile.readAll()).object();
        const int eos = expected["eos"].toInt();
        std::vector<std::int64_t> want;
        std::int64_t documents = 0;
        for (const auto doc : expected["ids"].toArray()) {
            for (const auto id : doc.toArray())
                want.push_back(id.toInt());
            if (want.empty() || want.back() != eos)
                want.push_back(eos);
            ++documents;
        }
        const QString output = m_dir.path() + "/" + kind + QString::number(threads) + ".bin";
        auto o = options(m_ref + "/corpus.jsonl", output, kind);
        o.threads = threads;
        auto stats = text::prepareTokenFile(o);
        QVERIFY2(stats, stats ? "" : stats.error().message.c_str());
        QCOMPARE(stats->totals.documents, documents);
        QCOMPARE(stats->totals.tokens, static_cast<std::int64_t>(want.size()));
        auto file = text::TokenFile::open(output.toStdString());
        QVERIFY2(file, file ? "" : file.error().message.c_str());
        QCOMPARE(file->info().dtype, text::TokenDtype::UInt16);
        QCOMPARE(file->info().eosId.value_or(-1), eos);
        QCOMPARE(file->info().vocabSize, static_cast<std::int64_t>(expected["id_bound"].toInt()));
        QCOMPARE(file->info().documents, documents);
        QCOMPARE(readAll(*file), want);
        const auto ends = file->documentEnds();
        QCOMPARE(static_cast<std::int64_t>(ends.size()), documents);
        QCOMPARE(ends.back(), static_cast<std::int64_t>(want.size()));
        QVERIFY(!QFile::exists(output + ".partial"));
    }

    void badInputIsRefusedWithItsPlace_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("message");
        QTest::newRow("not json") << "a.jsonl" << QByteArray("{\"text\": \"ok\"}\n\n{\"text\": oops}\n") << "a.jsonl:3: not JSON";
        QTest::newRow("missing field") << "b.jsonl" << QByteArray("{\"text\": \"ok\"}\n{\"body\": \"x\", \"id\": 2}\n")
                                       << "b.jsonl:2: has no \"text\" field (it has: body, id)";
        QTest::newRow("field not a string") << "c.jsonl" << QByteArray("{\"text\": 12}\n")
                                            << "c.jsonl:1: its \"text\" is a number";
        QTest::newRow("not an object") << "d.jsonl" << QByteArray("[1, 2]\n") << "d.jsonl:1: is an array";
        QTest::newRow("text not utf-8") << "e.txt" << QByteArray("fine\nstill fine\nbad \xff here\n") << "e.txt:3: not UTF-8";
        QTest::newRow("empty corpus") << "f.jsonl" << QByteArray("\n  \n") << "the corpus has no documents";
        QTest::newRow("empty text file") << "g.txt" << QByteArray() << "the corpus has no documents";
    }
    void badInputIsRefusedWithItsPlace()
    {
        QFETCH(QString, name);
        QFETCH(QByteArray, content);
        QFETCH(QString, message);
        const QString input = m_dir.path() + "/" + name;
        writeFile(input, content);
        const QString output = input + ".bin";
        auto stats = text::prepareTokenFile(options(input, output));
        QVERIFY(!stats);
        QVERIFY2(QString::fromStdString(stats.error().message).contains(message), stats.error().message.c_str());
        QVERIFY(nothingAt(output));
    }

    void anExistingOutputIsNotReplacedUnlessForced()
    {
        const QString input = m_dir.path() + "/keep.jsonl";
        writeFile(input, "{\"text\": \"hello world\"}\n");
        const QString output = m_dir.path() + "/keep.bin";
        writeFile(output, "precious");
        auto refused = text::prepareTokenFile(options(input, output));
        QVERIFY(!refused);
        QVERIFY2(refused.error().message.find("exists") != std::string::npos, refused.error().message.c_str());
        QFile kept(output);
        QVERIFY(kept.open(QIODevice::ReadOnly));
        QCOMPARE(kept.readAll(), QByteArray("precious"));
        kept.close();
        auto o = options(input, output);
        o.overwrite = true;
        QVERIFY(text::prepareTokenFile(o));
        QVERIFY(text::TokenFile::open(output.toStdString()));
    }

    void missingInputsAndTokenizersAreNamed()
    {
        auto noInput = text::prepareTokenFile(options(m_dir.path() + "/absent.jsonl", m_dir.path() + "/x.bin"));
        QVERIFY(!noInput);
        QVERIFY2(noInput.error().message.find("absent.jsonl: cannot be read") != std::string::npos,
                 noInput.error().message.c_str());
        auto noTokenizer = text::prepareTokenFile(options(m_ref + "/corpus.jsonl", m_dir.path() + "/x.bin", "nothing-here"));
        QVERIFY(!noTokenizer);
        QVERIFY(noTokenizer.error().message.find("has no tokenizer.json") != std::string::npos);
        QVERIFY(nothingAt(m_dir.path() + "/x.bin"));
    }

    void tokenFileLayouts()
    {
        // llm.c: 256 int32 header (magic, version 2 = uint32, count), then the ids.
        const QString llmc = m_dir.path() + "/llmc.bin";
        {
            std::vector<std::int32_t> header(256, 0);
            header[0] = 20240520;
            header[1] = 2;
            header[2] = 3;
            const std::uint32_t ids[3] = {7, 70000, 9};
            std::ofstream out(llmc.toStdString(), std::ios::binary);
            out.write(reinterpret_cast<const char*>(header.data()), 1024);
            out.write(reinterpret_cast<const char*>(ids), sizeof ids);
        }
        auto file = text::TokenFile::open(llmc.toStdString());
        QVERIFY2(file, file ? "" : file.error().message.c_str());
        QCOMPARE(file->info().layout, text::TokenFileLayout::LlmC);
        QCOMPARE(readAll(*file), (std::vector<std::int64_t>{7, 70000, 9}));
        QCOMPARE(file->maxId(), 70000U);

        // Bare (nanoGPT): the dtype must be said; a size that is not a multiple of it is refused.
        const QString bare = m_dir.path() + "/bare.bin";
        writeFile(bare, QByteArray("\x01\x00\x02\x00\x03", 5));
        auto unknown = text::TokenFile::open(bare.toStdString());
        QVERIFY(!unknown);
        QVERIFY2(unknown.error().message.find("set data.token_dtype") != std::string::npos, unknown.error().message.c_str());
        auto odd = text::TokenFile::open(bare.toStdString(), text::TokenDtype::UInt16);
        QVERIFY(!odd);
        QVERIFY2(odd.error().message.find("has 5 bytes of ids, not a multiple of 2") != std::string::npos,
                 odd.error().message.c_str());
        writeFile(bare, QByteArray("\x01\x00\x02\x00", 4));
        auto fine = text::TokenFile::open(bare.toStdString(), text::TokenDtype::UInt16);
        QVERIFY(fine);
        QCOMPARE(readAll(*fine), (std::vector<std::int64_t>{1, 2}));

        // Ours, truncated after it was written: the description's count no longer matches.
        const QString input = m_dir.path() + "/short.jsonl";
        writeFile(input, "{\"text\": \"some words to tokenize\"}\n");
        const QString output = m_dir.path() + "/short.bin";
        QVERIFY(text::prepareTokenFile(options(input, output)));
        QFile::resize(output, QFileInfo(output).size() - 2);
        auto truncated = text::TokenFile::open(output.toStdString());
        QVERIFY(!truncated);
        QVERIFY2(truncated.error().message.find("but its description says") != std::string::npos,
                 truncated.error().message.c_str());
    }

    void progressLineSaysWhatAndWhen()
    {
        text::PrepareProgress p;
        p.bytesDone = 25'000'000;
        p.bytesTotal = 100'000'000;
        p.documents = 1234;
        p.tokens = 5'000'000;
        p.seconds = 2.5;
        QCOMPARE(QString::fromStdString(text::formatProgress(p)),
                 QString("25.0 MB of 100.0 MB (25%), 1234 documents, 2.00 M tokens/s, ETA 8 s"));
    }
};

QTEST_APPLESS_MAIN(TstDataPrepare)
#include "tst_data_prepare.moc"
