#!/bin/sh
# structure.sh — run structure.py (no call cycle among src/*.c).  Prints TAP.
exec "${MCFDW_PYTHON:-python3}" "$(dirname "$0")/structure.py"
