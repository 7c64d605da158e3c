#!/usr/bin/env python3
"""Builds the scan-logs benchmark corpus from real Flink logs (issue 42), deterministically.

Every JobManager and TaskManager log captured from a real cluster, of every scenario
(tests/fixtures/flink-*/*/logs/* and, when present, ../shared/fixtures/flink-*/*/logs/*),
taken once each (the shared captures are byte-identical copies of some of the test fixtures:
duplicates by content are dropped), in the order of their path below fixtures/
(flink-<version>/<scenario>/logs/<file>), a newline added to a file that lacks a final one,
concatenated and repeated until the output holds at least SIZE_MB MiB, cut at a whole copy.

The same fixtures give the same bytes on every machine (the script prints the SHA-256), so
CI builds the file the figures in docs/performance.md were measured on.

usage: log-corpus.py OUT_FILE [--mb 300] [--versions 1.17.2,2.3.0] [--root REPO]
"""

import argparse
import glob
import hashlib
import os
import sys


def fixture_logs(root, versions):
    """(key, bytes) of every distinct captured log, ordered by key."""
    seen = {}
    bases = [os.path.join(root, "tests", "fixtures"), os.path.join(root, "..", "shared", "fixtures")]
    for base in bases:
        for path in glob.glob(os.path.join(base, "flink-*", "*", "logs", "*")):
            if not os.path.isfile(path):
                continue
            key = os.path.relpath(path, base)
            version = key.split(os.sep)[0][len("flink-"):]
            if versions and version not in versions:
                continue
            with open(path, "rb") as f:
                data = f.read()
            if data and not data.endswith(b"\n"):
                data += b"\n"
            digest = hashlib.sha256(data).digest()
            # The first key (in sorted order) names a content seen under several paths.
            if digest not in seen or key < seen[digest][0]:
                seen[digest] = (key, data)
    return sorted(seen.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=int, default=300, help="at least this many MiB (default 300)")
    ap.add_argument("--versions", default="", help="only these Flink versions, comma-separated")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = ap.parse_args()
    versions = {v for v in args.versions.split(",") if v}
    logs = fixture_logs(args.root, versions)
    if not logs:
        sys.exit("log-corpus.py: no fixture logs found under " + args.root)
    once = b"".join(data for _, data in logs)
    copies = -(-(args.mb << 20) // len(once))
    tmp = args.out + ".tmp"
    digest = hashlib.sha256()
    with open(tmp, "wb") as f:
        for _ in range(copies):
            f.write(once)
            digest.update(once)
    os.replace(tmp, args.out)
    jm = sum(1 for k, _ in logs if "standalonesession" in k)
    print(
        f"{args.out}: {len(logs)} distinct logs ({jm} JobManager, {len(logs) - jm} TaskManager, "
        f"{len({k.split(os.sep)[0] for k, _ in logs})} versions, "
        f"{len({os.sep.join(k.split(os.sep)[:2]) for k, _ in logs})} captures), "
        f"{len(once)} bytes once, {copies} copies, {copies * len(once)} bytes, sha256 {digest.hexdigest()}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
