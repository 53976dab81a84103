"""Entry point: `python -m helpers.course.train sr|cifar` trains the course's models (the code is recipes.py)."""

from helpers.course.recipes import main

if __name__ == "__main__":
    raise SystemExit(main())
