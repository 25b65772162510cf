#!/bin/sh
# engine_layer.sh — run engine_layer.py (the request engine is the one way
# to the sockets).  Prints TAP.
exec "${MCFDW_PYTHON:-python3}" "$(dirname "$0")/engine_layer.py"
