"""What the .ci/ checks print and return: each problem on a line, then a count."""


def report(check, problems, what):
    """Prints `problems` and "<check>: N <what>"; returns the exit code (1 if any)."""
    for problem in problems:
        print(problem)
    print(f'{check}: {len(problems)} {what}')
    return 1 if problems else 0
