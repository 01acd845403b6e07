"""Summarises a sanitizer run's logs (scripts/sanitizer-build): the number of
reports per kind and, for each distinct report, its first line and the first
stack frame in meshsim's sources. Exits 1 if there is any report.

    python3 scripts/sanitizers/summarize.py build/asan/logs
"""
import collections
import os
import re
import sys

REPORT = re.compile(r"^(==\d+==ERROR: \w+Sanitizer: .*|\w+Sanitizer: CHECK failed: .*|WARNING: ThreadSanitizer: .*|.*runtime error: .*)$")
FRAME = re.compile(r"#\d+ .* (/\S*/cpp/\S+:\d+)")


def reports(text: str):
    """(headline, first meshsim frame) of each report in one log."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = REPORT.match(line)
        if not m:
            continue
        headline = re.sub(r"0x[0-9a-f]+|\(pid=\d+\)|==\d+==", "", m.group(1)).strip()
        where = ""
        for follow in lines[i + 1:i + 40]:
            if REPORT.match(follow):
                break
            f = FRAME.search(follow)
            if f:
                where = f.group(1).split("/cpp/", 1)[1]
                break
        if "runtime error" in headline:  # UBSan names its source line first
            where = headline.split(": runtime error")[0].split("/cpp/")[-1]
            headline = "runtime error:" + headline.split("runtime error:", 1)[1]
        yield headline, where


def main(logs: str) -> int:
    counts = collections.Counter()
    distinct = collections.Counter()
    for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        with open(os.path.join(logs, name), errors="replace") as f:
            for headline, where in reports(f.read()):
                counts[name.split(".")[0]] += 1
                distinct[(headline[:160], where)] += 1
    total = sum(counts.values())
    print(f"sanitizer reports in {logs}: {total}" +
          (" (" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")" if total else ""))
    for (headline, where), n in distinct.most_common():
        print(f"  {n:5d}x {headline}  [{where or 'no meshsim frame'}]")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
