#include "ui/cluster_catch_up.h"

#include "storage/store_paths.h"
#include "ui/shardscope_command.h"

#include <QJsonArray>
#include <QJsonObject>

namespace shardscope::ui {

ClusterCatchUp::ClusterCatchUp(std::filesystem::path databaseFile, QObject* parent)
    : QObject(parent), m_databaseFile(std::move(databaseFile)), m_command(new ShardscopeCommand(this))
{
    connect(m_command, &ShardscopeCommand::finished, this, &ClusterCatchUp::answered);
}

bool ClusterCatchUp::running() const { return m_command->running(); }

QString ClusterCatchUp::saidIn(const QJsonDocument& answer)
{
    return answer.object().value(QStringLiteral("said")).toString().trimmed();
}

int ClusterCatchUp::startedIn(const QJsonDocument& answer)
{
    return static_cast<int>(answer.object().value(QStringLiteral("started")).toArray().size());
}

void ClusterCatchUp::start()
{
    if (m_command->running())
        return; // one is on its way
    // The followers record into this history: its folder is their home. A history file of
    // another name is no Shardscope home (a test's): no cluster runs to catch up with.
    if (m_databaseFile.filename() != storage::historyFile({}).filename() || m_databaseFile.parent_path().empty()) {
        emit finished({}, 0);
        return;
    }
    m_command->start({QStringLiteral("runs"), QStringLiteral("--home"),
                      QString::fromStdString(m_databaseFile.parent_path().string()), QStringLiteral("follow"),
                      QStringLiteral("--all"), QStringLiteral("--json")},
                     ShardscopeCommand::Output::Json);
}

void ClusterCatchUp::answered(const CommandAnswer& answer)
{
    emit finished(answer.started ? saidIn(answer.json) : QString(), answer.started ? startedIn(answer.json) : 0);
}

} // namespace shardscope::ui
