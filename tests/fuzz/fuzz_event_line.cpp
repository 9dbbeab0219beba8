// Fuzz target: the event decoder (engine/protocol/events.h), fed line by line as the launcher
// reads a rank's pipe. Invariants: a rejected line gets a message; an accepted event encodes to a
// line that decodes again, and encoding that gives the same line (a fixed point), so what the
// launcher accepts survives events.jsonl and the store's recovery from it.

#include "engine/protocol/events.h"
#include "tests/fuzz/fuzz_check.h"

using namespace shardscope::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text = shardscope::fuzz::text(data, size);
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        const std::string_view line(text.data() + start, end - start);
        start = end + 1;
        auto event = decodeEvent(line);
        if (!event) {
            FUZZ_CHECK(!event.error().message.empty(), "a rejected line without a message");
            continue;
        }
        const std::string encoded = encodeEvent(*event);
        FUZZ_CHECK(encoded.find('\n') == std::string::npos, "an encoded event spans lines: " + encoded);
        auto again = decodeEvent(encoded);
        FUZZ_CHECK(again.ok(), "an accepted event does not decode after encoding: " + again.error().message + "\n--- line ---\n"
                                   + std::string(line) + "\n--- encoded ---\n" + encoded);
        FUZZ_CHECK(encodeEvent(*again) == encoded, "encoding is not a fixed point\n" + encoded);
    }
    return 0;
}
