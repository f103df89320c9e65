/* Reset: copy .data, clear .bss, run main, and end the run through semihosting if main
   returns. The vector table holds the stack and reset only; the code under test takes no
   interrupts. */
#include <stdint.h>

extern uint32_t _data, _edata, _data_load, _bss, _ebss, _stack_top;
extern int main(void);

void reset(void)
{
    uint32_t *src = &_data_load, *dst = &_data;
    while (dst < &_edata) {
        *dst++ = *src++;
    }
    for (dst = &_bss; dst < &_ebss; dst++) {
        *dst = 0;
    }
    int code = main();
    register uint32_t r0 __asm__("r0") = 0x18; /* SYS_EXIT */
    register uint32_t r1 __asm__("r1") = code ? 0x20024 : 0x20026;
    __asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {
    }
}

__attribute__((section(".vectors"), used)) static const void *const vectors[2] = {
    &_stack_top,
    (const void *)reset,
};
