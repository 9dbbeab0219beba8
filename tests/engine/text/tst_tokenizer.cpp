// Shardscope's tokenizer against Hugging Face `tokenizers` and transformers' AutoTokenizer:
// tests/tools/tokenizer_reference.py trains five small BPE tokenizers locally (GPT-2's byte-level,
// Llama 3's and Qwen2's split regexes, Llama 2's normalizer with byte fallback, Mistral's Metaspace)
// on a corpus of ASCII, accented, CJK, emoji, combining marks, code, odd whitespace and special
// tokens inside text, and writes what the reference makes of every document. Our ids must equal
// tokenizers' (with and without special tokens) and AutoTokenizer's, and decoding must give the
// same text (also of slices cut mid-character). Also: unsupported components are refused by name.

#include "engine/text/regex.h"
#include "engine/text/tokenizer.h"
#include "engine/text/unicode.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using shardscope::text::Tokenizer;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kTools = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/");

std::vector<std::int32_t> idsOf(const QJsonValue& value)
{
    std::vector<std::int32_t> ids;
    for (const auto v : value.toArray())
        ids.push_back(v.toInt());
    return ids;
}

QString show(const std::vector<std::int32_t>& ids)
{
    QStringList parts;
    for (const auto id : ids)
        parts << QString::number(id);
    return "[" + parts.join(",") + "]";
}

} // namespace

class TstTokenizer : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    QStringList m_docs;

    QJsonObject expected(const QString& kind)
    {
        QFile file(m_dir.path() + "/" + kind + "/expected.json");
        if (!file.open(QIODevice::ReadOnly))
            return {};
        return QJsonDocument::fromJson(file.readAll()).object();
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QProcess python;
        python.start(kPython, {kTools + "tokenizer_reference.py", "--out", m_dir.path()});
        QVERIFY2(python.waitForFinished(300000) && python.exitCode() == 0,
                 qPrintable("tokenizer_reference.py failed: " + python.readAllStandardError().right(3000)));
        QFile corpus(m_dir.path() + "/corpus.jsonl");
        QVERIFY(corpus.open(QIODevice::ReadOnly));
        for (const QByteArray& line : corpus.readAll().split('\n'))
            if (!line.isEmpty())
                m_docs << QJsonDocument::fromJson(line).object()["text"].toString();
        QVERIFY(m_docs.size() > 100);
    }

    void idsAndTextEqualTheReference_data()
    {
        QTest::addColumn<QString>("kind");
        for (const char* kind : {"gpt2", "llama3", "qwen2", "llama2", "mistral"})
            QTest::newRow(kind) << QString(kind);
    }
    void idsAndTextEqualTheReference()
    {
        QFETCH(QString, kind);
        const QJsonObject ref = expected(kind);
        QVERIFY(!ref.isEmpty());
        auto tokenizer = Tokenizer::load((m_dir.path() + "/" + kind).toStdString());
        QVERIFY2(tokenizer, tokenizer ? "" : tokenizer.error().message.c_str());
        for (int i = 0; i < m_docs.size(); ++i) {
            const std::string doc = m_docs[i].toStdString();
            const auto ids = tokenizer->encode(doc);
            const auto want = idsOf(ref["ids"].toArray()[i]);
            QVERIFY2(
                ids == want,
                qPrintable(
                    QString("document %1 (%2): ours %3, tokenizers' %4").arg(i).arg(m_docs[i].left(60), show(ids), show(want))));
            QCOMPARE(tokenizer->encode(doc, false), idsOf(ref["plain_ids"].toArray()[i]));
            QCOMPARE(ids, idsOf(ref["auto_ids"].toArray()[i])); // AutoTokenizer's, with tokenizer_config.json
            QCOMPARE(QString::fromStdString(tokenizer->decode(ids)), ref["decoded"].toArray()[i].toString());
            QCOMPARE(QString::fromStdString(tokenizer->decode(ids, true)), ref["decoded_skip"].toArray()[i].toString());
        }
        for (const auto slice : ref["slices"].toArray()) {
            const auto ids = idsOf(slice.toArray()[0]);
            QCOMPARE(QString::fromStdString(tokenizer->decode(ids)), slice.toArray()[1].toString());
        }
        QCOMPARE(tokenizer->idBound(), ref["id_bound"].toInt());
        QCOMPARE(tokenizer->bosId().value_or(-1), ref["bos"].isNull() ? -1 : ref["bos"].toInt());
        QCOMPARE(tokenizer->eosId().value_or(-1), ref["eos"].isNull() ? -1 : ref["eos"].toInt());
    }

    void lossyUtf8IsRustsFromUtf8Lossy()
    {
        using shardscope::text::utf8Lossy;
        QCOMPARE(utf8Lossy("abc"), std::string("abc"));
        // A truncated 3-byte sequence is one U+FFFD; a stray continuation byte is one each.
        QCOMPARE(utf8Lossy("a\xE6\x97z"), std::string("a\xEF\xBF\xBDz"));
        QCOMPARE(utf8Lossy("\x80\x80"), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));
        // A surrogate (ED A0 80) is invalid from its second byte: three replacements.
        QCOMPARE(utf8Lossy("\xED\xA0\x80"), std::string("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
        QVERIFY(!shardscope::text::firstInvalidUtf8("\xE6\x97\xA5"));
        QCOMPARE(shardscope::text::firstInvalidUtf8("ab\xFF").value_or(99), std::size_t{2});
    }

    void whitespaceIsOnigurumas()
    {
        using shardscope::text::withOnigurumaWhitespace;
        QCOMPARE(withOnigurumaWhitespace(R"(\s+(?!\S))"), std::string(R"([\s\x{85}]+(?![^\s\x{85}]))"));
        QCOMPARE(withOnigurumaWhitespace(R"([^\s\p{L}])"), std::string(R"([^\s\x{85}\p{L}])"));
        QCOMPARE(withOnigurumaWhitespace(R"([]\s])"), std::string(R"([]\s\x{85}])"));
    }

    void unsupportedComponentsAreRefusedByName_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("message");
        const QString bpe = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
        QTest::newRow("wordpiece") << R"({"model": {"type": "WordPiece", "vocab": {}}})"
                                   << "model.type: the model 'WordPiece'";
        QTest::newRow("bert pre-tokenizer") << "{" + bpe + R"(, "pre_tokenizer": {"type": "BertPreTokenizer"}})"
                                            << "pre_tokenizer: the pre-tokenizer 'BertPreTokenizer' is not supported";
        QTest::newRow("precompiled in a sequence")
            << "{" + bpe + R"(, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Precompiled"}]}})"
            << "normalizer.normalizers[1]: the normalizer 'Precompiled' is not supported";
        QTest::newRow("wordpiece decoder") << "{" + bpe + R"(, "decoder": {"type": "WordPiece"}})"
                                           << "decoder: the decoder 'WordPiece' is not supported";
        QTest::newRow("roberta") << "{" + bpe + R"(, "post_processor": {"type": "RobertaProcessing"}})"
                                 << "post_processor: the post-processor 'RobertaProcessing' is not supported";
        QTest::newRow("dropout") << R"({"model": {"type": "BPE", "dropout": 0.1, "vocab": {}, "merges": []}})"
                                 << "BPE dropout is not supported";
        QTest::newRow("merge outside the vocabulary")
            << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})"
            << "merge 0 ('a' 'b'): 'ab' is not in the vocabulary";
        // (Not a raw string: moc misreads one that holds "(a".)
        QTest::newRow("bad regex")
            << "{" + bpe
                   + ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": \"Isolated\"}}"
            << "pre_tokenizer.pattern: the regular expression '(a' does not compile";
        QTest::newRow("not json") << "{nope"
                                  << "not a JSON object";
    }
    void unsupportedComponentsAreRefusedByName()
    {
        QFETCH(QString, json);
        QFETCH(QString, message);
        auto tokenizer = Tokenizer::fromJson(json.toStdString(), "x/tokenizer.json");
        QVERIFY(!tokenizer);
        const QString got = QString::fromStdString(tokenizer.error().message);
        QVERIFY2(got.startsWith("x/tokenizer.json") && got.contains(message), qPrintable(got));
    }

    void configTokensMustExist()
    {
        const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
        auto tokenizer = Tokenizer::fromJson(json, "t.json", R"({"eos_token": "</s>"})", "c.json");
        QVERIFY(!tokenizer);
        QVERIFY2(tokenizer.error().message.find("c.json: eos_token '</s>' is not a token") != std::string::npos,
                 tokenizer.error().message.c_str());
        auto missing = Tokenizer::load(m_dir.path().toStdString() + "/nowhere");
        QVERIFY(!missing);
        QVERIFY(missing.error().message.find("has no tokenizer.json") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TstTokenizer)
#include "tst_tokenizer.moc"
