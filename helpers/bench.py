"""Entry point: `python -m helpers.bench sr|cifar` runs a loader ladder (the code is helpers.course.ladder_cli)."""

from helpers.course.ladder_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
