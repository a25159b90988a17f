"""Generates the Python SDK from openapi/openapi.json into the directory given, with
openapi-python-client and sdk/config.yaml. Exits non-zero if the generator warns: a warning
means part of the API is missing from the client, and CI should say so.

Usage: python sdk/generate.py OUTPUT_DIR   (`make sdk` writes build/sdk/loopwright-client)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "openapi" / "openapi.json"
CONFIG = ROOT / "sdk" / "config.yaml"
PACKAGE = "loopwright_client"
BIN = Path(sys.executable).parent  # this virtualenv's scripts, not resolved past its link


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    output = Path(argv[0])
    if (output / PACKAGE).is_dir():
        # A fresh tree: the generator's --overwrite leaves the files of removed operations.
        shutil.rmtree(output)
    elif output.exists():
        print(f"{output} exists and holds no generated client: not replacing it", file=sys.stderr)
        return 2
    # The generator formats its output with ruff (post hooks), found on PATH.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [
        str(BIN / "openapi-python-client"),
        "generate",
        f"--path={DOCUMENT}",
        f"--config={CONFIG}",
        f"--output-path={output}",
        "--fail-on-warning",
    ]
    return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
