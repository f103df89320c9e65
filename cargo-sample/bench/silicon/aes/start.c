/* Reset: copy .data, clear .bss, run main. The vector table holds the stack and reset only;
   the routines under test take no interrupts. */
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
    main();
    for (;;) {
    }
}

__attribute__((section(".vectors"), used)) static const void *const vectors[2] = {
    &_stack_top,
    (const void *)reset,
};
