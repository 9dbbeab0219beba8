// The engine's token datasets (data.type tokens) against the way a Hugging Face script builds its
// batches: tests/tools/data_reference.py tokenizes the same JSON Lines corpus with `tokenizers`,
// joins the documents with EOS, cuts run_clm's blocks, splits off the eval blocks and samples them
// with torch's DistributedSampler and DataLoader per rank. Every batch of every rank over two
// epochs must be equal, inputs and labels. Also: a token file made by `data prepare` gives the same
// stream as its corpus; read-ahead never counts in the checkpointed position; and bad inputs are
// refused with what and where.

#include "engine/common/sample_order.h"
#include "engine/data/data.h"
#include "engine/text/data_prepare.h"
#include "engine/text/token_stream.h"
#include "engine/text/tokenizer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

// After torch: Qt's `slots` macro would break its headers.
#include "tests/common/python_tool.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <functional>
#include <numeric>

namespace config = shardscope::config;
namespace data = shardscope::data;
namespace text = shardscope::text;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kTools = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/");

// The reference script ran to its end (its output files are the result).
bool runTool(const QStringList& args, QString* error)
{
    shardscope::testing::runTool(args, *error, 300000);
    return error->isEmpty();
}

std::vector<std::int64_t> flat(const QJsonArray& rows)
{
    std::vector<std::int64_t> out;
    for (const auto row : rows)
        for (const auto v : row.toArray())
            out.push_back(v.toInteger());
    return out;
}

std::vector<std::int64_t> flat(const at::Tensor& t)
{
    auto c = t.contiguous();
    return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

std::string messageOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

} // namespace

class TstTokenData : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    int m_vocab = 0;

    QString ref() const { return m_dir.path(); }

    config::Recipe recipe(const std::vector<std::string>& paths, std::int64_t blockSize = 32) const
    {
        config::Recipe r;
        r.seed = 7;
        r.model.type = "gpt";
        r.model.vocabSize = m_vocab;
        r.model.blockSize = blockSize;
        r.data.type = "tokens";
        r.data.paths = paths;
        r.data.path = paths.empty() ? std::string() : paths.front();
        r.data.tokenizer = (ref() + "/llama3").toStdString();
        r.data.evalFraction = 0.1;
        r.perDeviceBatchSize = 4;
        return r;
    }
    std::string corpus() const { return (ref() + "/corpus.jsonl").toStdString(); }
    std::string write(const QString& name, const QByteArray& bytes) const
    {
        QFile f(ref() + "/" + name);
        if (!f.open(QIODevice::WriteOnly))
            return {};
        f.write(bytes);
        return f.fileName().toStdString();
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QString error;
        QVERIFY2(runTool({kTools + "tokenizer_reference.py", "--out", ref(), "--kinds", "llama3"}, &error), qPrintable(error));
        QFile expected(ref() + "/llama3/expected.json");
        QVERIFY(expected.open(QIODevice::ReadOnly));
        m_vocab = QJsonDocument::fromJson(expected.readAll()).object()["id_bound"].toInt();
        QVERIFY(m_vocab > 256);
    }

    void batchesEqualTheReference_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<bool>("evenBatches");
        QTest::newRow("1 rank") << 1 << true;
        QTest::newRow("2 ranks, even_batches") << 2 << true;
        QTest::newRow("3 ranks, even_batches false (drop_last)") << 3 << false;
    }
    void batchesEqualTheReference()
    {
        QFETCH(int, ranks);
        QFETCH(bool, evenBatches);
        const QString out = ref() + QString("/data-%1-%2.json").arg(ranks).arg(evenBatches);
        QString error;
        QVERIFY2(runTool({kTools + "data_reference.py",
                          "--tokenizer",
                          ref() + "/llama3",
                          "--corpus",
                          ref() + "/corpus.jsonl",
                          "--block-size",
                          "32",
                          "--ranks",
                          QString::number(ranks),
                          "--batch",
                          "4",
                          "--seed",
                          "7",
                          "--eval-fraction",
                          "0.1",
                          "--even-batches",
                          evenBatches ? "1" : "0",
                          "--epochs",
                          "2",
                          "--out",
                          out},
                         &error),
                 qPrintable(error));
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject expected = QJsonDocument::fromJson(file.readAll()).object();

        config::Recipe r = recipe({corpus()});
        r.data.evenBatches = evenBatches;
        const data::Split split = data::makeTokenBlocks(r, 2);
        QCOMPARE(split.train.size() + split.eval.size(), expected["blocks"].toInteger());
        QCOMPARE(split.eval.size(), expected["eval_blocks"].toInteger());
        const std::int64_t firstEval = 0;
        QCOMPARE(flat(split.eval.gather(&firstEval, 1).first), flat(QJsonArray{expected["eval_first"].toArray()}));
        const QJsonArray perRank = expected["ranks"].toArray();
        QCOMPARE(perRank.size(), ranks);
        for (int rank = 0; rank < ranks; ++rank) {
            data::DistributedSampler sampler(split.train.size(), rank, ranks, true, r.seed, !evenBatches);
            data::BatchIterator batches(split.train, sampler, r.perDeviceBatchSize);
            const QJsonArray want = perRank[rank].toArray();
            QVERIFY(want.size() > 10);
            QVERIFY(want.last().toObject()["epoch"].toInt() == 1); // the comparison crosses an epoch
            for (int b = 0; b < want.size(); ++b) {
                const auto batch = batches.next();
                const QJsonObject w = want[b].toObject();
                QCOMPARE(batch.epoch, w["epoch"].toInteger());
                QVERIFY2(flat(batch.inputs) == flat(w["inputs"].toArray()),
                         qPrintable(QString("rank %1, batch %2: inputs differ").arg(rank).arg(b)));
                QVERIFY2(flat(batch.targets) == flat(w["labels"].toArray()),
                         qPrintable(QString("rank %1, batch %2: labels differ").arg(rank).arg(b)));
            }
        }
    }

    void tokenFileGivesTheStreamOfItsCorpus()
    {
        text::PrepareOptions o;
        o.tokenizer = (ref() + "/llama3").toStdString();
        o.inputs = {corpus()};
        o.output = (ref() + "/corpus.tokens").toStdString();
        o.threads = 2;
        auto prepared = text::prepareTokenFile(o);
        QVERIFY2(prepared, prepared ? "" : prepared.error().message.c_str());
        const auto fromCorpus = data::makeTokenBlocks(recipe({corpus()}), 1);
        const auto fromFile = data::makeTokenBlocks(recipe({o.output}), 1);
        QCOMPARE(fromFile.train.size(), fromCorpus.train.size());
        std::vector<std::int64_t> all(static_cast<std::size_t>(fromFile.train.size()));
        std::iota(all.begin(), all.end(), 0);
        QVERIFY(flat(fromFile.train.gather(all.data(), fromFile.train.size()).first)
                == flat(fromCorpus.train.gather(all.data(), fromCorpus.train.size()).first));
        // A list of paths is one stream, in order.
        text::TokenSourceOptions both;
        both.paths = {o.output, corpus()};
        both.tokenizer = std::make_shared<const text::Tokenizer>(std::move(*text::Tokenizer::load(o.tokenizer)));
        auto stream = text::TokenStream::open(both);
        QVERIFY(stream);
        QCOMPARE(stream->size(), 2 * prepared->totals.tokens);
        std::vector<std::int64_t> across(10), first(5), second(5);
        stream->read(prepared->totals.tokens - 5, 10, across.data());
        stream->read(prepared->totals.tokens - 5, 5, first.data());
        stream->read(0, 5, second.data());
        QVERIFY(std::equal(first.begin(), first.end(), across.begin()));
        QVERIFY(std::equal(second.begin(), second.end(), across.begin() + 5));
    }

    void readAheadIsNotInThePosition()
    {
        const auto split = data::makeTokenBlocks(recipe({corpus()}), 1);
        data::DistributedSampler sampler(split.train.size(), 0, 2, true, 7, false);
        data::BatchIterator run(split.train, sampler, 4);
        const int perEpoch = static_cast<int>(sampler.samplesPerRank() / 4);
        const int total = perEpoch + 15, restart = perEpoch + 5;
        std::vector<std::vector<std::int64_t>> seen;
        for (int i = 0; i < total; ++i) // into epoch 1
            seen.push_back(flat(run.next().inputs));
        QCOMPARE(run.epoch(), std::int64_t(1));
        // After `restart` batches the position says exactly those (none read ahead), and an
        // iterator restored there continues with batch `restart`.
        data::BatchIterator probe(split.train, sampler, 4);
        for (int i = 0; i < restart; ++i)
            probe.next();
        QCOMPARE(probe.epoch(), std::int64_t(1));
        QCOMPARE(probe.position(), std::int64_t(4 * (restart - perEpoch)));
        data::BatchIterator resumed(split.train, sampler, 4);
        resumed.restore(probe.epoch(), probe.position());
        for (int i = restart; i < total; ++i)
            QVERIFY(flat(resumed.next().inputs) == seen[static_cast<std::size_t>(i)]);
    }

    // The torch-free permutation (the recipe editor's sample batch) is torch's.
    void torchFreeOrderIsTorchs()
    {
        for (std::int64_t n : {1, 2, 10, 522, 100003})
            for (std::uint64_t seed : {0ULL, 7ULL, 1234ULL, (1ULL << 32) + 5})
                QVERIFY2(*shardscope::torchRandperm(n, seed)
                             == flat(at::randperm(n, at::make_generator<at::CPUGeneratorImpl>(seed), at::kLong)),
                         qPrintable(QString("n %1, seed %2").arg(n).arg(seed)));
    }

    void badInputsAreRefused()
    {
        // A tokenizer with more ids than the model embeds.
        config::Recipe small = recipe({corpus()});
        small.model.vocabSize = 256;
        auto message = messageOf([&] { data::makeTokenBlocks(small, 1); });
        QVERIFY2(message.find("has ids up to " + std::to_string(m_vocab - 1)) != std::string::npos, message.c_str());
        QVERIFY2(message.find("vocab_size is 256") != std::string::npos, message.c_str());
        // A token file holding an id the model cannot embed (no tokenizer named).
        const std::uint16_t ids[] = {1, 2, 3, 300, 4, 5, 6, 7};
        const auto bin = write("big-id.bin", QByteArray(reinterpret_cast<const char*>(ids), sizeof ids));
        config::Recipe bare = recipe({bin}, 2);
        bare.data.tokenizer.clear();
        bare.data.tokenDtype = "uint16";
        bare.model.vocabSize = 256;
        message = messageOf([&] { data::makeTokenBlocks(bare, 1); });
        QVERIFY2(message.find("holds the token id 300") != std::string::npos, message.c_str());
        // A token file whose size is not a multiple of its dtype.
        const auto odd = write("odd.bin", QByteArray(7, '\1'));
        config::Recipe truncated = recipe({odd}, 2);
        truncated.data.tokenDtype = "uint16";
        message = messageOf([&] { data::makeTokenBlocks(truncated, 1); });
        QVERIFY2(message.find("not a multiple of 2") != std::string::npos, message.c_str());
        // An empty corpus, and one shorter than a sequence.
        const auto empty = write("empty.jsonl", "\n\n");
        message = messageOf([&] { data::makeTokenBlocks(recipe({empty}), 1); });
        QVERIFY2(message.find("the corpus has no documents") != std::string::npos, message.c_str());
        const auto tiny = write("tiny.jsonl", "{\"text\": \"hello\"}\n");
        message = messageOf([&] { data::makeTokenBlocks(recipe({tiny}, 512), 1); });
        QVERIFY2(message.find("fewer than one sequence of model.block_size 512") != std::string::npos, message.c_str());
        // A line that is not JSON, and one without the field: file:line.
        const auto broken = write("broken.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"cut\n");
        message = messageOf([&] { data::makeTokenBlocks(recipe({broken}), 1); });
        QVERIFY2(message.find("broken.jsonl:2: not JSON") != std::string::npos, message.c_str());
        const auto fieldless = write("fieldless.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"x\"}\n");
        message = messageOf([&] { data::makeTokenBlocks(recipe({fieldless}), 1); });
        QVERIFY2(message.find("fieldless.jsonl:2: has no \"text\" field") != std::string::npos, message.c_str());
        // A corpus without a tokenizer.
        config::Recipe untokenized = recipe({corpus()});
        untokenized.data.tokenizer.clear();
        message = messageOf([&] { data::makeTokenBlocks(untokenized, 1); });
        QVERIFY2(message.find("names no tokenizer") != std::string::npos, message.c_str());
    }

    void recipeReadsTokenData()
    {
        const std::string yaml = "model: {type: gpt, vocab_size: 600, block_size: 16}\n"
                                 "data: {type: tokens, path: [a.tokens, b.jsonl], tokenizer: tok, field: body}\n";
        auto parsed = config::parseRecipe(yaml, "r.yaml");
        QVERIFY2(parsed, parsed ? "" : parsed.error().message.c_str());
        QCOMPARE(parsed->data.paths, (std::vector<std::string>{"a.tokens", "b.jsonl"}));
        QCOMPARE(parsed->data.field, std::string("body"));
        auto again = config::parseRecipe(config::recipeToYaml(*parsed), "again.yaml");
        QVERIFY(again);
        QCOMPARE(again->data.paths, parsed->data.paths);
        QCOMPARE(again->data.tokenizer, std::string("tok"));
        auto none = config::parseRecipe("data: {type: tokens}\n", "n.yaml");
        QVERIFY(!none);
        QVERIFY2(none.error().message.find("data.type tokens needs data.path") != std::string::npos,
                 none.error().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TstTokenData)
#include "tst_token_data.moc"
