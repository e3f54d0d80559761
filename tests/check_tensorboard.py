#!/usr/bin/env python3
"""Reads the event files of `[log] tensorboard = DIR` with TensorBoard's own reader (the
`tensorboard` package from PyPI, an independent implementation of the format) and prints every
scalar series it finds: tag, points, first and last (step, value). CI does not need it;
tests/test_tensorboard.sh checks the framing and CRCs without it.

    pip install tensorboard
    python3 tests/check_tensorboard.py DIR [--expect TAG...]   # exit 1 if an expected tag is missing
"""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    folder = sys.argv[1]
    expect = sys.argv[sys.argv.index("--expect") + 1:] if "--expect" in sys.argv else []
    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag in sorted(tags):
        points = acc.Scalars(tag)
        print("%-28s %4d points  first step %d = %.6g  last step %d = %.6g" % (
            tag, len(points), points[0].step, points[0].value, points[-1].step, points[-1].value))
    missing = [t for t in expect if t not in tags]
    if missing:
        print("missing: " + ", ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
