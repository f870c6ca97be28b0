"""What len() says when it has no count: the shards of a dataset's specs as listed, a local
shard that does not exist (with a hint when a manifest was copied away from its shards), or
the shards without a sample count."""
import os

from .. import _libshard
from .. import settings as _settings
from ..redact import shown


def _specs(urls):
    """The dataset's specs, a mix's sources' flattened."""
    if not (urls and isinstance(urls[0], tuple)):
        return list(urls)
    return [u for spec, _ in urls for u in ([spec] if isinstance(spec, str) else spec)]


def shard_list(urls, settings):
    """[(url, count or None, index)] of the specs, with the dataset's remote settings."""
    remote = {k: v for k, v in settings.items() if k in _settings.REMOTE_KEYS}
    return _libshard.list_shards(_specs(urls), **remote)


def local_path(u):
    """The file a local shard URL names (a path or file:///PATH), else None."""
    if u.startswith("file://"):
        return u[len("file://"):] if u.startswith("file:///") else None
    return None if "://" in u or u.startswith("pipe:") else u


def missing_shard(urls, settings, listed=None):
    """The first local shard that does not exist, or None (also when the list cannot be
    read here: a manifest of commands, for one; the epoch says what is wrong)."""
    if listed is None:
        try:
            listed = shard_list(urls, settings)
        except (ValueError, OSError, _libshard.ShardError):
            return None
    for u, *_ in listed:
        p = local_path(u)
        if p is not None and not os.path.exists(p):
            return u
    return None


def moved_hint(urls):
    """What to say of a missing shard when the specs hold a manifest: its shard names
    resolve against its own folder (a manifest copied away from its shards)."""
    if any(str(s).endswith(".json") for s in _specs(urls)):
        return " (a manifest's shard names resolve against the manifest's own folder)"
    return ""


def no_count(urls, settings):
    """Why len() has no count, naming the shards: a missing one, or those without an
    index."""
    listed = shard_list(urls, settings)
    missing = missing_shard(urls, settings, listed)
    if missing:
        return FileNotFoundError(f"len(): shard {shown(missing)} does not exist{moved_hint(urls)}")
    uncounted = [u for u, n, _ in listed if n is None]
    named = ", ".join(map(shown, uncounted[:3])) + (f" and {len(uncounted) - 3} more"
                                                    if len(uncounted) > 3 else "")
    return TypeError(f"len() needs sample counts: a manifest, a .idx beside every shard, or "
                     f"make_indexes other than 'never'; {len(uncounted)} shard(s) have "
                     f"none: {named}")
