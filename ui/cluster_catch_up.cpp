#include "ui/cluster_catch_up.h"

#include "storage/store_paths.h"
#include "ui/shardscope_command.h"

namespace shardscope::ui {

ClusterCatchUp::ClusterCatchUp(std::filesystem::path databaseFile, QObject* parent)
    : QObject(parent), m_databaseFile(std::move(databaseFile)), m_command(new ShardscopeCommand(this))
{
    connect(m_command, &ShardscopeCommand::finished, this, &ClusterCatchUp::answered);
}

bool ClusterCatchUp::running() const { return m_command->running(); }

bool ClusterCatchUp::startedFollowers(const QString& said) { return said.contains(QStringLiteral(" in the background ")); }

void ClusterCatchUp::start()
{
    if (m_command->running())
        return; // one is on its way
    // The followers record into this history: its folder is their home. A history file of
    // another name is no Shardscope home (a test's): no cluster runs to catch up with.
    if (m_databaseFile.filename() != storage::historyFile({}).filename() || m_databaseFile.parent_path().empty()) {
        emit finished({});
        return;
    }
    m_command->start({QStringLiteral("runs"), QStringLiteral("--home"),
                      QString::fromStdString(m_databaseFile.parent_path().string()), QStringLiteral("follow"),
                      QStringLiteral("--all")},
                     ShardscopeCommand::Output::Text);
}

void ClusterCatchUp::answered(const CommandAnswer& answer) { emit finished(answer.started ? answer.text.trimmed() : QString()); }

} // namespace shardscope::ui
