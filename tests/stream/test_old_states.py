"""States libshard 0.5 took (main at 2d5925e; data/states-0.5/states.json, made by
old_states.py) resume on this build and deliver exactly the samples 0.5 delivered after
them: exact, equal on 2 ranks of 2 workers, a mix, plain tars without counts. The control:
the same state with one compared setting changed is refused, naming it."""
import json

import pytest

from .old_states import CASES, DATA, args_for, make_shards

OLD = json.loads(DATA.read_text())


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("old-states") / "shards"
    make_shards(folder)
    return folder


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_state_of_libshard_0_5_resumes_where_it_left_off(stream, shards, tmp_path, case):
    old = OLD["cases"][case]
    assert old["after"], "a state taken at the epoch's end tests nothing"
    args = args_for(case, shards) + ["--index-cache", str(tmp_path / "idx")]
    after = stream(*args, "--state", old["state"]).ok().keys
    assert after == old["after"], (
        f"{case}: resumed from libshard 0.5's state, this build delivers {len(after)} "
        f"samples, 0.5 delivered {len(old['after'])}; first difference at "
        f"{next((i for i, (a, b) in enumerate(zip(after, old['after'])) if a != b), None)}")


def test_an_old_state_with_another_setting_is_refused(stream, shards, tmp_path):
    old = OLD["cases"]["exact"]
    args = args_for("exact", shards) + ["--index-cache", str(tmp_path / "idx")]
    args[args.index("--shuffle") + 1] = "31"
    r = stream(*args, "--state", old["state"])
    assert r.rc != 0 and "shuffle_buffer (shuffle=) is 30 in the state and 31 here" in r.err, r.err
