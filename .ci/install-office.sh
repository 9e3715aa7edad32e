#!/usr/bin/env bash
# Install Debian's LibreOffice Calc (headless) and poppler-utils for the reports' tests: the
# workbook's formulas are recalculated by a real spreadsheet engine, and PDFs rendered to PNG
# with pdftoppm. Idempotent: nothing is done when both are there.
set -euo pipefail
if command -v soffice >/dev/null 2>&1 && command -v pdftoppm >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: soffice or pdftoppm is missing; install libreoffice-calc-nogui and poppler-utils" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq libreoffice-calc-nogui poppler-utils >/dev/null
