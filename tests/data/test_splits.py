"""The dev split carved from train (tapt.data.splits, data.dev_from_train)."""

from __future__ import annotations

import random

import pytest

from tapt.data.beir import BeirDataset, DataError, Passage, write_beir
from tapt.data.relevance import BEIR
from tapt.data.sources import load_data
from tapt.data.splits import carve_dev, ids_digest


def beir_like(queries: int = 60, order_seed: int | None = None) -> BeirDataset:
    """A binary dataset: query qN judges passage pN relevant; q0..q4 judge nothing relevant."""
    ids = [f"q{i}" for i in range(queries)]
    if order_seed is not None:
        random.Random(order_seed).shuffle(ids)
    qrels = {q: {f"p{q[1:]}": 0 if int(q[1:]) < 5 else 1} for q in ids}
    corpus = {f"p{i}": Passage(text=f"passage {i}") for i in range(queries)}
    return BeirDataset(corpus=corpus, queries={q: f"query {q}" for q in ids},
                       qrels={"train": qrels, "test": {}}, rule=BEIR)


def test_carve_is_disjoint_by_query_and_loses_no_judgment():
    data = beir_like()
    carved = carve_dev(data, size=10, seed=3)
    dev, train = carved.split("dev"), carved.split("train")
    assert len(dev) == 10
    assert not set(dev) & set(train)
    assert {**dev, **train} == data.split("train")
    assert all(any(grade >= 1 for grade in docs.values()) for docs in dev.values())
    assert carved.carved == {"carved_from": "train", "split": "dev", "seed": 3, "queries": 10,
                             "remaining_train_queries": 50, "ids_digest": ids_digest(dev),
                             "by": "group", "groups": 10, "overlap": 0}
    assert "dev" not in data.qrels  # the input dataset is not changed


def test_carve_is_identical_for_a_seed_in_any_file_order():
    first = carve_dev(beir_like(), size=12, seed=7).split("dev")
    shuffled = carve_dev(beir_like(order_seed=1), size=12, seed=7).split("dev")
    assert set(first) == set(shuffled)
    assert set(carve_dev(beir_like(), size=12, seed=8).split("dev")) != set(first)


def test_a_larger_carve_by_query_contains_the_smaller_one():
    small = set(carve_dev(beir_like(), size=5, seed=0, by="query").split("dev"))
    large = set(carve_dev(beir_like(), size=20, seed=0, by="query").split("dev"))
    assert small < large


def shared_passages(groups: int = 30, size: int = 3) -> BeirDataset:
    """``groups`` chains of ``size`` queries: g{i}q{j} judges passages p{i}_{j} and
    p{i}_{j+1} relevant, so each chain shares passages along it (SciFact-like: claims
    that cite one abstract) and no two chains share any."""
    qrels, corpus = {}, {}
    for g in range(groups):
        for j in range(size):
            qrels[f"g{g}q{j}"] = {f"p{g}_{j}": 1, f"p{g}_{j + 1}": 1}
        corpus.update({f"p{g}_{j}": Passage(text=f"passage {g} {j}") for j in range(size + 1)})
    return BeirDataset(corpus=corpus, queries={q: f"query {q}" for q in qrels},
                       qrels={"train": qrels}, rule=BEIR)


def trained_positives(dataset: BeirDataset) -> set[str]:
    return {doc for docs in dataset.split("train").values() for doc, g in docs.items() if g}


def test_the_default_carve_keeps_every_dev_passage_out_of_training():
    data = shared_passages()
    carved = carve_dev(data, size=12, seed=0)
    dev = carved.split("dev")
    assert len(dev) == 12 and carved.carved["by"] == "group"
    assert carved.carved["groups"] == 4 and carved.carved["overlap"] == 0
    dev_passages = {doc for docs in dev.values() for doc in docs}
    assert not dev_passages & trained_positives(carved)
    # whole chains: a query is in dev exactly when its chain-mates are
    chains = {q.split("q")[0] for q in dev}
    assert set(dev) == {f"{g}q{j}" for g in chains for j in range(3)}


def test_carving_by_query_leaks_and_says_so(caplog):
    data = shared_passages()
    with caplog.at_level("WARNING"):
        carved = carve_dev(data, size=12, seed=0, by="query")
    assert carved.carved["by"] == "query" and carved.carved["groups"] == 12
    dev_passages = {d for docs in carved.split("dev").values() for d in docs}
    assert dev_passages & trained_positives(carved)
    assert carved.carved["overlap"] > 0
    assert "rewards memorising" in caplog.text


def test_groups_that_do_not_fit_are_passed_over_for_smaller_ones():
    data = shared_passages(groups=10, size=4)  # every group holds 4 queries
    assert len(carve_dev(data, size=10, seed=0).split("dev")) == 8  # two groups, not three
    with pytest.raises(DataError, match="larger than the 3 dev queries"):
        carve_dev(data, size=3, seed=0)


def test_a_fraction_counts_queries_with_a_relevant_passage():
    carved = carve_dev(beir_like(), size=0.1, seed=0)  # 55 eligible queries
    assert len(carved.split("dev")) == round(0.1 * 55)


@pytest.mark.parametrize("size", [55, 100, 0])
def test_a_carve_that_leaves_nothing_to_train_is_refused(size):
    with pytest.raises(DataError, match="dev carve"):
        carve_dev(beir_like(), size=size, seed=0)


def test_a_dataset_with_its_own_dev_split_is_not_carved(tiny_beir_path):
    data = load_data(tiny_beir_path, splits=["train", "dev"])
    with pytest.raises(DataError, match="already has a 'dev' split"):
        carve_dev(data, size=2, seed=0)


def recipe_for(folder, **data):
    import yaml

    from tapt.recipe import load_recipe

    path = folder.parent / f"{folder.name}-recipe.yaml"
    path.write_text(yaml.safe_dump({"model": {"name": "unused-model"},
                                    "data": {"path": str(folder), **data},
                                    "output_dir": str(folder.parent / "run")}))
    return load_recipe(path)


def test_recipe_key_carves_from_train_and_refuses_a_folder_with_dev(tmp_path, tiny_beir_path):
    from tapt.data.beir import load_beir_folder
    from tapt.training.inputs import load_recipe_data

    whole = load_beir_folder(tiny_beir_path, ["train", "dev", "test"])
    folder = tmp_path / "nodev"
    merged = {**whole.split("train"), **whole.split("dev")}  # 9 train queries, no dev file
    write_beir(folder, whole.corpus, whole.queries, {"train": merged,
                                                     "test": whole.split("test")})
    recipe = recipe_for(folder, dev_from_train=3, dev_seed=1)
    data = load_recipe_data(recipe, with_test=True)
    assert len(data.split("dev")) == 3 and len(data.split("train")) == 6
    assert data.carved["seed"] == 1 and data.carved["by"] == "group"
    assert data.carved["overlap"] == 0
    assert not (folder / "qrels" / "dev.tsv").exists()  # nothing written into the folder
    with pytest.raises(DataError, match="has its own"):
        load_recipe_data(recipe_for(tiny_beir_path, dev_from_train=2), with_test=False)


@pytest.mark.parametrize("value", [0, -3, 1.5, True, "many"])
def test_recipe_refuses_a_carve_that_is_neither_a_count_nor_a_fraction(tmp_path, value):
    from tapt.recipe import RecipeError

    folder = tmp_path / "data"
    folder.mkdir()
    with pytest.raises(RecipeError, match="dev_from_train"):
        recipe_for(folder, dev_from_train=value)


def test_mined_lines_of_carved_off_queries_are_skipped(tmp_path, tiny_beir_path):
    import json

    from tapt.data.mined import read_mined

    data = load_data(tiny_beir_path, splits=["train"])
    carved = carve_dev(data, size=2, seed=0, split="carved")
    mined = tmp_path / "mined.jsonl"
    with mined.open("w") as handle:
        for query_id in data.split("train"):
            handle.write(json.dumps({"query_id": query_id,
                                     "negatives": [{"id": "d0"}]}) + "\n")
    read = read_mined(mined, carved, "train")
    assert set(read) == set(carved.split("train"))
    with pytest.raises(DataError, match="not in the train split"):
        read_mined(mined, replace_carved(carved), "train")


def replace_carved(dataset):
    """The same splits without the carve record: the dev lines are then foreign."""
    from dataclasses import replace

    return replace(dataset, carved=None)


def test_a_recipe_decontaminates_before_it_carves(tmp_path):
    """data.decontaminate drops train judgments of test-relevant passages first, then dev is
    carved from what is left; without --test the test qrels are not kept."""
    from tapt.training.inputs import load_recipe_data

    data = shared_passages(groups=20, size=3)
    train = data.split("train")
    test = {"s1": {"p0_0": 1, "p0_1": 1}, "s2": {"p1_0": 1}}  # inside chains 0 and 1
    folder = tmp_path / "data"
    write_beir(folder, data.corpus, {**data.queries, "s1": "x", "s2": "y"},
               {"train": train, "test": test})
    recipe = recipe_for(folder, decontaminate=["test"], dev_from_train=6)
    loaded = load_recipe_data(recipe, with_test=False)
    assert "test" not in loaded.qrels
    assert loaded.decontaminated["train_queries"] == [60, 59]  # g0q0 lost its only positive
    assert loaded.decontaminated["judgments"] == [120, 116]
    held = {"p0_0", "p0_1", "p1_0"}
    for split in ("train", "dev"):
        assert not {d for docs in loaded.split(split).values() for d in docs} & held
    assert loaded.carved["overlap"] == 0 and loaded.carved["queries"] == 6
    assert len(loaded.split("train")) == 53
    with_test = load_recipe_data(recipe, with_test=True)
    assert with_test.split("test") == test


def test_decontaminating_against_a_datasets_own_dev_split_keeps_that_dev(tmp_path):
    """data.decontaminate: [test, dev] with a shipped dev split (Cranfield's case): train
    loses the dev-relevant passages too, and dev stays loaded to pick the checkpoint on."""
    from tapt.training.inputs import load_recipe_data

    data = shared_passages(groups=20, size=3)
    train = data.split("train")
    dev = {"d1": {"p2_0": 1}}
    test = {"s1": {"p0_0": 1}}
    folder = tmp_path / "data"
    write_beir(folder, data.corpus, {**data.queries, "d1": "x", "s1": "y"},
               {"train": train, "dev": dev, "test": test})
    recipe = recipe_for(folder, decontaminate=["test", "dev"])
    loaded = load_recipe_data(recipe, with_test=False)
    assert loaded.split("dev") == dev
    assert "test" not in loaded.qrels
    trained = {d for docs in loaded.split("train").values() for d in docs}
    assert not trained & {"p0_0", "p2_0"}
    assert loaded.decontaminated["against"] == ["test", "dev"]


def test_a_recipe_refuses_to_decontaminate_against_its_own_train_split(tmp_path):
    from tapt.recipe import RecipeError

    folder = tmp_path / "data"
    folder.mkdir()
    with pytest.raises(RecipeError, match="decontaminate"):
        recipe_for(folder, decontaminate=["train"])
