#!/usr/bin/env bash
# make interop needs: root (network namespaces), iproute2 (`ip netns`), a JDK 17 (javac: the project's
# Java is compiled against the release jars), Maven (the jars come from Maven Central) and Go (the Go
# client's scenario program). Checks each; as root on Debian, installs what is missing from Debian's
# packages; otherwise says what to install and fails.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "rmqspec: make interop needs root (each test makes its own network namespace)" >&2; exit 2; }
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || missing+=(golang-go)
[ ${#missing[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null 2>&1; then
  echo "rmqspec: installing ${missing[*]} from Debian's packages ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "rmqspec: make interop needs ${missing[*]}; install them and run it again" >&2
exit 2
