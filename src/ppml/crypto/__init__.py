"""Paillier cryptosystem with vectorized hot paths."""
