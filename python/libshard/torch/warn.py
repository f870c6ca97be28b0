"""Warnings that point at the user's line: the first frame outside the libshard package,
however many of its generators lie between (a stacklevel counted by hand breaks as soon as
an iteration passes through one more)."""
import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def warn(message, category=UserWarning):
    """warnings.warn at the first caller outside libshard."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2 is warn's caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
