"""GroupedBatchSampler: batches from one group, no repeated text, remnants merged in order."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from accelerate.data_loader import BatchSamplerShard
from datasets import Dataset

from tapt.training.grouped_batches import GroupedBatchSampler, grouped_batch_sampler


def _rows(sizes: dict[str, int]):
    queries, anchors, groups = [], [], []
    for group, size in sizes.items():
        for i in range(size):
            queries.append(f"{group} query {i}")
            anchors.append(f"{group} anchor {i}")
            groups.append(group)
    return Dataset.from_dict({"anchor": queries, "positive": anchors}), groups


def _group_counts(batch, groups):
    return Counter(groups[i] for i in batch)


def test_full_batches_hold_one_group_and_every_row_comes_once():
    dataset, groups = _rows({"A": 10, "B": 7, "C": 3, "D": 1, "E": 8})
    sampler = GroupedBatchSampler(dataset, 4, False, groups=groups, seed=3)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(dataset)))
    assert len(sampler) == len(batches)
    single = [b for b in batches if len(_group_counts(b, groups)) == 1]
    # A: 2 full, B: 1, E: 2 -> 5 single-group batches; remnants 2+3+3+1+0 = 9 rows pooled
    assert len(single) >= 5
    mixed = [b for b in batches if len(_group_counts(b, groups)) > 1]
    assert sum(len(b) for b in mixed) <= 9


def test_remnants_merge_consecutive_groups_only():
    dataset, groups = _rows({f"g{i}": 1 for i in range(12)})  # every group smaller than a batch
    sampler = GroupedBatchSampler(dataset, 4, True, groups=groups, seed=0)
    batches = list(sampler)
    assert [len(b) for b in batches] == [4, 4, 4]
    # the pool follows the epoch's seeded group order (the sampler's first draw): each batch
    # is 4 groups that are consecutive in it
    generator = torch.Generator()
    generator.manual_seed(0)
    place = {f"g{k}": p for p, k in enumerate(torch.randperm(12, generator=generator).tolist())}
    for batch in batches:
        spots = sorted(place[groups[i]] for i in batch)
        assert spots == list(range(spots[0], spots[0] + 4)), spots


def test_a_duplicate_text_never_shares_a_batch():
    dataset, groups = _rows({"A": 8})
    texts = dataset.to_dict()
    texts["positive"][5] = texts["positive"][1]  # the same anchor passage in two rows
    dataset = Dataset.from_dict(texts)
    for seed in range(20):
        for batch in GroupedBatchSampler(dataset, 4, False, groups=groups, seed=seed):
            assert not {1, 5} <= set(batch), (seed, batch)


def test_seeded_and_changing_with_the_epoch():
    dataset, groups = _rows({"A": 9, "B": 9})
    first = GroupedBatchSampler(dataset, 3, False, groups=groups, seed=1)
    again = GroupedBatchSampler(dataset, 3, False, groups=groups, seed=1)
    assert list(first) == list(again)
    first.set_epoch(1)
    assert list(first) != list(again)


def test_under_ddp_each_rank_batch_is_one_group():
    dataset, groups = _rows({"A": 16, "B": 16, "C": 8})
    sampler = GroupedBatchSampler(dataset, 4, True, groups=groups, seed=0)
    for rank in range(2):
        shard = BatchSamplerShard(sampler, num_processes=2, process_index=rank,
                                  split_batches=False, even_batches=True)
        for batch in shard:
            assert len(_group_counts(batch, groups)) == 1


def test_the_callable_matches_sentence_transformers_call():
    dataset, groups = _rows({"A": 4})
    build = grouped_batch_sampler(groups)
    sampler = build(dataset, batch_size=2, drop_last=False, valid_label_columns=["label"],
                    generator=None, seed=0)
    assert isinstance(sampler, GroupedBatchSampler) and len(list(sampler)) == 2
    with pytest.raises(ValueError, match="3 keys for 4 rows"):
        GroupedBatchSampler(dataset, 2, False, groups=groups[:3])



def test_a_tapt_run_with_batch_by_title_draws_every_batch_from_one_patent(
        make_recipe, synth_path, monkeypatch):
    """``data.batch_by: title`` reaches the trainer: the batches it trains on are the grouped
    sampler's, and every full one holds the anchors of one patent (title)."""
    from tapt.data.sources import load_data
    from tapt.data.triplets import build_training_rows
    from tapt.recipe import load_recipe
    from tapt.training.contrastive import train
    from tapt.training.inputs import group_of

    batches: list[list[int]] = []
    original = GroupedBatchSampler.__iter__

    def record(self):
        for batch in original(self):
            batches.append(batch)
            yield batch

    monkeypatch.setattr(GroupedBatchSampler, "__iter__", record)
    recipe_file, _ = make_recipe("grouped", data={"batch_by": "title"},  # one epoch: 19 steps
                                 training={"max_steps": 19, "eval_steps": 19,
                                           "per_device_batch_size": 2})
    train(load_recipe(recipe_file))
    assert batches, "the grouped sampler was not used"
    dataset = load_data(str(synth_path))
    _, groups = build_training_rows(dataset, "train", group_of=group_of(dataset, "title"))
    several = [g for g, n in Counter(groups).items() if n >= 2]  # titles with 2+ rows
    assert len(several) >= 2
    epoch = batches[:19]
    assert sorted(i for b in epoch for i in b) == list(range(len(groups)))
    single = {groups[b[0]] for b in epoch if len(b) == 2 and groups[b[0]] == groups[b[1]]}
    assert single == set(several)  # each title with 2+ rows filled a batch of its own


def test_batch_by_is_validated_and_label_needs_a_local_corpus(tiny_beir_path):
    from tapt.data.sources import load_data
    from tapt.recipe import DataSettings
    from tapt.training.inputs import group_of

    with pytest.raises(ValueError, match="none, title or label:FIELD"):
        DataSettings(path=str(tiny_beir_path), batch_by="patent")
    dataset = load_data(str(tiny_beir_path))
    assert group_of(dataset, "none") is None
    with pytest.raises(ValueError, match="no passage has label field"):
        group_of(dataset, "label:domain")
