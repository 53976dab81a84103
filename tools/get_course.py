# Get this course into a running Python that lacks it: Colab, or a Jupyter started outside `make lab`.
#
# Every notebook's setup cell (written by tools/sync_notebooks.py) tries `import helpers`; when that fails it downloads
# this file from the course's repository and runs it with exec(). It finds the course in the working folder or a folder
# above it, or in $COURSE_COLAB_ROOT (default /content); failing that it clones $COURSE_REPOSITORY_URL (default: the
# repository below, which `make sync-notebooks` writes) there with `git clone --depth 1`. Then it runs that checkout's
# tools/colab_setup.py: install what the course needs and this Python lacks, put `helpers` on the path, no restart.
#
# Comments rather than a docstring, and everything inside one function that deletes itself: exec() runs this in the
# notebook's namespace, and it leaves no name there. Standard library only: nothing of the course is importable yet.


def _get_course(repository: str = "https://github.com/feeding-the-gpu/feeding-the-gpu") -> None:
    import os
    import pathlib
    import runpy
    import subprocess
    import time

    url = os.getenv("COURSE_REPOSITORY_URL", repository)
    colab_root = pathlib.Path(os.getenv("COURSE_COLAB_ROOT", "/content"))
    clone = colab_root / url.rstrip("/").split("/")[-1].removesuffix(".git")
    places = [pathlib.Path.cwd(), *pathlib.Path.cwd().parents, clone]
    root = next((p for p in places if (p / "tools" / "colab_setup.py").is_file()), None)
    if root is None:
        start, root = time.perf_counter(), clone
        print(f"course setup: cloning {url} into {clone}", flush=True)
        git = ["git", "clone", "--quiet", "--depth", "1", url, str(clone)]
        done = subprocess.run(git, capture_output=True, text=True)
        if done.returncode:
            hint = f"Clone the course into {colab_root} yourself, or set COURSE_REPOSITORY_URL."
            raise RuntimeError(f"course setup: {' '.join(git)} failed: {done.stderr.strip()}\n{hint}")
        print(f"course setup: cloned in {time.perf_counter() - start:.1f} s", flush=True)
    else:
        print(f"course setup: found the course at {root}", flush=True)
    runpy.run_path(str(root / "tools" / "colab_setup.py"))["setup_course"](root)


try:
    _get_course()
finally:
    del _get_course
