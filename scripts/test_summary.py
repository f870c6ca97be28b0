#!/usr/bin/python3
"""Adds up the test cases of every meson test (criterion and pytest report their own counts)
in the testlog.json files named and prints one closing line: 'N passed, N failed, N skipped'.
--failed-builds N counts N builds that failed (their tests never ran) as failures."""
import json
import re
import sys

passed = failed = skipped = 0
args = sys.argv[1:]
if args[:1] == ["--failed-builds"]:
    failed, args = int(args[1]), args[2:]
for path in args:
    for line in open(path):
        t = json.loads(line)
        stdout = t.get("stdout") or ""
        out = stdout + (t.get("stderr") or "")
        m = re.search(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)", out)
        # pytest's closing line ends its stdout (a server thread may write to stderr after it)
        py = re.findall(r"(\d+) (passed|failed|skipped|error|errors)\b", stdout.splitlines()[-1] if stdout.strip() else "")
        if m:
            tested, ok, bad, crash = map(int, m.groups())
            passed += ok
            failed += bad + crash
            skipped += max(0, tested - ok - bad - crash)
        elif py:
            for n, what in py:
                n = int(n)
                if what == "passed":
                    passed += n
                elif what == "skipped":
                    skipped += n
                else:
                    failed += n
        elif t.get("result") == "OK":
            passed += 1
        elif t.get("result") == "SKIP":
            skipped += 1
        else:
            failed += 1
        if t.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL") and not (m and (int(m.group(3)) or int(m.group(4)))) and not any(w in ("failed", "error", "errors") for _, w in py):
            failed += 1  # the runner failed without counting a failed case (crash, timeout)
print(f"{passed} passed, {failed} failed, {skipped} skipped")
