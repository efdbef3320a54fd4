#!/usr/bin/env bash
# The report's browser test (tests/cli/test_report_browser.py) renders
# report.html in a real headless Chromium. Check for it; when missing and we
# are root on Debian, install Debian's `chromium`; otherwise say how to
# install it and fail.
set -euo pipefail

find_chromium() {
  local name
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if find_chromium >/dev/null; then
  exit 0
fi
echo "rmqspec: the report's browser test needs Chromium (not found on PATH)." >&2
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "rmqspec: installing Debian's chromium ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  if path=$(find_chromium); then
    echo "rmqspec: Chromium installed at ${path}." >&2
    exit 0
  fi
  echo "rmqspec: apt-get install chromium did not provide a chromium binary." >&2
  exit 1
fi
cat >&2 <<'MSG'
Install Chromium and make `chromium` available on PATH, for example:
  Debian:         sudo apt-get install chromium
  Ubuntu:         sudo apt-get install chromium-browser   (or: sudo snap install chromium)
  Fedora/RHEL:    sudo dnf install chromium
  macOS:          brew install --cask chromium
Then run scripts/ensure-chromium.sh again (or `make test`).
MSG
exit 1
