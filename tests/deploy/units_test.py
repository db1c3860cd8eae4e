#!/usr/bin/env python3
"""Checks the systemd units in deploy/systemd/ with `systemd-analyze verify` (ctest
deploy_units_test), after pointing ExecStart at this build's binaries, and that each keeps the
hardening options docs/operations.md promises. Exit 77 (skipped) without systemd-analyze.

Usage: units_test.py SOURCE_ROOT BINARY_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

REQUIRED = {
    "gpupoold.service": ["User=gpupool", "NoNewPrivileges=yes", "ProtectSystem=strict",
                         "PrivateDevices=yes", "CapabilityBoundingSet=", "StateDirectory=gpupool",
                         "SystemCallFilter=@system-service", "KillMode=mixed"],
    "gpupool-agent.service": ["NoNewPrivileges=yes", "ProtectSystem=full", "Delegate=yes",
                              "KillMode=process", "StateDirectory=gpupool-agent"],
}


def main():
    root, bindir = sys.argv[1], sys.argv[2]
    analyze = shutil.which("systemd-analyze")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for unit, options in REQUIRED.items():
            text = open(os.path.join(root, "deploy", "systemd", unit), encoding="utf-8").read()
            lines = {l.strip() for l in text.splitlines()}
            for o in options:
                if o not in lines:
                    errors.append(f"{unit}: missing '{o}'")
            text = text.replace("/usr/local/bin/", os.path.abspath(bindir) + "/")
            path = os.path.join(tmp, unit)
            open(path, "w", encoding="utf-8").write(text)
            paths.append(path)
        if analyze is None:
            print("systemd-analyze not found; option checks only")
        else:
            r = subprocess.run([analyze, "verify", *paths], capture_output=True, text=True)
            # Only complaints about our units count (the host's own units may be odd).
            ours = [l for l in (r.stdout + r.stderr).splitlines()
                    if any(u in l for u in REQUIRED)]
            errors += ours
            if r.returncode != 0 and not ours:
                print(f"systemd-analyze exited {r.returncode} without naming our units:\n{r.stderr}")
    for e in errors:
        print(e)
    if not errors:
        print(f"{len(REQUIRED)} units verified")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
