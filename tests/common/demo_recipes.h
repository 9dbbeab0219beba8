#pragma once

// The bundled demo recipes as tests run them.

#include <QFile>
#include <QString>

namespace shardscope::testing {

// resources/recipes/demo-llama.yaml with its data and tokenizer paths made absolute (the test
// writes its copy elsewhere), for `steps` steps with one warm-up step; empty when it cannot be read.
inline QString llamaDemoRecipe(int steps)
{
    const QString resources = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/");
    QFile demo(resources + "recipes/demo-llama.yaml");
    if (!demo.open(QIODevice::ReadOnly))
        return {};
    QString text = QString::fromUtf8(demo.readAll());
    text.replace("../data/", resources + "data/").replace("../tokenizers/", resources + "tokenizers/");
    text.replace("max_steps: 150", QStringLiteral("max_steps: %1").arg(steps)).replace("warmup_steps: 10", "warmup_steps: 1");
    return text;
}

} // namespace shardscope::testing
