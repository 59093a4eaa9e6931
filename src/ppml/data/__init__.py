"""Datasets: registry, verified download, readers, alignment, normalization, partitioning."""
