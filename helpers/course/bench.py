"""Entry point: `python -m helpers.course.bench sr|cifar` runs a loader ladder (the code is ladders.py)."""

from helpers.course.ladders import main

if __name__ == "__main__":
    raise SystemExit(main())
