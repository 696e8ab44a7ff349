"""Batches drawn from one group (one patent, one label value), without duplicate texts.

With in-batch negatives, what else is in the batch decides what the loss teaches. Random
batches of FormBench rows pair a query with passages of other patents and domains, far
easier than C1's near-misses; batches from one patent (``data.batch_by: title``) or one
label value (``label:FIELD``) make the in-batch negatives near-misses, as Nomic Embed, GritLM
and FlagEmbedding (``same_dataset_within_batch``) do. sentence-transformers' samplers have no
such mode (``GroupByLabelBatchSampler`` mixes labels within a batch for triplet losses), so
:class:`GroupedBatchSampler` adds it; the trainer builds it through its callable
``batch_sampler`` argument (:func:`grouped_batch_sampler`).

Rules:

- every batch is filled from one group, taking its rows in a seeded order that changes each
  epoch, and skipping a row whose texts are already in the batch (as ``NO_DUPLICATES``);
  skipped rows wait for the group's next batch;
- what is left of each group after its full batches (and every group smaller than a batch)
  is pooled with the remnants of the groups that follow it in the epoch's seeded group
  order, and the pool is cut into batches the same way: a merged batch holds the fewest
  consecutive groups that fill it;
- batches are then shuffled; the rows the pool cannot fill a batch with end the epoch in
  partial batches of distinct texts, or are dropped with ``drop_last``.

Under DDP, Accelerate hands whole batches of this sampler to the ranks in turn, so each
rank's batch comes from one group.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from sentence_transformers.base.sampler import DefaultBatchSampler


class GroupedBatchSampler(DefaultBatchSampler):
    """Batches of row indices, each from one group of ``groups`` (one key per row)."""

    def __init__(self, dataset, batch_size: int, drop_last: bool, *, groups: Sequence[str],
                 valid_label_columns: list[str] | None = None,
                 generator: torch.Generator | None = None, seed: int = 0) -> None:
        super().__init__(dataset, batch_size=batch_size, drop_last=drop_last,
                         valid_label_columns=valid_label_columns, generator=generator,
                         seed=seed)
        if len(groups) != len(dataset):
            raise ValueError(f"groups has {len(groups)} keys for {len(dataset)} rows")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        label_columns = set(dataset.column_names) & set(valid_label_columns or [])
        columns = [dataset[c] for c in dataset.column_names if c not in label_columns]
        self.row_texts = [frozenset(str(column[i]) for column in columns)
                          for i in range(len(dataset))]
        self.dataset = dataset
        self.groups = list(groups)
        self._plans: dict[int, list[list[int]]] = {}

    def _texts(self, index: int) -> frozenset[str]:
        return self.row_texts[index]

    def _fill(self, rows: list[int]) -> tuple[list[list[int]], list[int]]:
        """Cut ``rows`` into full batches of distinct texts; return them and the rest."""
        batches, waiting = [], list(rows)
        while len(waiting) >= self.batch_size:
            batch, texts, skipped = [], set(), []
            for index in waiting:
                if len(batch) == self.batch_size:
                    skipped.append(index)
                    continue
                row_texts = self._texts(index)
                if row_texts & texts:
                    skipped.append(index)
                    continue
                batch.append(index)
                texts |= row_texts
            if len(batch) < self.batch_size:  # the rest cannot fill a batch without repeats
                return batches, waiting
            batches.append(batch)
            waiting = skipped
        return batches, waiting

    def _partial(self, rows: list[int]) -> list[list[int]]:
        """The last rows as batches of distinct texts, each as full as the texts allow."""
        batches, waiting = [], list(rows)
        while waiting:
            batch, texts, skipped = [], set(), []
            for index in waiting:
                if len(batch) < self.batch_size and not self._texts(index) & texts:
                    batch.append(index)
                    texts |= self._texts(index)
                else:
                    skipped.append(index)
            batches.append(batch)
            waiting = skipped
        return batches

    def plan(self, epoch: int) -> list[list[int]]:
        """The batches of ``epoch``, in order (deterministic given the seed)."""
        if epoch not in self._plans:
            self._plans = {epoch: self._build(epoch)}
        return self._plans[epoch]

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.plan(self.epoch)

    def __len__(self) -> int:
        return len(self.plan(self.epoch))

    def _build(self, epoch: int) -> list[list[int]]:
        generator = torch.Generator()
        generator.manual_seed(self.seed + epoch)
        members: dict[str, list[int]] = {}
        for index, key in enumerate(self.groups):
            members.setdefault(key, []).append(index)
        keys = list(members)
        order = torch.randperm(len(keys), generator=generator).tolist()
        batches: list[list[int]] = []
        pool: list[int] = []
        for position in order:
            rows = members[keys[position]]
            shuffled = [rows[i] for i in torch.randperm(len(rows), generator=generator)]
            full, rest = self._fill(shuffled)
            batches += full
            pool += rest
        merged, rest = self._fill(pool)
        batches += merged
        if rest and not self.drop_last:
            batches += self._partial(rest)
        return [batches[p] for p in torch.randperm(len(batches), generator=generator).tolist()]


class GroupedBatchSamplerFactory:
    """What sentence-transformers' ``batch_sampler`` argument takes: called with the dataset,
    batch size, drop_last, label columns, generator and seed. A class, not a closure, so the
    trainer can pickle its arguments into checkpoints."""

    def __init__(self, groups: Sequence[str]) -> None:
        self.groups = list(groups)

    def __call__(self, dataset, batch_size: int, drop_last: bool, valid_label_columns=None,
                 generator=None, seed: int = 0) -> GroupedBatchSampler:
        return GroupedBatchSampler(dataset, batch_size, drop_last, groups=self.groups,
                                   valid_label_columns=valid_label_columns,
                                   generator=generator, seed=seed)

    def __repr__(self) -> str:  # what the trainer logs and W&B records
        return f"GroupedBatchSampler({len(set(self.groups))} groups)"


def grouped_batch_sampler(groups: Sequence[str]) -> GroupedBatchSamplerFactory:
    """The ``batch_sampler`` argument for batches from the groups of ``groups``."""
    return GroupedBatchSamplerFactory(groups)
