#!/usr/bin/env python3
"""Prints one status line per exercise from a CTest JUnit file, so a run where nothing executed
on a GPU can never read as "100% tests passed".

    python3 tools/test_status.py exercise build/Testing/course-status.xml   (after make test)
    python3 tools/test_status.py check    build/Testing/course-status.xml   (after make check)

Marks:  ✔ passed   ✘ failed   ⊘ not run (why)   · untouched (the skeleton is unchanged from git)
CTest counts a skipped test (exit 77) as "not failed"; that is right for CI, whose job is to
prove the code compiles, and wrong for a learner, who wants to know whether the kernel works.
The exit status is always 0: the caller keeps CTest's own verdict.
"""
import collections
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent
PASS, FAIL, NOTRUN, UNTOUCHED = "✔", "✘", "⊘", "·"


def load(junit):
    """{test name: (status, why)} with status in PASS/FAIL/NOTRUN."""
    results = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        out = (case.findtext("system-out") or "").strip()
        if case.get("status") == "run":
            results[name] = (PASS, "")
        elif case.get("status") == "fail":
            results[name] = (FAIL, failure_reason(case, out))
        else:
            results[name] = (NOTRUN, skip_reason(case, out))
    return results


def failure_reason(case, out):
    m = re.search(r"FAILED: (index helpers: \d+/\d+ checks passed)", out)
    if m:
        return m.group(1) + " (the kernel was not run)"
    if "HANG: test case" in out:
        m = re.search(r'HANG: test case "([^"]*)"', out)
        return f'hung in "{m.group(1)}" (the watchdog ended it)' if m else "hung"
    if "EXPECTED A FAILURE, GOT A PASS" in out:
        return "passed, but it is known to be wrong: the tests missed the bug"
    if "ERROR: " in out:
        return out[out.index("ERROR: ") + 7:].splitlines()[0]
    failure = case.find("failure")
    message = failure.get("message", "") if failure is not None else ""
    return message or "failed"


def skip_reason(case, out):
    for line in out.splitlines():
        m = re.search(r"not run: (.*?)(?:\. Run it on a GPU.*)?$", line)
        if m:
            why = m.group(1).split(". ")[0]  # the cause; the remedy is in the summary
            idx = re.search(r"index helpers: (\d+/\d+) checks passed", line)
            return f"{why}|index helpers {idx.group(1)} passed" if idx else why
    skipped = case.find("skipped")
    message = skipped.get("message", "") if skipped is not None else ""
    return "not run" if not message or message.startswith("SKIP_RETURN_CODE") else message


def untouched(day, ex):
    """True when the learner's skeleton is exactly what git has (so its failure is expected)."""
    path = f"{day}/{ex}.cu"
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path], cwd=ROOT,
                             capture_output=True).returncode == 0
    same = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", path], cwd=ROOT,
                          capture_output=True).returncode == 0
    return tracked and same


def exercises():
    """[(day folder, exercise id)] in course order."""
    return sorted((p.parent.name, p.stem) for p in ROOT.glob("day*/[0-9][0-9]_*.cu"))


def by_exercise(results):
    """{exercise id: {kind: (status, why)}}; kind is exercise, solution, skeleton_fails, wrong/<bug>."""
    table = collections.defaultdict(dict)
    for name, result in results.items():
        parts = name.split("/", 2)
        if len(parts) == 3 and parts[0].startswith("day"):
            table[parts[1]][parts[2]] = result
    return table


def summary(counts, total):
    line = (f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[NOTRUN]} not run"
            f"{f', {counts[UNTOUCHED]} untouched' if counts[UNTOUCHED] else ''} (of {total})")
    if counts["ran"] == 0 and counts["skipped"]:
        line += ("\nNOTHING RAN ON A GPU: whether the kernels are correct is unknown. "
                 "Run them on a GPU (docs/colab.md).")
    elif counts["skipped"]:
        line += f"\n{counts['skipped']} did not run: their correctness is unknown."
    return line


def split_reason(why):
    """'cause|index helpers 3/3 passed' -> ('cause', 'index helpers 3/3 passed'); no | -> (why, '')."""
    cause, _, extra = why.partition("|")
    return cause, extra


def report_exercises(table):
    counts = collections.Counter()
    rows = []
    for day, ex in exercises():
        status, why = table.get(ex, {}).get("exercise", (NOTRUN, "no test registered"))
        counts["ran" if status in (PASS, FAIL) else "skipped"] += 1
        if status == PASS:
            why = "passed"
        rows.append([day, ex, status, why])
    # A reason every skipped line shares (no GPU here) is said once, under the list.
    causes = collections.Counter(split_reason(w)[0] for _, _, s, w in rows if s == NOTRUN)
    shared = causes.most_common(1)[0][0] if causes and causes.most_common(1)[0][1] > 1 else None
    print("\nYour exercises:")
    for day, ex, status, why in rows:
        if status == NOTRUN:
            cause, extra = split_reason(why)
            why = ("not run" if cause == shared else f"not run: {cause}") + (f" ({extra})" if extra else "")
        if untouched(day, ex) and status != PASS:
            note = f"; {why}"
            status, why = UNTOUCHED, f"untouched{note}; start: make hint EX={ex}"
        counts[status] += 1
        print(f"  {status} {ex:<24} {why}")
    if shared:
        print(f"(not run: {shared})")
    print(summary(counts, len(exercises())))


def report_check(table, results):
    counts = collections.Counter()
    cpu = [r for n, r in results.items() if n.startswith("cpu/")]
    if cpu:
        ok = sum(s == PASS for s, _ in cpu)
        print(f"\nCPU tests: {ok}/{len(cpu)} passed")
    # Tests of given code that is no exercise (day 11's engine: day11/engine/<case>).
    ids = {ex for _, ex in exercises()}
    given = sorted((n, r) for n, r in results.items()
                   if n.startswith("day") and len(n.split("/")) == 3 and n.split("/")[1] not in ids)
    if given:
        ran = [(n, r) for n, r in given if r[0] != NOTRUN]
        ok = sum(r[0] == PASS for _, r in ran)
        failed = [n for n, r in ran if r[0] == FAIL]
        print("\nGiven code's GPU tests: " + (f"{ok}/{len(ran)} passed" if ran else "") +
              (f"{', ' if ran else ''}{len(given) - len(ran)} not run ({split_reason(next(r[1] for _, r in given if r[0] == NOTRUN))[0]})"
               if len(ran) < len(given) else "") + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    print("\nSolutions and wrong variants (a wrong variant passes when its test rejects it):")
    for _, ex in exercises():
        kinds = table.get(ex, {})
        status, why = kinds.get("solution", (NOTRUN, "no test registered"))
        wrong = {k: v for k, v in kinds.items() if k.startswith("wrong/")}
        index = kinds.get("index")
        parts = ["solution " + {PASS: "passed", FAIL: f"FAILED ({why})",
                                NOTRUN: f"not run ({split_reason(why)[0]})"}[status]]
        for kind, (s, _) in sorted(kinds.items()):  # solution_2gpu, ...: the multi-GPU entries
            if kind.startswith("solution_") and s != NOTRUN:
                parts.append(f"{kind} " + ("passed" if s == PASS else "FAILED"))
                if s == FAIL:
                    status = FAIL
        if index and index[0] != NOTRUN:
            parts.append("index checks (CPU) " + ("passed" if index[0] == PASS else "FAILED"))
            if index[0] == FAIL:
                status = FAIL
        if wrong:
            rejected = sum(s == PASS for s, _ in wrong.values())
            notrun = sum(s == NOTRUN for s, _ in wrong.values())
            missed = [k[6:] for k, (s, _) in wrong.items() if s == FAIL]
            if notrun == len(wrong):
                parts.append(f"{len(wrong)} wrong variants not run")
            else:
                ran = len(wrong) - notrun
                note = f" ({notrun} not run: {split_reason(next(w for s, w in wrong.values() if s == NOTRUN))[0]})" \
                    if notrun else ""
                parts.append(f"wrong variants rejected {rejected}/{ran}{note}")
            if missed:
                parts.append("NOT rejected: " + ", ".join(missed))
                status = FAIL
        counts[status] += 1
        counts["ran" if status in (PASS, FAIL) else "skipped"] += 1
        print(f"  {status} {ex:<24} " + "; ".join(parts))
    print(summary(counts, len(exercises())))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("exercise", "check"):
        sys.exit(__doc__)
    junit = pathlib.Path(sys.argv[2])
    if not junit.is_file():
        print(f"(no per-exercise status: {junit} was not written; CTest >= 3.21 writes it)")
        return
    results = load(junit)
    table = by_exercise(results)
    if sys.argv[1] == "exercise":
        report_exercises(table)
    else:
        report_check(table, results)


if __name__ == "__main__":
    main()
