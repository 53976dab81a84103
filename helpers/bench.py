"""Entry point: `python -m helpers.bench sr|cifar` runs a loader ladder (the code is helpers.course.ladders)."""

from helpers.course.ladders import main

if __name__ == "__main__":
    raise SystemExit(main())
