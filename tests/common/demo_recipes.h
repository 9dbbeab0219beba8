#pragma once

// The bundled demo recipes, and the configs tests share, as tests run them.

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

// An Accelerate config for HSDP on 4 CPU ranks from parallelism_config (FSDP2, dp_replicate_size 2 x
// dp_shard_size 2), written to `path`; false when it cannot be written.
inline bool writeHsdpConfig(const QString& path)
{
    QFile file(path);
    return file.open(QIODevice::WriteOnly)
           && file.write(
                  "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 4\nuse_cpu: true\n"
                  "fsdp_config:\n  fsdp_version: 2\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                  "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n  parallelism_config_dp_shard_size: 2\n")
                  > 0;
}

} // namespace shardscope::testing
