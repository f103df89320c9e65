/* What the benchmark prints goes nowhere in the QEMU build (`-DHAS_PRINTF=0`): its result
   is read from the counts. A wrong build still shows: a CRC that does not match the one the
   benchmark expects ends the run with a failure. */
#include <stdint.h>

static int has(const char *s, const char *part)
{
    for (; *s; s++) {
        const char *a = s, *b = part;
        while (*a && *b && *a == *b) {
            a++;
            b++;
        }
        if (!*b) {
            return 1;
        }
    }
    return 0;
}

int ee_printf(const char *fmt, ...)
{
    if (has(fmt, "crc 0x")) {
        register uint32_t r0 __asm__("r0") = 0x18;     /* SYS_EXIT */
        register uint32_t r1 __asm__("r1") = 0x20024; /* internal error */
        __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    }
    return 0;
}
