"""Entry point: `python -m helpers.train sr|cifar` trains the course's models (the code is helpers.course.recipes)."""

from helpers.course.recipes import main

if __name__ == "__main__":
    raise SystemExit(main())
