#!/bin/sh
# Build the routines of github.com/Ko-/aes-armcortexm (DIR: a checkout at the commit recorded in
# cargo-sample/data/silicon/aes-armcortexm.csv) with this harness, for QEMU's mps2 machines:
#   build.sh DIR OUT   ->  OUT/aes-armcortexm-{aes128,aes128ctr,aes192ctr,aes256ctr,aes128ctrbs}.elf
# The routines are Thumb-2 assembly, so the compiler only builds the harness.
set -eu
dir=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
cc="arm-none-eabi-gcc -mthumb -mcpu=cortex-m3 -O2 -g -ffreestanding -nostdlib -Wall -Wextra"
build() {
    name=$1 variant=$2 asm=$3
    $cc -DVARIANT="$variant" -T "$here/link.ld" -o "$out/aes-armcortexm-$name.elf" \
        "$here/start.c" "$here/main.c" "$dir/$asm" -lgcc
}
build aes128 1 aes128/aes.s
build aes128ctr 2 aes128ctr/aes_128_ctr.s
build aes192ctr 3 aes192ctr/aes_192_ctr.s
build aes256ctr 4 aes256ctr/aes_256_ctr.s
build aes128ctrbs 5 aes128ctrbs/aes_128_ctr_bs.s
