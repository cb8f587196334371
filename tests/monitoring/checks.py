"""fail()/check() and the exit summary shared by the monitoring test scripts: every check prints
one line, failures are collected, and finish() turns them into the exit code."""
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def check(cond, msg):
    if cond:
        print("ok  ", msg)
    else:
        fail(msg)


def finish(ok_msg):
    if failures:
        print(f"\n{len(failures)} failure(s)")
        return 1
    print(f"\n{ok_msg}")
    return 0
