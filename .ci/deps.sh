#!/usr/bin/env bash
# Installs the servers the test suite starts, when they are missing:
# PostgreSQL (initdb, pg_ctl, postgres), redis-server, chromium (the
# console's browser tests) and promtool (from Debian's prometheus package:
# the alert rules test). Tests start their
# own throwaway instances on random loopback ports; nothing is started here.
set -euo pipefail

have_postgres() {
  command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

missing=()
have_postgres || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing ${missing[*]}: install them (for example: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
