/* Stands in for the Pico SDK's header in a QEMU build. */
