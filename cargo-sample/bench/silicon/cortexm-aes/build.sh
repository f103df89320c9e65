#!/bin/sh
# Build the routines of github.com/jnk0le/cortexm-AES (DIR: a checkout at the commit recorded in
# cargo-sample/data/silicon/cortexm-aes.csv) with this harness into one ELF for QEMU's
# mps2-an386 (every routine assembles for the Cortex-M4; the Cortex-M0, M3, M7 and M33 ones are
# timed with `--core`):   build.sh DIR OUT  ->  OUT/cortexm-aes.elf
set -eu
dir=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
set --
for v in CM0_sBOX CM0_FASTMULsBOX CM0_d4T CM3_1T CM4_DSPsBOX CM7_1T CM7_DSPsBOX CM33_1T CM33_d4T; do
    for f in "$dir"/aes/target/"$v"/*.S; do
        set -- "$@" "$f"
    done
done
arm-none-eabi-gcc -mthumb -mcpu=cortex-m4 -O2 -g -ffreestanding -nostdlib \
    -fno-optimize-sibling-calls -Wall -Wextra -I "$dir" \
    -T "$here/../aes/link.ld" -o "$out/cortexm-aes.elf" \
    "$here/../aes/start.c" "$here/main.c" "$dir/aes/lookup_tables.c" "$@" -lgcc
