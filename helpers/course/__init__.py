"""The course layer: profiles, data locations and stand-ins, the traditional baselines the lessons measure, the ladders
(the engine, the SR and CIFAR ladders, their steps and command line) and recipes, the verdicts, plots, and the runner
with its report. It imports the library in `helpers`; nothing in the library imports it."""
