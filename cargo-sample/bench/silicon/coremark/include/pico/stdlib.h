/* Stands in for the Pico SDK's header in a QEMU build: nothing to set up. */
#include <stdint.h>
static inline void stdio_init_all(void) {}
