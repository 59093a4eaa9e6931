"""Losses and local models."""
