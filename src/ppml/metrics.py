"""Binary classification metrics computed from decision scores (log-odds)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score


def logistic_loss(y01: np.ndarray, scores: np.ndarray) -> float:
    """Mean log(1 + exp(-y s)) with y in {-1, +1} from 0/1 labels; stable for large |s|."""
    y = 2.0 * np.asarray(y01, dtype=float) - 1.0
    return float(np.mean(np.logaddexp(0.0, -y * np.asarray(scores, dtype=float))))


def binary_metrics(y01: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Log loss, AUC, error rate and accuracy of scores against 0/1 labels."""
    y01 = np.asarray(y01)
    scores = np.asarray(scores, dtype=float)
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contain NaN or inf; the model diverged")
    error = float(np.mean((scores > 0).astype(int) != y01))
    auc = float(roc_auc_score(y01, scores)) if 0 < y01.sum() < len(y01) else float("nan")
    return {"logloss": logistic_loss(y01, scores), "auc": auc, "error": error, "accuracy": 1.0 - error}
