/*
 * A stand-in bcryptprimitives.dll for wine 8, which lacks ProcessPrng (added in wine 9). Rust's
 * std (1.78 and later) imports ProcessPrng from bcryptprimitives.dll for its hash-map keys and
 * random seeds, so without this every Rust test binary fails to load under wine 8.
 *
 * ProcessPrng fills a buffer from the system's cryptographic generator and always succeeds;
 * RtlGenRandom (advapi32's SystemFunction036), which wine does implement, provides the bytes.
 * Built by scripts/windows.sh with x86_64-w64-mingw32-gcc into the test wine prefix only.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    /* RtlGenRandom takes a ULONG length: fill large buffers in pieces. */
    while (length > 0) {
        ULONG piece = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, piece)) {
            return FALSE;
        }
        data += piece;
        length -= piece;
    }
    return TRUE;
}
