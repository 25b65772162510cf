#!/bin/sh
# layout.sh — does docs/layout.md list src/ as the files' own headers say (layout.py)?  Prints TAP.
exec "${MCFDW_PYTHON:-python3}" "$(dirname "$0")/layout.py" --check
