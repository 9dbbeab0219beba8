// Thousands of seeded mutations of the corpus fed to the loader: nothing crashes, every failure
// is an error value with a message that names the file, and whatever loads survives a save/load
// round trip as a fixed point. Bounded in time; the seed is printed so that a failure can be replayed.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/yaml_io.h"
#include "tests/common/oracle_support.h"

#include <QTest>

#include <chrono>
#include <filesystem>
#include <random>

using namespace shardscope::config;

namespace {

const char* const kTokens[] = {"NO",     "no",         "1e8",   "~",   "''",   "[",     "{",        "]",    "}",
                               "!!int ", "&a ",        "*a",    "<<:", ": ",   "- ",    "#",        "\"",   "'",
                               "\t",     "\n",         "---\n", "010", "0x1F", "1_000", "\xc3\xa9", "\xff", "null",
                               ".inf",   "2020-01-01", "? ",    "|",   ">",    "!",     "%",        "@",    "`"};

std::string mutate(std::string text, std::mt19937& rng)
{
    auto pick = [&](std::size_t n) {
        return n == 0 ? std::size_t{0} : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };
    const int edits = 1 + static_cast<int>(pick(4));
    for (int e = 0; e < edits; ++e) {
        const std::size_t pos = pick(text.size() + 1);
        switch (pick(8)) {
        case 0: // flip a byte
            if (!text.empty())
                text[pick(text.size())] = static_cast<char>(pick(256));
            break;
        case 1: // insert a YAML/JSON-significant token
            text.insert(pos, kTokens[pick(std::size(kTokens))]);
            break;
        case 2: // delete a range
            if (!text.empty())
                text.erase(pick(text.size()), 1 + pick(12));
            break;
        case 3: { // duplicate a line
            const auto start = text.rfind('\n', pos == 0 ? 0 : pos - 1);
            const auto from = start == std::string::npos ? 0 : start + 1;
            const auto end = text.find('\n', from);
            const std::string line = text.substr(from, end == std::string::npos ? std::string::npos : end - from + 1);
            text.insert(from, line);
            break;
        }
        case 4: // truncate
            text.resize(pos);
            break;
        case 5: // change indentation
            text.insert(pos, std::string(1 + pick(4), ' '));
            break;
        case 6: { // replace a value after a colon
            const auto colon = text.find(": ", pos);
            if (colon != std::string::npos) {
                const auto eol = text.find('\n', colon);
                text.replace(colon + 2, (eol == std::string::npos ? text.size() : eol) - colon - 2,
                             kTokens[pick(std::size(kTokens))]);
            }
            break;
        }
        default: // swap two characters
            if (text.size() > 1)
                std::swap(text[pick(text.size())], text[pick(text.size())]);
        }
    }
    return text;
}

} // namespace

class TestConfigFuzz : public QObject {
    Q_OBJECT

private slots:
    void mutatedCorpusNeverCrashesOrPassesSilently()
    {
        std::vector<std::pair<std::string, std::string>> corpus; // name, text
        for (const auto& e : std::filesystem::directory_iterator(shardscope::testing::corpusDir())) {
            const auto ext = e.path().extension().string();
            if (ext != ".yaml" && ext != ".yml" && ext != ".json")
                continue;
            auto text = readTextFile(e.path().string());
            QVERIFY(text.ok());
            corpus.emplace_back(e.path().filename().string(), *text);
        }
        std::sort(corpus.begin(), corpus.end());
        QVERIFY(corpus.size() >= 60);

        const unsigned seed = qEnvironmentVariableIsSet("SHARDSCOPE_FUZZ_SEED")
                                  ? static_cast<unsigned>(qEnvironmentVariableIntValue("SHARDSCOPE_FUZZ_SEED"))
                                  : 20260801u;
        qInfo("fuzz seed %u (set SHARDSCOPE_FUZZ_SEED to replay)", seed);
        std::mt19937 rng(seed);
        const auto start = std::chrono::steady_clock::now();
        int iterations = 0, loaded = 0, rejected = 0;
        const int target = qEnvironmentVariableIsSet("SHARDSCOPE_FUZZ_ITERATIONS")
                               ? qEnvironmentVariableIntValue("SHARDSCOPE_FUZZ_ITERATIONS")
                               : 10000;
        for (; iterations < target; ++iterations) {
            const auto& [name, original] = corpus[iterations % corpus.size()];
            const std::string text = mutate(original, rng);
            const FileFormat format = (iterations / static_cast<int>(corpus.size())) % 3 == 2
                                          ? (name.size() > 5 && name.substr(name.size() - 5) == ".json" ? FileFormat::Yaml
                                                                                                        : FileFormat::Json)
                                          : formatForPath(name);
            const std::string source = "fuzz/" + name;
            if (qEnvironmentVariableIsSet("SHARDSCOPE_FUZZ_TRACE"))
                fprintf(stderr, "iteration %d %s\n%s\n=====\n", iterations, name.c_str(), text.c_str());
            auto cfg = parseAccelerateConfig(text, source, format);
            if (!cfg) {
                ++rejected;
                const std::string& m = cfg.error().message;
                QVERIFY2(!m.empty(), ("empty error message, iteration " + std::to_string(iterations)).c_str());
                QVERIFY2(m.find(source) != std::string::npos || m.find("distributed_type") != std::string::npos,
                         ("the message does not say where: " + m).c_str());
                continue;
            }
            ++loaded;
            // `distributed_type: null` (or `compute_environment: null`, which selects SageMaker)
            // loads in Accelerate too, but its writer drops nulls and the saved file no longer
            // loads (or loads as the other schema); validation reports these, so skip them here.
            if (cfg->field("distributed_type").isNull() || cfg->field("compute_environment").isNull()
                || (cfg->kind() == ConfigKind::SageMaker
                    && (cfg->field("ec2_instance_type").isNull() || cfg->field("iam_role_name").isNull())))
                continue;
            // Whatever loads must survive our own writers unchanged.
            for (FileFormat f : {FileFormat::Yaml, FileFormat::Json}) {
                const std::string saved = f == FileFormat::Yaml ? toYamlText(*cfg) : toJsonText(*cfg);
                auto back = parseAccelerateConfig(saved, "saved", f);
                if (!back.ok())
                    QFAIL(("iteration " + std::to_string(iterations) + " (" + name + "): saved file does not load: "
                           + back.error().message + "\n--- input ---\n" + text + "\n--- saved ---\n" + saved)
                              .c_str());
                // Saving converges: Accelerate's to_dict turns a nested {} into null and drops
                // top-level nulls (which reload as dataclass defaults), so the first save may
                // normalise; from the second save on the file must not change.
                const std::string second = f == FileFormat::Yaml ? toYamlText(*back) : toJsonText(*back);
                auto back2 = parseAccelerateConfig(second, "saved2", f);
                QVERIFY(back2.ok());
                const std::string third = f == FileFormat::Yaml ? toYamlText(*back2) : toJsonText(*back2);
                QVERIFY2(third == second,
                         ("iteration " + std::to_string(iterations) + " (" + name
                          + "): saving does not converge\n--- second ---\n" + second + "\n--- third ---\n" + third)
                             .c_str());
            }
            const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            QVERIFY2(elapsed < 30.0 || target > 10000, "the fuzz run is too slow");
        }
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        qInfo("%d mutations: %d loaded, %d rejected with a message, %.2f s", iterations, loaded, rejected, elapsed);
        QCOMPARE(iterations, target);
        QVERIFY(loaded > 100); // the mutations are not all fatal...
        QVERIFY(rejected > 500); // ...and not all harmless
    }
};

QTEST_APPLESS_MAIN(TestConfigFuzz)
#include "tst_config_fuzz.moc"
