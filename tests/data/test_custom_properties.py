"""Property: no graph in the custom-dataset format can crash its loader. Generated small graphs
(no nodes, isolated nodes, duplicate and self edges, edges out of range, NaN and infinite
features, labels out of range, negative or fractional, wrong dtypes and shapes, masks of the
wrong length, missing files) give either a valid load (a graph whose tensors are finite, whose
edges lie within its nodes, whose class ids are ``0..C-1`` and whose masks are disjoint) or
exactly one :class:`~gnngp_cli.errors.DatasetError`, never another exception. The number of
examples comes from the profile (:mod:`tests.properties`)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from hypothesis import event, example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gnngp_cli.data.custom import load_custom
from gnngp_cli.errors import DatasetError

from properties import examples, within

NUMBER_DTYPES = st.sampled_from(["float32", "float64", "float16", "int64", "int8", "uint8", "bool", "complex64", "<U3"])


@st.composite
def graphs(draw):
    """The files of one small graph, as a dict of file name to content (an array, or a CSV text);
    ``None`` leaves a file out."""
    n = draw(st.integers(0, 12))
    files: dict = {}
    if draw(st.booleans()):   # half of them well formed but for their graph (isolated nodes, duplicate and self edges): most load
        files["features.npy"] = draw(hnp.arrays(draw(st.sampled_from(["float32", "float64", "int8"])), (max(n, 1), draw(st.integers(1, 3))),
                                                elements=st.integers(-3, 3)))
        files["labels.npy"] = draw(hnp.arrays("int64", max(n, 1), elements=st.integers(0, 2)))
        node = st.integers(0, max(n, 1) - 1)
        files["edges.csv"] = "".join(f"{a},{b}\n" for a, b in draw(st.lists(st.tuples(node, node), max_size=20)))
        return files, draw(st.sampled_from([None, "classification", "regression"])), (0.5, 0.25)
    # features: mostly n x F of a real dtype, sometimes the wrong shape or dtype; NaN and inf allowed
    f_shape = draw(st.one_of(st.just((n, draw(st.integers(0, 4)))), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)))
    f_dtype = draw(st.one_of(st.just("float32"), NUMBER_DTYPES))
    files["features.npy"] = draw(hnp.arrays(f_dtype, f_shape)) if draw(st.integers(0, 19)) else None   # sometimes no feature file
    # labels: integers (in range, out of range, negative, huge), floats (whole or not, NaN), bool, the wrong length or shape
    label_len = draw(st.one_of(st.just(n), st.integers(0, 13)))
    labels = draw(st.one_of(
        hnp.arrays("int64", label_len, elements=st.integers(0, 3)),
        hnp.arrays("int64", label_len, elements=st.integers(-2, 10**12)),
        hnp.arrays("uint64", label_len, elements=st.integers(0, 2**64 - 1)),
        hnp.arrays("float64", label_len),
        hnp.arrays("float32", label_len, elements=st.integers(0, 3).map(float)),
        hnp.arrays("bool", label_len),
        hnp.arrays("int64", (label_len, draw(st.integers(0, 2)))),
        hnp.arrays("<U2", label_len),
    ))
    files["labels.npy"] = labels
    # edges: ids in range, out of range, negative, duplicated and self loops; sometimes a header, blank lines or junk
    ids = st.integers(-1, n) if draw(st.booleans()) else st.integers(0, max(n - 1, 0))
    pairs = draw(st.lists(st.tuples(ids, ids), max_size=30))
    if pairs and draw(st.booleans()):
        pairs += pairs[: draw(st.integers(1, len(pairs)))]   # duplicates
    lines = [f"{a},{b}" for a, b in pairs]
    if draw(st.booleans()):
        lines.insert(0, "source,target")
    if draw(st.integers(0, 9)) == 0:
        lines.append(draw(st.sampled_from(["1,2,3", "a,b", "1.5,2", ",", "nan,1", "99999999999999999999999,1", "", " 1 , 2 "])))
    files["edges.csv"] = "\n".join(lines) + ("\n" if lines else "")
    # masks: none, all three (booleans or 0/1, any length), or only some
    kind = draw(st.sampled_from(["none", "three", "some"]))
    if kind != "none":
        names = ["train_mask", "val_mask", "test_mask"] if kind == "three" else draw(st.lists(st.sampled_from(["train_mask", "val_mask", "test_mask"]),
                                                                                              min_size=1, max_size=2, unique=True))
        for name in names:
            length = draw(st.one_of(st.just(n), st.integers(0, 13)))
            files[f"{name}.npy"] = draw(st.one_of(hnp.arrays("bool", length), hnp.arrays("int8", length, elements=st.integers(-1, 2)),
                                                  hnp.arrays("float64", length)))
    task = draw(st.sampled_from([None, None, "classification", "regression"]))
    ratios = draw(st.sampled_from([(0.5, 0.25), (0.0, 0.0), (1.0, 0.0), (0.3, 0.3)]))
    return files, task, ratios


def _write(folder: Path, files: dict) -> None:
    for name, content in files.items():
        if content is None:
            continue
        if isinstance(content, str):
            (folder / name).write_text(content, encoding="utf-8")
        else:
            np.save(folder / name, content, allow_pickle=False)


def _check_loaded(data) -> None:
    """What a valid load promises the job."""
    n = data.x.size(0)
    assert data.x.dim() == 2 and n > 0 and bool(torch.isfinite(data.x).all())
    assert data.edge_index.dim() == 2 and data.edge_index.size(0) == 2
    if data.edge_index.numel():
        assert int(data.edge_index.min()) >= 0 and int(data.edge_index.max()) < n
    assert data.y.shape == (n,)
    if data.task == "classification":
        assert not data.y.is_floating_point() and data.num_classes >= 1
        assert int(data.y.min()) >= 0 and int(data.y.max()) < data.num_classes
    masks = [data[m] for m in ("train_mask", "val_mask", "test_mask")]
    assert all(m.dtype == torch.bool and m.shape == (n,) for m in masks)


def _load(files: dict, task, ratios) -> str:
    """``load_custom`` on the files: ``refused`` (one DatasetError) or ``loaded (<task>)``, checked by :func:`_check_loaded`."""
    folder = Path(tempfile.mkdtemp(prefix="gnngp-graph-"))
    try:
        _write(folder, files)
        try:
            data = load_custom(str(folder), task, ratios[0], ratios[1], seed=0)
        except DatasetError as err:
            assert "\n" not in str(err).strip(), f"a refusal in more than one line: {err}"
            return "refused"
        _check_loaded(data)
        return f"loaded ({data.task})"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _graph(n=4, **files):
    base = {"features.npy": np.ones((n, 2), np.float32), "labels.npy": np.arange(n) % 2, "edges.csv": "0,1\n1,2\n"}
    return {**base, **files}


# the examples the generators found, kept as regression cases
@example(case=(_graph(features=np.ones((0, 2))), None, (0.5, 0.25)))
@example(case=(_graph(**{"edges.csv": "0,0\n0,0\n1,1\n"}), None, (0.5, 0.25)))
@example(case=(_graph(features=np.full((4, 2), np.nan)), None, (0.5, 0.25)))
@example(case=(_graph(**{"labels.npy": np.array([0, 1, 7, 10**12])}), None, (0.5, 0.25)))
@example(case=(_graph(**{"labels.npy": np.array([0.0, np.nan, 1.0, 2.0])}), "regression", (0.5, 0.25)))
@example(case=(_graph(**{"edges.csv": "source,target\n1,2,3\n"}), None, (0.5, 0.25)))
@example(case=(_graph(features=np.ones((4, 0))), None, (0.5, 0.25)))
@example(case=(_graph(**{"edges.csv": ""}), None, (0.5, 0.25)))
@example(case=(_graph(**{"edges.csv": "\n\n"}), None, (0.5, 0.25)))
@examples(ci=60)
@given(case=graphs())
def test_generated_graphs_load_or_give_one_dataset_error(case):
    files, task, ratios = case
    with within(30, f"loading {sorted(files)}"):
        event(_load(files, task, ratios))


def test_listed_self_loops_are_left_out_and_a_class_without_training_nodes_is_said(tmp_path, capsys):
    """A trial: a self-loop in edges.csv weighed its node 2 in I + A (node 1 of 0-1, 1-2 had
    weight 0.5, not 1/3; accuracy 0.5833 against 0.5000 without the loop), and a class with val and
    test nodes but no training node ran silently."""
    from gnngp_cli.graph.operators import normalized_adjacency

    n = 6
    np.save(tmp_path / "features.npy", np.eye(n))
    np.save(tmp_path / "labels.npy", np.array([0, 0, 1, 1, 2, 2]))
    for name, mask in (("train_mask", [1, 0, 1, 0, 0, 0]), ("val_mask", [0, 1, 0, 0, 1, 0]), ("test_mask", [0, 0, 0, 1, 0, 1])):
        np.save(tmp_path / f"{name}.npy", np.array(mask, dtype=bool))
    (tmp_path / "edges.csv").write_text("0,1\n1,2\n1,1\n3,4\n")
    data = load_custom(str(tmp_path), None, 0.5, 0.25, 0)
    err = capsys.readouterr().err
    assert "lists 1 node linked to itself; those self-loops are left out" in err
    assert "class 2 of " in err and "has validation or test nodes but no training node" in err and len(data.warnings) == 2
    ei, w = normalized_adjacency(data.edge_index, n, "sym", dtype=torch.float64)
    own = {(int(a), int(b)): float(x) for a, b, x in zip(ei[0], ei[1], w)}
    assert own[(1, 1)] == __import__("pytest").approx(1 / 3)   # node 1: itself, 0 and 2 in I + A, each 1 / 3 (it was 2 / 4)
    (tmp_path / "edges.csv").write_text("0,1\n1,2\n3,4\n")
    np.save(tmp_path / "train_mask.npy", np.array([1, 0, 1, 0, 1, 0], dtype=bool))
    assert load_custom(str(tmp_path), None, 0.5, 0.25, 0).warnings == [] and capsys.readouterr().err == ""


def test_a_ratio_that_rounds_to_no_node_is_said_as_the_rounding(tmp_path):
    """A trial: a 4-node custom graph said 'the training set is empty; give a training mask or a
    positive dataset.train_ratio', and train_ratio was the positive 0.1 (round(0.4) = 0)."""
    import pytest

    np.save(tmp_path / "features.npy", np.eye(4))
    np.save(tmp_path / "labels.npy", np.array([0, 1, 0, 1]))
    (tmp_path / "edges.csv").write_text("0,1\n2,3\n")
    with pytest.raises(DatasetError, match=r"dataset.train_ratio=0.1 of the 4 nodes of .* rounds to no training node; give masks .* or "
                                           r"dataset.train_ratio of at least 0.25"):
        load_custom(str(tmp_path), None, 0.1, 0.5, 0)
