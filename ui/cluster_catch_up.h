#pragma once

// The cluster runs nobody follows here get a follower each, in the background: `shardscope runs
// --home HOME follow --all` for the history's home. That covers this history's pending or running
// cluster runs whose follower is gone (a closed workbench), and the user's runs submitted from
// another machine that shares the profiles' folders. The followers live on in sessions of their
// own; what the command said comes back with how many it started (its --json answer).

#include <QJsonDocument>
#include <QObject>
#include <QString>

#include <filesystem>

namespace shardscope::ui {

struct CommandAnswer;
class ShardscopeCommand;

class ClusterCatchUp : public QObject {
    Q_OBJECT
public:
    // `databaseFile`: the history the followers record into; its folder is their home.
    explicit ClusterCatchUp(std::filesystem::path databaseFile, QObject* parent = nullptr);

    // Starts the catch-up; nothing while one is on its way. A history file that is not a
    // Shardscope home's (a test's) has no cluster runs to catch up with: finished({}) at once.
    void start();
    bool running() const;

    // What `runs follow --all --json` answered: its words, and the followers it started.
    static QString saidIn(const QJsonDocument& answer);
    static int startedIn(const QJsonDocument& answer);

signals:
    // What the command said, trimmed (empty when it could not start or was not asked), and how
    // many followers it started.
    void finished(const QString& said, int started);

private:
    void answered(const CommandAnswer& answer);

    std::filesystem::path m_databaseFile;
    ShardscopeCommand* m_command = nullptr;
};

} // namespace shardscope::ui
