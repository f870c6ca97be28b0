"""WebDataset's exception handlers: given the exception a stage raised, each returns True
to go on (the sample left out), False to stop, or raises."""
import warnings
from ..redact import shown


def reraise_exception(exn):
    """Raise the exception again (the default handler)."""
    raise exn


def ignore_and_continue(exn):
    """Leave the sample out and go on."""
    return True


def warn_and_continue(exn):
    """Warn, leave the sample out and go on."""
    warnings.warn(shown(repr(exn)))
    return True


def ignore_and_stop(exn):
    """End the iteration quietly."""
    return False


def warn_and_stop(exn):
    """Warn and end the iteration."""
    warnings.warn(shown(repr(exn)))
    return False


CONTINUING = (ignore_and_continue, warn_and_continue)
