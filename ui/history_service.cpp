#include "ui/history_service.h"

namespace shardscope::ui {

HistoryService::HistoryService(QObject* parent) : QObject(parent)
{
    m_thread.setObjectName(QStringLiteral("history"));
    m_worker = new QObject;
    m_worker->moveToThread(&m_thread);
    m_thread.start();
}

HistoryService::~HistoryService()
{
    // quit() is handled after the job in progress; the queued ones are dropped with the thread's
    // event loop, and their answers (posted to this object) with this object.
    m_thread.quit();
    m_thread.wait();
    delete m_worker;
}

} // namespace shardscope::ui
