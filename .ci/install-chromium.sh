#!/usr/bin/env bash
# Install Debian's Chromium and ChromeDriver for the dashboard's browser tests (Playwright's own
# browser download does not work on these machines; the tests launch /usr/bin/chromium).
# Idempotent: nothing is done when the browser is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: /usr/bin/chromium is missing; install Debian's chromium package (needs root)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium chromium-driver >/dev/null
/usr/bin/chromium --version
