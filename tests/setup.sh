#!/usr/bin/env bash
# Installs what cargo-sample's examples and tests need on a fresh machine, and nothing twice:
# the Rust targets of the bundled firmware, and QEMU for Arm (Debian/Ubuntu packages).
#
# --with-qemu10: also unpack QEMU 10 from Debian's bookworm-backports into target/qemu-10
# (not installed system-wide), for the test that the exact-count plugin built for QEMU's newer
# plugin API counts the same there as the older one does in QEMU 7.2.
# --with-pyocd: also make a Python virtual environment in target/pyocd-venv with pyOCD from
# PyPI, whose SWO parser the tests compare ours with.
# --with-fuzz: also install cargo-fuzz from crates.io (for tests/fuzz.sh).
# --with-chromium: also install Chromium and ChromeDriver from Debian's packages (the HTML
#   report is tested in a real headless browser).
# --with-tmux: also install tmux from Debian's packages (the live top view is tested in a real
#   terminal).
# --with-windows: also add the x86_64-pc-windows-gnu target and Debian's MinGW-w64 C compiler,
# for the check that the host crate builds for Windows.
# --with-arm-gcc: also install Debian's gcc-arm-none-eabi and libnewlib-arm-none-eabi (C firmware
#   for the benchmark's comparison with cycles measured on silicon, `--silicon DIR`).
# --with-python: also make a Python virtual environment in target/py-venv with pyelftools from
# PyPI, the independent DWARF reader the symbolizer's tests compare with (tests/dwarf_oracle.py).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
with_qemu10=0
with_tmux=0
with_chromium=0
with_pyocd=0
with_fuzz=0
with_python=0
with_windows=0
with_arm_gcc=0
for arg in "$@"; do
  case "$arg" in
    --with-fuzz) with_fuzz=1 ;;
    --with-tmux) with_tmux=1 ;;
    --with-chromium) with_chromium=1 ;;
    --with-qemu10) with_qemu10=1 ;;
    --with-pyocd) with_pyocd=1 ;;
    --with-python) with_python=1 ;;
    --with-windows) with_windows=1 ;;
    --with-arm-gcc) with_arm_gcc=1 ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

targets=(thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf thumbv8m.main-none-eabihf aarch64-unknown-none)
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

if [ "$with_tmux" = 1 ] && ! command -v tmux >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing tmux" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y --no-install-recommends tmux >&2 \
    || { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends tmux >&2; }
fi

if [ "$with_arm_gcc" = 1 ] && ! command -v arm-none-eabi-gcc >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: install gcc-arm-none-eabi and newlib for it with your package manager" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing gcc-arm-none-eabi and libnewlib-arm-none-eabi" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi make >&2 \
    || { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi make >&2; }
fi

if [ "$with_chromium" = 1 ] && { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; }; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: install Chromium and ChromeDriver (/usr/bin/chromium, /usr/bin/chromedriver) with your package manager" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing Chromium and ChromeDriver" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y --no-install-recommends chromium chromium-driver >&2 \
    || { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends chromium chromium-driver >&2; }
fi

if ((with_qemu10)); then
  dest="${CARGO_TARGET_DIR:-$root/target}/qemu-10"
  if [ ! -x "$dest/usr/bin/qemu-system-arm" ]; then
    echo "setup: unpacking QEMU 10 from bookworm-backports into $dest" >&2
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/lists/partial" "$tmp/archives/partial"
    echo "deb http://deb.debian.org/debian bookworm-backports main" >"$tmp/sources.list"
    apt_opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache::Archives=$tmp/archives"
      -o APT::Sandbox::User="$(id -un)")
    apt-get "${apt_opts[@]}" -qq update >&2
    (cd "$tmp" && apt-get "${apt_opts[@]}" -qq download qemu-system-arm/bookworm-backports >&2)
    mkdir -p "$dest"
    dpkg-deb -x "$tmp"/qemu-system-arm_*.deb "$dest"
  fi
  "$dest/usr/bin/qemu-system-arm" --version 2>/dev/null | head -n 1 >&2
fi

if ((with_pyocd)); then
  venv="${CARGO_TARGET_DIR:-$root/target}/pyocd-venv"
  if ! "$venv/bin/python" -c "import pyocd.trace.swo" 2>/dev/null; then
    echo "setup: installing pyOCD into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "pyocd==0.46.0" >&2
  fi
  "$venv/bin/python" -c "import pyocd; print('pyOCD', pyocd.__version__)" >&2
fi

if ((with_windows)); then
  rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu \
    || rustup target add x86_64-pc-windows-gnu >&2
  if ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing gcc-mingw-w64-x86-64" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends gcc-mingw-w64-x86-64 >&2 \
      || { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends gcc-mingw-w64-x86-64 >&2; }
  fi
fi

if ((with_python)); then
  venv="${CARGO_TARGET_DIR:-$root/target}/py-venv"
  if ! "$venv/bin/python" -c "import elftools" 2>/dev/null; then
    echo "setup: installing pyelftools into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "pyelftools==0.32" >&2
  fi
fi

if ((with_fuzz)) && ! cargo fuzz --version >/dev/null 2>&1; then
  echo "setup: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked >&2
fi
