#!/bin/bash
# Parameters arrive as environment variables named like the parameters.
set -euo pipefail

: "${TARGET:?TARGET is required}"
echo "Target: $TARGET"
if [ "${DRY_RUN:-true}" = "true" ]; then
    echo "Dry run: nothing changed."
    exit 0
fi
# Your work on "$TARGET" here.
