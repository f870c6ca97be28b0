"""URLs as libshard shows them in its messages, warnings and prints: without a user and
password, and with the query (a signed URL's signature, a token) replaced by "?..."
(shard_url_display). A sample's own __url__ keeps the URL as given."""
from ._libshard import url_display


def shown(value):
    """str(value) as a message may show it: URLs inside redacted, lists and tuples item by
    item (as their repr)."""
    if isinstance(value, str):
        return url_display(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(shown_repr(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return url_display(str(value))


def shown_repr(value):
    """repr(value) with its URLs redacted."""
    if isinstance(value, str):
        return repr(url_display(value))
    if isinstance(value, (list, tuple)):
        return shown(value)
    return url_display(repr(value))
