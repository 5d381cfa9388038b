# Sourced by the other scripts: installs what a bare Debian machine with Rust lacks.
# Elixir/OTP come from the OS packages; nothing comes from Hex.
if ! command -v mix >/dev/null 2>&1 || ! command -v erl >/dev/null 2>&1; then
  echo "==> installing Elixir and Erlang/OTP from the Debian packages"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq elixir erlang-dev erlang-nox >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "hrw needs the Rust toolchain (cargo) on PATH" >&2
  exit 1
fi
export LANG="${LANG:-C.UTF-8}" LC_ALL="${LC_ALL:-C.UTF-8}"
