"""Datasets: BEIR loading and validation, training rows, sub-corpora, a FormBench-like generator."""
