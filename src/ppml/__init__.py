"""ppml: privacy-preserving learning over partitioned data.

A reference implementation of four papers (ADMM sharing, PP-/IPP-ADMM, Paillier quasi-Newton vertical
logistic regression, FDML) and their baselines, driven by a DVC pipeline. See README.md.
"""

__version__ = "0.1.0"
