#!/bin/sh
# A check with graded results: exit 0 healthy, 1 warning, 2 critical. The template's
# exit-code mapping turns 1 into a medium and 2 into a critical failure.
value=$(df -P / | awk 'NR==2 {print $5+0}')
echo "Root filesystem ${value}% used"
if [ "$value" -ge "${CRITICAL:-95}" ]; then exit 2; fi
if [ "$value" -ge "${WARNING:-85}" ]; then exit 1; fi
exit 0
