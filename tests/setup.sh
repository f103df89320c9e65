#!/usr/bin/env bash
# Installs what cargo-sample's examples and tests need on a fresh machine, and nothing twice:
# the Rust targets of the bundled firmware, and QEMU for Arm (Debian/Ubuntu packages).
set -euo pipefail

targets=(thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf thumbv8m.main-none-eabihf)
installed=$(rustup target list --installed 2>/dev/null || true)
missing=()
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$installed" || missing+=("$t")
done
if ((${#missing[@]})); then
  echo "setup: adding Rust targets ${missing[*]}" >&2
  rustup target add "${missing[@]}" >&2
fi
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >&2
done

if ! command -v qemu-system-arm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing qemu-system-arm" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends qemu-system-arm >&2 \
      || { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends qemu-system-arm >&2; }
  else
    echo "setup: install QEMU for Arm (qemu-system-arm) with your package manager" >&2
    exit 1
  fi
fi
qemu-system-arm --version | head -n 1 >&2
