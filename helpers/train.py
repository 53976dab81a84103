"""Entry point: `python -m helpers.train sr|cifar` trains the course's models (the code is helpers.course.recipe_run)."""

from helpers.course.recipe_run import main

if __name__ == "__main__":
    raise SystemExit(main())
