"""The course layer: profiles, data locations and stand-ins, the traditional baselines the lessons measure, the ladders
(the engine, the SR and CIFAR ladders, their steps and command line, `python -m helpers.course.bench`) and recipes
(`python -m helpers.course.train`), the verdicts, plots, and the runner with its report. It imports the library in
`helpers`; nothing in the library imports it. It is not installed by `pip install .`: it runs from the course's
checkout."""
