#!/bin/sh
# structure.sh — run structure.py (the layer folders of src/ and their rules).  Prints TAP.
exec "${MCFDW_PYTHON:-python3}" "$(dirname "$0")/structure.py"
