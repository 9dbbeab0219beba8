// keepFreedHostMemoryForReuse (Note [keeping freed host memory]): after it, a block of a few MiB
// comes from malloc's heap instead of a fresh mmap (glibc's mallinfo2 counts mmapped blocks),
// and a user's own glibc malloc settings are left alone.

#include "engine/common/host_allocator.h"

#include <QtTest>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace shardscope;

namespace {

#if defined(__GLIBC__)
// Whether malloc serves a block of `bytes` with its own mmap (written so that it is really used).
bool servedByMmap(std::size_t bytes)
{
    const std::size_t before = mallinfo2().hblks;
    auto* block = static_cast<char*>(std::malloc(bytes));
    std::memset(block, 1, bytes);
    asm volatile("" : : "r"(block) : "memory"); // the block escapes: the compiler may not elide malloc and free
    const bool mapped = mallinfo2().hblks > before;
    std::free(block);
    return mapped;
}
#endif

} // namespace

class TestHostAllocator : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
#if !defined(__GLIBC__)
        QSKIP("glibc's malloc only");
#elif defined(__SANITIZE_ADDRESS__)
        QSKIP("AddressSanitizer replaces malloc");
#endif
    }

    void usersOwnSettingsWin()
    {
#if defined(__GLIBC__)
        setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1);
        QVERIFY(!keepFreedHostMemoryForReuse());
        unsetenv("MALLOC_TRIM_THRESHOLD_");
        // Untouched: glibc's default threshold still maps an 8 MiB block on its own.
        QVERIFY(servedByMmap(8 << 20));
#endif
    }

    void blocksOfMegabytesStayInTheHeap()
    {
#if defined(__GLIBC__)
        QVERIFY(keepFreedHostMemoryForReuse());
        QVERIFY(!servedByMmap(8 << 20));
        QVERIFY(!servedByMmap(64 << 20));
        QVERIFY(servedByMmap(std::size_t{300} << 20)); // above the raised threshold: still its own mapping
#endif
    }
};

QTEST_APPLESS_MAIN(TestHostAllocator)
#include "tst_host_allocator.moc"
