"""A ShardDataset's position as a state: what state_dict() returns, and what
load_state_dict() accepts (formats/order.md describes the state's text)."""


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


def take_seed(ds, state):
    """A state's seed, for a resume: taken when ds drew its own (made without seed=, as in
    a new process), refused when it was given another."""
    seed = state.get("seed")
    if seed is None or seed == ds.settings.get("seed"):
        return
    if not ds.seed_drawn:
        raise ValueError(f"the state was taken with seed {seed}, this dataset was given "
                         f"seed={ds.settings.get('seed')} (make it without seed= to take "
                         f"the state's)")
    ds.settings["seed"] = seed
