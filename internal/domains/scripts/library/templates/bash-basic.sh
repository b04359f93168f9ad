#!/bin/bash
# Stops at the first failing command and says where it failed.
set -euo pipefail
trap 'echo "failed at line $LINENO: $BASH_COMMAND" >&2' ERR

echo "Running on $(hostname) as $(id -un)"
# Your work here. Exit 0 for success; any other code is a failure (see the exit-code mapping).
