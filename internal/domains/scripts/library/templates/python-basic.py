#!/usr/bin/env python3
"""Parameters arrive as environment variables; print what a technician should read."""
import os
import platform
import sys


def main() -> int:
    print(f"Running on {platform.node()} ({platform.system()} {platform.release()})")
    target = os.environ.get("TARGET", "")
    if not target:
        print("TARGET is required", file=sys.stderr)
        return 2
    # Your work here.
    return 0


if __name__ == "__main__":
    sys.exit(main())
