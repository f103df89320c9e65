#!/bin/sh
# Build the CoreMark of github.com/KafCoppelia/pico-coremark (DIR: a checkout at the commit
# recorded in cargo-sample/data/silicon/coremark-rp2040.csv) for QEMU, as it was built for
# the Raspberry Pi Pico (a Cortex-M0+ at 125 MHz, code in RAM, -O3), with stand-ins for the
# Pico SDK's headers and the startup of ../aes:   build.sh DIR OUT  ->  OUT/coremark-m0plus.elf
set -eu
dir=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
arm-none-eabi-gcc -mthumb -mcpu=cortex-m0plus -O3 -g -ffreestanding --specs=nosys.specs \
    -nostartfiles -DPERFORMANCE_RUN=1 -DHAS_PRINTF=0 -DHAS_STDIO=0 -DHAS_FLOAT=0 \
    -I "$here/include" -I "$dir/coremark" -T "$here/../aes/link.ld" \
    -o "$out/coremark-m0plus.elf" "$here/../aes/start.c" "$here/port.c" \
    "$dir"/coremark/core_list_join.c "$dir"/coremark/core_main.c "$dir"/coremark/core_matrix.c \
    "$dir"/coremark/core_state.c "$dir"/coremark/core_util.c "$dir"/coremark/core_portme.c
