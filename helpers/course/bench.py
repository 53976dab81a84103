"""Entry point: `python -m helpers.course.bench sr|cifar` runs a loader ladder (the code is ladder_cli.py)."""

from helpers.course.ladder_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
