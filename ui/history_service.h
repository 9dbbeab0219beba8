#pragma once

// The workbench's way to the run history (SQLite) and the run directories without blocking the
// window: a job is a function that runs on the service's worker thread, one job at a time in the
// order asked (so one store connection is never used by two threads), and its result comes back
// to the GUI thread by a queued call. The result is delivered only while the object that asked
// still exists (a QPointer checked on the GUI thread), so a page closed or a run switched while
// its job ran simply drops the answer; pages that ask again and again also tag each request with
// a generation and ignore answers to older ones (see RunPage::pollNow).
//
// The job-tracker pattern of Qt Creator and Hotspot, reduced to what the pages need.

#include "engine/common/result.h"
#include "storage/run_store.h"

#include <QObject>
#include <QPointer>
#include <QThread>

#include <filesystem>
#include <functional>
#include <memory>

namespace shardscope::ui {

class HistoryService : public QObject {
    Q_OBJECT
public:
    explicit HistoryService(QObject* parent = nullptr);
    // Waits for the job in progress (a SQLite query or a file read: bounded), drops the rest.
    ~HistoryService() override;

    // Runs `job` on the worker thread, then `done(result)` on the GUI thread if `context` still
    // exists then. The job must not touch widgets; it owns what it captures.
    template <typename T>
    void submit(QObject* context, std::function<T()> job, std::function<void(T)> done)
    {
        QPointer<QObject> guard(context);
        ++m_pending;
        QMetaObject::invokeMethod(
            m_worker,
            [this, guard, job = std::move(job), done = std::move(done)] {
                auto result = std::make_shared<T>(job());
                QMetaObject::invokeMethod(
                    this,
                    [this, guard, result, done] {
                        --m_pending;
                        if (guard)
                            done(std::move(*result));
                    },
                    Qt::QueuedConnection);
            },
            Qt::QueuedConnection);
    }

    // Jobs asked and not yet answered (for tests and the status bar).
    int pendingJobs() const { return m_pending; }

private:
    QThread m_thread;
    QObject* m_worker = nullptr; // lives on m_thread
    int m_pending = 0;
};

// A page's store connection: opened at its first use, on the history thread, and used only
// there (a page holds it by shared_ptr and hands it to its jobs).
class HistoryConnection {
public:
    HistoryConnection(std::filesystem::path databaseFile, storage::StoreOptions options)
        : m_databaseFile(std::move(databaseFile)), m_options(options)
    {
    }

    Result<storage::RunStore*> get()
    {
        if (!m_store) {
            auto opened = storage::RunStore::open(m_databaseFile, m_options);
            if (!opened)
                return opened.error();
            m_store = std::make_unique<storage::RunStore>(std::move(*opened));
        }
        return m_store.get();
    }

private:
    std::filesystem::path m_databaseFile;
    storage::StoreOptions m_options;
    std::unique_ptr<storage::RunStore> m_store;
};

} // namespace shardscope::ui
