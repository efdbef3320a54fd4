#!/usr/bin/env bash
# PySpark needs Java 17+. Check for it; when missing and we are root on Debian,
# install default-jre-headless; otherwise say how to install it and fail.
set -euo pipefail

java_major() {
  command -v java >/dev/null 2>&1 || { echo 0; return; }
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

major=$(java_major)
if [ "${major:-0}" -ge 17 ] 2>/dev/null; then
  exit 0
fi
echo "rmqspec: PySpark needs Java 17 or newer (found: ${major:-none})." >&2
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "rmqspec: installing Debian's default-jre-headless ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq default-jre-headless >/dev/null
  major=$(java_major)
  if [ "${major:-0}" -ge 17 ] 2>/dev/null; then
    echo "rmqspec: Java ${major} installed." >&2
    exit 0
  fi
  echo "rmqspec: default-jre-headless did not provide Java 17+ (found: ${major:-none})." >&2
  exit 1
fi
cat >&2 <<'MSG'
Install a Java 17+ runtime and make `java` available on PATH, for example:
  Debian/Ubuntu:  sudo apt-get install default-jre-headless
  Fedora/RHEL:    sudo dnf install java-17-openjdk-headless
  macOS:          brew install openjdk@17
MSG
exit 1
