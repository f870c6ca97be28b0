"""A ShardDataset's position as a state: what state_dict() returns, and what
load_state_dict() accepts (formats/order.md describes the state's text)."""
import operator
import re
from collections.abc import Mapping

#: what state_dict() returns, as a refusal names it
EXPECTED = ('{"epoch": int, "seed": int or None, "state": str or None} (ShardLoader\'s adds '
            '"next": int)')


def of_dataset(ds, epochs):
    """{"epoch", "seed", "state"} after the last batch ds handed out in this process
    (epochs: its Epochs); state None before its first."""
    seed = ds.settings.get("seed")
    if ds.shared.worker_runs != ds.worker_runs_seen:
        raise RuntimeError(
            "ShardDataset.state_dict(): this dataset was last iterated in DataLoader worker "
            "processes, whose positions this process cannot see; iterate it through "
            "libshard.torch.ShardLoader(dataset, num_workers=...) and take "
            "loader.state_dict() instead")
    if epochs.handed_state is not None and epochs.mine() is not None:
        # with device="cuda" the loader runs ahead of the batches handed out
        return {"epoch": ds.epoch, "state": epochs.handed_state, "seed": seed}
    src = epochs.mine()
    return {"epoch": ds.epoch, "state": src.state() if src is not None else None, "seed": seed}


def refuse_old(state, how):
    """A state of libshard 0.3's ShardLoader, refused with the way on (how: the call that
    starts the next epoch, e.g. "set_epoch")."""
    if "workers" in state or "states" in state:
        raise ValueError(f"this state was taken by libshard 0.3's ShardLoader, in the order "
                         f"before canonical partitions, which this libshard reads "
                         f"differently: go on from the next epoch's start, "
                         f"{how}({int(state['epoch']) + 1}), with no state")


def seed_to_take(state, settings, drawn):
    """A state's seed, for a resume, or None: taken by a dataset that drew its own (drawn:
    made without seed=, as in a new process), refused when it was given another."""
    seed = state.get("seed")
    if seed is None or seed == settings.get("seed"):
        return None
    if not drawn:
        raise ValueError(f"the state was taken with seed {seed}, this dataset was given "
                         f"seed={settings.get('seed')} (make it without seed= to take "
                         f"the state's)")
    return seed


def mode_to_take(text, settings):
    """A state's mode, for a resume, or None: taken by a dataset made without mode= (its
    default follows the world size, which a resume may change: 2 ranks' equal onto 1 rank),
    as its seed is."""
    if not text or "mode" in settings:
        return None
    m = re.search(r"[:,;]mode=(exact|equal|resampled)(?=[,;])", text)
    return m.group(1) if m else None


def check(state, who):
    """A state as load_state_dict takes it, refused at once, naming what was expected, when
    it is not one (a model's or an optimizer's state_dict, {}, another loader's)."""
    if isinstance(state, Mapping):
        refuse_old(state, "set_epoch" if who == "ShardDataset" else "loader.set_epoch")
    if not isinstance(state, Mapping) or not {"epoch", "state"} <= set(state):
        got = (f"a dict with keys {sorted(map(str, state))[:8]}" if isinstance(state, Mapping)
               else f"a {type(state).__name__}")
        raise ValueError(f"{who}.load_state_dict: this is not a libshard state: expected what "
                         f"{who}.state_dict() returns, {EXPECTED}, and got {got} (a model's "
                         f"or an optimizer's state_dict?)")
    epoch, text = state["epoch"], state["state"]
    try:
        epoch = operator.index(epoch)  # an int, or a tensor's or numpy's (torch.load)
    except TypeError:
        epoch = -1
    if isinstance(state["epoch"], bool) or epoch < 0:
        raise ValueError(f"{who}.load_state_dict: 'epoch' is {state['epoch']!r}, not an "
                         f"epoch number")
    if text is not None and not (isinstance(text, str) and text[:1] == "v"):
        raise ValueError(f"{who}.load_state_dict: 'state' is {str(text)[:80]!r}, not a reader "
                         f"state (a 'v4:EPOCH:SEED:...' text, or None at an epoch's start)")
    said = text.split(":", 2)[1] if text and text.count(":") >= 2 else None
    if said is not None and said.isdigit() and int(said) != epoch:
        raise ValueError(f"{who}.load_state_dict: 'epoch' is {epoch} and 'state' was taken in "
                         f"epoch {int(said)}: the two are one state's, saved together; an "
                         f"edited epoch would resume another epoch's order")
    return epoch, text
