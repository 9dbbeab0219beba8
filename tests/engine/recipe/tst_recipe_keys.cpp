// The recipe key reference (engine/recipe/recipe_keys.h) against the parser: every key
// parseRecipe accepts is documented and every documented key is accepted, each documented default
// is Recipe{}'s, and docs/RECIPES.md is the reference as generated.

#include "engine/recipe/recipe.h"
#include "engine/recipe/recipe_keys.h"

#include <QFile>
#include <QtTest>

#include <set>

using namespace shardscope::config;

namespace {

// The keys parseRecipe knows in a section: an unknown key far from every known one gets the
// list in its error ("(known keys: a, b, c)").
std::set<std::string> acceptedKeys(const std::string& section)
{
    std::string yaml;
    std::string indent;
    std::size_t from = 0;
    while (!section.empty()) {
        const auto dot = section.find('.', from);
        yaml += indent + section.substr(from, dot == std::string::npos ? std::string::npos : dot - from) + ":\n";
        indent += "  ";
        if (dot == std::string::npos)
            break;
        from = dot + 1;
    }
    yaml += indent + "zzzzzzzzzzzzzzzz: 1\n";
    auto parsed = parseRecipe(yaml, "keys.yaml");
    std::set<std::string> keys;
    if (parsed)
        return keys;
    const std::string& message = parsed.error().message;
    const auto open = message.find("(known keys: ");
    const auto close = message.rfind(')');
    if (open == std::string::npos || close == std::string::npos)
        return keys;
    const std::string list = message.substr(open + 13, close - open - 13);
    for (std::size_t at = 0; at <= list.size();) {
        const auto comma = list.find(", ", at);
        keys.insert(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        if (comma == std::string::npos)
            break;
        at = comma + 2;
    }
    return keys;
}

} // namespace

class TestRecipeKeys : public QObject {
    Q_OBJECT
private slots:
    void everyKeyTheParserAcceptsIsDocumentedAndBack()
    {
        for (const std::string section : {"", "model", "model.lora", "data", "optimizer", "schedule", "ddp", "loss_scaler",
                                          "training", "export", "profile"}) {
            const auto accepted = acceptedKeys(section);
            QVERIFY2(accepted.size() >= 2, section.c_str());
            const std::string prefix = section.empty() ? std::string() : section + ".";
            for (const auto& key : accepted)
                QVERIFY2(findRecipeKey(prefix + key), (prefix + key + " is accepted but not documented").c_str());
            for (const auto& doc : recipeKeyReference()) {
                if (doc.path.rfind(prefix, 0) != 0 || doc.path.find('<') != std::string::npos)
                    continue;
                const std::string rest = doc.path.substr(prefix.size());
                if (rest.find('.') != std::string::npos)
                    continue; // a nested section's key
                QVERIFY2(accepted.count(rest), (doc.path + " is documented but not accepted").c_str());
            }
        }
    }

    void documentedDefaultsAreTheRecipesOwn()
    {
        auto baseline = parseRecipe("name: recipe\n", "baseline.yaml");
        QVERIFY(baseline);
        const std::string expected = recipeToYaml(*baseline);
        int checked = 0;
        for (const auto& doc : recipeKeyReference()) {
            if (doc.defaultValue.empty() || doc.path.rfind("model.lora", 0) == 0 || doc.path.find('<') != std::string::npos)
                continue; // lora's keys enable lora; a family's keys are its config.json's
            const auto dot = doc.path.find('.');
            const std::string yaml = dot == std::string::npos ? doc.path + ": " + doc.defaultValue + "\n"
                                                              : doc.path.substr(0, dot) + ":\n  " + doc.path.substr(dot + 1)
                                                                    + ": " + doc.defaultValue + "\n";
            auto parsed = parseRecipe(yaml, "default.yaml");
            QVERIFY2(parsed, (doc.path + ": " + (parsed ? std::string() : parsed.error().message)).c_str());
            QVERIFY2(recipeToYaml(*parsed) == expected,
                     (doc.path + ": documented default " + doc.defaultValue + " is not the recipe's").c_str());
            ++checked;
        }
        QVERIFY(checked > 50);
    }

    void recipesDocIsTheReference()
    {
        const QString path = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/docs/RECIPES.md");
        const QByteArray generated = QByteArray::fromStdString(recipeKeysMarkdown());
        if (qEnvironmentVariable("SHARDSCOPE_UPDATE_DOCS") == QLatin1String("1")) {
            QFile out(path);
            QVERIFY(out.open(QIODevice::WriteOnly | QIODevice::Truncate));
            out.write(generated);
        }
        QFile in(path);
        QVERIFY2(in.open(QIODevice::ReadOnly), "docs/RECIPES.md is missing: run with SHARDSCOPE_UPDATE_DOCS=1");
        QVERIFY2(in.readAll() == generated,
                 "docs/RECIPES.md is stale: SHARDSCOPE_UPDATE_DOCS=1 build/dev/tests/engine/tst_recipe_keys");
    }
};

QTEST_APPLESS_MAIN(TestRecipeKeys)
#include "tst_recipe_keys.moc"
