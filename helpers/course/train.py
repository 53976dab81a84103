"""Entry point: `python -m helpers.course.train sr|cifar` trains the course's models (the code is recipe_run.py)."""

from helpers.course.recipe_run import main

if __name__ == "__main__":
    raise SystemExit(main())
